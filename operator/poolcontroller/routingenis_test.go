package poolcontroller

import (
	"context"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// settledRig is a joinRig whose m5.large node has joined, a resync
// interval ago: a node in shape, its ENIs in spec.enis alone.
func settledRig(t *testing.T) *joinRig {
	j := newJoinRig(t)
	j.attach(1)
	j.reconcile()
	j.attached("eni-1")
	j.report(true, true)
	j.reconcile()
	j.attach(2)
	j.reconcile()
	j.attached("eni-2")
	j.report(true, true)
	j.reconcile()
	j.now = j.now.Add(61 * time.Second)
	j.reconcile()
	if n, m := len(j.node().Status.ENI.ENIs), len(j.routing().Spec.ENIs); n != 0 || m != 3 {
		t.Fatalf("settled node: status.eni.enis lists %d ENIs, spec.enis %d; want 0 and 3", n, m)
	}
	return j
}

// bytesPerRun is what f allocates a run, in bytes, over n runs (the
// test's goroutine alone allocates meanwhile).
func bytesPerRun(n int, f func()) float64 {
	f()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

// TestReconcileInShapeCostsNothingForSpecENIs: the periodic reconcile of
// a node in shape costs nothing for its ENIs in the NodeRouting's
// spec.enis: no NodeRouting or CiliumNode write; the list read is kept
// as it is (no entry made again: no allocation), the ENIs listed are
// checked against EC2's without making a list, the spec compared with
// what it would write allocates no more than the spec without its ENIs,
// and the two copies of the NodeRouting the reconcile keeps share the
// list.
func TestReconcileInShapeCostsNothingForSpecENIs(t *testing.T) {
	j := settledRig(t)
	status, spec := j.status, j.spec
	j.routingWrites = 0
	j.reconcile()
	if j.status != status || j.spec != spec || j.routingWrites != 0 {
		t.Fatalf("a reconcile with nothing to do wrote: %d CiliumNode status, %d spec, %d NodeRouting writes",
			j.status-status, j.spec-spec, j.routingWrites)
	}

	s := j.prepare()
	if &s.routingRead.Spec.ENIs[0] != &s.routing.Spec.ENIs[0] {
		t.Error("the NodeRouting read and its copy hold two spec.enis lists, want one shared")
	}
	// The ENIs as fill lists them, from EC2's view.
	enis := s.nodeENIs()
	if n := testing.AllocsPerRun(100, func() {
		if kept := s.keepMissingENIs(enis); len(kept) != 0 {
			t.Fatalf("kept %v for the grace, want none", kept)
		}
	}); n != 0 {
		t.Errorf("keepMissingENIs of a node whose every ENI EC2 shows: %v allocations, want 0", n)
	}

	s.fill()
	if !sameJSON(s.orig.Status, s.cn.Status) || len(s.cn.Status.ENI.ENIs) != 0 {
		t.Error("fill of a node in shape: the status is not the one read, without a copy of the ENIs")
	}
	had := s.routingRead.Spec.ENIs
	var want routingENIs
	if n := testing.AllocsPerRun(100, func() { want = s.wantRoutingENIs(enis, nil) }); n != 0 {
		t.Errorf("wantRoutingENIs of unchanged ENIs: %v allocations, want 0", n)
	}
	s.routing.Spec.ENIs = want.list
	if got := s.routing.Spec.ENIs; !want.set || len(got) != len(had) || &got[0] != &had[0] {
		t.Errorf("spec.enis wanted is not the list read")
	}

	ctx := context.Background()
	if err := s.writeRouting(ctx); err != nil {
		t.Fatal(err)
	}
	rest := func() {
		a, b := s.routingRead.Spec, s.routing.Spec
		a.ENIs, b.ENIs = nil, nil
		sameJSON(a, b)
		sameJSON(s.routingRead.OwnerReferences, s.routing.OwnerReferences)
	}
	write := func() {
		if err := s.writeRouting(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, without := bytesPerRun(200, write), bytesPerRun(200, rest); got > without+16 {
		t.Errorf("writeRouting with nothing to write allocates %.0f bytes, the spec without its ENIs %.0f: the ENIs cost %.0f",
			got, without, got-without)
	}
	if j.routingWrites != 0 {
		t.Errorf("%d NodeRouting writes, want none", j.routingWrites)
	}
}

// TestIsSpecENIIsSpecENIsJSON: isSpecENI says of an entry what comparing
// it with specENI's as JSON says, for an ENI with unsorted addresses and
// prefixes, invalid ones among them, the VPC's primary CIDR listed again,
// IPv6 prefixes and tags; and each field changed is told apart.
// sameNodeENI agrees with JSON too.
func TestIsSpecENIIsSpecENIsJSON(t *testing.T) {
	a := func(s string) ciliumip.Addr { return ciliumip.AddrFrom(netip.MustParseAddr(s)) }
	p := func(s string) ciliumip.Prefix { return ciliumip.PrefixFrom(netip.MustParsePrefix(s)) }
	e := awstypes.ENI{ID: "eni-1", MAC: "02:00:00:00:00:01", Number: 1, IP: a("10.0.1.4"),
		Addresses:    []ciliumip.Addr{a("10.0.1.12"), {}, a("10.0.1.9"), a("10.0.1.10")},
		Prefixes:     []ciliumip.Prefix{p("10.0.2.32/28"), p("10.0.2.16/28"), {}},
		IPv6Prefixes: []ciliumip.Prefix{p("2600:1f18::/80"), p("2600:1f18:0:1::/80")},
		Tags:         map[string]string{"keep": "x", "other": "y"},
	}
	e.Subnet.ID, e.Subnet.CIDR = "subnet-a", p("10.0.0.0/20")
	e.VPC.PrimaryCIDR = p("10.0.0.0/16")
	e.VPC.CIDRs = []ciliumip.Prefix{p("10.0.0.0/16"), p("100.64.0.0/16")}
	exclude := map[string]string{"keep": "", "absent": ""}

	want := specENI(&e, exclude)
	if !isSpecENI(&e, &want, exclude) {
		t.Fatalf("isSpecENI(%+v) false for specENI's own entry", want)
	}
	for name, change := range map[string]func(n *enipamv1alpha1.NodeENI){
		"id":            func(n *enipamv1alpha1.NodeENI) { n.ID = "eni-2" },
		"mac":           func(n *enipamv1alpha1.NodeENI) { n.MAC = "02:00:00:00:00:02" },
		"number":        func(n *enipamv1alpha1.NodeENI) { n.Number = 2 },
		"primary":       func(n *enipamv1alpha1.NodeENI) { n.PrimaryIP = "10.0.1.5" },
		"no primary":    func(n *enipamv1alpha1.NodeENI) { n.PrimaryIP = "" },
		"subnet":        func(n *enipamv1alpha1.NodeENI) { n.SubnetID = "subnet-b" },
		"subnet cidr":   func(n *enipamv1alpha1.NodeENI) { n.SubnetCIDR = "10.0.16.0/20" },
		"vpc cidrs":     func(n *enipamv1alpha1.NodeENI) { n.VPCCIDRs = n.VPCCIDRs[:1] },
		"vpc order":     func(n *enipamv1alpha1.NodeENI) { slices.Reverse(n.VPCCIDRs) },
		"vpc again":     func(n *enipamv1alpha1.NodeENI) { n.VPCCIDRs = append(n.VPCCIDRs, n.VPCCIDRs[0]) },
		"address":       func(n *enipamv1alpha1.NodeENI) { n.Addresses[1] = "10.0.1.11" },
		"address gone":  func(n *enipamv1alpha1.NodeENI) { n.Addresses = n.Addresses[1:] },
		"address order": func(n *enipamv1alpha1.NodeENI) { slices.Reverse(n.Addresses) },
		"address more":  func(n *enipamv1alpha1.NodeENI) { n.Addresses = append(n.Addresses, "10.0.1.13") },
		"prefix":        func(n *enipamv1alpha1.NodeENI) { n.Prefixes[0] = "10.0.2.48/28" },
		"prefix order":  func(n *enipamv1alpha1.NodeENI) { slices.Reverse(n.Prefixes) },
		"ipv6 prefix":   func(n *enipamv1alpha1.NodeENI) { n.IPv6Prefixes = n.IPv6Prefixes[:1] },
		"ipv6 order":    func(n *enipamv1alpha1.NodeENI) { slices.Reverse(n.IPv6Prefixes) },
		"tag value":     func(n *enipamv1alpha1.NodeENI) { n.Tags = map[string]string{"keep": "z"} },
		"tag more":      func(n *enipamv1alpha1.NodeENI) { n.Tags = map[string]string{"keep": "x", "other": "y"} },
		"no tags":       func(n *enipamv1alpha1.NodeENI) { n.Tags = nil },
	} {
		n := specENI(&e, exclude)
		change(&n)
		if isSpecENI(&e, &n, exclude) {
			t.Errorf("%s changed: isSpecENI true for %+v", name, n)
		}
		if sameNodeENI(want, n) != sameJSON(want, n) {
			t.Errorf("%s changed: sameNodeENI %v, JSON says %v", name, sameNodeENI(want, n), sameJSON(want, n))
		}
	}
	// Empty and absent lists and maps are alike in JSON.
	n := specENI(&e, exclude)
	n.IPv6Prefixes, want.IPv6Prefixes = []string{}, nil
	if !sameNodeENI(want, n) || !sameJSON(want, n) {
		t.Error("an empty list and none told apart")
	}
	// An ENI of more addresses than isSpecENI sorts in place.
	e.Addresses = nil
	for i := range maxMatched + 1 {
		e.Addresses = append(e.Addresses, a(netip.AddrFrom4([4]byte{10, 0, 3, byte(200 - i)}).String()))
	}
	want = specENI(&e, exclude)
	if !isSpecENI(&e, &want, exclude) {
		t.Errorf("isSpecENI false for specENI's entry of %d addresses", len(e.Addresses))
	}
	want.Addresses[3] = "10.0.4.1"
	if isSpecENI(&e, &want, exclude) {
		t.Errorf("isSpecENI true for an entry of %d addresses with one changed", len(e.Addresses))
	}
}
