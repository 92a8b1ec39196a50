package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/test/ec2sim"
)

// runCLI runs enipam with args and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, strings.TrimSpace(out.String()), errOut.String()
}

// TestMaxPodsFromCatalog: figures a user can check by hand. m5.large (3
// ENIs of 10 addresses): 27 pool addresses, less cilium-agent's router
// and health, plus 2 host-network pods; with prefixes 432 addresses, 110
// recommended for its 2 vCPUs; m5.xlarge with first interface index 1: 3
// ENIs of 14; p5.48xlarge: 2 ENIs on card 0, one of them taken by an
// EFA-only interface; a 96-vCPU type's ceiling is 250.
func TestMaxPodsFromCatalog(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--instance-type", "m5.large"}, 27},
		{[]string{"--instance-type", "m5.large", "--prefix-delegation"}, 110},
		{[]string{"--instance-type", "m5.large", "--prefix-delegation", "--show-max-allowed"}, 432},
		{[]string{"--instance-type", "m5.xlarge", "--first-interface-index", "1"}, 42},
		{[]string{"--instance-type", "m5.xlarge", "--host-network-pods", "4", "--agent-endpoint-ips", "1"}, 4*14 - 1 + 4},
		{[]string{"--instance-type", "p5.48xlarge", "--reserved-enis", "1"}, 49},
		{[]string{"--instance-type", "m5.24xlarge", "--prefix-delegation"}, 250},
		{[]string{"--instance-type", "m5.24xlarge", "--prefix-delegation", "--max-allocate", "200"}, 200},
		{[]string{"--instance-type", "t3.medium", "--prefix-delegation", "--show-max-allowed"}, 2*5*16 + 5*16},
	} {
		code, out, errOut := runCLI(t, append([]string{"max-pods"}, c.args...)...)
		if code != 0 || out != strconv.Itoa(c.want) {
			t.Errorf("enipam max-pods %v = %q (exit %d, %s), want %d", c.args, out, code, errOut, c.want)
		}
	}
}

// TestMaxPodsDualStackSaysWhatLimits: with the built-in catalog, a
// dual-stack m5.large (nitro: one IPv6 /80) is limited by its IPv4 pool,
// 27 as IPv4 alone; IPv6 alone by EKS's ceiling (110); a dual-stack
// m4.large (xen: single IPv6 addresses, 2 ENIs × 10 less the node's own)
// by its IPv4 pool still (18 < 19). The JSON says which limit applies;
// m1.small has no IPv6 and says so.
func TestMaxPodsDualStackSaysWhatLimits(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want      int
		limitedBy string
	}{
		{[]string{"--instance-type", "m5.large", "--ip-families", "IPv4,IPv6"}, 27, "IPv4 addresses"},
		{[]string{"--instance-type", "m5.large", "--ip-families", "IPv6"}, 110, "EKS ceiling"},
		{[]string{"--instance-type", "m4.large", "--ip-families", "IPv6,IPv4"}, 18, "IPv4 addresses"},
		{[]string{"--instance-type", "m4.large", "--ip-families", "IPv6", "--first-interface-index", "1"}, 10 - 2 + 2, "IPv6 addresses"},
	} {
		code, out, errOut := runCLI(t, append([]string{"max-pods", "--output", "json"}, c.args...)...)
		var r report
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Recommended != c.want || r.LimitedBy != c.limitedBy {
			t.Errorf("enipam max-pods %v = %s (exit %d, %s), want %d limited by %s", c.args, out, code, errOut, c.want, c.limitedBy)
		}
	}
	code, _, errOut := runCLI(t, "max-pods", "--instance-type", "m1.small", "--ip-families", "IPv4,IPv6")
	if code != 1 || !strings.Contains(errOut, "instance type has no IPv6 addresses") {
		t.Errorf("dual-stack m1.small: exit %d, %q", code, errOut)
	}
}

// TestMaxPodsRefusesBadInput: no type, an unknown type, a policy leaving
// no ENI, bad flags: a non-zero exit and a message naming the problem.
func TestMaxPodsRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "one of --instance-type"},
		{[]string{"--instance-type", "m9.mega"}, 1, "not in the built-in catalog"},
		{[]string{"--instance-type", "m5.large", "--first-interface-index", "3"}, 1, "no ENI left for pods"},
		{[]string{"--instance-type", "m5.large", "--output", "yaml"}, 2, "--output must be"},
		{[]string{"--instance-type", "m5.large", "--bogus"}, 2, "bogus"},
		{[]string{"--instance-type", "m5.large", "--ip-families", "ipv6"}, 2, `--ip-families "ipv6": want IPv4, IPv6 or IPv4,IPv6`},
	} {
		code, _, errOut := runCLI(t, append([]string{"max-pods"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("enipam max-pods %v: exit %d, %q; want exit %d and %q", c.args, code, errOut, c.code, c.msg)
		}
	}
	if code, _, _ := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

// TestMaxPodsFromEC2AndIMDS: on an emulated p4d.24xlarge, --ec2 reads the
// limits with DescribeInstanceTypes through the operator's adapter and
// --instance-type-from-imds the type from instance metadata, as a node's
// bootstrap script would: card 0's 15 ENIs of 50 addresses.
func TestMaxPodsFromEC2AndIMDS(t *testing.T) {
	sc, err := ec2sim.ParseScenario([]byte(`
account: "123456789012"
region: us-east-1
zones: [us-east-1a]
vpcs:
- cidrs: [10.0.0.0/16]
  subnets:
  - {name: a, cidr: 10.0.0.0/20, zone: us-east-1a}
instances:
- {id: i-0a000000000000001, type: p4d.24xlarge, subnet: a}
`))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := ec2sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	imdsURL, err := sim.IMDSEndpoint("i-0a000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imdsURL)
	t.Setenv("AWS_ACCESS_KEY_ID", ec2sim.DefaultAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", ec2sim.DefaultSecretAccessKey)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")

	code, out, errOut := runCLI(t, "max-pods", "--instance-type-from-imds", "--ec2", "--ec2-endpoint", srv.URL, "--output", "json", "--show-max-allowed")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.InstanceType != "p4d.24xlarge" || r.Source != "ec2" || r.CardZeroENIs != 15 || r.AddressesPerENI != 50 || r.VCPUs != 96 ||
		r.PoolIPs != 15*49 || r.MaxAllowed != 15*49 || r.Recommended != 250 {
		t.Errorf("report %+v", r)
	}
	if got := sim.Counters().Succeeded("DescribeInstanceTypes"); got != 1 {
		t.Errorf("DescribeInstanceTypes calls = %d, want 1", got)
	}
}

// TestVersion: `enipam version` and `enipam --version` print the version.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, _ := runCLI(t, arg)
		if want := "enipam " + version.Get() + " "; code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("enipam %s: exit %d, %q, want %q…", arg, code, out, want)
		}
	}
}
