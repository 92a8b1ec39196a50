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

// nodeSync is one reconcile of one node: the object as read, and the
// reconcile's working state (deciding), which the read fills, the
// decision (decide) replaces, and the writes and the executor carry out.
type nodeSync struct {
	r        *Reconciler
	policies []enipamv1alpha1.ENIPolicy
	// wrote: the CiliumNode was written.
	wrote bool
	// started is when the reconcile began.
	started time.Time
	deciding
}

// deciding is the state a node's decision works on and leaves: what the
// read gathered (nodeState), the object as it should be written, the
// actions decided, and what happened on the way. Its methods see no
// Reconciler: r is their clock, the options' values, and the notes of
// what they log, count and tell (decisionEnv), emitted by the reconcile.
type deciding struct {
	r   *decisionEnv
	mem *memory
	cn  *ciliumv2.CiliumNode
	// orig is the CiliumNode as read, the base of its write: never
	// edited but by the write, to what it wrote.
	orig *ciliumv2.CiliumNode

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
	// (act.go).
	acts actions
	// held: the node's new ENI waits for the nodes that have no address
	// (serving by need, need.go).
	held bool
	// turnedAway: the plan's EC2 calls waited for a slot.
	turnedAway bool
	// writeCN: the CiliumNode is written, its status and spec as
	// writeStatus and writeSpec say, and the capacity set with it
	// (decideWriting); false: its write waits.
	writeCN bool
	// described: the read described the ENIs of addresses the pool
	// lacks to confirm them (decideReads, readAgain).
	described bool
	// cross are the answers of the coordinators shared between nodes,
	// read before the decision.
	cross crossNode
	// needsSet: the decision says whether the node is empty (empty),
	// for needs.set. slotWait: the plan waits for an EC2 slot, the node
	// to be woken with slotPriority.
	needsSet, empty bool
	slotWait        bool
	slotPriority    int
	// capacity is the NodeRouting's spec.capacity as decided, set once
	// the CiliumNode is written (setCapacity).
	capacity capacityDecision
	// writeStatus, writeSpec: the CiliumNode's status and spec are to
	// be written (decideWrite): changed, the spec's change not waiting
	// for the pool.
	writeStatus, writeSpec bool
	// landed are the remaps the node's agent confirmed that the decision
	// trusted (decideLandings), recorded in the inventory by take.
	landed []landing
	// routingENIs: the NodeRouting's spec.enis as decided, set in the
	// desired NodeRouting (fill). eniCopy: the status write is made for
	// the copy of the ENIs in status.eni.enis alone (a copy or a clear).
	routingENIs routingENIs
	eniCopy     bool
}

// crossNode is what a node's decision needs to know of the other nodes:
// how many of them have no address (needs), how many new ENIs EC2's
// buckets serve now (-1: unknown), and whether an EC2 slot is free.
type crossNode struct {
	emptyElsewhere int
	newENITokens   int
	slotOpen       bool
}

func (r *Reconciler) newSync(_ context.Context, cn *ciliumv2.CiliumNode, policies []enipamv1alpha1.ENIPolicy) *nodeSync {
	s := &nodeSync{r: r, policies: policies, started: r.now()}
	s.deciding = deciding{r: newDecisionEnv(r.now, r.opts, logLevel(r.log)), mem: r.memory(cn.Name), cn: cn.DeepCopy(), orig: cn}
	return s
}

// emit hands what the reconcile's steps noted (logs, events, metrics,
// the node's state) to the controller.
func (s *nodeSync) emit() {
	if s.deciding.r != nil {
		s.r.emit(s.mem, s.deciding.r.take())
	}
}

// run reads the node's state (read), then has decide derive from it
// alone the desired CiliumNode and NodeRouting, the EC2 actions the
// executor carries out once they are written (act), the memory's new
// values and the requeue, and returns that decision, for the reconcile
// to take (take) once the decision is over: the shared coordinators
// then learn what it decided (needs, slots), and its notes are emitted.
// A read that failed is decided too, by the same call: its decision is
// the failure's (decideReadFailed). It writes nothing
// of the CiliumNode: the reconcile writes it once, status then spec,
// before any of the actions runs. The static addresses' placements and
// the Elastic IP's association and release are actions too (act): their
// order of steps holds across reconciles (staticsync.go, staticip.go).
// The EC2 reads the decision needs (the Elastic IPs, and the describes
// by ID decide's first step asks for, decideReads) are read's, before
// it: a decision that asks for describes decides nothing else, and run
// makes them (readAgain) and decides again on what they showed.
func (s *nodeSync) run(ctx context.Context) decision {
	r := s.r
	s.read(ctx)
	for {
		if s.haveSnap {
			s.fillIn = s.readFill()
		}
		s.emit()
		if s.failed == nil {
			s.cross = s.readCross()
		}
		if r.onDecide != nil {
			r.onDecide(s.cn.Name)
		}
		d := decide(s.facts())
		if !d.reads.any() {
			return d
		}
		// The decision waits for describes (decideReads): it is over
		// before they are made, and made again on what they showed.
		if r.onDecided != nil {
			r.onDecided(s.cn.Name, true)
		}
		s.readAgain(ctx, d.reads)
	}
}

