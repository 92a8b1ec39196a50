package poolcontroller

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
)

// TestNodeRequeuedOnAttachmentAndRoutingReport: m5.large nodes join at
// once, first interface index 1, pre-allocate 8. While joined nodes wait
// in the queue (empty pools) and others are short of their target, a node
// whose ENI's attachment EC2 shows complete and a node whose agent reports
// its ENI routed are queued at once, ahead of all of them: their
// addresses are a write away from the pool, no EC2 call left. Both ENIs
// are timed for enipam_pool_handoff_seconds.
func TestNodeRequeuedOnAttachmentAndRoutingReport(t *testing.T) {
	needs := newNeeds()
	r := &Reconciler{now: time.Now, needs: needs, handoffs: newHandoffs(),
		opts: Options{Defaults: policy.Defaults{Knobs: pool.Knobs{PreAllocate: 8}}}}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()

	nodes := r.nodeHandler()
	joined := func(name string, pool ipamtypes.AllocationMap) *ciliumv2.CiliumNode {
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cn.Spec.IPAM.Pool = pool
		return cn
	}
	nodes.Create(ctx, event.TypedCreateEvent[*ciliumv2.CiliumNode]{Object: joined("empty-1", nil)}, q)
	nodes.Create(ctx, event.TypedCreateEvent[*ciliumv2.CiliumNode]{Object: joined("short", ipamtypes.AllocationMap{
		"10.0.0.1": {Resource: "eni-s"}, "10.0.0.2": {Resource: "eni-s"},
	})}, q)
	nodes.Create(ctx, event.TypedCreateEvent[*ciliumv2.CiliumNode]{Object: joined("empty-2", nil)}, q)
	if got := len(needs.empty); got != 2 {
		t.Fatalf("%d nodes counted empty after their CiliumNodes' creation, want 2", got)
	}

	r.attached(q, cloud.ENI{ID: "eni-a", Tags: map[string]string{TagNode: "attached"}})
	reported := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "routed"}}
	reported.Status.ENIs = []enipamv1alpha1.RoutedENI{{ID: "eni-r", IPs: []string{"10.0.1.1"}}}
	r.routingHandler().Update(ctx, event.UpdateEvent{ObjectOld: &enipamv1alpha1.NodeRouting{ObjectMeta: reported.ObjectMeta}, ObjectNew: reported}, q)

	want := []struct {
		node     string
		priority int
	}{
		{"attached", priorityPoolReady}, {"routed", priorityPoolReady},
		{"empty-1", priorityStarving}, {"empty-2", priorityStarving},
		{"short", priorityDeficit},
	}
	if q.Len() != len(want) {
		t.Fatalf("%d nodes queued, want %d", q.Len(), len(want))
	}
	got := map[string]int{}
	for i := range want {
		req, p, _ := q.GetWithPriority()
		got[req.Name] = p
		q.Done(req)
		if i < 2 && p != priorityPoolReady {
			t.Errorf("item %d: %s at priority %d, before the nodes with addresses ready", i, req.Name, p)
		}
	}
	for _, w := range want {
		if got[w.node] != w.priority {
			t.Errorf("%s queued at priority %d, want %d", w.node, got[w.node], w.priority)
		}
	}

	now := time.Now()
	r.handoffs.sawRouted("eni-a", now)
	r.handoffs.sawAttached("eni-r", now)
	for _, eni := range []string{"eni-a", "eni-r"} {
		if _, ok := r.handoffs.pooled(eni, now.Add(time.Second)); !ok {
			t.Errorf("%s not timed into its pool", eni)
		}
	}
}

// TestTheTargetOfAClaimedAddressLeavingAPoolIsQueued: db-0's address,
// stamped on node-1, leaves node-1's pool (moving to node-2, which the
// claim asks for); node-2 is queued at once, ahead of every other node:
// it waits for no pool to list the address. An ordinary address leaving
// wakes no other node.
func TestTheTargetOfAClaimedAddressLeavingAPoolIsQueued(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{NodeName: "node-2"}}
	r := &Reconciler{now: time.Now, needs: newNeeds(), handoffs: newHandoffs(),
		client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim).Build(),
		opts:   Options{Defaults: policy.Defaults{Knobs: pool.Knobs{PreAllocate: 1}}}}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	old := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	old.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.0.1": {Resource: "eni-a"}, "10.0.0.2": {Resource: "eni-a"}, "10.0.0.9": {Resource: "eni-a", Owner: "default/db-0"},
	}
	cur := old.DeepCopy()
	delete(cur.Spec.IPAM.Pool, "10.0.0.2")
	r.nodeHandler().Update(context.Background(), event.TypedUpdateEvent[*ciliumv2.CiliumNode]{ObjectOld: old, ObjectNew: cur}, q)
	if q.Len() != 1 {
		t.Fatalf("%d nodes queued after an ordinary address left, want node-1 alone", q.Len())
	}
	old, cur = cur, cur.DeepCopy()
	delete(cur.Spec.IPAM.Pool, "10.0.0.9")
	r.nodeHandler().Update(context.Background(), event.TypedUpdateEvent[*ciliumv2.CiliumNode]{ObjectOld: old, ObjectNew: cur}, q)
	req, p, _ := q.GetWithPriority()
	if req.Name != "node-2" || p != priorityPoolReady {
		t.Errorf("first queued %s at priority %d, want node-2 at %d", req.Name, p, priorityPoolReady)
	}
}
