package ec2sim_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestScenarioValidationNamesTheBadField feeds broken scenarios and checks
// each is refused with a ScenarioError naming the field at fault.
func TestScenarioValidationNamesTheBadField(t *testing.T) {
	base := func(vpcs, instances string) string {
		return "account: \"111122223333\"\nregion: eu-west-1\nzones: [eu-west-1a]\nvpcs:\n" + vpcs + instances
	}
	okVPC := "- cidrs: [10.0.0.0/16]\n  subnets: [{name: a, cidr: 10.0.0.0/24, zone: eu-west-1a}]\n"
	cases := []struct {
		name, yaml, path string
	}{
		{"unknown field", base(okVPC, "colour: blue\n"), "(document)"},
		{"bad account", strings.Replace(base(okVPC, ""), "111122223333", "1234", 1), "account"},
		{"zone of another region", strings.Replace(base(okVPC, ""), "[eu-west-1a]", "[us-east-1a]", 1), "zones[0]"},
		{"VPC too big", base("- cidrs: [10.0.0.0/8]\n  subnets: []\n", ""), "vpcs[0].cidrs[0]"},
		{"host bits", base("- cidrs: [10.0.0.1/16]\n  subnets: []\n", ""), "vpcs[0].cidrs[0]"},
		{"subnet outside VPC", base("- cidrs: [10.0.0.0/16]\n  subnets: [{cidr: 10.1.0.0/24, zone: eu-west-1a}]\n", ""), "vpcs[0].subnets[0].cidr"},
		{"overlapping subnets", base("- cidrs: [10.0.0.0/16]\n  subnets: [{cidr: 10.0.0.0/24, zone: eu-west-1a}, {cidr: 10.0.0.128/25, zone: eu-west-1a}]\n", ""), "vpcs[0].subnets[1].cidr"},
		{"unknown zone", base("- cidrs: [10.0.0.0/16]\n  subnets: [{cidr: 10.0.0.0/24, zone: eu-west-1c}]\n", ""), "vpcs[0].subnets[0].zone"},
		{"bad subnet ID", base("- cidrs: [10.0.0.0/16]\n  subnets: [{id: sub-1, cidr: 10.0.0.0/24, zone: eu-west-1a}]\n", ""), "vpcs[0].subnets[0].id"},
		{"unknown subnet ref", base(okVPC, "instances: [{type: m5.large, subnet: nope}]\n"), "instances[0].subnet"},
		{"unknown type", base(okVPC, "instances: [{type: m9.large, subnet: a}]\n"), "instances[0]"},
		{"address outside subnet", base(okVPC, "instances: [{type: m5.large, subnet: a, privateIP: 10.0.1.9}]\n"), "instances[0]"},
		{"too many secondaries", base(okVPC, "instances: [{type: t3.nano, subnet: a, secondaryIPs: 2}]\n"), "instances[0].secondaryIPs"},
		{"ENI slot twice", base(okVPC, "instances: [{type: m5.large, subnet: a, enis: [{deviceIndex: 1}, {deviceIndex: 1}]}]\n"), "instances[0].enis[1]"},
		{"too many ENIs", base(okVPC, "instances: [{type: t3.nano, subnet: a, enis: [{deviceIndex: 1}, {deviceIndex: 2}]}]\n"), "instances[0].enis[1]"},
		{"bad profile", base(okVPC, "profile: fast\n"), "profile"},
		{"bad fault", base(okVPC, "faults: {rules: [{code: X}]}\n"), "faults"},
		{"bad timing", base(okVPC, "timing: {attachDelay: {min: -1s}}\n"), "timing"},
	}
	for _, c := range cases {
		sc, err := ec2sim.ParseScenario([]byte(c.yaml))
		if err == nil {
			_, err = ec2sim.New(sc)
		}
		var se *ec2sim.ScenarioError
		if !errors.As(err, &se) {
			t.Errorf("%s: want a ScenarioError, got %v", c.name, err)
			continue
		}
		if se.Path != c.path {
			t.Errorf("%s: error at %q, want %q (%v)", c.name, se.Path, c.path, err)
		}
	}
}

// TestScenarioSeedsExistingENIsAndRepeatsInstances seeds three alike nodes
// with count, each with extra addresses on its primary ENI and a secondary
// ENI holding addresses and a prefix, as a cluster enipam adopts would
// have; and a realistic profile with explicit zero timing.
func TestScenarioSeedsExistingENIsAndRepeatsInstances(t *testing.T) {
	sc := scenario(t, `
account: "111122223333"
region: us-west-2
seed: 3
zones: [us-west-2a]
profile: realistic
timing: {}
latency: {}
vpcs:
- cidrs: [10.9.0.0/16]
  subnets:
  - {name: nodes, cidr: 10.9.0.0/24, zone: us-west-2a}
  - {name: pods, cidr: 10.9.16.0/20, zone: us-west-2a}
instances:
- name: worker
  count: 3
  type: m5.xlarge
  subnet: nodes
  secondaryIPs: 2
  enis:
  - {deviceIndex: 1, subnet: pods, secondaryIPs: 4, prefixes: 1, tags: {adopt: me}}
`)
	e := newEnv(t, sc)
	for i := 1; i <= 3; i++ {
		in := e.instanceByName("worker-" + string(rune('0'+i)))
		if len(in.NetworkInterfaces) != 2 {
			t.Fatalf("worker-%d has %d ENIs", i, len(in.NetworkInterfaces))
		}
		for _, ni := range in.NetworkInterfaces {
			switch aws.ToInt32(ni.Attachment.DeviceIndex) {
			case 0:
				if len(ni.PrivateIpAddresses) != 3 || !aws.ToBool(ni.Attachment.DeleteOnTermination) {
					t.Errorf("worker-%d primary %+v", i, ni)
				}
			case 1:
				if len(ni.PrivateIpAddresses) != 5 || len(ni.Ipv4Prefixes) != 1 || aws.ToBool(ni.Attachment.DeleteOnTermination) ||
					ni.Attachment.Status != types.AttachmentStatusAttached {
					t.Errorf("worker-%d secondary %+v", i, ni)
				}
			}
		}
	}
	adopted, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{Name: aws.String("tag:adopt"), Values: []string{"me"}}}})
	noErr(t, err)
	if len(adopted.NetworkInterfaces) != 3 {
		t.Errorf("adoptable ENIs: %d", len(adopted.NetworkInterfaces))
	}
	// 4096 - 5 - 3*(5 + 16).
	if got := aws.ToInt32(e.subnetByName("pods").AvailableIpAddressCount); got != 4028 {
		t.Errorf("pods subnet free %d, want 4028", got)
	}
	// The realistic profile turned EC2's throttling on.
	c := e.counters()
	if len(c.Throttled) != 0 {
		t.Errorf("throttled already: %v", c.Throttled)
	}
}

