package ec2sim_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func assigned(out *ec2.AssignPrivateIpAddressesOutput) []string {
	var ips []string
	for _, a := range out.AssignedPrivateIpAddresses {
		ips = append(ips, aws.ToString(a.PrivateIpAddress))
	}
	return ips
}

// TestAssignPrivateIpAddressesOnPrimaryENI fills the primary ENI of an
// m5.large (10 addresses) the way an operator grows a pool: each answer
// lists only what that call assigned, the ENI keeps them in order, and the
// eleventh address fails with PrivateIpAddressLimitExceeded.
func TestAssignPrivateIpAddressesOnPrimaryENI(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	node := e.instanceByName("node-m5")
	eni := node.NetworkInterfaces[0].NetworkInterfaceId

	first, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(4)})
	noErr(t, err)
	if got := assigned(first); !slices.Equal(got, []string{"10.1.1.6", "10.1.1.7", "10.1.1.8", "10.1.1.9"}) {
		t.Errorf("first batch %v", got)
	}
	if aws.ToString(first.NetworkInterfaceId) != aws.ToString(eni) {
		t.Errorf("answer names %q", aws.ToString(first.NetworkInterfaceId))
	}
	second, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, PrivateIpAddresses: []string{"10.1.1.100", "10.1.1.101"}})
	noErr(t, err)
	if got := assigned(second); !slices.Equal(got, []string{"10.1.1.100", "10.1.1.101"}) {
		t.Errorf("second batch lists %v, want only its own two", got)
	}
	want := []string{"10.1.1.4", "10.1.1.6", "10.1.1.7", "10.1.1.8", "10.1.1.9", "10.1.1.100", "10.1.1.101"}
	if got := addresses(e.eni(*eni)); !slices.Equal(got, want) {
		t.Errorf("ENI holds %v, want %v", got, want)
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(3)})
	noErr(t, err)
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")

	if c := e.counters(); c.Calls["AssignPrivateIpAddresses"] != 4 || c.ErrorCount("AssignPrivateIpAddresses", "PrivateIpAddressLimitExceeded") != 1 ||
		c.Succeeded("AssignPrivateIpAddresses") != 3 {
		t.Errorf("counters %+v", c)
	}
}

// TestAssignPrivateIpAddressesErrors covers the refusals: addresses outside
// the subnet or reserved, taken by another ENI without AllowReassignment,
// already held, a subnet out of addresses, no count nor address, both, and
// an unknown ENI. None of them changes the subnet's free count.
func TestAssignPrivateIpAddressesErrors(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	a := e.createENI("big", 1)
	b := e.createENI("big", 0)
	tiny := e.createENI("tiny", 0)
	freeBig := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount)
	assign := func(in ec2.AssignPrivateIpAddressesInput) error {
		_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &in)
		return err
	}
	heldByA := addresses(a)[1]
	cases := []struct {
		name string
		in   ec2.AssignPrivateIpAddressesInput
		code string
	}{
		{"outside subnet", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{"10.1.2.9"}}, "InvalidParameterValue"},
		{"reserved router", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{"10.1.1.1"}}, "InvalidParameterValue"},
		{"not an address", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{"10.1.1.300"}}, "InvalidParameterValue"},
		{"held elsewhere", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{heldByA}}, "PrivateIpAddressInUse"},
		{"already held", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: a.NetworkInterfaceId, PrivateIpAddresses: []string{heldByA}}, "InvalidParameterValue"},
		{"subnet full", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: tiny.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(11)}, "InsufficientFreeAddressesInSubnet"},
		{"nothing asked", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId}, "MissingParameter"},
		{"count and list", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{"10.1.1.200"}, SecondaryPrivateIpAddressCount: aws.Int32(1)}, "InvalidParameterCombination"},
		{"unknown ENI", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String("eni-0123456789abcdef0"), SecondaryPrivateIpAddressCount: aws.Int32(1)}, "InvalidNetworkInterfaceID.NotFound"},
		{"half good batch", ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{"10.1.1.200", heldByA}}, "PrivateIpAddressInUse"},
	}
	for _, c := range cases {
		if err := assign(c.in); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			wantCode(t, err, c.code)
		}
	}
	if got := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount); got != freeBig {
		t.Errorf("failed assigns changed the free count: %d, want %d", got, freeBig)
	}
	if got := aws.ToInt32(e.subnetByName("tiny").AvailableIpAddressCount); got != 10 {
		t.Errorf("tiny subnet free %d, want 10", got)
	}
}

