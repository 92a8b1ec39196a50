package operator_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAFirstPlacementOnANewEntryIsStampedWithoutAMark: every free address
// of node-1's pool is handed to a pod when db-0's claim asks for node-1,
// so the claim waits for a free address while the pool grows. The pass
// that brings the new addresses into the pool stamps db-0 on one of them
// without marking it for release: the entry reaches Cilium's agent
// stamped, so no pod can hold it, while a mark (status, written before
// the spec) would reach the agent before the entry, which answers
// do-not-release for an address it does not have; the stamp would go and
// the address, free for any waiting pod, be stamped again while a pod
// holds it (the kill campaign's ledger caught db-0's pod then given the
// stamped entry over that pod). db-0 ends Bound on an address no other
// pod holds.
func TestAFirstPlacementOnANewEntryIsStampedWithoutAMark(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	for ip, e := range w.node("node-1").Spec.IPAM.Pool {
		if _, used := w.used["node-1"][ip]; e.Owner == "" && !used {
			w.used["node-1"][ip] = "default/web-" + ip
		}
	}
	w.agentStep("node-1")
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{})
	w.target("db-0", "node-1")
	ctx := context.Background()
	for p := newPatience(); w.claim("db-0").Status.Phase != enipamv1alpha1.ClaimBound; time.Sleep(20 * time.Millisecond) {
		if p.spent() {
			t.Fatalf("db-0 never bound: %s", w.describe())
		}
		listed := maps.Clone(w.node("node-1").Spec.IPAM.Pool)
		_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
		_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
		w.invariants()
		cn := w.node("node-1")
		for ip, e := range cn.Spec.IPAM.Pool {
			if _, ok := listed[ip]; !ok && e.Owner != "" && cn.Status.IPAM.ReleaseIPs[ip] != "" {
				t.Fatalf("%s entered node-1's pool stamped for %s and %s in the same pass; the pool as read held %v",
					ip, e.Owner, cn.Status.IPAM.ReleaseIPs[ip], slices.Sorted(maps.Keys(listed)))
			}
		}
		w.agentStep("node-1")
		_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
	}
	ip := w.claim("db-0").Status.Address
	if holder, ok := w.used["node-1"][ip]; ok {
		t.Fatalf("db-0 bound to %s, which %s holds", ip, holder)
	}
	if got := w.allocate("node-1", "default/db-0"); got != ip {
		t.Fatalf("db-0's pod got %s, want %s", got, ip)
	}
	w.invariants()
}
