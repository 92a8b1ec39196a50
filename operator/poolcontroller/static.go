package poolcontroller

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// Static addresses in a node's pool. A claimed address is stamped with its
// claim's owner ("namespace/name") in the pool of the node it must be on;
// Cilium's agent then gives that entry to that pod only, and before any
// other (pkg/ipam/crd.go, nodeStore.allocateNext) — but to that pod
// whatever the entry's state: in the release handshake, or held by
// another pod (crdAllocator.markAllocated overwrites the holder). So:
//
//   - a stamp goes only on an address no other pod can hold: one its own
//     pod holds, one the same pass brings into the pool (it reaches the
//     agent stamped), or one the agent acknowledged for release. A pool
//     entry is marked for release first, unstamped: the agent answers
//     ready-for-release if no pod holds it (and hands it to none while it
//     is in the handshake); it is then stamped, the answer kept, and the
//     answer is withdrawn in a later pass, once the stamp is written, so
//     the agent never sees it unstamped and out of the handshake in
//     between. On do-not-release nothing was stamped, and another address
//     is picked. A stamp is never written before that answer: the agent's
//     view lags the pool, and a stamp it saw stays in it after the
//     operator removed it, so the claim's pod, bound on another address
//     of the node, would be handed that one while another pod holds it
//     (seed 81238). Until the answer is withdrawn the pod is not bound;
//   - an address moves between nodes only through the old node's
//     handshake: marked there, with the stamp kept (only the claim's own
//     pod could still get it, and it is bound nowhere), never while a pod
//     that exists and is bound there holds it (the agent's do-not-release
//     says the same); once ready-for-release, or once the old node's
//     enipam-agent reports no endpoint holding it there (the fast move,
//     staticfast.go), it leaves the old pool (released, never
//     unassigned); only when no pool lists it any more is
//     it reassigned in EC2 onto an ENI of the new node (AllowReassignment:
//     one call, never on two ENIs); the new node's agent routes it, and
//     only then is it stamped in the new pool. An address is thus never in
//     two pools, and never on the new ENI while its old entry could still
//     be handed out;
//   - a stamped address is never counted free, never marked as excess,
//     never unassigned; a released claim's stamp is removed and the
//     address is an ordinary pool address again.
//
// Every step is derived from the claims, the pools and EC2 on each
// reconcile, so an operator killed between two steps resumes where the
// cluster is.

// staticInputs are the facts a node's static addresses are derived from,
// beside the pool and the snapshot: plain values read beforehand
// (readStatic), so the pass makes no call. The lookups on them
// (podOn, elsewhere, locate, ours, subnetOf, routed, endpointGone,
// remapUnsure; statefacts.go) answer from these values alone.
type staticInputs struct {
	node string
	// claims are the claims that concern the node (asked onto it,
	// recorded on it, stamped in its pool, or naming an address of its
	// ENIs), by owner.
	claims map[string]*claims.Claim
	// gone are the owners stamped in the pool whose claim no longer
	// exists (deleted without its finalizer): their stamps are removed.
	gone map[string]bool
	// podNodes: the node the pod of each owner whose stamped address may
	// leave the node is bound to, "" when there is no such pod or it is
	// not bound. An owner not listed counts as bound here (podOn).
	podNodes map[string]string
	// pooledElsewhere: for the claimed addresses the node's ENIs do not
	// hold, whether another node's pool lists them. An address not
	// listed counts as listed elsewhere (elsewhere).
	pooledElsewhere map[string]bool
	// located: where EC2 has those addresses (the inventory).
	located map[netip.Addr]inventory.Location
	// cluster and ourInstances: an ENI holding a claimed address may give
	// it up to a reassignment if it is tagged with the cluster or
	// attached to an instance of one of its nodes (ours).
	cluster      string
	ourInstances map[string]bool
	// liveTargets: for the claims whose address another ENI holds (a
	// reassignment), the claim's spec.nodeName read from the apiserver,
	// not the cache, right before the decision; a claim missing from it
	// could not be read. kube-scheduler's bind retries can ask a claim
	// onto another node at any moment, and only its current target may
	// take the address. nil: never read (every target taken as current).
	liveTargets map[string]string
	// subnets: the subnet of each of those addresses.
	subnets map[netip.Addr]cloud.Subnet
	// report is the node's agent's report of what it routed; nil when it
	// reports nothing.
	report routedFunc
	// absent are the addresses the node's agent, answering a query the
	// operator made after it saw the address's pod gone from the node,
	// found no endpoint holding (staticfast.go).
	absent map[string]bool
	// describesTrusted: the inventory's describes are trusted (no remap
	// is unsure then); remapsAsked: the remap queries this process made,
	// marked missing where the node's agent answered the metadata does
	// not list the address on the ENI asked about (the memory's, as the
	// decision leaves it: decideLandings; staticremap.go).
	describesTrusted bool
	remapsAsked      map[string]remapAsk
	// listed are the pool entries of the CiliumNode as read, before this
	// pass added any (nil: all are taken as listed). See pickFree's use.
	listed map[string]bool
	// firstMarks are the pool entries this process marked for release to
	// stamp them for a first placement once acknowledged, with the owner
	// each was marked for (placeFirst). Kept in memory only: lost with
	// the process, they are ordinary entries in the handshake.
	firstMarks map[string]string
	// firstAway are the owners of those marks whose claim still waits
	// for its first placement, asked onto another node for now
	// (kube-scheduler's bind retries move a pending pod's claim between
	// nodes): an acknowledged mark of theirs is kept for them (keepFirstMarks).
	firstAway map[string]bool
}

