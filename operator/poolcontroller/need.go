package poolcontroller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Serving by need. When EC2's token buckets bind (a thousand nodes join
// at once), every call waits behind the reservations made before it, in
// arrival order. A node that already has free addresses and asks for a
// new ENI only to top its headroom up (on m5.large the first ENI holds 9
// secondaries, pre-allocate 8 plus Cilium's router and health addresses
// need 10) would take Create and Attach tokens from nodes that have none.
// So such a top-up holds back its new ENI, without reserving a token,
// while any node this operator serves is still empty; what the node's
// current ENIs can hold is still assigned at once.

// nodeNeed is what decides a node's place: its addresses and its pods.
type nodeNeed struct {
	// Free: addresses the node can hand out, now or once routed (pooled
	// and on their way into the pool), beyond those in use and those
	// promised to pods waiting.
	Free int
	// Waiting: pods bound to the node still waiting for an address.
	Waiting int
	// Needed: addresses short of the pool's target.
	Needed int
	// PoolReady: addresses attached and routed wait to be written into the
	// pool, or will as soon as EC2 or the agent says so.
	PoolReady bool
}

// Queue priorities, highest first: a node whose addresses are ready for
// its pool (a write, no EC2 call), then nodes whose pool is empty, then
// nodes short of their target, then the rest.
const (
	priorityPoolReady = 30
	priorityStarving  = 20
	priorityDeficit   = 10
	priorityIdle      = 0
)

// empty reports whether the node has no address to give a pod that comes
// now: it waits for EC2's tokens.
func (n nodeNeed) empty() bool { return n.Free <= 0 && n.Needed > 0 }

// priority is the node's place in the work queue.
func (n nodeNeed) priority() int {
	switch {
	case n.PoolReady:
		return priorityPoolReady
	case n.empty():
		return priorityStarving
	case n.Needed > 0:
		return priorityDeficit
	}
	return priorityIdle
}

// holdNewENI reports whether a node's new ENI (created or adopted) waits
// for nodes in greater need: the node has free addresses, no pod waits on
// it, and emptyElsewhere other nodes have none.
func holdNewENI(n nodeNeed, emptyElsewhere int) bool {
	return emptyElsewhere > 0 && n.Free > 0 && n.Waiting == 0
}

// needs tracks which nodes are empty, across workers, and wakes the nodes
// whose new ENI was held once none is.
type needs struct {
	mu sync.Mutex
	// known: nodes a reconcile has classified; the others are estimated
	// from their object's events.
	known map[string]bool
	empty map[string]bool
	held  map[string]bool
	wake  func(nodes []string)
}

// needTracker is what the reconciles ask of the needs (*needs): one
// interface, so that a test can watch its changes (export_test.go).
type needTracker interface {
	estimate(node string, empty bool)
	set(node string, empty bool)
	emptyElsewhere(node string) int
	hold(node string) bool
	forget(node string)
	setWake(wake func(nodes []string))
}

func newNeeds() *needs {
	return &needs{known: map[string]bool{}, empty: map[string]bool{}, held: map[string]bool{}}
}

// estimate records a node not reconciled yet as empty or not, from its
// object alone.
func (n *needs) estimate(node string, empty bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.known[node] {
		n.setLocked(node, empty)
	}
}

// set records a reconcile's word on a node; when no node is empty any
// more, the held nodes are woken.
func (n *needs) set(node string, empty bool) {
	n.mu.Lock()
	n.known[node] = true
	held, wake := n.setLocked(node, empty), n.wake
	n.mu.Unlock()
	if len(held) > 0 && wake != nil {
		wake(held)
	}
}

func (n *needs) setLocked(node string, empty bool) []string {
	if empty {
		n.empty[node] = true
		return nil
	}
	delete(n.empty, node)
	if len(n.empty) > 0 || len(n.held) == 0 {
		return nil
	}
	wake := make([]string, 0, len(n.held))
	for h := range n.held {
		wake = append(wake, h)
	}
	clear(n.held)
	return wake
}

// planWhole reports whether a node's plan takes at once every new ENI its
// need calls for (pool.ComputeWhole: extra new ENIs beyond the first)
// rather than one (pool.Compute). EC2's Create and Attach buckets (5 a
// second each) serve ENIs in the order they are asked for: in a wave, a
// node's second ENI asked for with its first would come ahead of other
// nodes' first ENIs, and every node's first address would wait for the
// whole wave's ENIs. Empty pools come first, so the whole need at once
// only when pods wait on the node (they are its need, as for a top-up),
// while fewer than wholeNeedEmptyNodes other nodes are empty, or while
// the client-side buckets would serve at once (tokens: new ENIs they
// grant now without a wait; negative when unknown) the whole need of
// every empty node, each counted as needing as many ENIs as this one.
func planWhole(n nodeNeed, emptyElsewhere, extra, tokens int) bool {
	if n.Waiting > 0 || emptyElsewhere < wholeNeedEmptyNodes {
		return true
	}
	return tokens >= 0 && (emptyElsewhere+1)*(1+extra) <= tokens
}

