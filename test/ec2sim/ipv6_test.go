package ec2sim_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/enipam/enipam/test/ec2sim"
)

// dualStackScenario is a VPC with an Amazon /56, a dual-stack subnet (a
// /64 of it), an IPv4-only subnet, an m5.large (10 IPv6 slots per ENI), a
// t3.medium (6) and an m1.small (no IPv6).
const dualStackScenario = `
account: "111122223333"
region: eu-west-1
seed: 9
zones: [eu-west-1a]
vpcs:
- name: dual
  cidrs: [10.1.0.0/16]
  ipv6Cidr: 2600:1f18:abc:de00::/56
  subnets:
  - {name: dual, cidr: 10.1.1.0/24, ipv6Cidr: 2600:1f18:abc:de01::/64, zone: eu-west-1a}
  - {name: other, cidr: 10.1.3.0/24, ipv6Cidr: 2600:1f18:abc:de03::/64, zone: eu-west-1a}
  - {name: v4, cidr: 10.1.2.0/24, zone: eu-west-1a}
instances:
- {name: node-m5, type: m5.large, subnet: dual}
- {name: node-t3, type: t3.medium, subnet: dual}
- {name: node-m1, type: m1.small, subnet: dual}
`

var dual64 = netip.MustParsePrefix("2600:1f18:abc:de01::/64")

func ipv6sOf(ni types.NetworkInterface) []string {
	var out []string
	for _, a := range ni.Ipv6Addresses {
		out = append(out, aws.ToString(a.Ipv6Address))
	}
	return out
}

func ipv6PrefixesOf(ni types.NetworkInterface) []string {
	var out []string
	for _, p := range ni.Ipv6Prefixes {
		out = append(out, aws.ToString(p.Ipv6Prefix))
	}
	return out
}

// TestIPv6CIDRsInDescribes: DescribeVpcs shows the VPC's /56 and
// DescribeSubnets each subnet's /64 (none for the IPv4-only one), both
// associated, and their ipv6-cidr-block-association filters select them;
// DescribeInstanceTypes' network-info.ipv6-supported selects the types
// with IPv6.
func TestIPv6CIDRsInDescribes(t *testing.T) {
	e := newEnv(t, scenario(t, dualStackScenario))
	vpcs, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{
		{Name: aws.String("ipv6-cidr-block-association.ipv6-cidr-block"), Values: []string{"2600:1f18:abc:de00::/56"}},
	}})
	noErr(t, err)
	if len(vpcs.Vpcs) != 1 || len(vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet) != 1 {
		t.Fatalf("VPCs by IPv6 CIDR: %+v", vpcs.Vpcs)
	}
	a := vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet[0]
	if aws.ToString(a.Ipv6CidrBlock) != "2600:1f18:abc:de00::/56" || a.Ipv6CidrBlockState.State != types.VpcCidrBlockStateCodeAssociated ||
		aws.ToString(a.Ipv6Pool) != "Amazon" || !strings.HasPrefix(aws.ToString(a.AssociationId), "vpc-cidr-assoc-") {
		t.Errorf("VPC IPv6 association %+v", a)
	}
	dual, v4 := e.subnetByName("dual"), e.subnetByName("v4")
	if len(dual.Ipv6CidrBlockAssociationSet) != 1 || aws.ToString(dual.Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlock) != dual64.String() ||
		dual.Ipv6CidrBlockAssociationSet[0].Ipv6CidrBlockState.State != types.SubnetCidrBlockStateCodeAssociated {
		t.Errorf("dual subnet %+v", dual.Ipv6CidrBlockAssociationSet)
	}
	if len(v4.Ipv6CidrBlockAssociationSet) != 0 {
		t.Errorf("IPv4-only subnet shows %+v", v4.Ipv6CidrBlockAssociationSet)
	}
	its, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m1.small", "m5.large"},
		Filters: []types.Filter{{Name: aws.String("network-info.ipv6-supported"), Values: []string{"true"}}}})
	noErr(t, err)
	if len(its.InstanceTypes) != 1 || its.InstanceTypes[0].InstanceType != "m5.large" || !aws.ToBool(its.InstanceTypes[0].NetworkInfo.Ipv6Supported) ||
		aws.ToInt32(its.InstanceTypes[0].NetworkInfo.Ipv6AddressesPerInterface) != 10 {
		t.Errorf("types supporting IPv6: %+v", its.InstanceTypes)
	}
	subnets, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("ipv6-cidr-block-association.state"), Values: []string{"associated"}},
	}})
	noErr(t, err)
	if len(subnets.Subnets) != 2 {
		t.Errorf("subnets with an associated IPv6 CIDR: %d, want 2", len(subnets.Subnets))
	}
}

