package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

var (
	m5large = cloud.InstanceType{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10, Hypervisor: "nitro"}
	t3med   = cloud.InstanceType{Name: "t3.medium", MaxENIs: 3, IPv4PerENI: 6, Hypervisor: "nitro"}
)

type nodeOpt func(*snapshot.Node)

// node builds a node in us-east-1a, subnet-a (200 free), with its primary
// ENI (device 0, no secondary IPs) and security group sg-primary.
func node(typ cloud.InstanceType, opts ...nodeOpt) *snapshot.Node {
	n := &snapshot.Node{
		Instance: cloud.Instance{ID: "i-1", Type: typ.Name, AZ: "us-east-1a", VPCID: "vpc-1", SubnetID: "subnet-a"},
		Type:     typ,
		ENIs:     []cloud.ENI{{ID: "eni-0", DeviceIndex: 0, SubnetID: "subnet-a", SecurityGroups: []string{"sg-primary"}}},
		Subnets: []cloud.Subnet{
			{ID: "subnet-a", AZ: "us-east-1a", VPCID: "vpc-1", Available: 200},
			{ID: "subnet-b", AZ: "us-east-1a", VPCID: "vpc-1", Available: 100, Tags: map[string]string{"pods": "yes"}},
			{ID: "subnet-c", AZ: "us-east-1a", VPCID: "vpc-1", Available: 150, Tags: map[string]string{"pods": "yes"}},
			{ID: "subnet-z", AZ: "us-east-1b", VPCID: "vpc-1", Available: 4000, Tags: map[string]string{"pods": "yes"}},
		},
		SecurityGroups: []cloud.SecurityGroup{
			{ID: "sg-pods", VPCID: "vpc-1", Tags: map[string]string{"pods": "yes"}},
			{ID: "sg-other", VPCID: "vpc-1"},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// withIPs gives ENI device index idx count secondary IPs.
func withIPs(idx, count int) nodeOpt {
	return func(n *snapshot.Node) {
		for i := range n.ENIs {
			if n.ENIs[i].DeviceIndex == idx {
				for j := 0; j < count; j++ {
					n.ENIs[i].IPs = append(n.ENIs[i].IPs, netip.AddrFrom4([4]byte{10, 0, byte(idx), byte(j + 10)}))
				}
			}
		}
	}
}

func withENI(idx int, tags map[string]string) nodeOpt {
	return func(n *snapshot.Node) {
		n.ENIs = append(n.ENIs, cloud.ENI{ID: fmt.Sprintf("eni-%d", idx), DeviceIndex: idx, SubnetID: "subnet-b", Tags: tags})
	}
}

func withPool(available, used int) nodeOpt {
	return func(n *snapshot.Node) { n.Available, n.Used = available, used }
}

func withSubnetFree(id string, free int) nodeOpt {
	return func(n *snapshot.Node) {
		for i := range n.Subnets {
			if n.Subnets[i].ID == id {
				n.Subnets[i].Available = free
			}
		}
	}
}

// TestComputeAssignsOnPrimaryWithRoom: m5.large, pre-allocate 8, first
// interface index 0, empty pool → one Assign of 8 on the primary ENI.
func TestComputeAssignsOnPrimaryWithRoom(t *testing.T) {
	p := Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 8}})
	if len(p.Assign) != 1 || p.Assign[0] != (Assign{ENIID: "eni-0", IPs: 8}) || p.Create != nil || p.Blocked != nil {
		t.Fatalf("plan = %+v, want one Assign of 8 on eni-0", p)
	}
}

// TestComputeWatermarkLimitedByRoom: m5.large (9 secondary slots),
// pre-allocate 8 + watermark 4 → 9 on the primary, no ENI for the
// watermark's remainder.
func TestComputeWatermarkLimitedByRoom(t *testing.T) {
	p := Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 8, MaxAboveWatermark: 4}})
	if len(p.Assign) != 1 || p.Assign[0].IPs != 9 || p.Create != nil {
		t.Fatalf("plan = %+v, want 9 on eni-0 and no new ENI", p)
	}
}

// TestComputeCreatesENIWhenPrimaryExcluded: m5.large, first interface
// index 1 → a new ENI at device 1 in the node's subnet carrying 8 IPs, with
// the primary ENI's security groups.
func TestComputeCreatesENIWhenPrimaryExcluded(t *testing.T) {
	p := Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 8}, FirstInterfaceIndex: 1})
	want := Create{SubnetID: "subnet-a", SecurityGroups: []string{"sg-primary"}, DeviceIndex: 1, IPs: 8}
	if len(p.Assign) != 0 || p.Create == nil || fmt.Sprint(*p.Create) != fmt.Sprint(want) {
		t.Fatalf("plan = %+v, want create %+v", p, want)
	}
}

