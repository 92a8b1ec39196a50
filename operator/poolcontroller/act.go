package poolcontroller

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// actions are the EC2 calls a reconcile decided on, carried out by the
// executor once the CiliumNode is written (act): a grown pool, a marked
// address, a handshake completed never waits behind EC2's buckets, and
// what the calls produce is written by the next reconcile, which reads
// it from the inventory.
type actions struct {
	// release: the Unassigns of acknowledged addresses EC2 still holds;
	// their handshake completes (released) on the next reconcile, once
	// the inventory shows them gone.
	release []releaseStep
	// window6Assign: the primary ENI that gets a /80 for the IPv6
	// window; window6Unassign the window's idle /80s given back;
	// window6Describe the primary ENI described by ID to confirm its /80.
	window6Assign   string
	window6Unassign window6Return
	window6Describe string
	// plan is the pool's allocation; slot: an EC2 slot is held for it
	// already (taken otherwise by act, released once the plan ran).
	plan pool.Plan
	slot bool
	// repairs are the delete-on-termination repairs due.
	repairs repairs
	// consolidation is the call consolidation decided on (detach an
	// emptied ENI, or delete the detached one); nil: none.
	consolidation *consolidationStep
	// static are the static addresses' calls (placements, and the
	// secondary address or the ENI a first placement needs): the pool's
	// plan waits for the next reconcile, which sees what they produced.
	static staticCalls
	// associate is the Elastic IP's association with the primary
	// address, recorded in the NodeRouting by the executor right before
	// the call (associate); nil: none. Its association is recorded, and
	// status.ipam.assigned-static-ip written, by the next reconcile.
	associate *staticIPCall
	// disassociate is the recorded Elastic IP to release (the node no
	// longer asks for it, or it no longer serves the node): undone in
	// EC2, then its record and finalizer cleared (disassociate); nil:
	// none. status.ipam.assigned-static-ip stops naming it in the write
	// before.
	disassociate *enipamv1alpha1.NodeStaticIP
	// notes are the claims' notes the decision queued, written after
	// the CiliumNode's write (writeNotes), not EC2 calls: they change
	// nothing produce reports.
	notes []claimNote
}

// staticCalls are the EC2 calls of the static addresses' pass
// (staticOutcome's place, create and secondary).
type staticCalls struct {
	place     []placement
	create    *pool.Create
	secondary string
}

func (c *staticCalls) any() bool {
	return len(c.place) > 0 || c.create != nil || c.secondary != ""
}

// staticIPCall is an Elastic IP association to make: pick with the
// primary address of primary; rec is its record, written in the
// NodeRouting's spec by the executor before the call.
type staticIPCall struct {
	pick    cloud.Address
	primary *cloud.ENI
	rec     enipamv1alpha1.NodeStaticIP
	// reserve: pick is a free address the address book is to reserve
	// for the node once the decision is over (take).
	reserve bool
}

// window6Return is the window's /80s given back to EC2 from the primary
// ENI.
type window6Return struct {
	eniID    string
	prefixes []netip.Prefix
}

// produce reports whether the actions change what EC2 holds for the
// node's pool, so that the next reconcile has something to write.
func (a *actions) produce() bool {
	return len(a.release) > 0 || a.window6Assign != "" || len(a.window6Unassign.prefixes) > 0 || !a.plan.Empty() ||
		a.static.any() || a.associate != nil || a.disassociate != nil
}

// dropActions gives up the actions (the CiliumNode's write failed),
// releasing the EC2 slot held for the plan.
func (s *nodeSync) dropActions() {
	if s.acts.slot {
		s.r.slots.release()
	}
	if s.acts.associate != nil {
		s.r.inv.Addresses().Unreserve(s.cn.Name)
	}
	s.acts = actions{}
}

// settleActErr forgets why the node's last actions failed
// (memory.actErr) once the reconcile decides none that would retry them:
// the failure is over. Otherwise the write carries it in the
// operator-status (fill).
func (s *deciding) settleActErr() {
	if s.mem.actErr != nil && !s.acts.produce() {
		s.mem.actErr, s.mem.actFailures = nil, 0
	}
}