// TestAssignIpv6AddressesAndPrefixes assigns IPv6 addresses and /80
// prefixes to an attached ENI up to m5.large's ten, reads them back from
// DescribeNetworkInterfaces (ipv6AddressesSet, ipv6PrefixSet, ipv6Address),
// its filters and DescribeInstances' network-interface filters, then
// unassigns some: the answers list what each call did.
func TestAssignIpv6AddressesAndPrefixes(t *testing.T) {
	e := newEnv(t, scenario(t, dualStackScenario))
	node := e.instanceByName("node-m5")
	eniID := aws.ToString(node.NetworkInterfaces[0].NetworkInterfaceId)

	out, err := e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6AddressCount: aws.Int32(3), Ipv6PrefixCount: aws.Int32(2)})
	noErr(t, err)
	if aws.ToString(out.NetworkInterfaceId) != eniID || len(out.AssignedIpv6Addresses) != 3 || len(out.AssignedIpv6Prefixes) != 2 {
		t.Fatalf("assigned %+v", out)
	}
	for _, s := range out.AssignedIpv6Addresses {
		if ip := netip.MustParseAddr(s); !dual64.Contains(ip) || ip.String() != s {
			t.Errorf("address %s is not a canonical address of %s", s, dual64)
		}
	}
	for _, s := range out.AssignedIpv6Prefixes {
		if p := netip.MustParsePrefix(s); p.Bits() != 80 || p.Masked() != p || !dual64.Contains(p.Addr()) {
			t.Errorf("prefix %s is not an aligned /80 of %s", s, dual64)
		}
		for _, a := range out.AssignedIpv6Addresses {
			if netip.MustParsePrefix(s).Contains(netip.MustParseAddr(a)) {
				t.Errorf("address %s lies in prefix %s", a, s)
			}
		}
	}
	explicitAddr := "2600:1f18:abc:de01:0:1234:5678:9"
	explicitPrefix := "2600:1f18:abc:de01:42::/80"
	more, err := e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID,
		Ipv6Addresses: []string{explicitAddr}, Ipv6Prefixes: []string{explicitPrefix}})
	noErr(t, err)
	if !slices.Equal(more.AssignedIpv6Addresses, []string{explicitAddr}) || !slices.Equal(more.AssignedIpv6Prefixes, []string{explicitPrefix}) {
		t.Errorf("explicit assign answered %+v", more)
	}

	ni := e.eni(eniID)
	addrs, prefixes := ipv6sOf(ni), ipv6PrefixesOf(ni)
	if len(addrs) != 4 || len(prefixes) != 3 || aws.ToString(ni.Ipv6Address) != addrs[0] {
		t.Fatalf("described: addresses %v, prefixes %v, ipv6Address %q", addrs, prefixes, aws.ToString(ni.Ipv6Address))
	}
	if got := e.enisWhere("ipv6-addresses.ipv6-address", explicitAddr); !slices.Equal(got, []string{eniID}) {
		t.Errorf("ipv6-addresses.ipv6-address filter: %v", got)
	}
	if got := e.enisWhere("ipv6-addresses.ipv6-address", "2600:1f18:abc:de01::ffff"); len(got) != 0 {
		t.Errorf("filter on an address nobody holds: %v", got)
	}
	insts, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("network-interface.ipv6-prefixes.ipv6-prefix"), Values: []string{explicitPrefix}},
	}})
	noErr(t, err)
	if len(insts.Reservations) != 1 || aws.ToString(insts.Reservations[0].Instances[0].InstanceId) != aws.ToString(node.InstanceId) {
		t.Errorf("instances by IPv6 prefix: %+v", insts.Reservations)
	}

	// Four addresses and three prefixes take seven of ten slots.
	_, err = e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6PrefixCount: aws.Int32(4)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
	_, err = e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6PrefixCount: aws.Int32(3)})
	noErr(t, err)
	if ni := e.eni(eniID); len(ni.Ipv6Prefixes)+len(ni.Ipv6Addresses) != 10 {
		t.Errorf("at the limit the ENI holds %d", len(ni.Ipv6Prefixes)+len(ni.Ipv6Addresses))
	}

	un, err := e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID,
		Ipv6Addresses: []string{explicitAddr}, Ipv6Prefixes: []string{explicitPrefix}})
	noErr(t, err)
	if !slices.Equal(un.UnassignedIpv6Addresses, []string{explicitAddr}) || !slices.Equal(un.UnassignedIpv6Prefixes, []string{explicitPrefix}) {
		t.Errorf("unassign answered %+v", un)
	}
	ni = e.eni(eniID)
	if slices.Contains(ipv6sOf(ni), explicitAddr) || slices.Contains(ipv6PrefixesOf(ni), explicitPrefix) || len(ni.Ipv6Addresses)+len(ni.Ipv6Prefixes) != 8 {
		t.Errorf("after unassign: %v %v", ipv6sOf(ni), ipv6PrefixesOf(ni))
	}
	if c := e.counters(); c.Calls["AssignIpv6Addresses"] != 4 || c.Calls["UnassignIpv6Addresses"] != 1 {
		t.Errorf("counters %+v", c.Calls)
	}
}