// TestComputeFillsThenCreates: t3.medium (5 secondary slots per ENI),
// primary holds 3, pool 3 of which 3 used, pre-allocate 8 → 2 on the
// primary, then a new ENI with 6 (capped at 5 slots).
func TestComputeFillsThenCreates(t *testing.T) {
	p := Compute(node(t3med, withIPs(0, 3), withPool(3, 3)), &Config{Knobs: Knobs{PreAllocate: 8}})
	if p.Needed != 8 || len(p.Assign) != 1 || p.Assign[0].IPs != 2 {
		t.Fatalf("plan = %+v, want needed 8 with 2 on the primary", p)
	}
	if p.Create == nil || p.Create.IPs != 5 || p.Create.DeviceIndex != 1 {
		t.Fatalf("create = %+v, want 5 IPs at device 1", p.Create)
	}
}

// TestComputeWaitsForSlotsBeingReleased: t3.medium, the primary full
// (5 secondaries), 4 of them acknowledged for release and not unassigned
// yet (an Unassign that failed, or a leader that died before it), 1 used,
// pre-allocate 4: the 4 slots coming back cover the need, so no ENI is
// created that would outlive it; one more needed than they cover, and
// the ENI is created.
func TestComputeWaitsForSlotsBeingReleased(t *testing.T) {
	releasing := func(n *snapshot.Node) { n.Releasing = 4 }
	p := Compute(node(t3med, withIPs(0, 5), withPool(0, 1), releasing), &Config{Knobs: Knobs{PreAllocate: 3}})
	if p.Needed != 4 || !p.Empty() || !p.Deferred || p.Blocked != nil {
		t.Fatalf("plan = %+v, want needed 4, nothing asked, deferred", p)
	}
	p = Compute(node(t3med, withIPs(0, 5), withPool(0, 1), releasing), &Config{Knobs: Knobs{PreAllocate: 4}})
	if p.Needed != 5 || p.Create == nil || p.Deferred {
		t.Fatalf("plan = %+v, want needed 5 and a new ENI", p)
	}
}

// TestComputeSubnetPrecedence: IDs beat tags beat the node's subnet; among
// candidates in the node's zone the most free wins; other zones never.
func TestComputeSubnetPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"node subnet by default", Config{}, "subnet-a"},
		{"tags pick most free in zone", Config{SubnetTags: map[string]string{"pods": "yes"}}, "subnet-c"},
		{"IDs beat tags", Config{SubnetIDs: []string{"subnet-b"}, SubnetTags: map[string]string{"pods": "yes"}}, "subnet-b"},
		{"IDs in another zone fall through", Config{SubnetIDs: []string{"subnet-z"}, SubnetTags: map[string]string{"pods": "yes"}}, "subnet-c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Knobs, cfg.FirstInterfaceIndex = Knobs{PreAllocate: 4}, 1
			p := Compute(node(m5large), &cfg)
			if p.Create == nil || p.Create.SubnetID != tc.want {
				t.Fatalf("plan = %+v, want create in %s", p, tc.want)
			}
		})
	}
}

// TestComputeSubnetExhausted: the tagged subnets are full → blocked with
// ErrSubnetExhausted, naming the subnet; a partly full subnet shrinks the
// new ENI instead.
func TestComputeSubnetExhausted(t *testing.T) {
	cfg := &Config{Knobs: Knobs{PreAllocate: 8}, FirstInterfaceIndex: 1, SubnetTags: map[string]string{"pods": "yes"}}
	p := Compute(node(m5large, withSubnetFree("subnet-b", 0), withSubnetFree("subnet-c", 1)), cfg)
	if !errors.Is(p.Blocked, ErrSubnetExhausted) || p.Create != nil {
		t.Fatalf("plan = %+v, want blocked by exhausted subnets", p)
	}
	p = Compute(node(m5large, withSubnetFree("subnet-b", 0), withSubnetFree("subnet-c", 4)), cfg)
	if p.Create == nil || p.Create.SubnetID != "subnet-c" || p.Create.IPs != 3 {
		t.Fatalf("plan = %+v, want create of 3 in subnet-c", p)
	}
}

// TestComputeAtCapacity: t3.medium with 3 full ENIs → blocked at capacity,
// nothing asked.
func TestComputeAtCapacity(t *testing.T) {
	n := node(t3med, withENI(1, nil), withENI(2, nil), withIPs(0, 5), withIPs(1, 5), withIPs(2, 5), withPool(15, 15))
	p := Compute(n, &Config{Knobs: Knobs{PreAllocate: 4}})
	if !errors.Is(p.Blocked, ErrAtCapacity) || !p.Empty() {
		t.Fatalf("plan = %+v, want blocked at capacity with no calls", p)
	}
}

