package room

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/google/go-cmp/cmp"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestDigestCountsAsCiliumHandsOut: a pool of six entries on a node
// where the agent uses two (one for a pod, one for its router), one is
// marked for release, one answered do-not-release (still handed out by
// Cilium), one is stamped for a StatefulSet pod and one is free. Free
// counts what any pod may get; the stamped entry belongs to its owner
// only; used owners are known.
func TestDigestCountsAsCiliumHandsOut(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.1.10": {Resource: "eni-1"},
		"10.0.1.11": {Resource: "eni-1"},
		"10.0.1.12": {Resource: "eni-1"},
		"10.0.1.13": {Resource: "eni-1"},
		"10.0.1.14": {Resource: "eni-1", Owner: "db/db-0"},
		"10.0.1.15": {Resource: "eni-1"},
		"10.0.1.16": {Resource: "eni-1", Owner: "db/db-1"},
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{
		"10.0.1.10": {Owner: "web/web-abc"},
		"10.0.1.11": {Owner: "router"},
	}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{
		"10.0.1.12": ipamoption.IPAMMarkForRelease,
		"10.0.1.13": ipamoption.IPAMDoNotRelease,
		"10.0.1.16": ipamoption.IPAMReadyForRelease,
	}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1", Addresses: addrs("10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13", "10.0.1.14", "10.0.1.15", "10.0.1.16")}}
	got := Digest(cn, nil)
	want := Pool{
		Size: 7, Free: 2, Free4: 2, Leaving: 2, Marked: 1,
		Stamped: map[string]string{"db/db-0": "10.0.1.14"},
		// db-1's stamp is in the handshake: its placement is under way.
		Answered: map[string]string{"db/db-1": "10.0.1.16"},
		Settled:  map[string]string{"db/db-0": "10.0.1.14"},
		UsedBy:   map[string]uint64{"web/web-abc": 0, "router": 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Digest (-want +got):\n%s", diff)
	}
}

// TestDigestCountsWhatMayBeMarkedForAFirstPlacement: of the entries in
// the release handshake, Marked counts those enipam-operator may have
// marked for a static-IP claim's first placement: unowned, not in use,
// marked-for-release or ready-for-release. Not a stamped one (its claim
// has an address), one a pod uses, nor one released (leaving the pool).
func TestDigestCountsWhatMayBeMarkedForAFirstPlacement(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
	for _, e := range []struct {
		ip, owner, usedBy string
		state             ipamtypes.IPReleaseStatus
	}{
		{ip: "10.0.1.10", state: ipamoption.IPAMMarkForRelease},  // counted
		{ip: "10.0.1.11", state: ipamoption.IPAMReadyForRelease}, // counted
		{ip: "10.0.1.12", usedBy: "web/web-abc", state: ipamoption.IPAMMarkForRelease},
		{ip: "10.0.1.13", state: ipamoption.IPAMReleased},
		{ip: "10.0.1.14", owner: "db/db-0", state: ipamoption.IPAMMarkForRelease},
		{ip: "10.0.1.15"}, // free
	} {
		cn.Spec.IPAM.Pool[e.ip] = ipamtypes.AllocationIP{Resource: "eni-1", Owner: e.owner}
		if e.usedBy != "" {
			cn.Status.IPAM.Used[e.ip] = ipamtypes.AllocationIP{Owner: e.usedBy}
		}
		if e.state != "" {
			cn.Status.IPAM.ReleaseIPs[e.ip] = e.state
		}
	}
	if p := Digest(cn, nil); p.Marked != 2 || p.Leaving != 5 || p.Free != 1 {
		t.Errorf("marked %d, leaving %d, free %d; want 2, 5, 1", p.Marked, p.Leaving, p.Free)
	}
}

// TestDigestSettlesOnlyAStampTheENIsHold: db-0's entry is stamped and out
// of the handshake, but the node's ENIs (status.eni.enis) do not hold its
// address (EC2 has it elsewhere, or nowhere): it is not settled, so no
// bind goes onto the node until the operator placed it back; db-2's entry
// names another ENI than the one holding it; db-1's, in a delegated
// prefix of its ENI, is settled.
func TestDigestSettlesOnlyAStampTheENIsHold(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.1.14": {Resource: "eni-1", Owner: "db/db-0"},
		"10.0.2.18": {Resource: "eni-1", Owner: "db/db-1"},
		// On eni-1, but the entry still names the ENI it was on.
		"10.0.1.10": {Resource: "eni-2", Owner: "db/db-2"},
	}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1", Addresses: addrs("10.0.1.10"),
		Prefixes: []ciliumip.Prefix{ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.2.16/28"))}}}
	got := Digest(cn, nil).Settled
	if want := map[string]string{"db/db-1": "10.0.2.18"}; !maps.Equal(got, want) {
		t.Errorf("settled %v, want %v", got, want)
	}
}

// TestAPinnedStaticAddressFitsOnlyItsHolder: db-0's address is a member
// of a /28 prefix delegated to node a (a first placement made before
// static addresses were secondary ones): it cannot move, so node b, with
// room in the subnet, is refused in words, and node a takes the pod.
func TestAPinnedStaticAddressFitsOnlyItsHolder(t *testing.T) {
	holder := &ciliumv2.CiliumNode{}
	holder.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": {ID: "eni-1",
		Prefixes: []ciliumip.Prefix{ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.2.16/28"))}}}
	hp := Digest(holder, nil)
	c := &Claim{Address: "10.0.2.18", Subnet: "subnet-a", Zone: "us-east-1a", Holder: "a", Checked: true, Pinned: hp.InPrefix("10.0.2.18")}
	if !c.Pinned {
		t.Fatal("10.0.2.18 not seen in node a's prefix")
	}
	roomy := &enipamv1alpha1.NodeCapacity{AvailabilityZone: "us-east-1a", FreeENISlots: 1,
		SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-a", Free: 5}}}
	b := AssessStatic(&Node{Name: "b", Pool: &Pool{}, Capacity: roomy}, "db/db-0", c)
	if b.Kind.Fits() || !strings.Contains(b.Reason, "cannot move") {
		t.Errorf("node b: %+v, want a refusal saying the address cannot move", b)
	}
	if a := AssessStatic(&Node{Name: "a", Pool: &hp, Capacity: roomy}, "db/db-0", c); a.Kind != Own {
		t.Errorf("node a: %+v, want Own", a)
	}
}

func addrs(ips ...string) []ciliumip.Addr {
	out := make([]ciliumip.Addr, len(ips))
	for i, ip := range ips {
		out[i] = ciliumip.AddrFrom(netip.MustParseAddr(ip))
	}
	return out
}

// TestAssess: one node at a time, the verdict a pod gets. Capacities are
// those the operator writes: a node of 3 ENIs × 10 addresses at capacity
// ("instance at capacity"), a node that can still grow to 27 addresses.
func TestAssess(t *testing.T) {
	atCapacity := &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 27, CanGrow: false,
		Reason: "instance at capacity: 3/3 ENIs attached, usable ENIs full (10 addresses each)"}
	canGrow := &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4, CanGrow: true}
	for _, tc := range []struct {
		name  string
		node  Node
		owner string
		want  Kind
		score int64
		// reason is a part of the refusal's words.
		reason string
	}{
		{"no CiliumNode", Node{}, "", NoCiliumNode, 0, "no CiliumNode"},
		{"a free IP now", Node{Pool: &Pool{Size: 4, Free: 1}}, "", Free, 10, ""},
		{"free IPs all promised, at capacity", Node{Pool: &Pool{Size: 27, Free: 2}, Promised: 2, Capacity: atCapacity}, "", NoIP,
			0, "no free IP; instance at capacity: 3/3 ENIs attached, usable ENIs full (10 addresses each)"},
		{"one free IP left after the promises", Node{Pool: &Pool{Size: 27, Free: 3}, Promised: 2, Capacity: atCapacity}, "", Free, 10, ""},
		{"no free IP, can grow", Node{Pool: &Pool{Size: 4}, Capacity: canGrow}, "", Growth, 3, ""},
		{"no free IP, capacity not reported", Node{Pool: &Pool{Size: 4}}, "", NoCapacity, 0, "has not reported the node's capacity"},
		{"growth taken by pods bound there", Node{Pool: &Pool{Size: 4}, Promised: 23, Capacity: canGrow}, "", NoIP, 0, "at its maximum of 27 addresses"},
		{"the last address of growth", Node{Pool: &Pool{Size: 4}, Promised: 22, Capacity: canGrow}, "", Growth, 3, ""},
		{"addresses awaiting routing, no growth", Node{Pool: &Pool{Size: 20}, Promised: 1,
			Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 20, Awaiting: 7}}, "", Coming, 6, ""},
		{"awaiting addresses already in the pool are not counted twice", Node{Pool: &Pool{Size: 27}, Promised: 0,
			Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 20, Awaiting: 7, Reason: "instance at capacity"}}, "", NoIP, 0, "instance at capacity"},
		{"cannot grow, no reason given", Node{Pool: &Pool{Size: 4}, Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4}}, "", NoIP, 0, "the pool cannot grow"},
		{"its own stamped IP on a full node", Node{Pool: &Pool{Size: 27, Stamped: map[string]string{"db/db-1": "10.0.1.9"}}, Capacity: atCapacity}, "db/db-1", Own, 10, ""},
		{"another pod's stamped IP is not free", Node{Pool: &Pool{Size: 27, Stamped: map[string]string{"db/db-1": "10.0.1.9"}}, Capacity: atCapacity}, "db/db-2", NoIP, 0, "no free IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Assess(&tc.node, tc.owner)
			if v.Kind != tc.want || v.Score != tc.score || v.Kind.Fits() != (tc.reason == "") || !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("Assess = %+v (%s), want %s score %d reason with %q", v, v.Kind, tc.want, tc.score, tc.reason)
			}
		})
	}
}