// TestIPv6Refusals: each refusal with EC2's code, and a refused call
// changes nothing.
func TestIPv6Refusals(t *testing.T) {
	e := newEnv(t, scenario(t, dualStackScenario))
	m5 := e.instanceByName("node-m5")
	eniID := aws.ToString(m5.NetworkInterfaces[0].NetworkInterfaceId)
	held, err := e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6AddressCount: aws.Int32(1), Ipv6PrefixCount: aws.Int32(1)})
	noErr(t, err)
	heldAddr, heldPrefix := held.AssignedIpv6Addresses[0], held.AssignedIpv6Prefixes[0]
	inPrefix := netip.MustParsePrefix(heldPrefix).Addr().Next().String()
	t3 := e.instanceByName("node-t3")
	t3ENI := aws.ToString(t3.NetworkInterfaces[0].NetworkInterfaceId)
	m1ENI := aws.ToString(e.instanceByName("node-m1").NetworkInterfaces[0].NetworkInterfaceId)
	v4ENI := aws.ToString(e.createENI("v4", 0).NetworkInterfaceId)

	assign := func(in ec2.AssignIpv6AddressesInput) error {
		_, err := e.ec2.AssignIpv6Addresses(e.ctx, &in)
		return err
	}
	for _, c := range []struct {
		name string
		in   ec2.AssignIpv6AddressesInput
		code string
	}{
		{"nothing asked", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI}, "MissingParameter"},
		{"addresses and a count", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{"2600:1f18:abc:de01::100"}, Ipv6AddressCount: aws.Int32(1)}, "InvalidParameterCombination"},
		{"prefixes and a count", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Prefixes: []string{"2600:1f18:abc:de01:77::/80"}, Ipv6PrefixCount: aws.Int32(1)}, "InvalidParameterCombination"},
		{"a negative count", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6AddressCount: aws.Int32(-1)}, "InvalidParameterValue"},
		{"a malformed address", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{"10.1.1.50"}}, "InvalidParameterValue"},
		{"a /64 for a prefix", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Prefixes: []string{dual64.String()}}, "InvalidParameterValue"},
		{"an unaligned /80", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Prefixes: []string{"2600:1f18:abc:de01:77::1/80"}}, "InvalidParameterValue"},
		{"an address of another subnet", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{"2600:1f18:abc:de03::100"}}, "InvalidParameterValue"},
		{"a reserved address", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{"2600:1f18:abc:de01::2"}}, "InvalidParameterValue"},
		{"an address twice", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{"2600:1f18:abc:de01::100", "2600:1f18:abc:de01::100"}}, "InvalidParameterValue"},
		{"another ENI's address", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{heldAddr}}, "InvalidIPAddress.InUse"},
		{"an address in another ENI's prefix", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{inPrefix}}, "InvalidIPAddress.InUse"},
		{"another ENI's prefix", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Prefixes: []string{heldPrefix}}, "InvalidParameterValue"},
		{"a prefix over another ENI's address", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Prefixes: []string{netip.PrefixFrom(netip.MustParseAddr(heldAddr), 80).Masked().String()}}, "InvalidParameterValue"},
		{"past t3.medium's six", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6AddressCount: aws.Int32(4), Ipv6PrefixCount: aws.Int32(3)}, "PrivateIpAddressLimitExceeded"},
		{"a subnet without IPv6", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &v4ENI, Ipv6AddressCount: aws.Int32(1)}, "InvalidParameterValue"},
		{"a type without IPv6", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &m1ENI, Ipv6PrefixCount: aws.Int32(1)}, "InvalidParameterValue"},
		{"an unknown ENI", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String("eni-0123456789abcdef0"), Ipv6AddressCount: aws.Int32(1)}, "InvalidNetworkInterfaceID.NotFound"},
	} {
		err := assign(c.in)
		if !isCode(err, c.code) {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	// All or nothing: a good address with a taken one assigns neither.
	err = assign(ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Addresses: []string{"2600:1f18:abc:de01::100", heldAddr}})
	wantCode(t, err, "InvalidIPAddress.InUse")
	if ni := e.eni(t3ENI); len(ni.Ipv6Addresses)+len(ni.Ipv6Prefixes) != 0 {
		t.Errorf("refused assigns left %v %v on %s", ipv6sOf(ni), ipv6PrefixesOf(ni), t3ENI)
	}

	unassign := func(in ec2.UnassignIpv6AddressesInput) error {
		_, err := e.ec2.UnassignIpv6Addresses(e.ctx, &in)
		return err
	}
	wantCode(t, unassign(ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID}), "MissingParameter")
	wantCode(t, unassign(ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6Addresses: []string{heldAddr, "2600:1f18:abc:de01::100"}}), "InvalidParameterValue")
	wantCode(t, unassign(ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6Prefixes: []string{"2600:1f18:abc:de01:77::/80"}}), "InvalidParameterValue")
	if ni := e.eni(eniID); !slices.Equal(ipv6sOf(ni), []string{heldAddr}) || !slices.Equal(ipv6PrefixesOf(ni), []string{heldPrefix}) {
		t.Errorf("refused unassigns changed %s: %v %v", eniID, ipv6sOf(ni), ipv6PrefixesOf(ni))
	}

	create := func(in ec2.CreateNetworkInterfaceInput) error {
		_, err := e.ec2.CreateNetworkInterface(e.ctx, &in)
		return err
	}
	dual := e.subnetByName("dual").SubnetId
	wantCode(t, create(ec2.CreateNetworkInterfaceInput{SubnetId: dual, Ipv6AddressCount: aws.Int32(1), Ipv6PrefixCount: aws.Int32(1)}), "InvalidParameterCombination")
	wantCode(t, create(ec2.CreateNetworkInterfaceInput{SubnetId: dual, Ipv6AddressCount: aws.Int32(1),
		Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String("2600:1f18:abc:de01::100")}}}), "InvalidParameterCombination")
	wantCode(t, create(ec2.CreateNetworkInterfaceInput{SubnetId: e.subnetByName("v4").SubnetId, Ipv6PrefixCount: aws.Int32(1)}), "InvalidParameterValue")
	wantCode(t, create(ec2.CreateNetworkInterfaceInput{SubnetId: dual, Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String(heldAddr)}}}), "InvalidIPAddress.InUse")

	// An unattached ENI may hold what the largest type allows; attaching
	// it to a smaller one is refused.
	big, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: dual, Ipv6AddressCount: aws.Int32(8)})
	noErr(t, err)
	if len(big.NetworkInterface.Ipv6Addresses) != 8 {
		t.Fatalf("created with %d IPv6 addresses", len(big.NetworkInterface.Ipv6Addresses))
	}
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: big.NetworkInterface.NetworkInterfaceId,
		InstanceId: t3.InstanceId, DeviceIndex: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")

	// Addresses and prefixes of a deleted ENI can be had again.
	created, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: dual,
		Ipv6Prefixes: []types.Ipv6PrefixSpecificationRequest{{Ipv6Prefix: aws.String("2600:1f18:abc:de01:77::/80")}}})
	noErr(t, err)
	if got := ipv6PrefixesOf(*created.NetworkInterface); !slices.Equal(got, []string{"2600:1f18:abc:de01:77::/80"}) {
		t.Fatalf("created with prefixes %v", got)
	}
	_, err = e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: created.NetworkInterface.NetworkInterfaceId})
	noErr(t, err)
	noErr(t, assign(ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &t3ENI, Ipv6Prefixes: []string{"2600:1f18:abc:de01:77::/80"}}))
}

