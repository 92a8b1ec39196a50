package ec2sim_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enipam/enipam/test/ec2sim"
)

// awsCLI runs the AWS CLI against the emulator with throwaway credentials
// and no user configuration, returning stdout, stderr and the exit error.
type awsCLI struct {
	t        *testing.T
	bin      string
	endpoint string
	env      []string
}

func newAWSCLI(t *testing.T, endpoint string) *awsCLI {
	t.Helper()
	bin, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("the aws command is not installed (apt-get install awscli, or pip install awscli); skipping the AWS CLI test")
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Skipf("aws --version failed (%v): %s; skipping the AWS CLI test", err, out)
	}
	t.Logf("using %s", strings.TrimSpace(string(out)))
	dir := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"AWS_ACCESS_KEY_ID="+ec2sim.DefaultAccessKeyID, "AWS_SECRET_ACCESS_KEY="+ec2sim.DefaultSecretAccessKey,
		"AWS_DEFAULT_REGION=eu-west-1", "AWS_PAGER=",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1",
		"AWS_CONFIG_FILE="+filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "credentials"),
	)
	return &awsCLI{t: t, bin: bin, endpoint: endpoint, env: env}
}

func (c *awsCLI) run(args ...string) (stdout, stderr string, err error) {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"ec2", "--endpoint-url", c.endpoint, "--output", "json"}, args...)...)
	cmd.Env = c.env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting aws: %v", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		c.t.Fatalf("aws %v did not finish in 60 s", args)
	}
	return o.String(), e.String(), err
}

// json runs a command that must succeed and decodes what it prints.
func (c *awsCLI) json(v any, args ...string) {
	c.t.Helper()
	out, errOut, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("aws %v: %v\n%s", args, err, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("aws %v printed no JSON: %v\n%s", args, err, out)
	}
}

type cliENI struct {
	NetworkInterfaceID string `json:"NetworkInterfaceId"`
	Status             string
	PrivateIPAddresses []struct {
		PrivateIPAddress string `json:"PrivateIpAddress"`
		Primary          bool
	} `json:"PrivateIpAddresses"`
	Attachment *struct {
		AttachmentID string `json:"AttachmentId"`
		InstanceID   string `json:"InstanceId"`
		DeviceIndex  int
		Status       string
	}
	TagSet []struct{ Key, Value string }
}

// TestAWSCLIAgainstTheEmulator drives the emulator with the unmodified AWS
// CLI: find a subnet by tag, create an ENI with two secondary addresses and
// a tag, attach it, assign three more, describe the instance's ENIs with
// filters, and read an error the way the CLI reports it.
func TestAWSCLIAgainstTheEmulator(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	cli := newAWSCLI(t, e.url)

	var subnets struct {
		Subnets []struct {
			SubnetID                string `json:"SubnetId"`
			AvailableIPAddressCount int    `json:"AvailableIpAddressCount"`
		}
	}
	cli.json(&subnets, "describe-subnets", "--filters", "Name=tag:role,Values=pods")
	if len(subnets.Subnets) != 1 || subnets.Subnets[0].AvailableIPAddressCount != 249 {
		t.Fatalf("subnets %+v", subnets)
	}
	var instances struct {
		Reservations []struct {
			Instances []struct {
				InstanceID string `json:"InstanceId"`
			}
		}
	}
	cli.json(&instances, "describe-instances", "--filters", "Name=instance-type,Values=m5.large")
	if len(instances.Reservations) != 1 {
		t.Fatalf("instances %+v", instances)
	}
	instance := instances.Reservations[0].Instances[0].InstanceID

	var created struct{ NetworkInterface cliENI }
	cli.json(&created, "create-network-interface", "--subnet-id", subnets.Subnets[0].SubnetID,
		"--secondary-private-ip-address-count", "2", "--description", "from the cli",
		"--tag-specifications", "ResourceType=network-interface,Tags=[{Key=owner,Value=cli}]")
	eni := created.NetworkInterface
	if eni.Status != "available" || len(eni.PrivateIPAddresses) != 3 || !eni.PrivateIPAddresses[0].Primary || len(eni.TagSet) != 1 {
		t.Fatalf("created %+v", eni)
	}
	var attached struct {
		AttachmentID string `json:"AttachmentId"`
	}
	cli.json(&attached, "attach-network-interface", "--network-interface-id", eni.NetworkInterfaceID, "--instance-id", instance, "--device-index", "1")
	if !strings.HasPrefix(attached.AttachmentID, "eni-attach-") {
		t.Errorf("attachment %q", attached.AttachmentID)
	}
	var assigned struct {
		NetworkInterfaceID         string `json:"NetworkInterfaceId"`
		AssignedPrivateIPAddresses []struct {
			PrivateIPAddress string `json:"PrivateIpAddress"`
		} `json:"AssignedPrivateIpAddresses"`
	}
	cli.json(&assigned, "assign-private-ip-addresses", "--network-interface-id", eni.NetworkInterfaceID, "--secondary-private-ip-address-count", "3")
	if len(assigned.AssignedPrivateIPAddresses) != 3 {
		t.Errorf("assigned %+v", assigned)
	}
	var described struct{ NetworkInterfaces []cliENI }
	cli.json(&described, "describe-network-interfaces",
		"--filters", "Name=attachment.instance-id,Values="+instance, "Name=tag:owner,Values=cli")
	if len(described.NetworkInterfaces) != 1 {
		t.Fatalf("described %+v", described)
	}
	got := described.NetworkInterfaces[0]
	if got.NetworkInterfaceID != eni.NetworkInterfaceID || got.Status != "in-use" || len(got.PrivateIPAddresses) != 6 ||
		got.Attachment == nil || got.Attachment.Status != "attached" || got.Attachment.DeviceIndex != 1 || got.Attachment.InstanceID != instance {
		t.Errorf("described %+v", got)
	}

	_, errOut, err := cli.run("delete-network-interface", "--network-interface-id", eni.NetworkInterfaceID)
	if err == nil || !strings.Contains(errOut, "InvalidParameterValue") || !strings.Contains(errOut, "currently in use") {
		t.Errorf("deleting an attached ENI: err %v, stderr %q", err, errOut)
	}
	// The CLI signs as botocore does; a wrong secret is EC2's answer.
	cli.env = append(cli.env, "AWS_SECRET_ACCESS_KEY=not-the-secret")
	_, errOut, err = cli.run("describe-vpcs")
	if err == nil || !strings.Contains(errOut, "SignatureDoesNotMatch") {
		t.Errorf("a wrong secret: err %v, stderr %q", err, errOut)
	}
	if c := e.counters(); c.Calls["CreateNetworkInterface"] != 1 || c.Calls["AssignPrivateIpAddresses"] != 1 || c.Calls["DeleteNetworkInterface"] != 1 {
		t.Errorf("counters %+v", c.Calls)
	}
}

