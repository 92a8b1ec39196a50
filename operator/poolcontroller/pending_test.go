package poolcontroller

import (
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
)

// pendingDemand is the pod watch as the pool math reads it: pods bound
// to the node (arrivals) and pods not bound yet (pending).
type pendingDemand struct {
	arrivals []time.Time
	pending  int
}

func (d *pendingDemand) Waiting(string, func(string) bool) int { return 0 }
func (d *pendingDemand) Arrivals(string, time.Duration) []time.Time {
	return d.arrivals
}
func (d *pendingDemand) Pending(time.Duration) int { return d.pending }
func (d *pendingDemand) OnChange(func(string))     {}

// adaptiveSync is a reconcile of node n1 under the adaptive headroom
// (pre-allocate 8) in a fleet of nodes nodes.
func adaptiveSync(d Demand, nodes int, now time.Time) *nodeSync {
	r := New(nil, nil, nil, nil, nil, Options{Demand: d, Now: func() time.Time { return now }}, nil)
	for i := range nodes {
		r.memory(string(rune('a'+i)) + "-node")
	}
	s := &nodeSync{r: r, mem: r.memory("a-node"), cn: &ciliumv2.CiliumNode{}}
	s.cn.Name = "a-node"
	s.cfg = policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 8}, Adaptive: true}, ReleaseDelay: 10 * time.Second}
	return s
}

// TestHeadroomCoversPendingShare: a node that saw one pod a minute keeps
// a headroom of 1; when 60 pods are created and none is bound yet in a
// fleet of 20 nodes, its headroom is its share, 3, before any of them
// lands; a share above pre-allocate is held to it; less than a pod per
// node moves nothing.
func TestHeadroomCoversPendingShare(t *testing.T) {
	now := time.Unix(1000, 0)
	d := &pendingDemand{arrivals: []time.Time{now.Add(-30 * time.Second)}}
	for _, tc := range []struct {
		pending, want int
	}{
		{0, 1},
		{19, 1},
		{60, 3},
		{1000, 8},
	} {
		d.pending = tc.pending
		s := adaptiveSync(d, 20, now)
		s.adaptKnobs()
		if s.headroom != tc.want || s.cfg.PreAllocate != tc.want {
			t.Errorf("%d pods pending over 20 nodes: headroom %d, pre-allocate %d; want %d", tc.pending, s.headroom, s.cfg.PreAllocate, tc.want)
		}
	}
}

// TestPendingChangeWakesEveryNode: every node is looked at again when
// its share of the pods not bound yet moves, and not when it stays.
func TestPendingChangeWakesEveryNode(t *testing.T) {
	d := &pendingDemand{}
	s := adaptiveSync(d, 3, time.Unix(1000, 0))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	d.pending = 2
	s.r.pendingChanged(q)
	if q.Len() != 0 {
		t.Fatalf("2 pods pending over 3 nodes: %d nodes queued, want 0", q.Len())
	}
	d.pending = 7
	s.r.pendingChanged(q)
	if q.Len() != 3 {
		t.Fatalf("7 pods pending over 3 nodes: %d nodes queued, want 3", q.Len())
	}
	for q.Len() > 0 {
		req, _ := q.Get()
		q.Done(req)
		q.Forget(req)
		if req.NamespacedName == (types.NamespacedName{}) {
			t.Errorf("queued an empty name")
		}
	}
	d.pending = 8
	s.r.pendingChanged(q)
	if q.Len() != 0 {
		t.Errorf("8 pods pending over 3 nodes (share still 2): %d nodes queued, want 0", q.Len())
	}
}