// TestIPv6InIMDSAndLag: IMDS lists an attached ENI's ipv6s, ipv6-prefix
// and its subnet's and VPC's IPv6 CIDRs at once, while with an assign
// window DescribeNetworkInterfaces shows the new IPv6 only after it, and
// an unassign window keeps them shown.
func TestIPv6InIMDSAndLag(t *testing.T) {
	e := newEnv(t, scenario(t, dualStackScenario))
	lag := ec2sim.LagConfig{Assign: fixed(2 * time.Second), Unassign: fixed(3 * time.Second)}
	noErr(t, e.admin.SetTiming(e.ctx, ec2sim.TimingConfig{Lag: lag}))
	node := e.instanceByName("node-m5")
	primary := node.NetworkInterfaces[0]
	eniID, mac := aws.ToString(primary.NetworkInterfaceId), aws.ToString(primary.MacAddress)
	out, err := e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6AddressCount: aws.Int32(2), Ipv6PrefixCount: aws.Int32(1)})
	noErr(t, err)
	c := e.imdsClient(aws.ToString(node.InstanceId))
	base := "network/interfaces/macs/" + mac + "/"
	if got := metadata(t, e, c, base+"ipv6s"); got != strings.Join(out.AssignedIpv6Addresses, "\n") {
		t.Errorf("IMDS ipv6s %q, want %v", got, out.AssignedIpv6Addresses)
	}
	if got := metadata(t, e, c, base+"ipv6-prefix"); got != out.AssignedIpv6Prefixes[0] {
		t.Errorf("IMDS ipv6-prefix %q, want %s", got, out.AssignedIpv6Prefixes[0])
	}
	if got := metadata(t, e, c, base+"subnet-ipv6-cidr-blocks"); got != dual64.String() {
		t.Errorf("IMDS subnet-ipv6-cidr-blocks %q", got)
	}
	if got := metadata(t, e, c, base+"vpc-ipv6-cidr-blocks"); got != "2600:1f18:abc:de00::/56" {
		t.Errorf("IMDS vpc-ipv6-cidr-blocks %q", got)
	}
	if ni := e.eni(eniID); len(ni.Ipv6Addresses)+len(ni.Ipv6Prefixes) != 0 || len(e.enisWhere("ipv6-addresses.ipv6-address", out.AssignedIpv6Addresses[0])) != 0 {
		t.Errorf("right after the assign, describes show %v %v", ipv6sOf(ni), ipv6PrefixesOf(ni))
	}
	e.clock.Advance(2 * time.Second)
	if ni := e.eni(eniID); len(ni.Ipv6Addresses) != 2 || len(ni.Ipv6Prefixes) != 1 || len(e.enisWhere("ipv6-addresses.ipv6-address", out.AssignedIpv6Addresses[0])) != 1 {
		t.Errorf("2 s after the assign, describes show %v %v", ipv6sOf(ni), ipv6PrefixesOf(ni))
	}
	_, err = e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6Prefixes: out.AssignedIpv6Prefixes})
	noErr(t, err)
	e.clock.Advance(2 * time.Second)
	if ni := e.eni(eniID); len(ni.Ipv6Prefixes) != 1 {
		t.Errorf("2 s after the unassign, describes show prefixes %v, want the old one", ipv6PrefixesOf(ni))
	}
	e.clock.Advance(time.Second)
	if ni := e.eni(eniID); len(ni.Ipv6Prefixes) != 0 || len(ni.Ipv6Addresses) != 2 {
		t.Errorf("3 s after the unassign, describes show %v %v", ipv6sOf(ni), ipv6PrefixesOf(ni))
	}
}

