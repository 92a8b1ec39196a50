package cloudfake_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// dualStackYAML: a VPC with an Amazon /56, a subnet with a /64 of it and
// one without IPv6, an m5.large (10 IPv6 slots per ENI) and an m1.small
// (no IPv6).
const dualStackYAML = `
account: "111122223333"
clusterName: c1
region: eu-west-1
seed: 12
zones: [eu-west-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.1.0.0/16]
  ipv6Cidr: 2600:1f18:abc:de00::/56
  subnets:
  - {id: subnet-0a000000000000001, name: dual, cidr: 10.1.1.0/24, ipv6Cidr: 2600:1f18:abc:de01::/64, zone: eu-west-1a}
  - {id: subnet-0a000000000000002, name: v4, cidr: 10.1.2.0/24, zone: eu-west-1a}
instances:
- {id: i-0a000000000000001, name: node-m5, type: m5.large, subnet: dual}
- {id: i-0a000000000000002, name: node-m1, type: m1.small, subnet: dual}
`

func assignIPv6Prefixes(eni string, n int) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.AssignIPv6Prefixes(ctx, eni, n) }
}

func assignIPv6s(eni string, n int) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return api.AssignIPv6s(ctx, eni, n) }
}

func unassignIPv6Prefixes(eni string, prefixes ...netip.Prefix) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) {
		return nil, api.UnassignIPv6Prefixes(ctx, eni, prefixes)
	}
}

func unassignIPv6s(eni string, ips ...netip.Addr) func(context.Context, cloud.API) (any, error) {
	return func(ctx context.Context, api cloud.API) (any, error) { return nil, api.UnassignIPv6s(ctx, eni, ips) }
}