// wholeNeedEmptyNodes is how many other empty nodes let a node still take
// its whole need at once: each ENI it asks for beyond its first delays
// their first ENIs by at most one Attach token (0.2 s at EC2's refill),
// so fewer than 10 cost any of them under 2 s, and only when the bucket
// is dry.
const wholeNeedEmptyNodes = 10

// emptyElsewhere counts the nodes other than node that are empty, for
// node's decision (planWhole, holdNewENI).
func (n *needs) emptyElsewhere(node string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.emptyElsewhereLocked(node)
}

// hold records node's new ENI as held (decided with holdNewENI), to be
// woken once no node is empty; false, recording nothing, when no other
// node is empty any more.
func (n *needs) hold(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.emptyElsewhereLocked(node) == 0 {
		return false
	}
	n.held[node] = true
	return true
}

// setWake has the needs call wake with the held nodes once no node is
// empty.
func (n *needs) setWake(wake func(nodes []string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wake = wake
}

func (n *needs) emptyElsewhereLocked(node string) int {
	elsewhere := len(n.empty)
	if n.empty[node] {
		elsewhere--
	}
	return elsewhere
}

// forget drops a node that is gone.
func (n *needs) forget(node string) {
	n.mu.Lock()
	delete(n.known, node)
	delete(n.held, node)
	held, wake := n.setLocked(node, false), n.wake
	n.mu.Unlock()
	if len(held) > 0 && wake != nil {
		wake(held)
	}
}

// wakeSource enqueues the nodes whose new ENI was held, as top-ups, once
// no node is empty, and the nodes turned away from EC2 as slots free.
func (r *Reconciler) wakeSource() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.needs.setWake(func(nodes []string) {
			for _, node := range nodes {
				enqueue(q, node, priorityDeficit)
			}
		})
		r.slots.setWake(func(node string, priority int) { enqueue(q, node, priority) })
		return nil
	})
}

// enqueue adds a node to the queue with a priority (when the queue has
// priorities).
func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], node string, priority int) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: node}}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		return
	}
	q.Add(req)
}

// slots bound the reconciles making EC2 calls at once. A call may wait
// minutes in EC2's token buckets when they bind; were every worker
// waiting there, a node whose addresses are ready for its pool (a write,
// no EC2 call) would wait for a worker as long. So some workers are kept
// from EC2: a node turned away takes no bucket reservation and is woken
// when a slot frees, oldest first.
type slots struct {
	mu      sync.Mutex
	free    int
	waiting []string
	waits   map[string]int // node → its priority
	wake    func(node string, priority int)
}

// slotKeeper is what the reconciles ask of the slots (*slots): one
// interface, so that a test can watch its changes (export_test.go).
type slotKeeper interface {
	open() bool
	acquire(node string, priority int) bool
	release()
	setWake(wake func(node string, priority int))
}

func newSlots(n int) *slots { return &slots{free: n, waits: map[string]int{}} }

// slotsFor is how many of workers may make EC2 calls at once: all but a
// tenth (at least one held back, when there are two or more).
func slotsFor(workers int) int {
	if workers < 2 {
		return 1
	}
	return workers - max(workers/10, 1)
}

// open reports whether a slot is free now (acquire may still find none
// a moment later).
func (s *slots) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free > 0
}

// acquire takes a slot for node, or records it as waiting (with the
// priority it is to be woken with) and returns false.
func (s *slots) acquire(node string, priority int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 {
		s.free--
		return true
	}
	if _, ok := s.waits[node]; !ok {
		s.waiting = append(s.waiting, node)
	}
	s.waits[node] = priority
	return false
}

// setWake has the slots call wake with each waiting node woken as a
// slot frees, and the priority it waited with.
func (s *slots) setWake(wake func(node string, priority int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wake = wake
}

// release gives a slot back and wakes the two oldest waiting nodes (one
// may no longer need it).
func (s *slots) release() {
	s.mu.Lock()
	s.free++
	type woken struct {
		node     string
		priority int
	}
	var wake []woken
	for len(s.waiting) > 0 && len(wake) < 2 {
		node := s.waiting[0]
		s.waiting = s.waiting[1:]
		wake = append(wake, woken{node, s.waits[node]})
		delete(s.waits, node)
	}
	f := s.wake
	s.mu.Unlock()
	if f != nil {
		for _, w := range wake {
			f(w.node, w.priority)
		}
	}
}
