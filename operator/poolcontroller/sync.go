package poolcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// nodeSync is one reconcile of one node: the object as read, the object
// as it should be written, and what happened on the way.
type nodeSync struct {
	r        *Reconciler
	mem      *memory
	orig     *ciliumv2.CiliumNode
	cn       *ciliumv2.CiliumNode
	policies []enipamv1alpha1.ENIPolicy

	// nodeState is what the reconcile decides on, read beforehand
	// (read.go).
	nodeState
	pool *poolView
	// staticDemand counts the first placements waiting for a free
	// address.
	staticDemand int

	// opErr becomes status.ipam.operator-status.error; staticErr, the
	// node's static IP's trouble, does when there is no opErr.
	opErr     error
	staticErr error
	requeue   time.Duration
	// acts are the EC2 actions decided, carried out after the write
	// (act.go); wrote: the CiliumNode was written.
	acts  actions
	wrote bool
	// held: the node's new ENI waits for the nodes that have no address
	// (serving by need, need.go).
	held bool
	// started is when the reconcile began.
	started time.Time
	// turnedAway: the plan's EC2 calls waited for a slot.
	turnedAway bool
	// described: the read described the ENIs of addresses the pool
	// lacks to confirm them (confirmUnpooled).
	described bool
}

func (r *Reconciler) newSync(_ context.Context, cn *ciliumv2.CiliumNode, policies []enipamv1alpha1.ENIPolicy) *nodeSync {
	return &nodeSync{r: r, mem: r.memory(cn.Name), orig: cn, cn: cn.DeepCopy(), policies: policies, started: r.now()}
}