// TestAssignWithAllowReassignmentMovesAnAddress moves a secondary address
// from one ENI to another, as a static-IP pod moving nodes needs; a primary
// address never moves.
func TestAssignWithAllowReassignmentMovesAnAddress(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	a := e.createENI("big", 1)
	b := e.createENI("big", 0)
	moving := addresses(a)[1]
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{moving}, AllowReassignment: aws.Bool(true),
	})
	noErr(t, err)
	if got := assigned(out); !slices.Equal(got, []string{moving}) {
		t.Errorf("assigned %v", got)
	}
	if got := addresses(e.eni(*a.NetworkInterfaceId)); slices.Contains(got, moving) {
		t.Errorf("old ENI still holds %s: %v", moving, got)
	}
	if got := addresses(e.eni(*b.NetworkInterfaceId)); !slices.Contains(got, moving) {
		t.Errorf("new ENI lacks %s: %v", moving, got)
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{addresses(a)[0]}, AllowReassignment: aws.Bool(true),
	})
	wantCode(t, err, "PrivateIpAddressInUse")
}

// TestReassignmentCarriesTheElasticIP: an Elastic IP associated with a
// secondary address moves with it when another ENI takes the address with
// AllowReassignment, keeping its association ID, as EC2's API reference
// says of AssignPrivateIpAddresses; unassigning the address then breaks
// the association.
func TestReassignmentCarriesTheElasticIP(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	a := e.createENI("big", 1)
	b := e.createENI("big", 0)
	moving := addresses(a)[1]
	alloc, err := e.ec2.AllocateAddress(e.ctx, &ec2.AllocateAddressInput{Domain: types.DomainTypeVpc})
	noErr(t, err)
	assoc, err := e.ec2.AssociateAddress(e.ctx, &ec2.AssociateAddressInput{
		AllocationId: alloc.AllocationId, NetworkInterfaceId: a.NetworkInterfaceId, PrivateIpAddress: aws.String(moving),
	})
	noErr(t, err)
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{moving}, AllowReassignment: aws.Bool(true),
	})
	noErr(t, err)
	out, err := e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{*alloc.AllocationId}})
	noErr(t, err)
	got := out.Addresses[0]
	if aws.ToString(got.NetworkInterfaceId) != *b.NetworkInterfaceId || aws.ToString(got.PrivateIpAddress) != moving ||
		aws.ToString(got.AssociationId) != aws.ToString(assoc.AssociationId) {
		t.Fatalf("after the move: %s on %s (%s), want %s on %s (%s)", aws.ToString(got.PrivateIpAddress), aws.ToString(got.NetworkInterfaceId),
			aws.ToString(got.AssociationId), moving, *b.NetworkInterfaceId, aws.ToString(assoc.AssociationId))
	}
	_, err = e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: b.NetworkInterfaceId, PrivateIpAddresses: []string{moving}})
	noErr(t, err)
	out, err = e.ec2.DescribeAddresses(e.ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{*alloc.AllocationId}})
	noErr(t, err)
	if id := aws.ToString(out.Addresses[0].AssociationId); id != "" {
		t.Errorf("still associated (%s) once the address left", id)
	}
}

// TestUnassignPrivateIpAddresses returns addresses to the subnet; one the
// ENI does not hold, or its primary, fails and changes nothing.
func TestUnassignPrivateIpAddresses(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	ni := e.createENI("big", 3)
	ips := addresses(ni)
	free := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount)
	_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: ips[1:3]})
	noErr(t, err)
	if got := addresses(e.eni(*ni.NetworkInterfaceId)); !slices.Equal(got, []string{ips[0], ips[3]}) {
		t.Errorf("left %v", got)
	}
	if got := aws.ToInt32(e.subnetByName("big").AvailableIpAddressCount); got != free+2 {
		t.Errorf("free %d, want %d", got, free+2)
	}
	_, err = e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{ips[3], ips[1]}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{ips[0]}})
	wantCode(t, err, "InvalidParameterValue")
	if got := addresses(e.eni(*ni.NetworkInterfaceId)); len(got) != 2 {
		t.Errorf("failed unassigns changed the ENI: %v", got)
	}
	// A freed address is handed out again, lowest first.
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	noErr(t, err)
	if got := assigned(out); !slices.Equal(got, []string{ips[1]}) {
		t.Errorf("reassigned %v, want %s", got, ips[1])
	}
}

