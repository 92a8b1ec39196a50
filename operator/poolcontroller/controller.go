// Package poolcontroller is the operator's core loop: it keeps every
// CiliumNode's spec.ipam.pool ahead of its pods with ENIs and addresses
// from EC2, shrinks pools through Cilium's release handshake, and tells
// the story in spec.eni, status.eni and status.ipam.operator-status.
//
// # The invariant
//
// A node's pool is what EC2 reports on that node's instance's usable ENIs,
// once routed on the node, plus the addresses still in the release
// handshake until they are released. Every reconcile re-derives it from
// EC2 and the handshake (poolView.reconcile), so an interrupted step —
// a process killed between two calls, a write lost, a lease lost — is
// repaired by the next reconcile, not remembered:
//
//   - an address enters the pool only once EC2 shows its ENI attached and
//     the node's enipam-agent has reported it routed in the node's
//     NodeRouting (routed before pooled);
//   - a released address never stays in the pool;
//   - a free address EC2 no longer shows on its ENI leaves through the
//     handshake after a consistency grace (at once when EC2 shows it on
//     another instance), so the agent never hands it out meanwhile;
//   - an address the agent acknowledged (ready-for-release) is always
//     released to the end: its Unassign may have been sent already;
//   - the Node's providerID names the instance; a CiliumNode that names
//     another one is reset;
//   - a static address (a StatefulSet pod's StaticIPClaim) is stamped with
//     its pod as owner only in the pool of the node its claim places it
//     on, never in two pools, never on the new node's ENI while its old
//     entry stands, and moves only through the old node's handshake
//     (static.go); stamped addresses are never counted free, released or
//     unassigned.
//
// One reconcile of a node: read (read.go) the CiliumNode and Node from
// the informer cache, resolve the instance and the policy, take a
// snapshot of the instance from the inventory (no EC2 call when it is
// known), read the NodeRouting and its agent's report, the claims that
// concern the node and the facts about them (statefacts.go: their pods,
// the pools listing their addresses, where EC2 has them), all into plain
// values, with the inventory's VPC and subnets fill writes and the other
// nodes' answers the decision needs (how many are empty, the new-ENI
// tokens, whether an EC2 slot is free, the free Elastic IP the address
// book would reserve for the node); then decide at once, decide(facts) →
// decision: the pool, the static addresses, the releases, the node's
// static IP, the IPv6 window, the plan, the excess, the consolidation,
// the EC2 actions, the memory's new values and the requeue, with no
// client, clock, context or coordinator shared between nodes in reach
// (poolView.reconcile, reconcileStatic, decideRelease, decideWindow6,
// pool.Compute, decideConsolidation, decideStaticIP); take the decision
// (the needs, the EC2 slots and the address book's reservation learn
// what it decided, and what it logs, counts and tells is emitted); then
// write the CiliumNode's status, then its spec — each once, and only
// when it changed — with merge patches that touch only the operator's
// fields, so the agent's concurrent writes are never lost or conflicted,
// then the claims' notes (writeNotes) and the NodeRouting's spec once
// (writeRouting, an Elastic IP's record found on the primary address
// included); only then the executor (executor.go, act.go) makes the EC2
// calls, the association's record first, and records them in the
// inventory, and when they changed what EC2 holds for the pool the node
// is looked at again at once: that reconcile writes what they produced.
// The static addresses' placements and the node's Elastic IP are such
// actions, their steps in the order their handshakes need.
// Nothing of the operator's is kept in the CiliumNode's metadata, which
// Cilium's agent rewrites on every start.
package poolcontroller

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/policy"
)

