package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"

	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/pool"
)

// TestAcknowledgedFirstMarkKeptWhileItsClaimIsAway (seed 229581 of the
// static-IP simulation): a first placement marks an entry on n1; before
// Cilium's agent answers (it writes no oftener than every 15 s), a bind
// retry asks the claim onto n2. The answer, ready-for-release, arrives
// while the claim, still without an address, waits on n2: the entry is
// kept for it, neither unassigned nor counted as a slot coming back, so
// that when the next bind retry asks the claim back onto n1 the entry is
// stamped at once. Released, as the pass did before, every move restarted
// the first placement and its wait for the agent, and a claim asked
// between two nodes more often than the agent answers was never placed.
// Once the claim records an address (placed on n2), the entry is
// released as any other.
func TestAcknowledgedFirstMarkKeptWhileItsClaimIsAway(t *testing.T) {
	n := newFirstNode()
	st := &n.cn.Status.IPAM
	cfg := &pool.Config{FirstInterfaceIndex: 1}

	// Pass 1 on n1: .10 marked for the first placement.
	n.pass()
	if st.ReleaseIPs["10.0.1.10"] != ipamoption.IPAMMarkForRelease || n.marks["10.0.1.10"] != firstOwner {
		t.Fatalf("pass 1: release-ips %v, marks %v; want 10.0.1.10 marked for %s", st.ReleaseIPs, n.marks, firstOwner)
	}

	// The claim is asked onto n2; then the agent acknowledges .10.
	st.ReleaseIPs["10.0.1.10"] = ipamoption.IPAMReadyForRelease
	away := func(addr netip.Addr) (*poolView, *staticInputs, staticOutcome) {
		in := &staticInputs{
			node: "n1", claims: map[string]*claims.Claim{}, cluster: "test",
			podNodes: map[string]string{}, pooledElsewhere: map[string]bool{},
			located: map[netip.Addr]inventory.Location{}, subnets: map[netip.Addr]cloud.Subnet{},
			listed: map[string]bool{"10.0.1.10": true, "10.0.1.11": true}, firstMarks: maps.Clone(n.marks),
		}
		// What readFirstAway reads: the claim, not concerning n1, waits
		// on n2 without an address.
		c := claims.Claim{Owner: firstOwner, Target: "n2", Addr: addr, Ready: true}
		if waitsFirstElsewhere(&c, "n1") {
			in.markAway(firstOwner)
		}
		v := &poolView{cn: n.cn}
		out := v.reconcileStatic(in, n.snap, cfg)
		n.marks = out.firstMarks
		return v, in, out
	}
	v, in, _ := away(netip.Addr{})
	if got := n.stampedFor(firstOwner); len(got) != 0 {
		t.Fatalf("pass 2: %v stamped on n1 for a claim asked onto n2", got)
	}
	if n.marks["10.0.1.10"] != firstOwner {
		t.Errorf("pass 2: the acknowledged mark is forgotten (marks %v) while its claim waits on n2", n.marks)
	}
	for _, step := range decideRelease(n.cn, n.snap, in, v.heldFirst, netip.Prefix{}) {
		if slices.Contains(step.ips, netip.MustParseAddr("10.0.1.10")) {
			t.Errorf("pass 2: 10.0.1.10 is unassigned while its claim waits for its first placement on n2")
		}
	}
	if got := v.releasing(n.snap, cfg); got != 0 {
		t.Errorf("pass 2: %d slots counted as coming back, want 0 (the kept entry is not released)", got)
	}

	// The claim is asked back onto n1: the kept entry is stamped at once.
	n.claim.Target = "n1"
	n.pass()
	if got := n.stampedFor(firstOwner); !slices.Equal(got, []string{"10.0.1.10"}) {
		t.Fatalf("pass 3: stamped %v for %s back on n1, want 10.0.1.10 at once", got, firstOwner)
	}

	// Another node: the claim recorded an address elsewhere meanwhile; a
	// mark acknowledged for it is released as any other.
	m := newFirstNode()
	m.pass()
	m.cn.Status.IPAM.ReleaseIPs["10.0.1.10"] = ipamoption.IPAMReadyForRelease
	n = m
	v, in, _ = away(netip.MustParseAddr("10.0.2.7"))
	if len(n.marks) != 0 || len(v.heldFirst) != 0 {
		t.Errorf("placed elsewhere: marks %v, kept %v; want none", n.marks, v.heldFirst)
	}
	released := false
	for _, step := range decideRelease(n.cn, n.snap, in, v.heldFirst, netip.Prefix{}) {
		released = released || slices.Contains(step.ips, netip.MustParseAddr("10.0.1.10"))
	}
	if !released {
		t.Error("placed elsewhere: the acknowledged entry is not released")
	}
}
