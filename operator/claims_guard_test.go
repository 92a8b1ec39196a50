package operator_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// freeEntry returns a free ordinary address of node's pool: not used,
// not in the handshake.
func (w *staticWorld) freeEntry(node string) string {
	w.t.Helper()
	cn := w.node(node)
	var ips []string
	for ip, e := range cn.Spec.IPAM.Pool {
		_, used := w.used[node][ip]
		_, hs := cn.Status.IPAM.ReleaseIPs[ip]
		if e.Owner == "" && !used && !hs {
			ips = append(ips, ip)
		}
	}
	if len(ips) == 0 {
		w.t.Fatalf("no free address on %s:%s", node, w.describe())
	}
	slices.Sort(ips)
	return ips[0]
}

// TestAClaimedAddressIsNeverUnassignedAfterALostStamp: db-0 asks for a
// free ordinary address of node-1. The operator marks it (status) and
// dies before its stamp (spec) lands; node-1's agent acknowledges the
// mark. The next operator stamps it again instead of releasing it: the
// address never leaves node-1's ENI in EC2, and db-0 ends bound to it.
func TestAClaimedAddressIsNeverUnassignedAfterALostStamp(t *testing.T) {
	w := newStaticWorld(t)
	unassigned := &unassignRecorder{Cloud: w.cloud, ips: map[netip.Addr]int{}}
	w.api = unassigned
	first := w.start()
	w.converge(first)
	ip := w.freeEntry("node-1")
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{Address: ip, NodeName: "node-1"})
	ctx := context.Background()
	_, _ = first.claims.Reconcile(ctx, reqClaim("db-0"))
	w.failSpecOf = "node-1"
	_, _ = first.pools.Reconcile(ctx, reqNode("node-1"))
	cn := w.node("node-1")
	if st := cn.Status.IPAM.ReleaseIPs[ip]; st != ipamoption.IPAMMarkForRelease || cn.Spec.IPAM.Pool[ip].Owner != "" {
		t.Fatalf("after the lost spec patch: %s is %q, owner %q; the test tests nothing:%s", ip, st, cn.Spec.IPAM.Pool[ip].Owner, w.describe())
	}
	first.cancel()
	w.agentStep("node-1")
	if st := w.node("node-1").Status.IPAM.ReleaseIPs[ip]; st != ipamoption.IPAMReadyForRelease {
		t.Fatalf("the agent answered %q", st)
	}

	second := w.start()
	left := 0
	w.until(second, "db-0 bound on node-1", func() bool {
		if _, in, _ := w.eniHolding(ip); in != "i-0a000000000000001" {
			left++
		}
		n, got := w.stampedOn("default/db-0")
		return n == "node-1" && got == ip && w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound
	})
	if n := unassigned.ips[netip.MustParseAddr(ip)]; left > 0 || n > 0 {
		t.Errorf("%s unassigned %d times, off node-1's ENI at %d looks: a claimed address was unassigned", ip, n, left)
	}
}

// unassignRecorder counts the Unassigns of each address.
type unassignRecorder struct {
	*cloudfake.Cloud
	ips map[netip.Addr]int
}

func (u *unassignRecorder) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	for _, ip := range ips {
		u.ips[ip]++
	}
	return u.Cloud.UnassignIPs(ctx, eniID, ips)
}

// leaveNode1 steps db-0's claim and node-1 only until db-0's address has
// left node-1's pool on its way to another node: EC2 still has it on
// node-1's ENI, and no pool lists it.
func (w *staticWorld) leaveNode1(l *staticLife, ip string) {
	w.t.Helper()
	ctx := context.Background()
	for range 40 {
		_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
		_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
		w.agentStep("node-1")
		w.invariants()
		if _, in := w.node("node-1").Spec.IPAM.Pool[ip]; !in {
			return
		}
	}
	w.t.Fatalf("%s never left node-1's pool:%s", ip, w.describe())
}