// Options tune the controller.
type Options struct {
	// Cluster names the cluster in the tags of the ENIs the operator
	// creates.
	Cluster string
	// Pods reads single pods, uncached (the manager's API reader): the
	// operator keeps no cache of a cluster's pods, whose size grows with
	// the cluster, and asks only about the pod of a static address that
	// is moving away. Nil reads through the controller's client.
	Pods client.Reader
	// Workers is how many nodes are served at once; most of a worker's
	// time is spent waiting for EC2's token buckets, so this is sized to
	// keep every bucket busy, not to the CPU count.
	Workers int
	// Defaults are the last step of the policy precedence.
	Defaults policy.Defaults
	// RetryBase and RetryMax bound the per-node backoff after a transient
	// failure.
	RetryBase, RetryMax time.Duration
	// ConsistencyGrace is how long a pool address may be missing from its
	// ENI in EC2's describes before it is taken out of the pool.
	ConsistencyGrace time.Duration
	// RoutingPatience is how long addresses may wait for the node agent's
	// report before the node is told about it.
	RoutingPatience time.Duration
	// BlockedRetry is how often a node that cannot grow (at capacity,
	// subnets exhausted, instance unknown) is looked at again without any
	// other change.
	BlockedRetry time.Duration
	// Demand is the pod watch: pods bound to a node and still waiting for
	// an address count toward its pool's demand, their arrivals size the
	// adaptive headroom, and a change of them requeues the node. Nil: the
	// demand is what Cilium's agent lists in status.ipam.used, and the
	// headroom is always pre-allocate.
	Demand Demand
	// NewENITokens is how many new ENIs (a Create and an Attach each) the
	// EC2 client's buckets would serve now without a wait; it lets nodes
	// of a wave take their whole need at once when the buckets hold it
	// for every empty node (planWhole). Nil: unknown, never counted on.
	NewENITokens func() int
	// Now is the controller's clock; nil is time.Now. A simulation that
	// calls Reconcile step by step drives its own.
	Now func() time.Time
	// Term names the operator's term in the notes the controller leaves
	// on claims (status.placement.term); the claim controller of the
	// same term is given the same name, and ignores the notes of others.
	Term string
}

// Reconciler serves CiliumNodes.
type Reconciler struct {
	client  client.Client
	api     cloud.API
	inv     *inventory.Inventory
	events  events.EventRecorder
	metrics *Metrics
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	// onDecide, when set, is called as a node's decision starts, once
	// its reads are done (a test's view of the reconcile's phases).
	onDecide func(node string)
	// onDecided, when set, is called as a node's decision ends: before
	// the CiliumNode's write, or (reads) before the describes by ID it
	// asked for, after which the node is decided again (tests).
	onDecided func(node string, reads bool)
	// onShared, when set, is told of each change of the state shared
	// between nodes: the needs, the slots, the nodes' states and the
	// metrics (tests).
	onShared func(what string)

	// needs order the nodes when EC2's buckets bind; handoffs time new
	// ENIs into their pools; slots keep some workers from EC2's buckets.
	needs    needTracker
	handoffs *handoffs
	slots    slotKeeper
	// families: the nodes without a family their policy asks for, for
	// the policies' IPFamilies conditions.
	families *policy.FamilyProblems

	mu    sync.Mutex
	nodes map[string]*memory
	// noSpecENIs is when the apiserver last refused a NodeRouting apply
	// for spec.enis not being in the stored CRD's schema (a chart
	// upgraded without its CRDs): until specENIsRetry has passed, the
	// applies go without spec.enis and every node's agent is taken for one
	// that routes status.eni.enis only (noSpecENIsLogged: logged once).
	noSpecENIs       time.Time
	noSpecENIsLogged bool
}