// TestComputeSkipsExcludedENIs: an ENI carrying the exclude tags gets no
// IPs and keeps its device slot; the next free slot is used.
func TestComputeSkipsExcludedENIs(t *testing.T) {
	n := node(m5large, withENI(1, map[string]string{"owner": "other"}))
	p := Compute(n, &Config{Knobs: Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1, ExcludeTags: map[string]string{"owner": "other"}})
	if len(p.Assign) != 0 || p.Create == nil || p.Create.DeviceIndex != 2 {
		t.Fatalf("plan = %+v, want a new ENI at device 2", p)
	}
}

// TestComputeAdoptsOrphan: an unattached ENI created for this instance is
// attached instead of creating another.
func TestComputeAdoptsOrphan(t *testing.T) {
	n := node(m5large)
	n.Orphans = []cloud.ENI{{ID: "eni-orphan", Status: cloud.ENIAvailable, AZ: "us-east-1a"}}
	p := Compute(n, &Config{Knobs: Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1})
	if p.Adopt == nil || p.Adopt.ENIID != "eni-orphan" || p.Adopt.DeviceIndex != 1 || p.Create != nil {
		t.Fatalf("plan = %+v, want adoption of eni-orphan at device 1", p)
	}
}

// TestComputePrefixDelegation: nitro m5.large with prefix delegation, need
// 20 → two /28 prefixes on the primary (one slot each).
func TestComputePrefixDelegation(t *testing.T) {
	p := Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 20}, PrefixDelegation: true})
	if len(p.Assign) != 1 || p.Assign[0].Prefixes != 2 || p.Assign[0].IPs != 0 {
		t.Fatalf("plan = %+v, want 2 prefixes on eni-0", p)
	}
}

// TestComputePrefixDelegationBareMetal: m5.metal has no hypervisor but
// takes prefixes, as Cilium's IsPrefixDelegated says; a xen type does not.
func TestComputePrefixDelegationBareMetal(t *testing.T) {
	metal := cloud.InstanceType{Name: "m5.metal", MaxENIs: 15, IPv4PerENI: 50, BareMetal: true}
	p := Compute(node(metal), &Config{Knobs: Knobs{PreAllocate: 20}, PrefixDelegation: true})
	if len(p.Assign) != 1 || p.Assign[0].Prefixes != 2 {
		t.Errorf("m5.metal plan = %+v, want 2 prefixes", p)
	}
	xen := cloud.InstanceType{Name: "m4.large", MaxENIs: 2, IPv4PerENI: 10, Hypervisor: "xen"}
	p = Compute(node(xen), &Config{Knobs: Knobs{PreAllocate: 5}, PrefixDelegation: true})
	if len(p.Assign) != 1 || p.Assign[0].Prefixes != 0 || p.Assign[0].IPs != 5 {
		t.Errorf("xen plan = %+v, want 5 single addresses", p)
	}
}

// TestComputeSecurityGroupTags: tags select the VPC's matching groups; tags
// matching nothing block rather than silently using the primary's groups.
func TestComputeSecurityGroupTags(t *testing.T) {
	p := Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1, SecurityGroupTags: map[string]string{"pods": "yes"}})
	if p.Create == nil || fmt.Sprint(p.Create.SecurityGroups) != "[sg-pods]" {
		t.Fatalf("plan = %+v, want sg-pods", p)
	}
	p = Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1, SecurityGroupTags: map[string]string{"nope": "x"}})
	if !errors.Is(p.Blocked, ErrNoSecurityGroup) {
		t.Fatalf("plan = %+v, want blocked by unmatched security group tags", p)
	}
}

// TestComputeNothingNeeded: a full pool asks for nothing.
func TestComputeNothingNeeded(t *testing.T) {
	p := Compute(node(m5large, withIPs(0, 8), withPool(8, 0)), &Config{Knobs: Knobs{PreAllocate: 8}})
	if !p.Empty() || p.Needed != 0 || p.Blocked != nil {
		t.Fatalf("plan = %+v, want nothing", p)
	}
}

