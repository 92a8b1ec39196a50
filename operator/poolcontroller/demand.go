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
	// OnChange registers f, called with a node's name whenever the pods
	// it waits for change.
	OnChange(f func(node string))
}

// demandSource requeues a node whenever the pods it waits for change,
// ahead of idle nodes: a bound pod's CNI call comes within seconds.
func (r *Reconciler) demandSource() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.opts.Demand.OnChange(func(node string) { enqueue(q, node, priorityDeficit) })
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

// readArrivals reads from the pod watch, under the adaptive headroom,
// when pods were bound to the node within the headroom's memory (the
// policy's release delay, at least pool.MinMemory). Without a pod watch
// there are no arrivals to learn from.
func (s *nodeSync) readArrivals() {
	if !s.cfg.Adaptive || s.r.opts.Demand == nil {
		return
	}
	s.adapts = true
	s.arrivals = s.r.opts.Demand.Arrivals(s.cn.Name, max(s.cfg.ReleaseDelay, pool.MinMemory))
}

// notePolicyConflict tells, once per change, that other policies match
// the node than the one governing it. Its memory is its own
// (lastConflict): through the allocation warnings' (lastWarning), which
// a node in shape clears, it was told on every reconcile, and an
// allocation warning alternating with it was told again each time.
func (s *deciding) notePolicyConflict() {
	if s.policyConflict == s.mem.lastConflict {
		return
	}
	s.mem.lastConflict = s.policyConflict
	if s.policyConflict != "" {
		s.r.event(s.cn, "Warning", ReasonPolicyConflict, s.policyConflict)
	}
}

// decideConfig turns the resolved policy into what the pool math runs
// with (telling first of the other policies that match the node): while the node's subnet has no free /28 (noPrefixesUntil), its
// plans use single addresses; under the adaptive headroom, the headroom
// the node's arrivals call for replaces pre-allocate
// (pool.AdaptiveKnobs), and without arrivals to learn from it stays
// fixed.
func (s *deciding) decideConfig() {
	s.notePolicyConflict()
	if s.r.now().Before(s.mem.noPrefixesUntil) {
		s.cfg.PrefixDelegation = false
	}
	cfg := &s.cfg.Config
	if !s.adapts {
		s.headroom = cfg.PreAllocate
		return
	}
	memory := max(s.cfg.ReleaseDelay, pool.MinMemory)
	s.headroom = pool.Headroom(s.arrivals, s.r.now(), pool.Lead(s.mem.leads), memory, cfg.PreAllocate)
	ipam := s.cn.Spec.IPAM
	cfg.Knobs = pool.AdaptiveKnobs(cfg.Knobs, s.headroom, pool.AgentStart(ipam.MinAllocate, ipam.PreAllocate))
}