// memory is what the controller remembers of a node between reconciles.
type memory struct {
	// excessWindow started when excess was first seen; excessFloor is the
	// lowest excess seen since. excessFloor is an int32 beside the bool
	// deficitENI so that the two take one word: the struct is then 608
	// bytes, which with its malloc header fits Go's 640-byte size class
	// rather than the 704-byte one (TestNodeMemoryCost).
	excessWindow time.Time
	excessFloor  int32
	// deficitENI: the deficit being served (deficitAt) needed an ENI.
	deficitENI  bool
	failures    int
	lastWarning string
	// lastConflict is the policy conflict last told of (PolicyConflict),
	// apart from lastWarning, which a node in shape clears: a conflict
	// lasts as long as the policies do.
	lastConflict string
	deficitAt    time.Time
	// state is the node's last outcome, for enipam_nodes.
	state string
	// writtenRV is the resourceVersion of the operator's last write.
	writtenRV uint64
	// missing: since when each pool address has been missing from its
	// ENI in EC2.
	missing map[string]time.Time
	// missingENIs: since when each ENI of the node's status.eni.enis has
	// been missing from EC2's describes.
	missingENIs map[string]time.Time
	// awaitingSince is when addresses began to wait for the agent.
	awaitingSince time.Time
	// joinHeldSince is when the node's first pool write was first held
	// for the rest of its joining addresses (joiningPoolWaits). It is
	// the decision's, kept when the CiliumNode's write then fails: the
	// ready addresses wait out of the pool all the same, and joinHold
	// bounds that wait, not the time since a write went through.
	joinHeldSince time.Time
	// noPrefixesUntil: the subnet had no free /28; plans use single
	// addresses until then.
	noPrefixesUntil time.Time
	// repairs backs off DeleteOnTermination repairs per ENI; nil until
	// the first.
	repairs map[string]repair
	// leads are how long the node's last allocations on ENIs with room
	// took to reach the pool (pool.Lead).
	leads []time.Duration
	// foreignENIs are the ENIs of other instances the node's report
	// named last, as told in the last ForeignENIReported event.
	foreignENIs string
	// capacityWritten is when the NodeRouting's spec.capacity was last
	// written.
	capacityWritten time.Time
	// routingApplied is the base of the node's next NodeRouting apply,
	// as this process last applied it (the apiserver's answer; its UID,
	// generation, finalizers and spec only): the base of the next apply
	// while the cache has not seen it (routing.go).
	routingApplied *appliedRouting
	// asked: for each address this process put into the NodeRouting's
	// spec.endpointQueries, the generation its write made (staticfast.go).
	asked map[string]int64
	// firstMarks: the entries this process marked for release to stamp
	// them for first placements once acknowledged (placeFirst).
	firstMarks map[string]string
	// remapsAsked: for each address this process put into the
	// NodeRouting's spec.remapQueries, the ENI it asked about and the
	// generation its write made (staticremap.go).
	remapsAsked map[string]remapAsk
	// remapsLooked is when this process last asked the node's agent about
	// a remap or described the node's ENIs to confirm one
	// (describeCanWait).
	remapsLooked time.Time
	// consolidation: consolidate.go.
	consolidation consolidationMemory
	// window6: the IPv6 window's memory (ipv6sync.go).
	window6 window6Memory
	// actErr is why the node's last actions failed, actFailures how many
	// times in a row they did (act.go).
	actErr      error
	actFailures int
	// staticIPFailed is why the Elastic IP action (association or
	// release) the last actions made failed, standing while the same
	// action is decided again (staticip.go, staticIPRetried).
	staticIPFailed staticIPFailure
	// quickRuns counts the reconciles in a row requeued at once after
	// acting without a write of the CiliumNode (act.go).
	quickRuns int
}

// repair is the backoff of a repair that did not stick.
type repair struct {
	failures int
	next     time.Time
}

// Node states, the values of enipam_nodes{state}.
const (
	stateServed     = "served"
	stateDeficit    = "deficit"
	stateAtCapacity = "at_capacity"
	stateBlocked    = "blocked"
	stateFailing    = "failing"
)

// New returns a reconciler; it does nothing until registered with a
// manager.
func New(c client.Client, api cloud.API, inv *inventory.Inventory, rec events.EventRecorder, m *Metrics, opts Options, log *slog.Logger) *Reconciler {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	return &Reconciler{client: c, api: api, inv: inv, events: rec, metrics: m, opts: opts, log: log, now: now,
		nodes: map[string]*memory{}, needs: newNeeds(), handoffs: newHandoffs(),
		slots: newSlots(slotsFor(opts.Workers)), families: policy.NewFamilyProblems()}
}

// FamilyProblems are the controller's word on the nodes that get no
// address of a family their policy asks for, for the policy status
// controller.
func (r *Reconciler) FamilyProblems() *policy.FamilyProblems { return r.families }

// Reconcile serves one CiliumNode.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cn := &ciliumv2.CiliumNode{}
	if err := r.client.Get(ctx, req.NamespacedName, cn); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, r.releaseGone(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	if cn.DeletionTimestamp != nil {
		return ctrl.Result{}, r.releaseGone(ctx, req.Name)
	}
	if r.stale(cn) {
		// The cache has not seen this operator's last write yet (its
		// status write's event came first): acting now would redo that
		// write. The write's own event brings the node back.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	select {
	case <-r.inv.Synced():
	default:
		// No allocation before the first EC2 sync: the view would be
		// incomplete and could duplicate what exists.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	var policies enipamv1alpha1.ENIPolicyList
	if err := r.client.List(ctx, &policies); err != nil {
		return ctrl.Result{}, err
	}
	s := r.newSync(ctx, cn, policies.Items)
	// What the writes and the executor note (the live environment's
	// logs, events and states) is emitted as the reconcile ends.
	defer s.emit()
	d := s.run(ctx)
	if r.onDecided != nil {
		r.onDecided(cn.Name, false)
	}
	s.take(d)
	if s.writeCN {
		// Written as decided (decideWriting), before any EC2 call.
		if err := s.write(ctx); err != nil {
			s.dropActions()
			// The NodeRouting's spec is the agent's to act on whatever
			// became of the CiliumNode's write.
			if err := s.writeRouting(ctx); err != nil && !apierrors.IsNotFound(err) {
				r.log.Info("writing the NodeRouting failed", "node", cn.Name, "error", err)
			}
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, err
		}
		s.setCapacity()
	}
	s.writeNotes(ctx)
	routingErr := s.writeRouting(ctx)
	s.act(ctx)
	if routingErr != nil && !apierrors.IsNotFound(routingErr) {
		return ctrl.Result{}, routingErr
	}
	return s.result(), nil
}

func (r *Reconciler) memory(node string) *memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.nodes[node]
	if !ok {
		// repairs is made by the first repair (executeRepairs): most
		// nodes never need one.
		m = &memory{missing: map[string]time.Time{}, missingENIs: map[string]time.Time{}}
		r.nodes[node] = m
	}
	return m
}