// run reads the node's state and decides: the desired CiliumNode (s.cn)
// and NodeRouting, and the EC2 actions (s.acts) the executor carries out
// once they are written (act). It writes nothing of the CiliumNode: the
// reconcile writes it once, status then spec, before any of the actions
// runs. The static addresses' placements and the Elastic IP's
// association and release are actions too (act): their order of steps
// holds across reconciles (staticsync.go, staticip.go). The EC2 reads the
// decision needs (the describes that confirm addresses the pool lacks,
// the Elastic IPs) are read's, before it.
func (s *nodeSync) run(ctx context.Context) {
	r := s.r
	if !s.read(ctx) {
		return
	}
	if r.onDecide != nil {
		r.onDecide(s.cn.Name)
	}
	s.refreshAttaching(ctx)
	s.syncStaticIP(ctx)
	s.pool = &poolView{cn: s.cn}
	s.poolIn.now = r.now()
	d := decide(s.pool, s.poolIn)
	s.logPoolChanges(d.pool)
	s.countPool()
	s.runStatic(ctx, d.static)
	if s.described && s.pool.unverified > 0 {
		// Still unconfirmed after the read's describe: a reassignment
		// EC2 has not completed yet (it remaps asynchronously), or a
		// describe that lags. Looked at again until EC2 shows it.
		s.requeueWithin(unverifiedRecheck)
	}
	s.syncWindow6()
	needed := s.needed()
	r.log.Debug("pool sized", "node", s.cn.Name, "available", s.snap.Available, "used", s.snap.Used-s.waiting, "waiting", s.waiting,
		"headroom", s.headroom, "needed", needed, "lead", pool.Lead(s.mem.leads))
	r.metrics.observeNode(s.cn.Name, s.cfg.Policy, s.snap.Available, s.snap.Used-s.waiting, s.waiting, s.headroom, needed,
		pool.Short(&s.snap, &s.cfg.Config, needed))

	s.keepDraining(needed)
	s.snap.Draining = s.drainingENI()
	if needed > 0 {
		// Demand is back: IPs marked but not yet acknowledged are handed
		// back first.
		if s.pool.abortRelease(&s.snap) > 0 {
			s.countPool()
		}
	}
	// Acknowledged addresses EC2 no longer holds are released now; the
	// others are unassigned after the write, and released by the next
	// reconcile. Their slots count as releasing meanwhile: the plan
	// waits for them (Deferred) rather than take a new ENI.
	s.acts.release = s.releaseUnheld(decideRelease(s.cn, &s.snap, s.static, s.pool.heldFirst, s.mem.consolidation.drainPrefix))

	plan := s.computePlan()
	if !s.cfg.IPv4 {
		// IPv6 alone: the window is the pool; no IPv4 is asked for.
		plan = pool.Plan{}
	}
	if s.snap.Draining != "" && (plan.Create != nil || plan.Adopt != nil || plan.Deferred || plan.Blocked != nil) {
		// The other ENIs cannot carry the node: the drained one serves
		// again.
		plan = s.stopDrainingENI()
	}
	if s.acts.static.any() {
		// The static addresses' calls run first (act): the plan is made
		// by the next reconcile, at once, on what they produced (a slot
		// taken, an ENI created), as it was made on a fresh snapshot
		// after them when they ran inside the decision.
		plan.Assign = nil
		plan.DropNewENIs()
	}
	if plan.Needed > 0 && s.mem.deficitAt.IsZero() {
		s.mem.deficitAt = r.now()
	}
	need := s.need()
	r.needs.set(s.cn.Name, need.empty())
	if (plan.Create != nil || plan.Adopt != nil) && r.needs.holdNewENI(s.cn.Name, need) {
		// A top-up: the node has addresses and no pod waits on it, while
		// other nodes have none. What its ENIs can hold is assigned now;
		// the new ENI comes once no node is empty (the node is woken
		// then, and looked at again meanwhile in case the wake-up is
		// missed).
		r.log.Debug("new ENI held for nodes without addresses", "node", s.cn.Name, "free", need.Free)
		plan.DropNewENIs()
		s.held = true
		s.requeueWithin(heldRetry)
	}
	if !plan.Empty() && !r.slots.open() {
		// Every EC2 slot is taken: no bucket reservation now; the node is
		// woken when one frees (and looked at again meanwhile). A slot
		// free now is taken by the executor (act): held across the
		// write, it would keep another node's calls waiting.
		if r.slots.acquire(s.cn.Name, need.priority()) {
			s.acts.slot = true
		} else {
			r.log.Debug("EC2 calls wait for a slot", "node", s.cn.Name)
			plan.Assign = nil
			plan.DropNewENIs()
			s.turnedAway = true
			s.requeueWithin(slotRetry)
		}
	}
	if !plan.Empty() {
		// A new ENI's attachment takes seconds; a node's lead time is
		// what its ordinary allocations (addresses on ENIs with room)
		// take, so one ENI in a node's life does not inflate it.
		s.mem.deficitENI = s.mem.deficitENI || plan.Create != nil || plan.Adopt != nil
		if plan.Create != nil || plan.Adopt != nil {
			s.mem.consolidation.grewAt = r.now()
		}
		s.acts.plan = plan
	}
	s.acts.repairs = d.repairs
	defer s.settleActErr()
	if plan.Deferred {
		// The rest waits for the slots of addresses being released; their
		// Unassign is retried with the node.
		s.requeueWithin(max(s.r.opts.RetryBase, time.Second))
	}
	if plan.Blocked != nil {
		s.fail(plan.Blocked, reasonFor(plan.Blocked))
		return
	}
	if s.pool.awaiting > 0 {
		s.awaitRouting()
	} else {
		s.mem.awaitingSince = time.Time{}
	}
	if s.needed() == 0 && s.pool.awaiting == 0 && !s.mem.deficitAt.IsZero() {
		// Covered: the addresses are routed and in the pool, not only
		// held in EC2.
		took := r.now().Sub(s.mem.deficitAt)
		r.metrics.allocationLatency.Observe(took.Seconds())
		if !s.mem.deficitENI {
			s.mem.leads = pool.RecordLead(s.mem.leads, took)
		}
		s.mem.deficitAt, s.mem.deficitENI = time.Time{}, false
	}
	if !s.acts.produce() {
		// Otherwise reset once the actions went through (act).
		s.mem.failures = 0
	}
	if s.pool.awaiting == 0 {
		s.mem.lastWarning = ""
	}
	s.r.setState(s.mem, stateServed)
	if s.needed() > 0 || s.pool.awaiting > 0 {
		s.r.setState(s.mem, stateDeficit)
	}
	s.markExcess()
	s.consolidateENIs(ctx)
	// EC2 changes nothing in the apiserver: a node in shape is looked at
	// again on the resync interval (in memory, no API call unless
	// something changed), and sooner when a pool address is missing
	// from EC2 and its grace ends.
	s.requeueWithin(s.r.opts.BlockedRetry)
	for _, since := range s.mem.missing {
		s.requeueWithin(max(since.Add(s.r.opts.ConsistencyGrace).Sub(s.r.now()), time.Second))
	}
}