// readCross reads the other nodes' answers the decision needs: how many
// of them are empty, the new-ENI tokens, whether an EC2 slot is free.
func (s *nodeSync) readCross() crossNode {
	r := s.r
	return crossNode{emptyElsewhere: r.needs.emptyElsewhere(s.cn.Name), newENITokens: r.newENITokens(), slotOpen: r.slots.open()}
}

// facts are the node's facts for decide, as the read left them.
func (s *nodeSync) facts() *facts {
	return &facts{nodeState: s.nodeState, cn: s.cn, orig: s.orig, mem: *s.mem, now: s.r.now(), opts: optionValues(s.r.opts), logLevel: logLevel(s.r.log), cross: s.cross,
		described: s.described}
}

// take makes the decision the reconcile's: its desired objects, actions,
// memory and requeue; the shared coordinators learn what it decided (the
// node empty or not, its new ENI held, its wait for an EC2 slot), and
// the inventory the remaps it trusted on the agent's word (recordLanded,
// before any write: an observation of EC2, as a describe's is, which
// the next reconcile reads there); and its notes are emitted.
func (s *nodeSync) take(d decision) {
	r := s.r
	s.cn, s.routing, s.pool, s.acts, s.writeCN = d.cn, d.routing, d.pool, d.acts, d.writeCN
	s.requeue, s.opErr, s.staticErr = d.requeue, d.opErr, d.staticErr
	s.held, s.turnedAway, s.staticDemand = d.held, d.turnedAway, d.staticDemand
	s.snap, s.capacity = d.snap, d.capacity
	s.writeStatus, s.writeSpec = d.writeStatus, d.writeSpec
	s.eniCopy = d.eniCopy
	r.mu.Lock()
	state, rv := s.mem.state, s.mem.writtenRV
	*s.mem = d.mem
	s.mem.state, s.mem.writtenRV = state, rv
	r.mu.Unlock()
	r.emit(s.mem, d.notes)
	r.needs.set(s.cn.Name, d.empty)
	var o sharedOutcome
	if len(d.landed) > 0 {
		o.landingRefused = s.exec().recordLanded(d.landed)
	}
	o.holdMissed = s.held && !r.needs.hold(s.cn.Name)
	a := s.acts.associate
	o.reserveLost = a != nil && a.reserve && !r.inv.Addresses().ReserveID(s.cn.Name, a.pick.AllocationID)
	// Every EC2 slot was taken: the node waits for one, woken as one
	// frees; one freed since the decision is given back.
	if d.slotWait && r.slots.acquire(s.cn.Name, d.slotPriority) {
		r.slots.release()
		o.slotFreed = true
	}
	s.settleShared(o)
}

// sharedOutcome is what the coordinators shared between nodes answered
// the decision's changes (take): holdMissed, the node's new ENI was
// held but no node is empty any more; reserveLost, the free Elastic IP
// the read found was taken since (another node reserved it, or it was
// associated); slotFreed, a slot the node was to wait for freed since
// the decision; landingRefused, the inventory refused a landing the
// decision trusted (the address reassigned elsewhere since the read).
type sharedOutcome struct {
	holdMissed, reserveLost, slotFreed, landingRefused bool
}

// settleShared decides what the shared coordinators' answers mean for
// the node: a held ENI nothing will wake, an Elastic IP lost to another
// node (none is associated now) and a slot freed since the decision
// each have the node looked at again at once (to grow, to pick again,
// to make its calls), as does a landing the inventory refused (the
// address is moving elsewhere: decided again on that).
//
// A CiliumNode's write that waited for the association alone
// (writeWaits) is made after all.
func (s *deciding) settleShared(o sharedOutcome) {
	if o.reserveLost {
		s.acts.associate = nil
		if !s.writeCN && s.mayWrite() {
			s.writeCN = !s.writeWaits()
		}
	}
	if o.holdMissed || o.reserveLost || o.slotFreed || o.landingRefused {
		s.requeueWithin(actedRequeue)
	}
}

