package poolcontroller

import (
	"net/netip"
	"slices"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestDrainOrderLeastBusyCandidateFirst: the free addresses of the
// secondary ENI carrying the fewest pods go first (ties: the last grown),
// and ENIs holding a static address, or never consolidated (the primary,
// another owner's), are not in the order at all.
func TestDrainOrderLeastBusyCandidateFirst(t *testing.T) {
	got := drainOrder([]eniUse{
		{ID: "eni-primary", DeviceIndex: 0, Busy: 0},
		{ID: "eni-1", DeviceIndex: 1, Busy: 5, Candidate: true},
		{ID: "eni-2", DeviceIndex: 2, Busy: 1, Candidate: true},
		{ID: "eni-3", DeviceIndex: 3, Busy: 1, Candidate: true},
		{ID: "eni-static", DeviceIndex: 4, Busy: 0, Candidate: true, Pinned: true},
		{ID: "eni-foreign", DeviceIndex: 5, Busy: 0},
	})
	want := []string{"eni-3", "eni-2", "eni-1"}
	if !slices.Equal(got, want) {
		t.Errorf("drainOrder = %v, want %v", got, want)
	}
}

func consolidationSnap() *snapshot.Node {
	ours := map[string]string{cloud.TagCluster: "test"}
	attached := func(id string, dev int, tags map[string]string, ips ...string) cloud.ENI {
		e := cloud.ENI{ID: id, DeviceIndex: dev, Tags: tags, AttachmentStatus: cloud.AttachmentAttached, Status: cloud.ENIInUse, AttachmentID: "attach-" + id}
		for _, ip := range ips {
			e.IPs = append(e.IPs, netip.MustParseAddr(ip))
		}
		return e
	}
	detaching := attached("eni-detaching", 5, ours)
	detaching.AttachmentStatus = cloud.AttachmentDetaching
	return &snapshot.Node{ENIs: []cloud.ENI{
		attached("eni-primary", 0, nil),
		attached("eni-used", 1, ours, "10.0.1.1"),
		attached("eni-empty", 2, ours),
		attached("eni-foreign", 3, map[string]string{cloud.TagCluster: "other"}),
		attached("eni-named", 4, ours),
		detaching,
		attached("eni-empty-2", 6, ours),
	}}
}

// TestEmptyENIsOnlyOursSecondaryWithoutAddresses: only the cluster's own
// attached secondary ENIs with no address and no pool entry naming them
// may be deleted, the last grown first; never the primary, another
// cluster's, one holding an address, or one already detaching.
func TestEmptyENIsOnlyOursSecondaryWithoutAddresses(t *testing.T) {
	snap := consolidationSnap()
	primaryEmpty := snap.ENIs[0]
	primaryEmpty.Tags = map[string]string{cloud.TagCluster: "test"}
	snap.ENIs[0] = primaryEmpty
	got := emptyENIs(snap, &pool.Config{}, "test", func(id string) bool { return id == "eni-named" })
	want := []string{"eni-empty-2", "eni-empty"}
	if !slices.Equal(got, want) {
		t.Errorf("emptyENIs = %v, want %v", got, want)
	}
	// Under a first interface index of 3, the ENIs below it carry no pods
	// and are not the operator's to consolidate.
	got = emptyENIs(snap, &pool.Config{FirstInterfaceIndex: 3}, "test", func(string) bool { return false })
	if want := []string{"eni-empty-2", "eni-named"}; !slices.Equal(got, want) {
		t.Errorf("emptyENIs with first interface index 3 = %v, want %v", got, want)
	}
}

// TestLeastUsedPrefixSkipsPinnedAndWhollyFree: on a prefix-delegated
// node the /28 with the fewest busy members (but some, and some free) is
// drained; one with a static member never is, and a wholly free one is
// left to the ordinary release.
func TestLeastUsedPrefixSkipsPinnedAndWhollyFree(t *testing.T) {
	p1 := netip.MustParsePrefix("10.0.2.0/28")  // 3 busy
	p2 := netip.MustParsePrefix("10.0.2.16/28") // 1 busy, 1 static
	p3 := netip.MustParsePrefix("10.0.2.32/28") // 2 busy, 1 leaving
	p4 := netip.MustParsePrefix("10.0.2.48/28") // wholly free
	snap := &snapshot.Node{ENIs: []cloud.ENI{
		{ID: "eni-a", DeviceIndex: 0, Prefixes: []netip.Prefix{p1, p2}},
		{ID: "eni-b", DeviceIndex: 1, Prefixes: []netip.Prefix{p3, p4}},
	}}
	states := map[netip.Addr]member{
		netip.MustParseAddr("10.0.2.1"): memberBusy, netip.MustParseAddr("10.0.2.2"): memberBusy, netip.MustParseAddr("10.0.2.3"): memberBusy,
		netip.MustParseAddr("10.0.2.17"): memberBusy, netip.MustParseAddr("10.0.2.18"): memberPinned,
		netip.MustParseAddr("10.0.2.33"): memberBusy, netip.MustParseAddr("10.0.2.34"): memberBusy, netip.MustParseAddr("10.0.2.35"): memberLeaving,
	}
	state := func(ip netip.Addr) member { return states[ip] } // memberFree by default
	p, free, ok := leastUsedPrefix(snap, &pool.Config{}, state)
	if !ok || p != p3 {
		t.Fatalf("leastUsedPrefix = %v (%v), want %v", p, ok, p3)
	}
	if len(free) != 13 {
		t.Errorf("free members = %d, want 13 (16 - 2 busy - 1 leaving)", len(free))
	}
	// With every prefix pinned, wholly free or wholly busy, none is.
	states[netip.MustParseAddr("10.0.2.36")] = memberPinned
	for ip := p1.Addr(); p1.Contains(ip); ip = ip.Next() {
		states[ip] = memberBusy
	}
	if p, _, ok := leastUsedPrefix(snap, &pool.Config{}, state); ok {
		t.Errorf("leastUsedPrefix = %v, want none", p)
	}
}

// TestCarriedElsewhereCountsOtherUsableENIs: m5.xlarge (15 slots per
// ENI): what the node's other usable ENIs can hold, whatever they hold
// now, 14 addresses each, 14 /28s under prefix delegation.
func TestCarriedElsewhereCountsOtherUsableENIs(t *testing.T) {
	snap := &snapshot.Node{Type: cloud.InstanceType{Name: "m5.xlarge", MaxENIs: 4, IPv4PerENI: 15, Hypervisor: "nitro"}, ENIs: []cloud.ENI{
		{ID: "eni-0", DeviceIndex: 0, IPs: make([]netip.Addr, 10)},
		{ID: "eni-1", DeviceIndex: 1, IPs: make([]netip.Addr, 14)},
		{ID: "eni-2", DeviceIndex: 2},
	}}
	if got := carriedElsewhere(snap, &pool.Config{}, "eni-2"); got != 28 {
		t.Errorf("carried besides eni-2 = %d, want 28", got)
	}
	if got := carriedElsewhere(snap, &pool.Config{FirstInterfaceIndex: 1}, "eni-2"); got != 14 {
		t.Errorf("carried besides eni-2 from device 1 = %d, want 14", got)
	}
	if got := carriedElsewhere(snap, &pool.Config{PrefixDelegation: true}, "eni-2"); got != 28*16 {
		t.Errorf("carried besides eni-2 under prefix delegation = %d, want %d", got, 28*16)
	}
}

// TestTakeBackPrefixOnlyWhileNoUnassignWasSent: a /28 drained on a
// prefix-delegated node whose drain stops (the node needs addresses
// again) has its members in the handshake, marked or acknowledged, put
// back in service, so the plan counts them rather than taking a new /28;
// a prefix all 16 of whose members are acknowledged (its Unassign may
// have been sent) or that EC2 no longer shows on the node is left alone.
func TestTakeBackPrefixOnlyWhileNoUnassignWasSent(t *testing.T) {
	p := netip.MustParsePrefix("10.0.3.16/28")
	snap := &snapshot.Node{ENIs: []cloud.ENI{{ID: "eni-a", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.3.0/28"), p}}}}
	node := func(ready, marked int) *ciliumv2.CiliumNode {
		cn := &ciliumv2.CiliumNode{}
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.3.1": ipamoption.IPAMReadyForRelease}
		ip := p.Addr()
		for range ready {
			cn.Status.IPAM.ReleaseIPs[ip.String()] = ipamoption.IPAMReadyForRelease
			ip = ip.Next()
		}
		for range marked {
			cn.Status.IPAM.ReleaseIPs[ip.String()] = ipamoption.IPAMMarkForRelease
			ip = ip.Next()
		}
		return cn
	}

	cn := node(12, 2) // two members busy
	if got := takeBackPrefix(cn, snap, p); got != 14 {
		t.Errorf("taken back = %d, want 14", got)
	}
	if len(cn.Status.IPAM.ReleaseIPs) != 1 {
		t.Errorf("handshake after = %v, want only the other prefix's member", cn.Status.IPAM.ReleaseIPs)
	}

	cn = node(16, 0)
	if got := takeBackPrefix(cn, snap, p); got != 0 || len(cn.Status.IPAM.ReleaseIPs) != 17 {
		t.Errorf("wholly acknowledged: taken back %d, handshake %d entries; want 0, 17", got, len(cn.Status.IPAM.ReleaseIPs))
	}

	cn = node(12, 2)
	gone := &snapshot.Node{ENIs: []cloud.ENI{{ID: "eni-a", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.3.0/28")}}}}
	if got := takeBackPrefix(cn, gone, p); got != 0 || len(cn.Status.IPAM.ReleaseIPs) != 15 {
		t.Errorf("prefix gone from EC2: taken back %d, handshake %d entries; want 0, 15", got, len(cn.Status.IPAM.ReleaseIPs))
	}
}

// TestAgentsOwnAddressesPinTheirPrefix: Cilium's agent holds its router
// and health addresses as long as it runs, so a /28 holding one never
// drains whole; drained, it would only withhold its free members (14 of
// them, counted free at rest) for good. On a prefix-delegated node whose
// first /28 holds the router and the health endpoint, and whose second
// holds three pods, the second is drained, not the least busy first.
func TestAgentsOwnAddressesPinTheirPrefix(t *testing.T) {
	first, second := netip.MustParsePrefix("10.0.4.0/28"), netip.MustParsePrefix("10.0.4.16/28")
	snap := &snapshot.Node{ENIs: []cloud.ENI{{ID: "eni-a", DeviceIndex: 0, Prefixes: []netip.Prefix{first, second}}}}
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for _, p := range []netip.Prefix{first, second} {
		for ip := p.Addr(); p.Contains(ip); ip = ip.Next() {
			cn.Spec.IPAM.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: "eni-a"}
		}
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{
		"10.0.4.1": {Owner: "router", Resource: "eni-a"}, "10.0.4.2": {Owner: "health", Resource: "eni-a"},
		"10.0.4.17": {Owner: "ns/pod-a", Resource: "eni-a"}, "10.0.4.18": {Owner: "ns/pod-b", Resource: "eni-a"},
		"10.0.4.19": {Owner: "ns/pod-c", Resource: "eni-a"},
	}
	s := &nodeSync{deciding: deciding{cn: cn, pool: &poolView{cn: cn}, nodeState: nodeState{static: &staticInputs{}}}}
	p, free, ok := leastUsedPrefix(snap, &pool.Config{}, s.memberState)
	if !ok || p != second || len(free) != 13 {
		t.Errorf("drained %v with %d free members (found %v), want %v with 13", p, len(free), ok, second)
	}
}