// releaseUnheld completes the handshake (released) of the acknowledged
// addresses of the release steps that EC2 no longer holds on their ENI
// (unassigned by an earlier reconcile, or by a process that died before
// saying so): no call is made for them. It returns the steps left for
// the executor, those with an Unassign to make.
func (s *nodeSync) releaseUnheld(steps []releaseStep) []releaseStep {
	var calls []releaseStep
	for _, step := range steps {
		if len(step.ips) > 0 && len(step.held) == 0 {
			s.released(step.ips)
			step.ips = nil
		}
		if len(step.prefixes) > 0 || len(step.ips) > 0 {
			calls = append(calls, step)
		}
	}
	return calls
}

// computePlan plans the node's allocation: its whole need at once,
// every new ENI it takes included (pool.ComputeWhole), unless a wave of
// empty nodes is served first (planWhole, need.go); then one new ENI
// (pool.Compute), and the rest once the wave is through. A joining node
// so planned has its status list its new ENIs in one write and its pool
// take them in one write once routed, instead of one pair of writes per
// ENI; in a wave its first ENI comes alone, ahead of no other node's
// first, and the rest as a top-up (held while nodes are empty, need.go),
// at the cost of a second pair of writes.
func (s *nodeSync) computePlan() pool.Plan {
	whole := pool.ComputeWhole(&s.snap, &s.cfg.Config)
	if len(whole.More) == 0 || s.r.needs.planWhole(s.cn.Name, s.need(), len(whole.More), s.r.newENITokens()) {
		return whole
	}
	return pool.Compute(&s.snap, &s.cfg.Config)
}

// newENITokens is how many new ENIs the EC2 client's buckets serve now
// without a wait (Options.NewENITokens), -1 when unknown.
func (r *Reconciler) newENITokens() int {
	if r.opts.NewENITokens == nil {
		return -1
	}
	return r.opts.NewENITokens()
}

// slotRetry is how soon a node turned away from EC2 (every slot taken)
// is looked at again, should its wake-up be missed.
const slotRetry = 10 * time.Second

// heldRetry is how soon a node whose new ENI was held is looked at
// again, should the wake-up once no node is empty be missed.
const heldRetry = 30 * time.Second

// need is the node's need as the pool stands (need.go).
func (s *nodeSync) need() nodeNeed {
	if s.pool == nil {
		return nodeNeed{}
	}
	return nodeNeed{
		Free:      s.snap.Available - s.snap.Used,
		Waiting:   s.waiting + s.staticDemand,
		Needed:    s.needed(),
		PoolReady: s.pool.awaiting > 0,
	}
}

// poolChanged reports whether the desired pool or release handshake
// differs from the node's object.
func (s *nodeSync) poolChanged() bool {
	return !sameJSON(s.orig.Spec.IPAM.Pool, s.cn.Spec.IPAM.Pool) || !sameJSON(s.orig.Status.IPAM.ReleaseIPs, s.cn.Status.IPAM.ReleaseIPs)
}

// logPoolChanges logs what a reconcile of the pool changed.
func (s *nodeSync) logPoolChanges(ch poolChanges) {
	if ch.any() || ch.usedOffENI > 0 {
		s.r.log.Info("pool follows EC2", "node", s.cn.Name, "instance", s.instanceID, "added", ch.added,
			"dropped", ch.dropped, "marked", ch.marked, "moved", ch.resourceFixed, "usedOffENI", ch.usedOffENI,
			"awaitingRoute", s.pool.awaiting)
	}
}

// unverifiedRecheck is how soon a node whose addresses a describe has not
// confirmed yet is looked at again.
const unverifiedRecheck = 2 * time.Second

// countPool sets the snapshot's counts: what the agent may hand out, plus
// the addresses on their way into the pool (so they are not asked for
// again), and what it uses, plus the pods bound to the node waiting for
// an address; and the addresses on their way out whose slots EC2 still
// holds.
func (s *nodeSync) countPool() {
	available, used := s.pool.counts()
	s.snap.Available, s.snap.Used = available+s.pool.awaiting+s.pool.unverified, used+s.staticDemand+s.waiting
	s.snap.Releasing = s.pool.releasing(&s.snap, &s.cfg.Config)
}

// needed is what the node's IPv4 pool lacks: nothing when its pods get
// IPv6 alone (the IPv6 window sizes itself, decideWindow6).
func (s *nodeSync) needed() int {
	if !s.cfg.IPv4 {
		return 0
	}
	return pool.Needed(s.snap.Available, s.snap.Used, s.cfg.Knobs)
}