// staticOutcome is what the pass decided beyond the pool edits.
type staticOutcome struct {
	// place are the addresses to assign onto this node's ENIs.
	place []placement
	// create asks for a new ENI in a subnet for a claimed address.
	create *pool.Create
	// notes per claim owner, for the claim controller (written to each
	// claim's status.placement by runStatic).
	notes map[string]placementNote
	// demand counts claims waiting for a free address of this pool (a
	// first placement): planning adds them to what the pool must hold.
	demand int
	// secondary names an ENI to assign one secondary address onto for a
	// first placement on a node whose free entries are all /28 members
	// (a member cannot move alone: a static address is never one).
	secondary string
	// handshakes counts stamps waiting for the agent's answer.
	handshakes int
	// waiting: a claimed address is still in the pool it leaves.
	waiting bool
	// oldPods are the owners whose pod is still bound to this node while
	// their address moves away: nothing in this node's objects changes
	// when such a pod goes, so the node is looked at again, slowly.
	oldPods map[string]bool
	// verify are stamped addresses the node's ENIs do not hold in the
	// inventory's view, to ask the node's agent about (staticremap.go).
	verify []placement
	// queries are the addresses leaving the node whose pod is gone from
	// it: the node's agent is asked whether an endpoint still holds them
	// (staticfast.go). fast counts those that left on its answer.
	queries []string
	fast    int
	// firstMarks: the first placements' marks still unanswered, for the
	// next pass (staticInputs.firstMarks).
	firstMarks map[string]string
}

// placement is one claimed address to assign onto an ENI of the node.
type placement struct {
	ip    netip.Addr
	owner string
	eniID string
	// reassign: another ENI holds it (AllowReassignment).
	reassign bool
}

// placementNote is the pass's word on one claim's placement. The zero
// value says the node the address leaves has the word: this one writes
// nothing.
type placementNote struct {
	// Reason is one of the claim reasons of package v1alpha1.
	Reason  string
	Message string
}