// decideWriting decides whether the CiliumNode is written (writeCN),
// and what (decideWrite). Its write is made before any EC2 call: what
// the reconcile decided never waits behind EC2's buckets. A node turned
// away from EC2 (every slot taken) with no change to its pool is not
// written: it comes back as a slot frees. Nor is one whose write waits
// for the actions (writeWaits): it comes back at once, and what this
// reconcile would write of the CiliumNode (the instance's details, the
// ENIs listed) and of the capacity is written then, once, with what
// the calls produced.
func (s *deciding) decideWriting() {
	if !s.mayWrite() {
		return
	}
	s.decideWrite()
	s.writeCN = !s.writeWaits()
}

// mayWrite reports whether the CiliumNode is to be written at all: not
// when the node was turned away from EC2 with no change to its pool
// (decideWriting).
func (s *deciding) mayWrite() bool {
	return !s.turnedAway || s.poolChanged()
}

// writeWaits reports whether the CiliumNode's write can wait for the
// next reconcile, which the actions about to run bring at once: they
// change what EC2 holds for the node, and the write would carry only
// what fill derives from EC2 (the ENIs' copy, the instance's details),
// which that reconcile writes anew with what the actions produced.
// Anything decided beyond it (the pool, the release handshake, the
// static IP, the operator-status) is written now, before the calls; so
// are addresses new on an attached ENI in what the node agent is told
// (listsRoutable): it routes them as soon as it reads them, and held
// back they would wait for the calls (an Assign's 150-400 ms, a new
// ENI's Create, Attach and Modify, over a second), then for the agent,
// while the pods bound in a burst make their CNI calls a second after
// their binding.
func (s *deciding) writeWaits() bool {
	if !s.acts.produce() || s.listsRoutable() {
		return false
	}
	return sameJSON(s.orig.Spec.IPAM, s.cn.Spec.IPAM) && sameJSON(s.orig.Status.IPAM, s.cn.Status.IPAM)
}

// listsRoutable reports whether the NodeRouting's spec.enis decided
// (routingENIs), which the node agent routes, lists on an ENI that EC2
// shows attached an address or a prefix that the spec.enis read
// (routingRead, of this instance) does not list on it: what the agent is
// told now, not the CiliumNode's copy, which most nodes do not have.
func (s *deciding) listsRoutable() bool {
	if !s.routingENIs.set {
		return false
	}
	var had []enipamv1alpha1.NodeENI
	if nr := s.routingRead; nr != nil && nr.Spec.InstanceID == s.instanceID {
		had = nr.Spec.ENIs
	}
	for i := range s.routingENIs.list {
		now := &s.routingENIs.list[i]
		if !attachedIn(s.snap.ENIs, now.ID) {
			continue
		}
		var old *enipamv1alpha1.NodeENI
		if j := slices.IndexFunc(had, func(e enipamv1alpha1.NodeENI) bool { return e.ID == now.ID }); j >= 0 {
			old = &had[j]
		}
		if old == nil {
			if len(now.Addresses) > 0 || len(now.Prefixes) > 0 {
				return true
			}
			continue
		}
		for _, a := range now.Addresses {
			if !slices.Contains(old.Addresses, a) {
				return true
			}
		}
		for _, p := range now.Prefixes {
			if !slices.Contains(old.Prefixes, p) {
				return true
			}
		}
	}
	return false
}

// attachedIn reports whether enis (EC2's view) shows the ENI id attached.
func attachedIn(enis []cloud.ENI, id string) bool {
	return slices.ContainsFunc(enis, func(e cloud.ENI) bool { return e.ID == id && e.AttachmentStatus == cloud.AttachmentAttached })
}