// TestPrefixDelegation assigns aligned /28 prefixes: each takes one IPv4
// slot of the ENI and sixteen addresses of the subnet, a misaligned prefix
// is refused, and a fragmented subnet with plenty of free addresses but no
// free aligned /28 answers InsufficientCidrBlocks.
func TestPrefixDelegation(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	sn := e.subnetByName("extra") // 100.64.0.0/24, nothing in it yet
	created, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: sn.SubnetId, Ipv4PrefixCount: aws.Int32(1)})
	noErr(t, err)
	ni := created.NetworkInterface
	// The first /28 holds the reserved addresses; the primary address took
	// 100.64.0.4, so the first free aligned /28 is .16/28.
	if len(ni.Ipv4Prefixes) != 1 || aws.ToString(ni.Ipv4Prefixes[0].Ipv4Prefix) != "100.64.0.16/28" {
		t.Fatalf("prefixes %+v", ni.Ipv4Prefixes)
	}
	out, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, Ipv4PrefixCount: aws.Int32(2)})
	noErr(t, err)
	var got []string
	for _, p := range out.AssignedIpv4Prefixes {
		got = append(got, aws.ToString(p.Ipv4Prefix))
	}
	if !slices.Equal(got, []string{"100.64.0.32/28", "100.64.0.48/28"}) || len(out.AssignedPrivateIpAddresses) != 0 {
		t.Errorf("assigned prefixes %v addresses %v", got, out.AssignedPrivateIpAddresses)
	}
	// 256 - 5 reserved - 1 primary - 3*16.
	if free := aws.ToInt32(e.subnetByName("extra").AvailableIpAddressCount); free != 202 {
		t.Errorf("free %d, want 202", free)
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, Ipv4Prefixes: []string{"100.64.0.72/28"}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, Ipv4Prefixes: []string{"100.64.0.64/28"}})
	noErr(t, err)
	desc := e.eni(*ni.NetworkInterfaceId)
	if len(desc.Ipv4Prefixes) != 4 || len(desc.PrivateIpAddresses) != 1 {
		t.Errorf("ENI has %d prefixes, %d addresses", len(desc.Ipv4Prefixes), len(desc.PrivateIpAddresses))
	}
	_, err = e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, Ipv4Prefixes: []string{"100.64.0.32/28"}})
	noErr(t, err)

	// Fragment the rest: one address in every remaining /28.
	frag := e.createENI("extra", 0)
	var scatter []string
	for _, base := range []int{0x20, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0} {
		scatter = append(scatter, "100.64.0."+strconv.Itoa(base+1))
	}
	for i := 0; i < len(scatter); i += 10 {
		end := min(i+10, len(scatter))
		_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: frag.NetworkInterfaceId, PrivateIpAddresses: scatter[i:end]})
		if err != nil {
			// An ENI holds at most 50 addresses unattached; spread over more.
			t.Fatalf("scatter: %v", err)
		}
	}
	free := aws.ToInt32(e.subnetByName("extra").AvailableIpAddressCount)
	if free < 16 {
		t.Fatalf("only %d free, the test needs the subnet fragmented, not full", free)
	}
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, Ipv4PrefixCount: aws.Int32(1)})
	wantCode(t, err, "InsufficientCidrBlocks")
	// Addresses still come: fragmentation only hurts prefixes.
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: ni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(16)})
	noErr(t, err)
}

// TestPrefixesCountAgainstTheENISlotLimit fills a t3.medium's primary ENI
// (6 slots): one address and five prefixes, then nothing more fits.
func TestPrefixesCountAgainstTheENISlotLimit(t *testing.T) {
	e := newEnv(t, scenario(t, smallScenario))
	eni := e.instanceByName("node-t3").NetworkInterfaces[0].NetworkInterfaceId
	_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, Ipv4PrefixCount: aws.Int32(5)})
	noErr(t, err)
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, Ipv4PrefixCount: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
	_, err = e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
	filtered, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("ipv4-prefix"), Values: []string{"10.1.1.*"}}},
	})
	noErr(t, err)
	if len(filtered.NetworkInterfaces) != 1 || len(filtered.NetworkInterfaces[0].Ipv4Prefixes) != 5 {
		t.Errorf("ENIs with prefixes: %d", len(filtered.NetworkInterfaces))
	}
}
