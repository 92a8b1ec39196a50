package poolcontroller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/enipam/enipam/operator/pool"
)

// Demand is what the controller asks of the pod watch (package demand).
type Demand interface {
	// Waiting returns how many pods bound to node will take an address
	// from its pool and are not listed, by owner ("namespace/name"), as
	// using one in status.ipam.used.
	Waiting(node string, listed func(owner string) bool) int
	// Arrivals returns when pods that take a pool address were bound to
	// node within the last since, oldest first.
	Arrivals(node string, since time.Duration) []time.Time
	// Pending returns how many pods that will take a pool address were
	// created within the last since and are not bound to a node yet.
	Pending(since time.Duration) int
	// OnChange registers f, called with a node's name whenever the pods
	// it waits for change, and with "" whenever the pods not bound yet
	// do.
	OnChange(f func(node string))
}

// The pods not bound yet. kube-scheduler binds a burst's pods one by one
// over seconds (a deployment scaled from 0 to 300 on 100 nodes: one to
// four seconds), each pod's CNI call comes about a second after its
// binding, and an address assigned then reaches the pool only after the
// node's agent reported it routed: under the apiserver writes of a burst
// that took 2-5 s against 0.1-0.3 s at other times, so a node's burst
// pods beyond its headroom waited for an address. The pods are known the
// moment they are created, before any is bound: spread over the nodes
// the scheduler places them on, they are each node's share of the pods
// about to land, and the headroom covers at least that share
// (pendingShare), so the burst's addresses are on their way before its
// first pod is bound. Only pods created within pendingWindow count:
// kube-scheduler binds a pod that fits within a second or so, and one
// pending longer most likely fits nowhere.
const pendingWindow = 10 * time.Second

// pendingShare is each node's share of pending pods not bound yet over
// nodes nodes, rounded down: less than a pod per node is the ordinary
// churn the adaptive headroom learns from, and moves no node.
func pendingShare(pending, nodes int) int {
	if nodes <= 0 {
		return 0
	}
	return pending / nodes
}

// pendingChanged is told that the pods not bound yet changed: when each
// node's share of them moves, every node is looked at again, ahead of
// idle ones.
func (r *Reconciler) pendingChanged(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	share := r.pendingShare()
	r.mu.Lock()
	changed := share != r.lastShare
	r.lastShare = share
	var names []string
	if changed {
		names = make([]string, 0, len(r.nodes))
		for name := range r.nodes {
			names = append(names, name)
		}
	}
	r.mu.Unlock()
	for _, name := range names {
		enqueue(q, name, priorityDeficit)
	}
}

// pendingShare is each served node's share of the pods not bound yet.
func (r *Reconciler) pendingShare() int {
	if r.opts.Demand == nil {
		return 0
	}
	r.mu.Lock()
	nodes := len(r.nodes)
	r.mu.Unlock()
	return pendingShare(r.opts.Demand.Pending(pendingWindow), nodes)
}

// demandSource requeues a node whenever the pods it waits for change,
// ahead of idle nodes: a bound pod's CNI call comes within seconds.
func (r *Reconciler) demandSource() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.opts.Demand.OnChange(func(node string) {
			if node == "" {
				r.pendingChanged(q)
				return
			}
			enqueue(q, node, priorityDeficit)
		})
		return nil
	})
}

// countDemand reads, from the pod watch, the pods bound to the node that
// still wait for an address the agent does not list as used.
func (s *nodeSync) countDemand() {
	d := s.r.opts.Demand
	if d == nil {
		return
	}
	used := s.cn.Status.IPAM.Used
	var owners map[string]bool
	s.waiting = d.Waiting(s.cn.Name, func(owner string) bool {
		if owners == nil {
			owners = make(map[string]bool, len(used))
			for _, e := range used {
				owners[e.Owner] = true
			}
		}
		return owners[owner]
	})
}

// adaptKnobs turns the resolved knobs into those the pool math runs
// with: under the adaptive headroom, the headroom the node's arrivals
// and its share of the pods not bound yet call for replaces pre-allocate
// (pool.AdaptiveKnobs). Without a pod
// watch there are no arrivals to learn from, and the headroom stays
// fixed.
func (s *nodeSync) adaptKnobs() {
	cfg := &s.cfg.Config
	if !cfg.Adaptive || s.r.opts.Demand == nil {
		s.headroom = cfg.PreAllocate
		return
	}
	memory := max(s.cfg.ReleaseDelay, pool.MinMemory)
	arrivals := s.r.opts.Demand.Arrivals(s.cn.Name, memory)
	s.headroom = pool.Headroom(arrivals, s.r.now(), pool.Lead(s.mem.leads), memory, cfg.PreAllocate)
	// At least the node's share of the pods created and not bound yet,
	// within pre-allocate as any headroom.
	s.headroom = max(s.headroom, min(s.r.pendingShare(), cfg.PreAllocate))
	ipam := s.cn.Spec.IPAM
	cfg.Knobs = pool.AdaptiveKnobs(cfg.Knobs, s.headroom, pool.AgentStart(ipam.MinAllocate, ipam.PreAllocate))
}
