package poolcontroller

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	r := &Reconciler{now: time.Now, needs: newNeeds(), handoffs: newHandoffs(),
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
	if got := len(r.needs.empty); got != 2 {
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