// TestAWSCLIOnIPv6 drives the IPv6 actions with the unmodified AWS CLI:
// the subnet's /64, an ENI created with a /80 prefix, addresses assigned
// and found by filter, unassigned, and a refusal as the CLI reports it.
func TestAWSCLIOnIPv6(t *testing.T) {
	e := newEnv(t, scenario(t, dualStackScenario))
	cli := newAWSCLI(t, e.url)

	var subnets struct {
		Subnets []struct {
			SubnetID                    string `json:"SubnetId"`
			Ipv6CidrBlockAssociationSet []struct {
				Ipv6CidrBlock      string
				Ipv6CidrBlockState struct{ State string }
			}
		}
	}
	cli.json(&subnets, "describe-subnets", "--filters", "Name=ipv6-cidr-block-association.ipv6-cidr-block,Values="+dual64.String())
	if len(subnets.Subnets) != 1 || len(subnets.Subnets[0].Ipv6CidrBlockAssociationSet) != 1 ||
		subnets.Subnets[0].Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlockState.State != "associated" {
		t.Fatalf("subnets %+v", subnets)
	}
	type cliIPv6ENI struct {
		NetworkInterfaceID string `json:"NetworkInterfaceId"`
		Ipv6Addresses      []struct{ Ipv6Address string }
		Ipv6Prefixes       []struct{ Ipv6Prefix string }
	}
	var created struct{ NetworkInterface cliIPv6ENI }
	cli.json(&created, "create-network-interface", "--subnet-id", subnets.Subnets[0].SubnetID, "--ipv6-prefix-count", "1")
	eni := created.NetworkInterface
	if len(eni.Ipv6Prefixes) != 1 || !strings.HasSuffix(eni.Ipv6Prefixes[0].Ipv6Prefix, "/80") {
		t.Fatalf("created %+v", eni)
	}
	var assigned struct {
		NetworkInterfaceID    string `json:"NetworkInterfaceId"`
		AssignedIpv6Addresses []string
	}
	cli.json(&assigned, "assign-ipv6-addresses", "--network-interface-id", eni.NetworkInterfaceID, "--ipv6-address-count", "2")
	if assigned.NetworkInterfaceID != eni.NetworkInterfaceID || len(assigned.AssignedIpv6Addresses) != 2 {
		t.Fatalf("assigned %+v", assigned)
	}
	var described struct{ NetworkInterfaces []cliIPv6ENI }
	cli.json(&described, "describe-network-interfaces", "--filters", "Name=ipv6-addresses.ipv6-address,Values="+assigned.AssignedIpv6Addresses[1])
	if len(described.NetworkInterfaces) != 1 || len(described.NetworkInterfaces[0].Ipv6Addresses) != 2 || len(described.NetworkInterfaces[0].Ipv6Prefixes) != 1 {
		t.Fatalf("described %+v", described)
	}
	var unassigned struct {
		UnassignedIpv6Addresses []string
		UnassignedIpv6Prefixes  []string
	}
	cli.json(&unassigned, "unassign-ipv6-addresses", "--network-interface-id", eni.NetworkInterfaceID,
		"--ipv6-addresses", assigned.AssignedIpv6Addresses[0], "--ipv6-prefixes", eni.Ipv6Prefixes[0].Ipv6Prefix)
	if len(unassigned.UnassignedIpv6Addresses) != 1 || len(unassigned.UnassignedIpv6Prefixes) != 1 {
		t.Errorf("unassigned %+v", unassigned)
	}
	_, errOut, err := cli.run("assign-ipv6-addresses", "--network-interface-id", eni.NetworkInterfaceID,
		"--ipv6-addresses", "2600:1f18:abc:de01::100", "--ipv6-address-count", "1")
	if err == nil || !strings.Contains(errOut, "InvalidParameterCombination") {
		t.Errorf("addresses and a count: err %v, stderr %q", err, errOut)
	}
	if c := e.counters(); c.Calls["AssignIpv6Addresses"] != 2 || c.Calls["UnassignIpv6Addresses"] != 1 {
		t.Errorf("counters %+v", c.Calls)
	}
}