func (o *staticOutcome) note(owner, reason, format string, args ...any) {
	if o.notes == nil {
		o.notes = map[string]placementNote{}
	}
	o.notes[owner] = placementNote{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func (in *staticInputs) markAway(owner string) {
	if in.firstAway == nil {
		in.firstAway = map[string]bool{}
	}
	in.firstAway[owner] = true
}

// target is where a claim's address must be: spec.nodeName, else where it
// is (a claim no pod was bound for yet keeps its address in place).
func (in *staticInputs) target(c *claims.Claim) string {
	if c.Target != "" {
		return c.Target
	}
	return in.node
}

// claimOf tells, for an address EC2 has on this node's ENIs that the pool
// lacks, the owner it must be stamped with and whether it belongs in this
// pool at all: a claimed address enters only the pool of the node it must
// be on, and only stamped.
func (in *staticInputs) claimOf(ip netip.Addr) (owner string, here bool) {
	for _, c := range in.claims {
		if c.Addr != ip || c.Release || c.Lost {
			continue
		}
		if !c.Ready {
			return c.Owner, false // nothing moves for a claim not checked
		}
		return c.Owner, in.target(c) == in.node
	}
	return "", true
}

// reconcileStatic runs the static addresses' steps on the node's desired
// pool (see the top of this file).
func (v *poolView) reconcileStatic(in *staticInputs, snap *snapshot.Node, cfg *pool.Config) staticOutcome {
	var out staticOutcome
	ipam, st := &v.cn.Spec.IPAM, &v.cn.Status.IPAM
	stamped := map[string]string{} // owner → address stamped here
	// refused: owners whose stamp the agent just refused; not stamped
	// again in this pass (the agent's next write says who holds it).
	refused := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(ipam.Pool)) {
		entry := ipam.Pool[key]
		if entry.Owner == "" {
			continue
		}
		c := in.claims[entry.Owner]
		ip, _ := netip.ParseAddr(key)
		switch {
		case c == nil && in.gone[entry.Owner]:
			v.unstamp(key) // its claim is gone: an ordinary address again
			continue
		case c == nil:
			continue // a stamp of someone else's: left alone
		case c.Release || (c.Addr.IsValid() && c.Addr != ip) || (c.Lost && st.Used[key].Owner != c.Owner):
			// Released, moved on, or another claim keeps the address (its
			// own pod, if it holds it, keeps it until it goes).
			v.unstamp(key)
			continue
		case !c.Ready:
			stamped[c.Owner] = key
			continue
		}
		stamped[c.Owner] = key
		state, inHandshake := st.ReleaseIPs[key]
		if state == ipamoption.IPAMReleased {
			continue // leaving; the pool's reconcile drops it
		}
		usedBy := st.Used[key].Owner
		if in.target(c) == in.node {
			eni := holder(snap, cfg, ip)
			if eni == nil {
				// EC2 has it elsewhere, or nowhere: the stamp stands (only
				// its pod could get it) and the address is placed again.
				v.backStamp(in, c, snap, cfg, &out)
				continue
			}
			if eni.ID != entry.Resource {
				// Placed back on another ENI of the node: the entry names
				// it once routed there (Cilium's agent routes the pod by
				// the entry's ENI).
				if eni.AttachmentStatus != cloud.AttachmentAttached || !in.routed(eni.ID, ip) {
					out.note(c.Owner, enipamv1alpha1.ReasonAwaitingRouting, "%s is on %s of node %s; waiting for enipam-agent to route it", key, eni.ID, in.node)
					continue
				}
				entry.Resource = eni.ID
				ipam.Pool[key] = entry
			}
			switch {
			case usedBy != "" && usedBy != c.Owner:
				// Another pod holds it: the stamp cannot stand.
				v.unstamp(key)
				delete(stamped, c.Owner)
				refused[c.Owner] = true
				out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s on node %s is in use by pod %s", key, in.node, usedBy)
			case state == ipamoption.IPAMReadyForRelease, state == ipamoption.IPAMDoNotRelease && usedBy == c.Owner:
				delete(st.ReleaseIPs, key) // the stamp holds
			case state == ipamoption.IPAMDoNotRelease:
				// Held by a pod the agent has not listed yet.
				v.unstamp(key)
				delete(stamped, c.Owner)
				refused[c.Owner] = true
				out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s on node %s is in use (Cilium's agent refused to give it up)", key, in.node)
			case inHandshake:
				out.handshakes++
				out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s stamped on node %s; waiting for Cilium's agent to confirm no other pod holds it", key, in.node)
			default:
				out.notes = notesDel(out.notes, c.Owner)
			}
			continue
		}
		// Moving away: the entry leaves through the handshake, never while
		// a pod that exists here holds it.
		if usedBy != "" && usedBy != c.Owner {
			// Another pod holds it: it got the entry before the agent saw
			// the stamp (a first placement not confirmed yet). The stamp
			// cannot stand here or anywhere; waiting for that pod to go
			// would wait for ever.
			v.unstamp(key)
			delete(stamped, c.Owner)
			refused[c.Owner] = true
			out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s on node %s is in use by pod %s", key, in.node, usedBy)
			continue
		}
		if in.podOn(c.Owner) == in.node {
			out.note(c.Owner, enipamv1alpha1.ReasonWaitingForOldPod, "%s stays on node %s while pod %s is bound there", key, in.node, c.Owner)
			if out.oldPods == nil {
				out.oldPods = map[string]bool{}
			}
			out.oldPods[c.Owner] = true
			continue
		}
		out.queries = append(out.queries, key)
		switch {
		case state == ipamoption.IPAMReadyForRelease:
			st.ReleaseIPs[key] = ipamoption.IPAMReleased
			delete(ipam.Pool, key)
			out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s left node %s's pool; moving to node %s", key, in.node, in.target(c))
			continue
		case state != ipamoption.IPAMDoNotRelease && in.endpointGone(key):
			// The fast move (staticfast.go): enipam-agent saw no
			// endpoint holding it after the pod was gone.
			st.ReleaseIPs[key] = ipamoption.IPAMReleased
			delete(ipam.Pool, key)
			out.fast++
			out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s left node %s's pool (enipam-agent found no endpoint holding it); moving to node %s", key, in.node, in.target(c))
			continue
		}
		switch state {
		case ipamoption.IPAMMarkForRelease:
			out.note(c.Owner, enipamv1alpha1.ReasonWaitingForOldPod, "%s is being released by Cilium's agent on node %s", key, in.node)
		default: // none, or do-not-release: ask (again)
			if state == ipamoption.IPAMDoNotRelease {
				delete(st.ReleaseIPs, key)
				out.note(c.Owner, enipamv1alpha1.ReasonWaitingForOldPod, "Cilium's agent on node %s still holds %s; asking again", in.node, key)
				continue
			}
			v.mark(key)
			out.note(c.Owner, enipamv1alpha1.ReasonWaitingForOldPod, "%s is being released by Cilium's agent on node %s", key, in.node)
		}
	}

	first := v.liveFirstMarks(in)
	waitingFirst := map[string]bool{}
	for owner, c := range in.claims {
		if _, ok := stamped[owner]; !ok && !refused[owner] && !c.Release && c.Ready && !c.Addr.IsValid() && in.target(c) == in.node {
			waitingFirst[owner] = true
		}
	}
	for _, owner := range slices.Sorted(maps.Keys(in.claims)) {
		c := in.claims[owner]
		if c.Release || !c.Ready {
			continue
		}
		if _, ok := stamped[owner]; ok || refused[owner] {
			continue
		}
		if in.target(c) != in.node {
			// Asked onto another node while it is an ordinary entry here:
			// stamped first (the agent confirming no pod holds it), it
			// then leaves through the handshake like any stamp moving away.
			if e, ok := ipam.Pool[c.Addr.String()]; c.Addr.IsValid() && ok && e.Owner == "" {
				v.claimEntry(in, c, &out)
			}
			continue
		}
		if !c.Addr.IsValid() {
			if v.placeFirst(in, c, first, waitingFirst, snap, cfg, &out) {
				continue
			}
			key, ok := v.pickFree(in, owner, snap, cfg, c.Subnet)
			switch {
			case ok && in.listed != nil && !in.listed[key]:
				// An entry this pass brings into the pool reaches Cilium's
				// agent stamped, in the same spec write: no pod can hold
				// it, so no mark. (A mark, written with the status before
				// the spec, would reach the agent before the entry: it
				// answers do-not-release for an address not in its pool,
				// the stamp would go, and the address, free for any
				// waiting pod, could be stamped again while one holds it.)
				entry := v.cn.Spec.IPAM.Pool[key]
				entry.Owner = owner
				v.cn.Spec.IPAM.Pool[key] = entry
				out.notes = notesDel(out.notes, owner)
			case ok:
				// A listed entry: a pod the agent has not reported yet may
				// hold it. Marked only; stamped once acknowledged.
				v.mark(key)
				first[key] = owner
				out.handshakes++
				out.note(owner, enipamv1alpha1.ReasonPlacing, "%s marked on node %s; waiting for Cilium's agent to confirm no pod holds it before stamping it", key, in.node)
			case out.secondary == "" && prefixed(snap, cfg):
				// The pool grows by /28 prefixes here: a secondary address
				// is asked for, and stamped once routed and pooled.
				if eni := secondarySlot(snap, cfg, c.Subnet); eni != "" {
					out.secondary = eni
					out.note(owner, enipamv1alpha1.ReasonPlacing, "assigning a secondary address on %s of node %s (a /28 member cannot move)", eni, in.node)
					continue
				}
				out.demand++
				out.note(owner, enipamv1alpha1.ReasonPlacing, "waiting for a free address slot for a secondary address on node %s", in.node)
			default:
				out.demand++
				out.note(owner, enipamv1alpha1.ReasonPlacing, "waiting for a free address on node %s", in.node)
			}
			continue
		}
		v.claimHere(in, c, snap, cfg, &out)
	}
	v.keepFirstMarks(in, first, waitingFirst, &out)
	return out
}

// claimHere brings the address of a claim whose target is this node into
// its pool, stamped: from this pool's own ordinary entries, or from EC2.
func (v *poolView) claimHere(in *staticInputs, c *claims.Claim, snap *snapshot.Node, cfg *pool.Config, out *staticOutcome) {
	key := c.Addr.String()
	if _, ok := v.cn.Spec.IPAM.Pool[key]; ok {
		v.claimEntry(in, c, out)
		return
	}
	for i := range snap.ENIs {
		if e := &snap.ENIs[i]; pool.Usable(e, cfg) && e.HasIP(c.Addr) {
			out.note(c.Owner, enipamv1alpha1.ReasonAwaitingRouting, "%s is on %s of node %s; waiting for enipam-agent to route it", key, e.ID, in.node)
			return
		}
	}
	if in.elsewhere(key) {
		// The node it leaves tells the claim why: no note of this one's.
		out.waiting = true
		if out.notes == nil {
			out.notes = map[string]placementNote{}
		}
		out.notes[c.Owner] = placementNote{}
		return
	}
	v.fromEC2(in, c, snap, cfg, out)
}

// claimEntry stamps a claim's address that is an ordinary entry of this
// pool, whichever node the claim names: at once if its pod holds it, else
// once the agent acknowledged a mark for release (no other pod holds it),
// the answer kept until a later pass (see the top of this file).
func (v *poolView) claimEntry(in *staticInputs, c *claims.Claim, out *staticOutcome) {
	key := c.Addr.String()
	st := &v.cn.Status.IPAM
	entry := v.cn.Spec.IPAM.Pool[key]
	state, inHandshake := st.ReleaseIPs[key]
	usedBy := st.Used[key].Owner
	switch {
	case entry.Owner != "" && entry.Owner != c.Owner:
		// Stamped for another claim (a first placement of this very pass
		// among them): its stamp and handshake are that claim's.
		out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s on node %s is stamped for pod %s", key, in.node, entry.Owner)
	case usedBy == c.Owner:
		entry.Owner = c.Owner // its pod has it already
		v.cn.Spec.IPAM.Pool[key] = entry
	case usedBy != "":
		out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s on node %s is in use by pod %s", key, in.node, usedBy)
	case state == ipamoption.IPAMMarkForRelease:
		// Marked (for this claim, or as excess): the agent's answer says
		// whether a pod holds it.
		v.keepMark(key)
		out.handshakes++
		out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s marked on node %s; waiting for Cilium's agent to confirm no pod holds it before stamping it", key, in.node)
	case state == ipamoption.IPAMReadyForRelease:
		// Acknowledged: no pod holds it, and the agent hands it to none
		// while it is in the handshake. Stamped now, the answer kept: the
		// stamped loop above withdraws it in a later pass (here), or lets
		// the address leave (for another node). A claimed address is
		// never unassigned: an operator killed between the writes leaves
		// this again, and it is stamped again. Should an earlier process
		// have sent an Unassign for it, the stamp's check against EC2
		// places it again.
		entry.Owner = c.Owner
		v.cn.Spec.IPAM.Pool[key] = entry
		out.handshakes++
		out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s stamped on node %s (Cilium's agent confirmed no pod holds it)", key, in.node)
	case inHandshake && state != ipamoption.IPAMDoNotRelease:
		// Released: it leaves the pool, and is placed again from EC2.
		out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s is being released from node %s's pool; placing it again afterwards", key, in.node)
	default:
		// Not asked yet, or refused by a pod the agent has not listed
		// yet: asked (again), nothing stamped.
		v.mark(key)
		v.keepMark(key)
		out.handshakes++
		out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s marked on node %s; waiting for Cilium's agent to confirm no pod holds it before stamping it", key, in.node)
	}
}

// unstamp makes a stamped entry ordinary again, withdrawing a handshake
// the stamp started and Cilium's agent answered (a stamped address is
// never unassigned, so none of its handshakes may end in an Unassign).
//
// A mark not answered yet stays, for the agent to answer as for any
// ordinary entry (do-not-release, or ready-for-release: the pool's
// release then decides, and never unassigns an address a claim
// records). Withdrawn here, the mark's removal (the status write) would
// land before the stamp's (the spec write): an operator killed between
// the two leaves a stamp with no handshake, which the next one takes for
// a stamp the agent confirmed, while another pod may hold the address
// (the agent had not answered yet).
func (v *poolView) unstamp(key string) {
	entry := v.cn.Spec.IPAM.Pool[key]
	entry.Owner = ""
	v.cn.Spec.IPAM.Pool[key] = entry
	switch v.cn.Status.IPAM.ReleaseIPs[key] {
	case ipamoption.IPAMReadyForRelease, ipamoption.IPAMDoNotRelease:
		delete(v.cn.Status.IPAM.ReleaseIPs, key)
	}
}

func notesDel(m map[string]placementNote, owner string) map[string]placementNote {
	delete(m, owner)
	return m
}