// TestIPv6ScenarioValidation: a scenario's IPv6 CIDRs are a /56 per VPC
// and a /64 of it per subnet, or it is refused with the field's path.
func TestIPv6ScenarioValidation(t *testing.T) {
	for _, c := range []struct{ vpc, subnet, path string }{
		{"", "2600:1f18:abc:de01::/64", "vpcs[0].subnets[0].ipv6Cidr"},
		{"2600:1f18:abc:de00::/48", "", "vpcs[0].ipv6Cidr"},
		{"10.9.0.0/16", "", "vpcs[0].ipv6Cidr"},
		{"2600:1f18:abc:de00::/56", "2600:1f18:abc:de01::/80", "vpcs[0].subnets[0].ipv6Cidr"},
		{"2600:1f18:abc:de00::/56", "2600:1f18:abc:df01::/64", "vpcs[0].subnets[0].ipv6Cidr"},
		{"2600:1f18:abc:de00::/56", "2600:1F18:abc:de01::/64", "vpcs[0].subnets[0].ipv6Cidr"},
	} {
		y := "account: \"111122223333\"\nregion: eu-west-1\nzones: [eu-west-1a]\nvpcs:\n- cidrs: [10.1.0.0/16]\n"
		if c.vpc != "" {
			y += "  ipv6Cidr: " + c.vpc + "\n"
		}
		y += "  subnets:\n  - {cidr: 10.1.1.0/24, zone: eu-west-1a"
		if c.subnet != "" {
			y += ", ipv6Cidr: " + c.subnet
		}
		y += "}\n"
		_, err := ec2sim.ParseScenario([]byte(y))
		if err == nil || !strings.Contains(err.Error(), c.path) {
			t.Errorf("VPC %q, subnet %q: got %v, want an error at %s", c.vpc, c.subnet, err, c.path)
		}
	}
}