// stale reports whether cn is older than the operator's last write of it.
// resourceVersions are etcd revisions; one that does not parse as a
// number is never taken for stale.
func (r *Reconciler) stale(cn *ciliumv2.CiliumNode) bool {
	rv, err := strconv.ParseUint(cn.ResourceVersion, 10, 64)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.nodes[cn.Name]
	return ok && rv < m.writtenRV
}

// setState records a node's outcome for enipam_nodes.
func (r *Reconciler) setState(mem *memory, state string) {
	if r.onShared != nil {
		r.onShared("state")
	}
	r.mu.Lock()
	mem.state = state
	r.mu.Unlock()
}

// wrote records the resourceVersion a write returned.
func (r *Reconciler) wrote(mem *memory, rv string) {
	if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
		r.mu.Lock()
		mem.writtenRV = max(mem.writtenRV, v)
		r.mu.Unlock()
	}
}

func (r *Reconciler) forget(node string) {
	r.mu.Lock()
	delete(r.nodes, node)
	r.mu.Unlock()
	r.metrics.forget(node)
	r.needs.forget(node)
	r.families.Set(node, "", "")
}

// warn emits a warning event on the node, once per change of reason.
func (r *Reconciler) warn(cn *ciliumv2.CiliumNode, mem *memory, reason, note string) {
	if mem.lastWarning == reason+note {
		return
	}
	mem.lastWarning = reason + note
	r.events.Eventf(cn, nil, "Warning", reason, "Allocate", "%s", note)
}

// retryAfter returns the backoff after the node's n-th consecutive
// failure.
func (r *Reconciler) retryAfter(failures int) time.Duration {
	return retryAfter(r.opts, failures)
}

// retryAfter returns the backoff opts give after the n-th consecutive
// failure.
func retryAfter(opts Options, failures int) time.Duration {
	d := opts.RetryBase << min(failures, 16)
	if d <= 0 || d > opts.RetryMax {
		d = opts.RetryMax
	}
	return d
}

// Event reasons on CiliumNodes; stable, for alerting.
const (
	ReasonInstanceNotFound   = "InstanceNotFound"
	ReasonSubnetExhausted    = "SubnetExhausted"
	ReasonInstanceAtCapacity = "InstanceAtCapacity"
	ReasonNoSecurityGroup    = "NoSecurityGroup"
	ReasonEC2Error           = "EC2Error"
	ReasonPolicyConflict     = "PolicyConflict"
	ReasonInstanceReplaced   = "InstanceReplaced"
	ReasonAwaitingRouting    = "AwaitingRouting"
	ReasonRepairFailing      = "RepairFailing"
	ReasonPrefixFallback     = "PrefixFallback"
	// ReasonForeignENIReported: the node's NodeRouting reports as routed
	// an ENI EC2 shows on another instance; ignored.
	ReasonForeignENIReported = "ForeignENIReported"
	// ReasonIPv6Unavailable: the policy asks for IPv6 and the node can
	// get none (its subnet or instance type has no IPv6, its primary ENI
	// no slot for a /80); its IPv4 is served as before.
	ReasonIPv6Unavailable = "IPv6Unavailable"
	// ReasonClaimsUnreadable: the StaticIPClaims that concern the node
	// could not be read (the operator's cache, or the apiserver for a
	// claim the cache lacks); without them a claimed address could be
	// pooled as an ordinary one, so the node is not served until they
	// are.
	ReasonClaimsUnreadable = "StaticIPClaimsUnreadable"
	// ReasonRoutingUnreadable: the node's NodeRouting could not be read,
	// made or taken over (the apiserver); without its report no address
	// is known routed, so the node is not served until it can be.
	ReasonRoutingUnreadable = "NodeRoutingUnreadable"
)

// isBlocked reports reasons that no retry fixes without a change.
func isBlocked(err error) bool {
	return errors.Is(err, cloud.ErrNotFound) || errors.Is(err, cloud.ErrUnauthorized)
}