// TestFakeMatchesAdapterOnIPv6 runs the IPv6 calls through the fake and
// through the operator's adapter over HTTP: the VPC's and subnets' IPv6
// CIDRs, ENIs created with a /80 prefix or addresses, prefixes and
// addresses assigned up to the type's IPv6 limit, the refusals (a subnet
// without IPv6, a type without it, past the limit, mixed parameters), and
// idempotent unassigns; every address and prefix lies in the subnet's /64
// and is on one ENI only.
func TestFakeMatchesAdapterOnIPv6(t *testing.T) {
	tw := newTwinsOf(t, dualStackYAML)
	const dual, v4, m5, m1 = "subnet-0a000000000000001", "subnet-0a000000000000002", "i-0a000000000000001", "i-0a000000000000002"
	sub64 := netip.MustParsePrefix("2600:1f18:abc:de01::/64")
	// The cluster's tag: the operator's policy lets it delete only its
	// cluster's ENIs.
	ours := map[string]string{cloud.TagCluster: cluster}
	res := tw.run(t, []step{
		{"describe VPC", describeVPC(vpcID), nil},
		{"list subnets", func(ctx context.Context, api cloud.API) (any, error) { return api.ListSubnets(ctx, vpcID) }, nil},
		{"instance types", func(ctx context.Context, api cloud.API) (any, error) {
			return api.InstanceTypes(ctx, []string{"m5.large", "m1.small"})
		}, nil},
		{"get instances", getInstances(m5, m1), nil},
		{"create with an IPv6 prefix", create(cloud.CreateENIRequest{SubnetID: dual, SecondaryIPs: 1, IPv6Prefixes: 1, Tags: ours}), nil},
		{"create with IPv6 addresses", create(cloud.CreateENIRequest{SubnetID: dual, IPv6Addresses: 2, Tags: ours}), nil},
		{"create with IPv6 in an IPv4-only subnet", create(cloud.CreateENIRequest{SubnetID: v4, IPv6Prefixes: 1, Tags: ours}), cloud.ErrInvalid},
		{"create with IPv6 addresses and a prefix", create(cloud.CreateENIRequest{SubnetID: dual, IPv6Addresses: 1, IPv6Prefixes: 1, Tags: ours}), cloud.ErrInvalid},
		{"create past the IPv6 limit", create(cloud.CreateENIRequest{SubnetID: dual, IPv6Addresses: 500, Tags: ours}), cloud.ErrIPLimit},
	})
	vpc := res[0].(cloud.VPC)
	if want := netip.MustParsePrefix("2600:1f18:abc:de00::/56"); !slices.Equal(vpc.IPv6CIDRs, []netip.Prefix{want}) {
		t.Errorf("VPC IPv6 CIDRs %v, want %v", vpc.IPv6CIDRs, want)
	}
	subnets := res[1].([]cloud.Subnet)
	if len(subnets) != 2 || subnets[0].IPv6CIDR != sub64 || subnets[1].IPv6CIDR.IsValid() {
		t.Fatalf("subnets %+v: want the /64 on the first only", subnets)
	}
	types := res[2].([]cloud.InstanceType)
	if len(types) != 2 || types[0].Name != "m1.small" || types[0].IPv6PerENI != 0 || types[1].IPv6PerENI != 10 {
		t.Fatalf("types %+v", types)
	}
	enis := res[3].([]any)[1].([]cloud.ENI)
	var m1Primary string
	for _, e := range enis {
		if e.InstanceID == m1 {
			m1Primary = e.ID
		}
	}
	prefixed, addressed := res[4].(cloud.ENI), res[5].(cloud.ENI)
	if len(prefixed.IPv6Prefixes) != 1 || len(prefixed.IPv6s) != 0 || len(prefixed.IPs) != 1 {
		t.Fatalf("created with a prefix: %+v", prefixed)
	}
	if p := prefixed.IPv6Prefixes[0]; p.Bits() != 80 || !sub64.Contains(p.Addr()) {
		t.Errorf("prefix %s is not a /80 of %s", p, sub64)
	}
	if len(addressed.IPv6s) != 2 || len(addressed.IPv6Prefixes) != 0 {
		t.Fatalf("created with addresses: %+v", addressed)
	}

	res = tw.run(t, []step{
		{"attach", attach(prefixed.ID, m5, 1), nil},
		{"assign two prefixes", assignIPv6Prefixes(prefixed.ID, 2), nil},
		{"assign three addresses", assignIPv6s(prefixed.ID, 3), nil},
		{"assign past m5.large's ten", assignIPv6Prefixes(prefixed.ID, 5), cloud.ErrIPLimit},
		{"assign up to it", assignIPv6Prefixes(prefixed.ID, 4), nil},
		{"assign to a type without IPv6", assignIPv6s(m1Primary, 1), cloud.ErrInvalid},
		{"get", getENIs(prefixed.ID, addressed.ID), nil},
	})
	got := res[6].([]cloud.ENI)
	if len(got) != 2 || got[0].ID != prefixed.ID {
		t.Fatalf("get %+v", got)
	}
	full := got[0]
	if full.IPv6Slots() != 10 || len(full.IPv6Prefixes) != 7 || len(full.IPv6s) != 3 {
		t.Fatalf("ENI at its limit holds %d prefixes and %d addresses, want 7 and 3", len(full.IPv6Prefixes), len(full.IPv6s))
	}
	// Every address and prefix in the /64, none twice, none inside
	// another ENI's prefix.
	seen := map[netip.Addr]bool{}
	for _, e := range got {
		for _, p := range e.IPv6Prefixes {
			if !sub64.Contains(p.Addr()) || p.Bits() != 80 || seen[p.Addr()] {
				t.Errorf("prefix %s of %s", p, e.ID)
			}
			seen[p.Addr()] = true
		}
	}
	for _, e := range got {
		for _, ip := range e.IPv6s {
			if !sub64.Contains(ip) || seen[ip] {
				t.Errorf("address %s of %s", ip, e.ID)
			}
			seen[ip] = true
			for _, o := range got {
				for _, p := range o.IPv6Prefixes {
					if p.Contains(ip) {
						t.Errorf("address %s of %s lies in %s's prefix %s", ip, e.ID, o.ID, p)
					}
				}
			}
		}
	}

	gone := full.IPv6Prefixes[0]
	res = tw.run(t, []step{
		{"unassign a prefix", unassignIPv6Prefixes(full.ID, gone), nil},
		{"unassign it again with another", unassignIPv6Prefixes(full.ID, gone, full.IPv6Prefixes[1]), nil},
		{"unassign the addresses", unassignIPv6s(full.ID, full.IPv6s...), nil},
		{"unassign them again", unassignIPv6s(full.ID, full.IPv6s...), nil},
		{"unassign from a missing ENI", unassignIPv6s(noENI, full.IPv6s[0]), cloud.ErrNotFound},
		{"get", getENIs(full.ID), nil},
		{"delete the unattached one", deleteENI(addressed.ID), nil},
	})
	after := res[5].([]cloud.ENI)[0]
	if len(after.IPv6s) != 0 || len(after.IPv6Prefixes) != 5 || slices.Contains(after.IPv6Prefixes, gone) {
		t.Errorf("after the unassigns: addresses %v, prefixes %v; want none and 5 without %s", after.IPv6s, after.IPv6Prefixes, gone)
	}
	// Five assigns; six unassigns: one a step, and for the second a
	// retry of what is still held after EC2 refused the first try.
	if c := tw.fake.Calls(); c[cloudfake.AssignIpv6Addresses] != 5 || c[cloudfake.UnassignIpv6Addresses] != 6 {
		t.Errorf("calls %v", c)
	}
	tw.sameCalls(t)
}