// TestIPv6SeededInScenarios: a scenario's instances start with IPv6
// prefixes on the primary ENI and addresses on a secondary one; asking for
// IPv6 in a subnet without it, or past the type's limit, is refused with
// the instance's path.
func TestIPv6SeededInScenarios(t *testing.T) {
	y := strings.Replace(dualStackScenario, "- {name: node-m5, type: m5.large, subnet: dual}",
		"- {name: node-m5, type: m5.large, subnet: dual, ipv6Prefixes: 1, enis: [{deviceIndex: 1, ipv6Addresses: 2}]}", 1)
	e := newEnv(t, scenario(t, y))
	node := e.instanceByName("node-m5")
	if len(node.NetworkInterfaces) != 2 {
		t.Fatalf("node has %d ENIs", len(node.NetworkInterfaces))
	}
	for _, ni := range node.NetworkInterfaces {
		got := e.eni(aws.ToString(ni.NetworkInterfaceId))
		want := [2]int{1, 0} // prefixes, addresses
		if aws.ToInt32(ni.Attachment.DeviceIndex) == 1 {
			want = [2]int{0, 2}
		}
		if len(got.Ipv6Prefixes) != want[0] || len(got.Ipv6Addresses) != want[1] {
			t.Errorf("device %d: prefixes %v, addresses %v", aws.ToInt32(ni.Attachment.DeviceIndex), ipv6PrefixesOf(got), ipv6sOf(got))
		}
	}
	for _, bad := range []string{
		"- {name: node-m5, type: m5.large, subnet: v4, ipv6Addresses: 1}",
		"- {name: node-m5, type: m5.large, subnet: dual, ipv6Prefixes: 11}",
	} {
		_, err := ec2sim.New(scenario(t, strings.Replace(dualStackScenario, "- {name: node-m5, type: m5.large, subnet: dual}", bad, 1)))
		if err == nil || !strings.Contains(err.Error(), "instances[0]") {
			t.Errorf("%s: got %v, want a refusal at instances[0]", bad, err)
		}
	}
}