// TestScenarioIsDeterministic builds the demo twice with the same seed and
// once with another: IDs and MACs repeat exactly for the same seed only.
func TestScenarioIsDeterministic(t *testing.T) {
	ids := func(seed uint64) []string {
		sc := ec2sim.DemoScenario()
		sc.Seed = seed
		sim, err := ec2sim.New(sc)
		noErr(t, err)
		d := sim.State().Dump()
		var out []string
		for _, ni := range d.NetworkInterfaces {
			out = append(out, ni.NetworkInterfaceID, ni.MacAddress, ni.Attachment.AttachmentID)
		}
		for _, sn := range d.Subnets {
			out = append(out, sn.SubnetID)
		}
		return out
	}
	a, b, c := ids(1), ids(1), ids(2)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different IDs:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same IDs")
	}
	if sc, err := ec2sim.LoadScenario("demo"); err != nil || len(sc.Instances) != 3 {
		t.Errorf("LoadScenario(demo): %v", err)
	}
	if _, err := ec2sim.LoadScenario("/no/such/file.yaml"); err == nil {
		t.Error("a missing file loaded")
	}
	for _, it := range ec2sim.Catalog() {
		if it.MaxInterfaces() < 2 || it.IPv4PerENI < 2 {
			t.Errorf("catalog entry %+v", it)
		}
	}
}

// TestDumpNetworkIsDumpsNetwork: DumpNetwork has Dump's network
// interfaces and Elastic IPs, and nothing else.
func TestDumpNetworkIsDumpsNetwork(t *testing.T) {
	sim, err := ec2sim.New(ec2sim.DemoScenario())
	noErr(t, err)
	d, n := sim.State().Dump(), sim.State().DumpNetwork()
	if len(d.NetworkInterfaces) == 0 || !reflect.DeepEqual(d.NetworkInterfaces, n.NetworkInterfaces) || !reflect.DeepEqual(d.Addresses, n.Addresses) {
		t.Errorf("DumpNetwork has %d ENIs and %d addresses, Dump %d and %d, or they differ",
			len(n.NetworkInterfaces), len(n.Addresses), len(d.NetworkInterfaces), len(d.Addresses))
	}
	if n.Instances != nil || n.Subnets != nil || n.Vpcs != nil {
		t.Errorf("DumpNetwork has more than the network: %d instances, %d subnets, %d VPCs", len(n.Instances), len(n.Subnets), len(n.Vpcs))
	}
}

// TestNextDue: an attachment under realistic timing is pending until its
// due time; once a dump taken at that time ran it, it is no more.
func TestNextDue(t *testing.T) {
	sc, err := ec2sim.ParseScenario([]byte(`
account: "123456789012"
region: us-east-1
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`))
	noErr(t, err)
	clock := newManualClock()
	st, err := ec2sim.NewState(sc, clock.Now)
	noErr(t, err)
	noErr(t, st.SetTiming(ec2sim.RealisticTiming()))
	if due, pending := st.NextDue(); pending {
		t.Fatalf("pending work at the start, due %v", due)
	}
	eni, err := st.CreateNetworkInterface(ec2sim.CreateNetworkInterfaceRequest{SubnetID: "subnet-0a000000000000001"})
	noErr(t, err)
	id := eni.NetworkInterface.NetworkInterfaceID
	_, err = st.AttachNetworkInterface(ec2sim.AttachNetworkInterfaceRequest{NetworkInterfaceID: id, InstanceID: "i-0a000000000000001", DeviceIndex: 1})
	noErr(t, err)
	due, pending := st.NextDue()
	if !pending || !due.After(clock.Now()) {
		t.Fatalf("after an attach under realistic timing: pending %v, due %v (now %v)", pending, due, clock.Now())
	}
	clock.Advance(due.Sub(clock.Now()))
	for _, e := range st.DumpNetwork().NetworkInterfaces {
		if e.NetworkInterfaceID == id && (e.Attachment == nil || e.Attachment.Status != "attached") {
			t.Errorf("at its due time, %s is %+v", id, e.Attachment)
		}
	}
	if next, pending := st.NextDue(); pending && !next.After(due) {
		t.Errorf("work due at %v still pending after a dump at %v", next, due)
	}
}
