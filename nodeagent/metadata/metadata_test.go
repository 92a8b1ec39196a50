package metadata_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/enipam/enipam/nodeagent/metadata"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestLocalIPv4sShowsAReassignedAddressOnceItsRemapLanded reads ec2sim's
// metadata service of one m5.large over HTTP, as enipam-agent does on its
// node: an address reassigned onto the instance's ENI (AllowReassignment,
// remapping 2 s in this scenario) is missing from the ENI's local-ipv4s
// until the remap lands, then listed; a MAC the instance does not have
// lists nothing, without an error.
func TestLocalIPv4sShowsAReassignedAddressOnceItsRemapLanded(t *testing.T) {
	sc, err := ec2sim.ParseScenario([]byte(`
account: "111122223333"
region: eu-west-1
zones: [eu-west-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.1.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, cidr: 10.1.1.0/24, zone: eu-west-1a}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1, secondaryIPs: 1}]}
- {id: i-0a000000000000002, type: m5.large, subnet: subnet-0a000000000000001, enis: [{deviceIndex: 1}]}
timing: {reassignDelay: {min: 2s, max: 2s}}
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := ec2sim.NewManualClock(time.Now())
	sim, err := ec2sim.New(sc, ec2sim.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	var ip, to, mac string
	for _, e := range sim.State().Dump().NetworkInterfaces {
		if e.Attachment == nil || e.Attachment.DeviceIndex != 1 {
			continue
		}
		if e.Attachment.InstanceID == "i-0a000000000000001" {
			ip = e.PrivateIPAddresses[1].PrivateIPAddress
		} else {
			to, mac = e.NetworkInterfaceID, e.MacAddress
		}
	}
	endpoint, err := sim.IMDSEndpoint("i-0a000000000000002")
	if err != nil {
		t.Fatal(err)
	}
	r := metadata.New(endpoint)
	ctx := context.Background()
	listed := func() []string {
		t.Helper()
		ips, err := r.LocalIPv4s(ctx, mac)
		if err != nil {
			t.Fatal(err)
		}
		return ips
	}
	if _, err := sim.State().AssignPrivateIpAddresses(ec2sim.AssignPrivateIpAddressesRequest{NetworkInterfaceID: to, PrivateIPAddresses: []string{ip}, AllowReassignment: true}); err != nil {
		t.Fatal(err)
	}
	if got := listed(); slices.Contains(got, ip) || len(got) != 1 {
		t.Fatalf("local-ipv4s before the remap landed = %v; want the ENI's primary address alone", got)
	}
	clock.Advance(2 * time.Second)
	if got := listed(); !slices.Contains(got, ip) || len(got) != 2 {
		t.Fatalf("local-ipv4s after the remap landed = %v; want the primary address and %s", got, ip)
	}
	if got, err := r.LocalIPv4s(ctx, "02:00:00:00:ff:ff"); err != nil || len(got) != 0 {
		t.Fatalf("local-ipv4s of an unknown MAC = %v, %v; want none, no error", got, err)
	}
}