// TestIPv6UnderIAM: the operator's policy (docs/iam/policy.json) allows
// AssignIpv6Addresses and UnassignIpv6Addresses; a principal allowed only
// describes is refused both, UnauthorizedOperation on the network
// interface, and its refused assign changes nothing.
func TestIPv6UnderIAM(t *testing.T) {
	sc := scenario(t, dualStackScenario)
	sc.ClusterName = "prod-1"
	sc.Principals = []ec2sim.PrincipalSpec{ec2sim.DefaultPrincipal(""), {
		Name: "reader", AccessKeyID: "AKIDREADER", SecretAccessKey: "s",
		PolicyDocument: []byte(`{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}]}`),
	}}
	e := newEnv(t, sc)
	eniID := aws.ToString(e.instanceByName("node-m5").NetworkInterfaces[0].NetworkInterfaceId)
	out, err := e.ec2.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6PrefixCount: aws.Int32(1)})
	noErr(t, err)
	_, err = e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6Prefixes: out.AssignedIpv6Prefixes})
	noErr(t, err)

	reader := e.newEC2ClientAs(1, "AKIDREADER", "s")
	arn := "arn:aws:ec2:eu-west-1:111122223333:network-interface/" + eniID
	refused := func(err error, action string) {
		t.Helper()
		wantStatus(t, err, "UnauthorizedOperation", 403)
		var ae smithy.APIError
		errors.As(err, &ae)
		f, derr := ec2sim.DecodeAuthorizationMessage(ae.ErrorMessage())
		if derr != nil || f.Allowed || f.Action != action || f.Resource != arn || f.Principal != "arn:aws:iam::111122223333:user/reader" {
			t.Errorf("authorization failure %+v (%v), want %s on %s", f, derr, action, arn)
		}
	}
	_, err = reader.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6PrefixCount: aws.Int32(1)})
	refused(err, "ec2:AssignIpv6Addresses")
	_, err = reader.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: &eniID, Ipv6Prefixes: out.AssignedIpv6Prefixes})
	refused(err, "ec2:UnassignIpv6Addresses")
	if ni := e.eni(eniID); len(ni.Ipv6Prefixes) != 0 {
		t.Errorf("a refused assign left %v", ipv6PrefixesOf(ni))
	}
}
