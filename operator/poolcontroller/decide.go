package poolcontroller

import (
	"log/slog"
	"slices"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// facts are what a node's decision is made on, all read beforehand:
// the read's plain values (nodeState), the CiliumNode as the read left
// it and as it was read (orig), the node's memory (a copy of its
// values, its maps its own), the moment of the decision, the options'
// values (optionValues: no client, no hook), the other nodes' answers
// (cross), and whether the read described ENIs by ID (described). The
// read decides nothing itself: no requeue, no error, no action (a read
// that failed says why, facts.failed, and decide decides the failure).
type facts struct {
	nodeState
	cn *ciliumv2.CiliumNode
	// orig is the CiliumNode as read, before the read's edits: the base
	// of the write, which decide reads and never edits.
	orig *ciliumv2.CiliumNode
	mem  memory
	now  time.Time
	opts Options
	// logLevel: the decision notes the log lines at this level and
	// above, those the controller's logger emits.
	logLevel slog.Level
	// cross: how many other nodes are empty, the new-ENI tokens, whether
	// an EC2 slot is free.
	cross crossNode
	// described: the read described the ENIs of addresses the pool
	// lacks to confirm them (readAgain).
	described bool
}

// decision is everything a node's decision decided: the desired
// CiliumNode and NodeRouting, the pool as derived, the EC2 actions, the
// memory's new values, the snapshot as counted, the node's errors, its
// requeue, whether its new ENI is held or its calls wait for a slot,
// whether it is empty (for the other nodes' decisions), the NodeRouting's
// capacity and the CiliumNode's write (writeCN: whether it is made, as
// decideWriting decides), and the notes to emit: logs,
// events, metric observations, the node's state.
type decision struct {
	cn           *ciliumv2.CiliumNode
	routing      *enipamv1alpha1.NodeRouting
	pool         *poolView
	acts         actions
	mem          memory
	snap         snapshot.Node
	opErr        error
	staticErr    error
	requeue      time.Duration
	held         bool
	turnedAway   bool
	writeCN      bool
	staticDemand int
	// needsSet: the node's emptiness was decided (empty), for
	// needs.set; a node whose emptiness was not decided (its reset, a
	// read that failed) counts as not empty.
	needsSet, empty bool
	// slotWait: the plan waits for an EC2 slot; the node is to be woken
	// with slotPriority when one frees.
	slotWait     bool
	slotPriority int
	// capacity: the NodeRouting's spec.capacity as decided.
	capacity capacityDecision
	// writeStatus, writeSpec: the CiliumNode's status and spec are to
	// be written (decideWrite).
	writeStatus, writeSpec bool
	// reads: the describes by ID to make before deciding (decideReads);
	// nothing else is decided then.
	reads readAsk
	// landed: the remaps the node's agent confirmed that the decision
	// trusted (decideLandings), for the inventory to record (take).
	landed []landing
	// routingENIs: the NodeRouting's spec.enis decided with the write
	// (also set in routing's spec); eniCopy: the status write is the
	// copy of the ENIs alone.
	routingENIs routingENIs
	eniCopy     bool
	notes       notes
}

// decide is a node's whole decision: from the facts alone, with no
// client, no clock, no context and no coordinator shared between nodes
// in its reach, it decides first a read that failed (decideReadFailed:
// the failure's write, returned alone), then whether the node's instance
// was replaced (decideReset: its reset, returned alone), then what the
// node's agent answered this process's remap queries (decideLandings:
// the landings it trusts, applied to the facts), then whether the
// snapshot is to be described before anything else (decideReads:
// returned alone), then the desired NodeRouting (decideRouting: made
// when the read found none; trimApplied: the base of its next apply
// without the ENIs status.eni.enis holds), what the policy's values come to for the
// node (decideConfig: the
// no-prefix window, the adaptive headroom), and derives the pool
// (decidePool), the static addresses'
// steps, the IPv6 window, the release handshake, the plan, the excess,
// the consolidation, the CiliumNode's write (decideWrite: what fill puts
// into it, whether its spec waits for the pool, and the NodeRouting's
// spec.enis from the snapshot) and the NodeRouting's
// capacity (decideCapacity), and returns them with everything it would
// log, count and tell (decision).
//
// decide owns the facts' CiliumNode, NodeRouting, snapshot and memory:
// the read copied or built them for this reconcile alone, and the
// decision is always the reconcile's (take). It edits them in place and
// returns them as the desired objects, the snapshot as counted and the
// memory's new values; it copies nothing of them. The rest of the facts
// (the claims and the other inputs the read gathered) it leaves as they
// were: the landings it trusts give the facts moves and untrusted
// addresses of their own (applyLandings).
func decide(f *facts) decision {
	if f.failed != nil {
		return decideReadFailed(f)
	}
	if instanceReplaced(f.cn, f.instanceID) {
		return decideReset(f)
	}
	landed := decideLandings(f)
	ask := decideReads(f)
	if ask.any() {
		// Nothing is decided before the describe: the facts as they
		// are, and what to describe (the read's, readAgain); the
		// landings are decided again on what it shows.
		return decision{cn: f.cn, routing: f.routing, snap: f.snap, mem: f.mem, reads: ask}
	}
	d, env := newDeciding(f)
	d.landed = landed
	for _, l := range landed {
		env.log.Debug("remap confirmed by enipam-agent", "node", f.cn.Name, "eni", l.eni, "ip", l.ip)
	}
	d.decideRouting()
	d.trimApplied()
	if f.static != nil {
		// The static pass reads the agent's remap answers as this
		// decision left them (decideLandings).
		in := *f.static
		in.remapsAsked = f.mem.remapsAsked
		d.static = &in
	}
	if f.poolIn != nil {
		in := *f.poolIn
		in.snap, in.cfg, in.missing, in.backoff, in.static = &d.snap, &d.cfg.Config, f.mem.missing, f.mem.repairs, d.static
		d.poolIn = &in
	}
	d.decideConfig()
	if f.window6 != nil {
		in := *f.window6
		in.missing, in.knobs = f.mem.missing, d.cfg.Knobs
		d.window6 = &in
	}
	d.settleReads(ask.wait)
	d.decideNode()
	d.decideEmpty()
	d.decideWriting()
	d.capacity = d.decideCapacity()
	return d.decision(env)
}

// newDeciding returns the state a decision works on, made of the facts
// (decide owns their CiliumNode, NodeRouting, snapshot and memory), and
// its environment: the facts' moment, options and log level.
func newDeciding(f *facts) (*deciding, *decisionEnv) {
	env := newDecisionEnv(func() time.Time { return f.now }, f.opts, f.logLevel)
	return &deciding{r: env, mem: &f.mem, cn: f.cn, orig: f.orig, nodeState: f.nodeState,
		described: f.described, cross: f.cross}, env
}

// decision is what the decision on d decided, whichever way it went
// (decide, decideReadFailed, decideReset): what it left unset stays
// zero. env is the decision's environment, whose notes it takes.
func (d *deciding) decision(env *decisionEnv) decision {
	return decision{cn: d.cn, routing: d.routing, pool: d.pool, acts: d.acts, mem: *d.mem, snap: d.snap,
		opErr: d.opErr, staticErr: d.staticErr, requeue: d.requeue, held: d.held, turnedAway: d.turnedAway, writeCN: d.writeCN,
		staticDemand: d.staticDemand, needsSet: d.needsSet, empty: d.empty, slotWait: d.slotWait,
		slotPriority: d.slotPriority, capacity: d.capacity, writeStatus: d.writeStatus, writeSpec: d.writeSpec,
		landed: d.landed, routingENIs: d.routingENIs, eniCopy: d.eniCopy, notes: env.take()}
}

// decideReadFailed is the whole decision on a node whose read failed
// (facts.failed: the instance, its snapshot, the NodeRouting or the
// claims could not be read): the node is not served (fail: the
// operator-status, the event, the state and the retry), the other
// policies that match it are told of, and the CiliumNode is written as
// a decision's would be (decideWriting), with what the read knows of
// the instance (fill). Nothing else is decided: no pool, no action.
func decideReadFailed(f *facts) decision {
	d, env := newDeciding(f)
	d.decideRouting()
	d.fail(f.failed, f.failedReason)
	d.notePolicyConflict()
	d.decideWriting()
	return d.decision(env)
}

// decideEmpty decides whether the node counts as empty in the other
// nodes' decisions (needs): as the decision leaves it, it has no free
// address and needs some, and nothing keeps it from being served.
func (s *deciding) decideEmpty() {
	s.needsSet, s.empty = true, s.opErr == nil && s.pool != nil && s.need().empty()
}

// poolDecision is what one look at a node's state decides about its pool and
// its static addresses, beyond the desired CiliumNode (the poolView's,
// edited in place): what the pool's reconcile changed, and the static
// addresses' outcome (the addresses to place on the node's ENIs, the ENI
// to create or the secondary address to assign for them, the agent's
// queries, the claims' notes and the first placements waiting), and the
// ENIs whose delete-on-termination is repaired.
type poolDecision struct {
	pool    poolChanges
	static  staticOutcome
	repairs repairs
}

// decidePool derives the node's pool from EC2 and the release handshake
// (poolView.reconcile), then runs the static addresses' steps on it
// (reconcileStatic), from the facts in in alone: it makes no call and
// reads no clock (in.now is the reconcile's). It also picks the repairs
// of delete-on-termination due (decideRepairs). Its EC2 actions are
// carried out by runStatic, the pool's plan by apply, the repairs by
// executeRepairs.
func decidePool(v *poolView, in *poolInputs) poolDecision {
	d := poolDecision{pool: v.reconcile(in), repairs: decideRepairs(in.snap, in.cluster, in.backoff, in.now)}
	if in.static != nil {
		// On a copy of the ENIs' list when a claim may be placed: a
		// placement takes its slot on the copy's ENI (fromEC2, with
		// addresses of its own), for the pass's next choices, while the
		// node's snapshot (and the ENIs its status lists) stays what
		// EC2 holds until the executor placed it.
		snap := *in.snap
		if len(in.static.claims) > 0 {
			snap.ENIs = slices.Clone(snap.ENIs)
		}
		d.static = v.reconcileStatic(in.static, &snap, in.cfg)
	}
	return d
}

// settleReads decides what the describes decideReads asked for came to:
// a failed one is logged (one confirming addresses is tried again a
// second later), one that confirmed addresses is remembered
// (memory.remapsLooked); wait is how soon the node is looked at again
// when the describe waits.
func (s *deciding) settleReads(wait time.Duration) {
	if wait > 0 {
		s.requeueWithin(wait)
	}
	if r := s.describes; r != nil && r.listed.err != nil {
		s.r.log.Info("describing listed ENIs missing from EC2's view failed", "node", s.cn.Name, "enis", r.listed.enis, "error", r.listed.err)
	}
	if r := s.describes; r != nil && r.confirm.err != nil {
		s.r.log.Info("describing ENIs to confirm addresses failed; retrying", "node", s.cn.Name, "enis", r.confirm.enis, "error", r.confirm.err)
		s.requeueWithin(time.Second)
	}
	if s.described {
		s.mem.remapsLooked = s.r.now()
	}
}

// decideNode decides the node after the read: what run did in place
// before, on the deciding state alone.
func (s *deciding) decideNode() {
	r := s.r
	s.refreshAttaching()
	s.syncStaticIP()
	s.pool = &poolView{cn: s.cn}
	s.poolIn.now = r.now()
	d := decidePool(s.pool, s.poolIn)
	s.logPoolChanges(d.pool)
	s.countPool()
	s.runStatic(d.static)
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
	if (plan.Create != nil || plan.Adopt != nil) && holdNewENI(need, s.cross.emptyElsewhere) {
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
	if !plan.Empty() && s.routesDue() {
		// The node's pool is one report away from addresses on attached
		// ENIs; the plan's calls (an Assign's 150-400 ms, a new ENI's
		// Create, Attach and Modify: over a second) would hold the
		// reconcile that report brings, which writes them. The calls
		// come once they are pooled, or routeHold after they began to
		// wait.
		plan.Assign = nil
		plan.DropNewENIs()
		s.requeueWithin(routeHold - s.r.now().Sub(s.awaitedFrom()))
	}
	if !plan.Empty() && !s.cross.slotOpen {
		// Every EC2 slot is taken: no bucket reservation now; the node
		// waits for one (take: slots.acquire), woken when one frees (and
		// looked at again meanwhile). A slot free now is taken by the
		// executor (act): held across the write, it would keep another
		// node's calls waiting.
		r.log.Debug("EC2 calls wait for a slot", "node", s.cn.Name)
		plan.Assign = nil
		plan.DropNewENIs()
		s.turnedAway = true
		s.slotWait, s.slotPriority = true, need.priority()
		s.requeueWithin(slotRetry)
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
	s.consolidateENIs()
	// EC2 changes nothing in the apiserver: a node in shape is looked at
	// again on the resync interval (in memory, no API call unless
	// something changed), and sooner when a pool address is missing
	// from EC2 and its grace ends.
	s.requeueWithin(s.r.opts.BlockedRetry)
	for _, since := range s.mem.missing {
		s.requeueWithin(max(since.Add(s.r.opts.ConsistencyGrace).Sub(s.r.now()), time.Second))
	}
}
