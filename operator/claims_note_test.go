package operator_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAPlacementNoteOutlivesItsOperatorButMisleadsNoOther: db-0's address
// is asked onto node-2 while its pod runs on node-1; the first operator's
// pool controller notes in the claim's status.placement that it waits
// for the old pod. That operator stops; the pod goes while none runs. The
// note survives in the API, but the next operator's claim controller,
// reconciling the claim before its pool controller looked at any node,
// does not take it for its own: the claim reads Placing, not waiting for
// a pod that is gone. Once the new pool controller has passed, its own
// note stands, the address moves, and the note goes once it is stamped
// on node-2. Nodes: m5.large, first interface index 1, pre-allocate 4.
func TestAPlacementNoteOutlivesItsOperatorButMisleadsNoOther(t *testing.T) {
	ctx := context.Background()
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)

	w.target("db-0", "node-2")
	for range 5 {
		w.step(l)
	}
	first := w.claim("db-0").Status.Placement
	if first == nil || first.Reason != enipamv1alpha1.ReasonWaitingForOldPod || first.Address != ip || first.Node != "node-1" {
		t.Fatalf("the first operator's note %+v, want %s about %s on node-1", first, enipamv1alpha1.ReasonWaitingForOldPod, ip)
	}

	l.cancel()
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)

	l2 := w.start()
	if _, err := l2.claims.Reconcile(ctx, reqClaim("db-0")); err != nil {
		t.Fatal(err)
	}
	c := w.claim("db-0")
	if c.Status.Placement == nil || *c.Status.Placement != *first {
		t.Fatalf("the first operator's note became %+v before the new pool controller spoke, want it as left: %+v", c.Status.Placement, first)
	}
	if r := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady); r == nil || r.Reason != enipamv1alpha1.ReasonPlacing || c.Status.Address != ip {
		t.Errorf("after the restart the claim reads %s %+v, want %s placing (the old note not acted on)", c.Status.Address, r, ip)
	}

	for _, n := range staticNodes {
		if _, err := l2.pools.Reconcile(ctx, reqNode(n.name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.claim("db-0").Status.Placement; n == nil || n.Term == first.Term {
		t.Errorf("after the new pool controller's pass the note is %+v, want one of the new term", n)
	}
	w.until(l2, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	w.step(l2)
	w.moved(ip, "node-2", "i-0a000000000000002")
	c = w.claim("db-0")
	if c.Status.Phase != enipamv1alpha1.ClaimBound || c.Status.Placement != nil {
		t.Errorf("claim %s with note %+v, want Bound with none", c.Status.Phase, c.Status.Placement)
	}
}