// releaseUnheld completes the handshake (released) of the acknowledged
// addresses of the release steps that EC2 no longer holds on their ENI
// (unassigned by an earlier reconcile, or by a process that died before
// saying so): no call is made for them. It returns the steps left for
// the executor, those with an Unassign to make.
func (s *deciding) releaseUnheld(steps []releaseStep) []releaseStep {
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
func (s *deciding) computePlan() pool.Plan {
	whole := pool.ComputeWhole(&s.snap, &s.cfg.Config)
	if len(whole.More) == 0 || planWhole(s.need(), s.cross.emptyElsewhere, len(whole.More), s.cross.newENITokens) {
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
func (s *deciding) need() nodeNeed {
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
func (s *deciding) poolChanged() bool {
	return !sameJSON(s.orig.Spec.IPAM.Pool, s.cn.Spec.IPAM.Pool) || !sameJSON(s.orig.Status.IPAM.ReleaseIPs, s.cn.Status.IPAM.ReleaseIPs)
}

// logPoolChanges logs what a reconcile of the pool changed.
func (s *deciding) logPoolChanges(ch poolChanges) {
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
func (s *deciding) countPool() {
	available, used := s.pool.counts()
	s.snap.Available, s.snap.Used = available+s.pool.awaiting+s.pool.unverified, used+s.staticDemand+s.waiting
	s.snap.Releasing = s.pool.releasing(&s.snap, &s.cfg.Config)
}

// needed is what the node's IPv4 pool lacks: nothing when its pods get
// IPv6 alone (the IPv6 window sizes itself, decideWindow6).
func (s *deciding) needed() int {
	if !s.cfg.IPv4 {
		return 0
	}
	return pool.Needed(s.snap.Available, s.snap.Used, s.cfg.Knobs)
}

// resolveInstance names the node's instance: the one the Node's
// providerID names, or the CiliumNode's spec.instance-id when it names
// none.
func resolveInstance(node *corev1.Node, cn *ciliumv2.CiliumNode) string {
	if fromNode := providerInstance(node); fromNode != "" {
		return fromNode
	}
	return cn.Spec.InstanceID
}

// instanceReplaced reports whether the CiliumNode's spec.instance-id
// names another instance than the node's (resolveInstance): a node name
// reused after its instance was replaced.
func instanceReplaced(cn *ciliumv2.CiliumNode, instanceID string) bool {
	return cn.Spec.InstanceID != "" && cn.Spec.InstanceID != instanceID
}

// decideReset is the whole decision on a node whose instance was
// replaced (instanceReplaced): the Node's providerID is the truth, so
// the CiliumNode's pool, release handshake and ENI status are reset,
// with an event, its spec names the new instance, and the addresses and
// ENIs missing from EC2 are forgotten. Nothing else is decided on what
// the read gathered of the old instance's node: the reset is written
// (decideWriting), and the next reconcile, at once, reads the node
// afresh on it (the new instance's snapshot, the NodeRouting, the
// claims) and decides the rest. That costs one reconcile more, and the
// CiliumNode writes of the reset (status and spec) before those of the
// new instance's ENIs and details, where one reconcile wrote both.
func decideReset(f *facts) decision {
	d, env := newDeciding(f)
	cn, have := d.cn, d.cn.Spec.InstanceID
	env.event(cn, "Warning", ReasonInstanceReplaced,
		fmt.Sprintf("Node %s now runs on instance %s, not %s: pool and ENI status reset", cn.Name, f.instanceID, have))
	env.log.Info("instance replaced; pool reset", "node", cn.Name, "old", have, "instance", f.instanceID)
	cn.Spec.InstanceID = f.instanceID
	cn.Spec.IPAM.Pool = nil
	cn.Status.IPAM.ReleaseIPs = nil
	cn.Status.ENI.ENIs = nil
	clear(f.mem.missing)
	clear(f.mem.missingENIs)
	d.decideWriting()
	d.requeueWithin(actedRequeue)
	return d.decision(env)
}

// snapshot refreshes s.snap from the inventory; false when it cannot
// (readFailed says why).
func (s *nodeSync) snapshot(ctx context.Context) bool {
	snap, err := s.r.inv.Snapshot(ctx, s.instanceID, s.r.opts.Cluster)
	return s.useSnapshot(snap, err, s.readFailed)
}

// useSnapshot makes snap, taken from the inventory (err: it could not
// be), s.snap; false when it could not, told to failed with why (the
// read's readFailed, the decision's fail).
func (s *deciding) useSnapshot(snap snapshot.Node, err error, failed func(error, string)) bool {
	if err != nil {
		if errors.Is(err, cloud.ErrNotFound) {
			failed(fmt.Errorf("EC2 instance %s: %w", s.instanceID, err), ReasonInstanceNotFound)
		} else {
			failed(err, ReasonEC2Error)
		}
		return false
	}
	s.snap, s.haveSnap = snap, true
	s.snap.Draining = s.mem.consolidation.drainENI
	return true
}

// fail records why the node is not served as it should be: the node's
// operator-status, an event, and when to look again.
func (s *deciding) fail(err error, reason string) {
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
func (s *deciding) result() ctrl.Result {
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
