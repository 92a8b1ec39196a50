package operator_test

import (
	"context"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	"k8s.io/apimachinery/pkg/api/meta"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAStampAnotherPodHoldsIsNotBound: an operator withdrew the agent's
// do-not-release for db-0's stamp (status) and died before the unstamp
// (spec) landed, so node-1's pool stamps an address for db-0 that pod
// web holds, with no handshake. The claim is not Bound to it (the
// scheduler would not bind db-0 there either): the next pool
// reconcile unstamps it and the claim says the address is taken.
func TestAStampAnotherPodHoldsIsNotBound(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	ctx := context.Background()
	ip := w.freeEntry("node-1")
	w.used["node-1"][ip] = "default/web"
	w.agentStep("node-1")
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{NodeName: "node-1"})
	c := w.claim("db-0")
	c.Status.Address = ip
	if err := w.c.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	cn := w.node("node-1")
	e := cn.Spec.IPAM.Pool[ip]
	e.Owner = "default/db-0"
	cn.Spec.IPAM.Pool[ip] = e
	if err := w.c.Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	if u := w.node("node-1").Status.IPAM.Used[ip]; u.Owner != "default/web" {
		t.Fatalf("used %v: the test tests nothing", ipamtypes.AllocationIP(u))
	}
	_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
	c = w.claim("db-0")
	if c.Status.Phase == enipamv1alpha1.ClaimBound {
		t.Fatalf("db-0 is Bound to %s, which pod web holds", c.Status.Address)
	}
	_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
	_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
	if owner := w.node("node-1").Spec.IPAM.Pool[ip].Owner; owner != "" {
		t.Errorf("%s still stamped for %s", ip, owner)
	}
	c = w.claim("db-0")
	if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); c.Status.Phase == enipamv1alpha1.ClaimBound || r == nil || r.Reason != enipamv1alpha1.ReasonAddressTaken && c.Status.Address == ip {
		t.Errorf("db-0: phase %s, address %s, ready %+v", c.Status.Phase, c.Status.Address, r)
	}
}
