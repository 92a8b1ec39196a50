package ec2sim_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/enipam/enipam/test/ec2sim"
)

func metadata(t *testing.T, e *env, c *imds.Client, path string) string {
	t.Helper()
	out, err := c.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		t.Fatalf("GetMetadata %s: %v", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	noErr(t, err)
	return string(b)
}

// TestIMDSShowsTheInstanceAndItsAttachedENIs reads an m5.large's metadata
// with the SDK's IMDS client (IMDSv2 only): identity, region, and per MAC
// the device number, subnet, addresses primary first and prefixes. An ENI
// appears only once its attachment has completed.
func TestIMDSShowsTheInstanceAndItsAttachedENIs(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{AttachDelay: fixed(time.Second)}))
	node := e.instanceByName("node-m5")
	c := e.imdsClient(aws.ToString(node.InstanceId))

	if got := metadata(t, e, c, "instance-id"); got != aws.ToString(node.InstanceId) {
		t.Errorf("instance-id %q", got)
	}
	if got := metadata(t, e, c, "instance-type"); got != "m5.large" {
		t.Errorf("instance-type %q", got)
	}
	if got := metadata(t, e, c, "placement/availability-zone"); got != "eu-west-1a" {
		t.Errorf("zone %q", got)
	}
	region, err := c.GetRegion(e.ctx, &imds.GetRegionInput{})
	noErr(t, err)
	if region.Region != "eu-west-1" {
		t.Errorf("region %q", region.Region)
	}
	doc, err := c.GetInstanceIdentityDocument(e.ctx, &imds.GetInstanceIdentityDocumentInput{})
	noErr(t, err)
	if doc.AccountID != "111122223333" || doc.PrivateIP != aws.ToString(node.PrivateIpAddress) {
		t.Errorf("identity %+v", doc.InstanceIdentityDocument)
	}

	ni := e.createENI("big", 2)
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, Ipv4PrefixCount: aws.Int32(1)})
	noErr(t, err)
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: ni.NetworkInterfaceId, InstanceId: node.InstanceId, DeviceIndex: aws.Int32(1)})
	noErr(t, err)
	primaryMAC := aws.ToString(node.NetworkInterfaces[0].MacAddress)
	if got := metadata(t, e, c, "network/interfaces/macs/"); got != primaryMAC+"/" {
		t.Errorf("while attaching, macs %q, want only the primary", got)
	}
	e.clock.Advance(time.Second)
	macs := strings.Split(metadata(t, e, c, "network/interfaces/macs/"), "\n")
	mac := aws.ToString(ni.MacAddress)
	if len(macs) != 2 || !slices.Contains(macs, mac+"/") {
		t.Fatalf("macs %q", macs)
	}
	base := "network/interfaces/macs/" + mac + "/"
	checks := map[string]string{
		"device-number":          "1",
		"interface-id":           aws.ToString(ni.NetworkInterfaceId),
		"subnet-id":              aws.ToString(ni.SubnetId),
		"vpc-id":                 aws.ToString(ni.VpcId),
		"subnet-ipv4-cidr-block": "10.1.1.0/24",
		"vpc-ipv4-cidr-blocks":   "10.1.0.0/16\n100.64.0.0/16",
		"local-ipv4s":            strings.Join(addresses(ni), "\n"),
		"network-card":           "0",
	}
	for k, want := range checks {
		if got := metadata(t, e, c, base+k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got := metadata(t, e, c, base+"ipv4-prefix"); !strings.HasSuffix(got, "/28") {
		t.Errorf("ipv4-prefix %q", got)
	}
	_, err = c.GetMetadata(e.ctx, &imds.GetMetadataInput{Path: "network/interfaces/macs/" + primaryMAC + "/ipv4-prefix"})
	if err == nil {
		t.Error("ipv4-prefix of an ENI without prefixes must be 404")
	}
	if got := metadata(t, e, c, "network/interfaces/macs/"+primaryMAC+"/device-number"); got != "0" {
		t.Errorf("primary device-number %q", got)
	}
}

// TestIMDSRequiresASessionToken checks IMDSv2's rules with raw HTTP: no
// token or a forged one is 401, a bad TTL 400, the TTL is echoed, a token
// expires, and one instance's token does not open another's metadata.
func TestIMDSRequiresASessionToken(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	m5, t3 := aws.ToString(e.instanceByName("node-m5").InstanceId), aws.ToString(e.instanceByName("node-t3").InstanceId)
	base, err := e.admin.IMDSEndpoint(e.ctx, m5)
	noErr(t, err)
	again, err := e.admin.IMDSEndpoint(e.ctx, m5)
	noErr(t, err)
	if again != base {
		t.Errorf("a second IMDSEndpoint call opened another listener: %s vs %s", again, base)
	}
	other, err := e.admin.IMDSEndpoint(e.ctx, t3)
	noErr(t, err)
	do := func(method, url string, h map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		noErr(t, err)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		noErr(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := do(http.MethodGet, base+"/latest/meta-data/instance-id", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	for _, ttl := range []string{"", "0", "21601", "x"} {
		resp, _ = do(http.MethodPut, base+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": ttl})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("ttl %q: %d", ttl, resp.StatusCode)
		}
	}
	resp, tok := do(http.MethodPut, base+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") != "60" {
		t.Fatalf("token: %d, ttl header %q", resp.StatusCode, resp.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
	}
	resp, body := do(http.MethodGet, base+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok})
	if resp.StatusCode != http.StatusOK || body != m5 {
		t.Errorf("with token: %d %q", resp.StatusCode, body)
	}
	resp, _ = do(http.MethodGet, other+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another instance's token: %d", resp.StatusCode)
	}
	resp, _ = do(http.MethodGet, base+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok + "x"})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged token: %d", resp.StatusCode)
	}
	resp, body = do(http.MethodGet, base+"/latest/meta-data/", map[string]string{"X-aws-ec2-metadata-token": tok})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "network/") || !strings.Contains(body, "instance-id") {
		t.Errorf("listing: %d %q", resp.StatusCode, body)
	}
	// The same metadata is reachable under /imds/<id>/ on the main listener.
	resp, body = do(http.MethodGet, e.url+"/imds/"+m5+"/latest/meta-data/local-ipv4", map[string]string{"X-aws-ec2-metadata-token": tok})
	if resp.StatusCode != http.StatusOK || body != "10.1.1.4" {
		t.Errorf("path-prefixed IMDS: %d %q", resp.StatusCode, body)
	}
	e.clock.Advance(61 * time.Second)
	resp, _ = do(http.MethodGet, base+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("expired token: %d", resp.StatusCode)
	}
	if _, err := e.admin.IMDSEndpoint(e.ctx, "i-0123456789abcdef0"); err == nil {
		t.Error("IMDS endpoint of an unknown instance")
	}
}