// resolveInstance names the node's instance. The Node's providerID is the
// truth: a CiliumNode whose spec.instance-id names another instance (a
// node name reused after its instance was replaced) has its pool and ENI
// status reset, with an event, before anything else happens.
func (s *nodeSync) resolveInstance(node *corev1.Node) string {
	fromNode := providerInstance(node)
	have := s.cn.Spec.InstanceID
	switch {
	case fromNode == "":
		return have
	case have == "" || have == fromNode:
		return fromNode
	}
	s.r.events.Eventf(s.cn, nil, "Warning", ReasonInstanceReplaced, "Allocate",
		"Node %s now runs on instance %s, not %s: pool and ENI status reset", s.cn.Name, fromNode, have)
	s.r.log.Info("instance replaced; pool reset", "node", s.cn.Name, "old", have, "instance", fromNode)
	s.cn.Spec.InstanceID = fromNode
	s.cn.Spec.IPAM.Pool = nil
	s.cn.Status.IPAM.ReleaseIPs = nil
	s.cn.Status.ENI.ENIs = nil
	clear(s.mem.missing)
	return fromNode
}

// snapshot refreshes s.snap from the inventory; false when the node
// cannot be served.
func (s *nodeSync) snapshot(ctx context.Context) bool {
	snap, err := s.r.inv.Snapshot(ctx, s.instanceID, s.r.opts.Cluster)
	return s.useSnapshot(snap, err)
}

// useSnapshot makes snap, taken from the inventory (err: it could not
// be), s.snap; false when the node cannot be served.
func (s *nodeSync) useSnapshot(snap snapshot.Node, err error) bool {
	if err != nil {
		if errors.Is(err, cloud.ErrNotFound) {
			s.fail(fmt.Errorf("EC2 instance %s: %w", s.instanceID, err), ReasonInstanceNotFound)
		} else {
			s.fail(err, ReasonEC2Error)
		}
		return false
	}
	s.snap, s.haveSnap = snap, true
	s.snap.Draining = s.mem.consolidation.drainENI
	return true
}

// fail records why the node is not served as it should be: the node's
// operator-status, an event, and when to look again.
func (s *nodeSync) fail(err error, reason string) {
	s.opErr = err
	s.r.warn(s.cn, s.mem, reason, err.Error())
	state := stateFailing
	switch {
	case errors.Is(err, pool.ErrAtCapacity):
		state = stateAtCapacity
	case isBlocked(err) || errors.Is(err, pool.ErrSubnetExhausted) || errors.Is(err, pool.ErrNoSecurityGroup):
		state = stateBlocked
	}
	s.r.setState(s.mem, state)
	if state == stateFailing {
		s.mem.failures++
		s.requeue = s.r.retryAfter(s.mem.failures - 1)
	} else {
		// Nothing but a change helps; watch events bring the changes,
		// and a slow retry covers the cloud's.
		s.requeue = s.r.opts.BlockedRetry
	}
	s.r.log.Info("node not fully served", "node", s.cn.Name, "instance", s.instanceID, "reason", reason, "error", err)
}

// result says when to look at the node again, and with which priority:
// the node's need as this reconcile leaves it, not the one it was queued
// with (a node queued as empty that now waits for its ENI's attachment
// comes back ahead of all; one whose new ENI is held, behind the nodes
// it waits for).
func (s *nodeSync) result() ctrl.Result {
	d := s.requeue
	if s.pool != nil && s.pool.pendingRelease > 0 && (d == 0 || s.pool.pendingRelease < d) {
		d = s.pool.pendingRelease
	}
	p := s.need().priority()
	if s.held || s.opErr != nil {
		p = priorityIdle
	}
	return ctrl.Result{RequeueAfter: d, Priority: &p}
}

// reasonFor maps an error to an event reason.
func reasonFor(err error) string {
	switch {
	case errors.Is(err, pool.ErrAtCapacity), errors.Is(err, cloud.ErrENILimit), errors.Is(err, cloud.ErrIPLimit):
		return ReasonInstanceAtCapacity
	case errors.Is(err, pool.ErrSubnetExhausted), errors.Is(err, cloud.ErrSubnetFull):
		return ReasonSubnetExhausted
	case errors.Is(err, pool.ErrNoSecurityGroup):
		return ReasonNoSecurityGroup
	case errors.Is(err, cloud.ErrNotFound):
		return ReasonInstanceNotFound
	}
	return ReasonEC2Error
}

// providerInstance returns the instance ID of a Node's providerID
// aws:///<zone>/<instance-id>, or "".
func providerInstance(node *corev1.Node) string {
	if node == nil {
		return ""
	}
	id, ok := strings.CutPrefix(node.Spec.ProviderID, "aws://")
	if !ok {
		return ""
	}
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}