// TestAClaimCannotTakeAnAddressAnotherClaimHolds: db-0 (made by
// enipam-scheduler: its address only in status) moves from node-1 to
// node-2. While its address is in no pool, web-0 asks for that address
// on node-3. web-0 is refused at its first look (AddressTaken, with an
// event) and db-0's address ends stamped on node-2, on its ENI only, with
// db-0's Elastic IP; no pool ever stamps it for web-0.
func TestAClaimCannotTakeAnAddressAnotherClaimHolds(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip, alloc := w.placedPublic(l, enipamv1alpha1.PublicIPRequest{Allocate: true})
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.target("db-0", "node-2")
	w.leaveNode1(l, ip)

	w.createClaim("web-0", enipamv1alpha1.StaticIPClaimSpec{Address: ip, NodeName: "node-3"})
	// Refused at its first look: db-0 records the address in its status.
	_, _ = l.claims.Reconcile(context.Background(), reqClaim("web-0"))
	if r := meta.FindStatusCondition(w.claim("web-0").Status.Conditions, enipamv1alpha1.ClaimReady); r == nil || r.Reason != enipamv1alpha1.ReasonAddressTaken {
		t.Errorf("web-0's condition at its first look %+v, want %s", r, enipamv1alpha1.ReasonAddressTaken)
	}
	w.until(l, "db-0's address stamped on node-2", func() bool {
		if _, got := w.stampedOn("default/web-0"); got == ip {
			t.Fatalf("%s stamped for web-0:%s", ip, w.describe())
		}
		n, _ := w.stampedOn("default/db-0")
		return n == "node-2"
	})
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
	c := w.claim("web-0")
	if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); r == nil || r.Reason != enipamv1alpha1.ReasonAddressTaken {
		t.Errorf("web-0's condition %+v, want %s", r, enipamv1alpha1.ReasonAddressTaken)
	}
	if !w.hasEvent(enipamv1alpha1.ReasonAddressTaken) {
		t.Errorf("no event says web-0's address is taken")
	}
	if got := w.associatedWith(l, ip, "node-2"); got != alloc {
		t.Errorf("db-0 has Elastic IP %s on node-2, had %s", got, alloc)
	}
	w.pod("db-0", "node-2", true)
	w.allocate("node-2", "default/db-0")
	w.atRest(l)
}

// TestOfTwoClaimsOfOneAddressTheOlderKeepsIt: web-0 and web-1 both ask
// for one free address of node-1 on node-1, web-0 first. web-0 is bound
// to it; web-1 is refused with AddressTaken, whatever order the claims
// are looked at in.
func TestOfTwoClaimsOfOneAddressTheOlderKeepsIt(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	ip := w.freeEntry("node-1")
	w.createClaim("web-1", enipamv1alpha1.StaticIPClaimSpec{Address: ip, NodeName: "node-1"})
	c := w.claim("web-1")
	// Made a second later than web-0, whatever the clock says.
	w.createClaim("web-0", enipamv1alpha1.StaticIPClaimSpec{Address: ip, NodeName: "node-1"})
	first := w.claim("web-0")
	first.CreationTimestamp = metav1.NewTime(c.CreationTimestamp.Add(-time.Second))
	if err := w.c.Update(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	w.until(l, "web-0 bound", func() bool { return w.claim("web-0").Status.Phase == enipamv1alpha1.ClaimBound })
	for range 3 {
		w.step(l)
	}
	if n, got := w.stampedOn("default/web-0"); n != "node-1" || got != ip {
		t.Errorf("web-0 stamped on %q with %q, want node-1 with %s", n, got, ip)
	}
	if r := meta.FindStatusCondition(w.claim("web-1").Status.Conditions, enipamv1alpha1.ClaimReady); r == nil || r.Reason != enipamv1alpha1.ReasonAddressTaken {
		t.Errorf("web-1's condition %+v, want %s", r, enipamv1alpha1.ReasonAddressTaken)
	}
}

// TestAStampedAddressEC2LostIsPlacedBack: db-0's address, stamped on
// node-1, is unassigned from node-1's ENI behind the operator's back. The
// operator sees it in EC2 (the inventory), keeps the stamp (only db-0's
// pod can get it) and assigns the address back onto an ENI of node-1;
// db-0 ends bound with it, on node-1's instance only.
func TestAStampedAddressEC2LostIsPlacedBack(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	ctx := context.Background()
	eni, _, _ := w.eniHolding(ip)
	if err := w.cloud.UnassignIPs(ctx, eni, []netip.Addr{netip.MustParseAddr(ip)}); err != nil {
		t.Fatal(err)
	}
	// The inventory believes a describe once its own last change to the
	// ENI is older than the consistency grace.
	for deadline := time.Now().Add(10 * time.Second); l.inv.Locate(netip.MustParseAddr(ip)).Found; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the inventory never saw the Unassign")
		}
		if err := l.inv.RefreshENIs(ctx, []string{eni}); err != nil {
			t.Fatal(err)
		}
	}
	// The world is broken on purpose: the invariants are checked once
	// the operator repaired it.
	for range 40 {
		if _, in, _ := w.eniHolding(ip); in == "i-0a000000000000001" {
			break
		}
		_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
		_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
		w.agentStep("node-1")
	}
	for range 3 {
		w.step(l)
	}
	w.moved(ip, "node-1", "i-0a000000000000001")
}