// act has the executor carry out the reconcile's actions, after the
// CiliumNode's write. It edits no desired object: when a call changed
// what EC2 holds for the pool, the node is looked at again at once, and
// that reconcile writes what the inventory then shows. What the calls
// came to is settled by settleActs.
func (s *nodeSync) act(ctx context.Context) {
	a := &s.acts
	out := actOutcome{decided: a.produce(), wrote: s.wrote}
	x := s.exec()
	var errs []error
	reason := ReasonEC2Error
	if len(a.release) > 0 {
		if _, err := x.release(ctx, a.release); err != nil {
			errs = append(errs, err)
		}
	}
	if a.static.any() {
		if err := s.placeStatic(ctx, &a.static); err != nil {
			errs = append(errs, err)
			reason = reasonFor(err)
		}
	}
	if a.disassociate != nil && !s.disassociate(ctx, a.disassociate) {
		// Failed (s.staticErr, memory.staticIPFailed say why): the
		// record stays, and the next reconcile decides the release again.
		a.disassociate = nil
	}
	if a.associate != nil && !s.associate(ctx, a.associate) {
		// Failed (s.staticErr, memory.staticIPFailed say why): nothing to
		// look at at once for it.
		a.associate = nil
	}
	if a.window6Assign != "" {
		s.tellIPv6Problem(s.assignWindowPrefix(ctx, a.window6Assign))
	}
	if len(a.window6Unassign.prefixes) > 0 {
		s.unassignWindowPrefixes(ctx, a.window6Unassign.eniID, a.window6Unassign.prefixes)
	}
	if a.window6Describe != "" {
		if err := x.describeENIs(ctx, []string{a.window6Describe}); err != nil {
			s.r.log.Info("describing the primary ENI to confirm its /80 failed; retrying", "node", s.cn.Name, "eni", a.window6Describe, "error", err)
		}
	}
	if !a.plan.Empty() && !a.slot {
		if a.slot = s.r.slots.acquire(s.cn.Name, s.need().priority()); !a.slot {
			// The slots were taken since the decision: no call of the
			// plan is made (settleActs says what that means).
			a.plan = pool.Plan{}
			out.turnedAway = true
		}
	}
	if !a.plan.Empty() {
		if err := x.apply(ctx, &a.plan); err != nil {
			errs = append(errs, err)
			reason = reasonFor(err)
		}
	}
	if a.slot {
		s.r.slots.release()
		a.slot = false
	}
	s.executeRepairs(ctx, a.repairs)
	if a.consolidation != nil {
		s.executeConsolidation(ctx, *a.consolidation)
	}
	out.err, out.reason = errors.Join(errs...), reason
	s.settleActs(out)
}

// actOutcome is what the executor's calls came to: decided, the actions
// as decided changed what EC2 holds for the pool (produce); err, their
// failures (nil: none) and reason, the event reason of the last that
// names one; wrote, the CiliumNode was written before them; turnedAway,
// the plan found every EC2 slot taken and made no call.
type actOutcome struct {
	decided    bool
	err        error
	reason     string
	wrote      bool
	turnedAway bool
}

// settleActs decides what the actions' outcome means for the node's
// memory and its requeue, from the outcome and the actions left (an
// action dropped on the way, a plan turned away from its slot, no
// longer counts): a failure is the node's (fail) and is remembered
// (memory.actErr), for the next reconcile to write it in the
// operator-status while it decides actions that retry it; actions that
// went through forget the failures, and the node is looked at again at
// once to write what they produced. A plan turned away from its slot
// waits for one: the node is woken as one frees (slots), and looked at
// again meanwhile.
func (s *deciding) settleActs(o actOutcome) {
	if o.turnedAway {
		s.r.log.Debug("EC2 calls wait for a slot", "node", s.cn.Name)
		s.turnedAway = true
		s.requeueWithin(slotRetry)
	}
	if !o.decided {
		s.mem.quickRuns = 0
	}
	if o.err != nil {
		s.fail(o.err, o.reason)
		s.mem.actErr = o.err
		if s.mem.actFailures++; s.mem.actFailures == 1 {
			// The first failure of a run is looked at again at once, to
			// write why (and try again); the next ones wait for their
			// backoff.
			s.requeueWithin(actedRequeue)
		}
		return
	}
	if s.acts.produce() {
		s.mem.failures, s.mem.actFailures = 0, 0
		s.mem.actErr = nil
		// At once, to write what the calls produced; a node whose calls
		// keep producing nothing to write (an EC2 answer that changes
		// nothing) is not looked at in a loop.
		if o.wrote {
			s.mem.quickRuns = 0
		}
		if s.mem.quickRuns++; s.mem.quickRuns <= maxQuickRuns {
			s.requeueWithin(actedRequeue)
		} else {
			s.requeueWithin(time.Second)
		}
	}
}

// actedRequeue is how soon a node whose actions changed what EC2 holds
// for it is looked at again: at once, to write what they produced.
const actedRequeue = time.Millisecond

// maxQuickRuns bounds the reconciles in a row that act, write nothing
// and are requeued at once.
const maxQuickRuns = 3