// TestDigestCountsEachFamily: a dual-stack pool with 3 free IPv4 and 5
// free IPv6 addresses (one more IPv6 used, one marked): each pod takes
// one of both, so 3 are free; the IPv6 window's entries take no slot
// (Size 4: the IPv4 entries) and are not counted leaving. An IPv6-only
// pool (no IPv4 entry) has its IPv6 free addresses free.
func TestDigestCountsEachFamily(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for _, ip := range []string{"10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"} {
		cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-1"}
	}
	for i := 1; i <= 7; i++ {
		cn.Spec.IPAM.Pool[fmt.Sprintf("2001:db8::a:0:0:%d", i)] = ipamtypes.AllocationIP{Resource: "eni-0"}
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.1.10": {Owner: "router"}, "2001:db8::a:0:0:1": {Owner: "router"}}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"2001:db8::a:0:0:7": ipamoption.IPAMMarkForRelease}
	got := Digest(cn, nil)
	if got.Size != 4 || got.Free4 != 3 || got.Free6 != 5 || got.Free != 3 || got.Leaving != 0 {
		t.Errorf("dual-stack: size %d, free %d (IPv4 %d, IPv6 %d), leaving %d; want 4, 3 (3, 5), 0", got.Size, got.Free, got.Free4, got.Free6, got.Leaving)
	}
	for _, ip := range []string{"10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"} {
		delete(cn.Spec.IPAM.Pool, ip)
	}
	if got := Digest(cn, nil); got.Size != 0 || got.Free != 5 {
		t.Errorf("IPv6 alone: size %d, free %d; want 0, 5", got.Size, got.Free)
	}
}

// TestAFirstPlacementOutsideTheClaimsZoneIsRefusedForTheZone: claim
// db-0 has no address yet and asks for subnet-a, in us-east-1a. A node
// of us-east-1b is refused for the zone whether its pool is full (no
// free IP for any pod either), has a free address, or is the claim's
// target holding an entry marked for release: the zone is a fact about
// the claim, and a pod's event that said "no free IP" of the full node
// would send its reader to the wrong cause. A full node of us-east-1a
// is still refused for having no free IP, and a node of unknown zone
// (no capacity reported) is judged by its pool.
func TestAFirstPlacementOutsideTheClaimsZoneIsRefusedForTheZone(t *testing.T) {
	zoneB := &enipamv1alpha1.NodeCapacity{MaxIPs: 10, PoolIPs: 10, AvailabilityZone: "us-east-1b", Reason: "instance at capacity"}
	zoneA := &enipamv1alpha1.NodeCapacity{MaxIPs: 10, PoolIPs: 10, AvailabilityZone: "us-east-1a", Reason: "instance at capacity"}
	c := &Claim{Subnet: "subnet-a", Zone: "us-east-1a", Target: "marked-b", Checked: true}
	for _, tc := range []struct {
		node   Node
		want   Kind
		reason string
	}{
		{Node{Name: "full-b", Pool: &Pool{Size: 10}, Capacity: zoneB}, NoZone, "must be in us-east-1a"},
		{Node{Name: "free-b", Pool: &Pool{Size: 10, Free: 3}, Capacity: zoneB}, NoZone, "must be in us-east-1a"},
		{Node{Name: "marked-b", Pool: &Pool{Size: 10, Leaving: 1, Marked: 1}, Capacity: zoneB}, NoZone, "must be in us-east-1a"},
		{Node{Name: "no-ciliumnode-b", Capacity: zoneB}, NoZone, "must be in us-east-1a"},
		{Node{Name: "full-a", Pool: &Pool{Size: 10}, Capacity: zoneA}, NoIP, ReasonNoIP},
		{Node{Name: "unreported", Pool: &Pool{Size: 10, Free: 1}}, Free, ""},
	} {
		v := AssessStatic(&tc.node, "db/db-0", c)
		if v.Kind != tc.want || !strings.Contains(v.Reason, tc.reason) || (tc.reason == "") != v.Kind.Fits() {
			t.Errorf("%s: %+v (%s), want %s with %q", tc.node.Name, v, v.Kind, tc.want, tc.reason)
		}
	}
}

// TestTheTargetHoldingTheFirstPlacementsAnsweredStampFits: claim db-0
// has no address recorded yet and asks for node target, full for any
// pod. The operator stamped 10.0.1.20 there for db-0 on the agent's
// ready-for-release, which it withdraws in its next pass: the agent
// hands that entry to db-0 alone, so target fits as db-0's own (10),
// not refused for having no free IP. Another node with such a stamp
// (the claim asks for target now) and target with a stamp of another
// pod are judged as for any pod.
func TestTheTargetHoldingTheFirstPlacementsAnsweredStampFits(t *testing.T) {
	full := func(owner string) *Pool {
		cn := &ciliumv2.CiliumNode{}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.1.10": {Resource: "eni-1"}, "10.0.1.20": {Resource: "eni-1", Owner: owner}}
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.1.10": {Owner: "web/web-abc"}}
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.1.20": ipamoption.IPAMReadyForRelease}
		p := Digest(cn, nil)
		return &p
	}
	atCapacity := &enipamv1alpha1.NodeCapacity{MaxIPs: 2, PoolIPs: 2, AvailabilityZone: "us-east-1a", Reason: "instance at capacity"}
	c := &Claim{Subnet: "subnet-a", Zone: "us-east-1a", Target: "target", Checked: true}
	if v := AssessStatic(&Node{Name: "target", Pool: full("db/db-0"), Capacity: atCapacity}, "db/db-0", c); v.Kind != Own || v.Score != 10 {
		t.Errorf("target: %+v (%s), want own, 10", v, v.Kind)
	}
	for _, tc := range []struct{ node, owner string }{{"elsewhere", "db/db-0"}, {"target", "db/db-1"}} {
		if v := AssessStatic(&Node{Name: tc.node, Pool: full(tc.owner), Capacity: atCapacity}, "db/db-0", c); v.Kind != NoIP {
			t.Errorf("%s with a stamp of %s: %+v (%s), want no_ip", tc.node, tc.owner, v, v.Kind)
		}
	}
}

// TestAClaimedAddressIsRefusedForTheZoneBeforeAMissingCiliumNode: claim
// db-0 holds 10.0.16.9 of subnet-a, in us-east-1a. A node of us-east-1b
// with no CiliumNode (its agent not started yet) but a reported capacity
// is refused for the zone, the claim's fact, as a node of us-east-1b
// with a pool is; a node of us-east-1a, or of unknown zone, with no
// CiliumNode is refused for that.
func TestAClaimedAddressIsRefusedForTheZoneBeforeAMissingCiliumNode(t *testing.T) {
	zone := func(az string) *enipamv1alpha1.NodeCapacity {
		return &enipamv1alpha1.NodeCapacity{MaxIPs: 10, PoolIPs: 10, AvailabilityZone: az, FreeENISlots: 1}
	}
	c := &Claim{Address: "10.0.16.9", Subnet: "subnet-a", Zone: "us-east-1a", Holder: "holder", Checked: true}
	for _, tc := range []struct {
		node   Node
		want   Kind
		reason string
	}{
		{Node{Name: "no-ciliumnode-b", Capacity: zone("us-east-1b")}, NoZone, "static IP 10.0.16.9 lives in subnet-a, us-east-1a"},
		{Node{Name: "pool-b", Pool: &Pool{Size: 10}, Capacity: zone("us-east-1b")}, NoZone, "static IP 10.0.16.9 lives in subnet-a, us-east-1a"},
		{Node{Name: "no-ciliumnode-a", Capacity: zone("us-east-1a")}, NoCiliumNode, ReasonNoCiliumNode},
		{Node{Name: "no-ciliumnode"}, NoCiliumNode, ReasonNoCiliumNode},
		{Node{Name: "pool-a", Pool: &Pool{Size: 10}, Capacity: zone("us-east-1a")}, Growth, ""},
	} {
		v := AssessStatic(&tc.node, "db/db-0", c)
		if v.Kind != tc.want || v.Reason != tc.reason {
			t.Errorf("%s: %+v (%s), want %s with %q", tc.node.Name, v, v.Kind, tc.want, tc.reason)
		}
	}
}