// TestARequestedOrdinaryAddressMovesToTheNodeAsked: db-0 asks, on
// node-2, for a free ordinary address of node-1's pool that node-1 never
// stamped. node-1 stamps it (its agent confirming no pod holds it), lets
// it go through the handshake, and node-2 gets it: db-0 ends bound on
// node-2 with it, on node-2's instance only.
func TestARequestedOrdinaryAddressMovesToTheNodeAsked(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	ip := w.freeEntry("node-1")
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{Address: ip, NodeName: "node-2"})
	w.until(l, "db-0 bound on node-2", func() bool {
		n, _ := w.stampedOn("default/db-0")
		return n == "node-2" && w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound
	})
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
}

// TestAStampWhoseClaimVanishedIsRemoved: db-0's claim is deleted without
// its finalizer (a forced removal) while its address is stamped on
// node-1 and its pod gone. The stamp goes: the address is an ordinary
// entry of node-1's pool again, for any pod.
func TestAStampWhoseClaimVanishedIsRemoved(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	ctx := context.Background()
	c := w.claim("db-0")
	c.Finalizers = nil
	if err := w.c.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	if !w.gone("db-0") {
		t.Fatal("the claim is still there")
	}
	w.until(l, ip+" an ordinary entry of node-1", func() bool { return w.ordinary("node-1", ip) })
}

// TestAFirstPlacementOnAPrefixNodeCanMove: the pod subnet's policy
// delegates /28 prefixes. db-0's first placement on node-1 takes a
// secondary address, never a member of a prefix (which could only leave
// with its whole prefix); so when db-0 is rescheduled on node-2, its
// address moves there.
func TestAFirstPlacementOnAPrefixNodeCanMove(t *testing.T) {
	w := newStaticWorld(t)
	ctx := context.Background()
	p := &enipamv1alpha1.ENIPolicy{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: "pods"}, p); err != nil {
		t.Fatal(err)
	}
	yes := true
	p.Spec.PrefixDelegation = &yes
	if err := w.c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	l := w.start()
	ip := w.placed(l)
	for _, e := range w.state.Dump().NetworkInterfaces {
		for _, pfx := range e.IPv4Prefixes {
			if netip.MustParsePrefix(pfx.IPv4Prefix).Contains(netip.MustParseAddr(ip)) {
				t.Fatalf("db-0 was given %s, in the prefix %s of %s", ip, pfx.IPv4Prefix, e.NetworkInterfaceID)
			}
		}
	}
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.target("db-0", "node-2")
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
}