// TestComputeFreshNodeIncludesAgentEndpoints: m5.large, pre-allocate 8, a
// fresh node (nothing in the pool, nothing used) → one Assign covering
// the agent's router and health IPs too, capped by the ENI's 9 slots.
func TestComputeFreshNodeIncludesAgentEndpoints(t *testing.T) {
	p := Compute(node(m5large), &Config{Knobs: Knobs{PreAllocate: 8, AgentEndpoints: 2}})
	if len(p.Assign) != 1 || p.Assign[0].IPs != 9 {
		t.Fatalf("plan = %+v, want 9 on eni-0", p)
	}
	p = Compute(node(m5large, withIPs(0, 8), withPool(8, 2)), &Config{Knobs: Knobs{PreAllocate: 8, AgentEndpoints: 2}})
	if len(p.Assign) != 1 || p.Assign[0].IPs != 1 {
		t.Fatalf("plan = %+v, want the 1 remaining slot for a node in use", p)
	}
}

// TestCapacityAgreesWithCompute: m5.large (3 ENIs × 10). With first index
// 1 the node can reach 2 × 9 = 18 addresses; once both usable ENIs are
// full it cannot grow and says it is at capacity, as Compute does.
func TestCapacityAgreesWithCompute(t *testing.T) {
	n := node(m5large)
	cfg := &Config{Knobs: Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1}
	room := Capacity(n, cfg)
	if room.MaxIPs != 18 || !room.CanGrow {
		t.Fatalf("room %+v, want 18 and room to grow", room)
	}
	full := *n
	for i := 1; i < m5large.MaxENIs; i++ {
		e := cloud.ENI{ID: fmt.Sprintf("eni-%d", i), DeviceIndex: i, SubnetID: n.Instance.SubnetID}
		for j := range m5large.IPv4PerENI - 1 {
			e.IPs = append(e.IPs, netip.AddrFrom4([4]byte{10, 0, byte(i), byte(10 + j)}))
		}
		full.ENIs = append(full.ENIs, e)
	}
	room = Capacity(&full, cfg)
	plan := Compute(&full, cfg)
	if room.CanGrow || !errors.Is(room.Blocked, ErrAtCapacity) || !errors.Is(plan.Blocked, ErrAtCapacity) {
		t.Fatalf("full node: room %+v, plan blocked %v; want both at capacity", room, plan.Blocked)
	}
}

// TestComputeOrdinaryCardZeroOnly: a p4d-like node (m5.large limits for
// brevity) with an EFA interface at device 1 of card 0 and an ENI at
// device 1 of card 1. Neither gets pod addresses; the card-1 ENI does not
// take card 0's device 1, the EFA interface does: the new ENI goes to
// device 2.
func TestComputeOrdinaryCardZeroOnly(t *testing.T) {
	n := node(m5large)
	n.ENIs = append(n.ENIs,
		cloud.ENI{ID: "eni-efa", DeviceIndex: 1, InterfaceType: "efa", SubnetID: "subnet-a"},
		cloud.ENI{ID: "eni-card1", DeviceIndex: 1, NetworkCard: 1, SubnetID: "subnet-a"},
	)
	cfg := &Config{Knobs: Knobs{PreAllocate: 4}, FirstInterfaceIndex: 1}
	p := Compute(n, cfg)
	if len(p.Assign) != 0 || p.Create == nil || p.Create.DeviceIndex != 2 {
		t.Fatalf("plan = %+v (create %+v), want a new ENI at device 2 and nothing on the EFA or card-1 ENIs", p, p.Create)
	}
	if room := Capacity(n, cfg); room.MaxIPs != 9 {
		t.Errorf("max IPs %d, want 9: one usable slot of card 0 left", room.MaxIPs)
	}
}

// TestComputeAssignsNothingOnTheDrainedENI: m5.large, pre-allocate 4,
// the primary ENI holding 3 addresses, eni-1 (device 1, 2 addresses)
// being drained for consolidation: the need goes to the primary ENI
// though eni-1 has room; with the primary full, the plan asks for a new
// ENI (the caller then stops draining) rather than assigning on the
// drained one.
func TestComputeAssignsNothingOnTheDrainedENI(t *testing.T) {
	cfg := &Config{Knobs: Knobs{PreAllocate: 4}}
	n := node(m5large, withIPs(0, 3), withENI(1, nil), withIPs(1, 2), withPool(5, 5))
	n.Draining = "eni-1"
	p := Compute(n, cfg)
	if len(p.Assign) != 1 || p.Assign[0].ENIID != "eni-0" || p.Assign[0].IPs != 4 || p.Create != nil {
		t.Fatalf("plan = %+v, want 4 on eni-0 only", p)
	}
	n = node(m5large, withIPs(0, 9), withENI(1, nil), withIPs(1, 2), withPool(5, 5))
	n.Draining = "eni-1"
	if p := Compute(n, cfg); len(p.Assign) != 0 || p.Create == nil {
		t.Fatalf("plan = %+v, want a new ENI and nothing on the drained eni-1", p)
	}
}
