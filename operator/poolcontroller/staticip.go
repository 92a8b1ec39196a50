package poolcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
)

// A node's static IP is Cilium's contract, which enipam serves for
// `ipam: crd`:
//
//   - cilium-agent started with ipam-static-ip-tags writes them into its
//     CiliumNode's spec.ipam.static-ip-tags (pkg/nodediscovery,
//     mutateNodeResource), and in crd mode it does not become ready until
//     status.ipam.assigned-static-ip is set (pkg/ipam/crd.go,
//     newNodeStore's wait, staticIPStatus);
//   - Cilium's own ENI operator associates an Elastic IP carrying those
//     tags, not associated anywhere, with the primary ENI, refusing
//     reassociation (pkg/aws/api, Client.AssociateEIP), and reports the
//     public address (operator/pkg/ipam/nodemanager, syncToAPIServer).
//
// enipam does the same, and also releases the association when the node
// goes away or its tags stop matching. It keeps a record, the NodeRouting's
// spec.staticIP (the operator's alone: the node's agent writes only the
// status), written before it asks EC2, behind a finalizer, so an
// association is found and undone whatever happens to the operator. Unlike
// Cilium, an address the primary ENI already has counts only if it is an
// Elastic IP carrying the tags: an address EC2 gave the instance at
// launch is not static, and one the user associated for another purpose
// is left alone (StaticIPConflict).

// Event reasons of a node's static IP.
const (
	ReasonStaticIPAssigned    = "StaticIPAssigned"
	ReasonStaticIPReleased    = "StaticIPReleased"
	ReasonStaticIPUnavailable = "StaticIPUnavailable"
	ReasonStaticIPConflict    = "StaticIPConflict"
)

// syncStaticIP has an Elastic IP associated with the node's primary
// address when its CiliumNode asks for one, reports it in
// status.ipam.assigned-static-ip once EC2 shows it, and releases what
// the node no longer asks for: read, decide, and queue the EC2 calls as
// actions, made after the CiliumNode's write (act: associate,
// disassociate). A release clears status.ipam.assigned-static-ip in the
// write ahead of its calls; the node's new address, when its tags
// changed, is associated by the next reconcile, at once. Failures land
// in s.staticErr, never blocking the pool. A free address the node is
// to get is the one the read found reservable (staticIPFacts.candidate):
// the reconcile reserves it once the decision is over (take).
func (s *deciding) syncStaticIP() {
	if err := s.staticIP.listErr; err != nil {
		s.staticFailed(err, ReasonEC2Error)
	}
	if !s.haveStaticIP {
		s.staticIPRetried(staticIPNone)
		return
	}
	s.executeStaticIP(decideStaticIP(s.staticIP))
}

// staticIPFailure is why the node's last Elastic IP action failed
// (memory.staticIPFailed): the association or the release, as op says.
type staticIPFailure struct {
	op  staticIPOp
	err error
}

// staticIPOp names an Elastic IP action.
type staticIPOp int

const (
	staticIPNone staticIPOp = iota
	staticIPAssociate
	staticIPRelease
)

// staticIPRetried settles the last Elastic IP action's failure as this
// reconcile decides op: it stands, in s.staticErr for the write, while
// the same action is tried again, and is forgotten otherwise.
func (s *deciding) staticIPRetried(op staticIPOp) {
	if f := s.mem.staticIPFailed; f.err != nil && f.op == op {
		s.staticErr = f.err
		return
	}
	s.mem.staticIPFailed = staticIPFailure{}
}

// staticIPDone records how the executor's Elastic IP action op went:
// its failure stands for the next reconcile (staticIPRetried), its
// success clears it.
func (s *nodeSync) staticIPDone(op staticIPOp, err error) {
	if err != nil {
		s.mem.staticIPFailed = staticIPFailure{op: op, err: err}
		return
	}
	s.mem.staticIPFailed = staticIPFailure{}
}

// staticIPFacts is what the node's static IP is decided on, read
// beforehand by readStaticIP: plain values, no client.
type staticIPFacts struct {
	// tags are the CiliumNode's static-ip-tags; record the NodeRouting's
	// spec.staticIP; deleting: the NodeRouting is being deleted.
	tags     map[string]string
	record   *enipamv1alpha1.NodeStaticIP
	deleting bool
	// instanceID names the node's instance, primary its primary ENI (nil
	// while EC2's view lacks it).
	instanceID string
	primary    *cloud.ENI
	// addrs are the Elastic IPs as the address book lists them;
	// candidate the free one carrying tags the book would reserve for
	// the node now (haveCandidate: there is one); primaryVouched: the
	// address book's view of the Elastic IP on the primary address, if
	// any, can be believed over what an earlier process did (inventory's
	// Addresses.Vouches).
	addrs          []cloud.Address
	candidate      cloud.Address
	haveCandidate  bool
	primaryVouched bool
	// listErr: the Elastic IPs could not be listed (nothing else is
	// known then).
	listErr error
}

// staticIPStep is what decideStaticIP decided: undo the recorded
// association, record the Elastic IP found on the primary address, or
// associate one (the recorded one while it is free, else one the address
// book reserves), or why none can be.
type staticIPStep struct {
	release bool
	record  *enipamv1alpha1.NodeStaticIP
	// unvouched: the address found on the primary address is seen in a
	// describe that may still show an association an earlier process
	// undid just before it died; it is recorded, not reported, until a
	// describe vouches for it.
	unvouched bool
	associate *staticIPAssociation
	err       error
	reason    string
}

// staticIPAssociation is an association to make: of pick (none when the
// address book picks a free address carrying tags) with the primary
// address of primary.
type staticIPAssociation struct {
	pick       cloud.Address
	tags       map[string]string
	primary    *cloud.ENI
	instanceID string
}

// readStaticIP gathers the facts of the node's static IP; false when
// there is nothing to decide (no tags and no record: a NodeRouting the
// read did not find records nothing) or
// the Elastic IPs cannot be listed (listErr says why, for the decision
// to fail the node's static IP with, syncStaticIP).
func (s *nodeSync) readStaticIP(ctx context.Context) (staticIPFacts, bool) {
	tags := s.cn.Spec.IPAM.StaticIPTags
	var record *enipamv1alpha1.NodeStaticIP
	deleting := false
	if s.routing != nil {
		record, deleting = s.routing.Spec.StaticIP, s.routing.DeletionTimestamp != nil
	}
	if len(tags) == 0 && record == nil {
		return staticIPFacts{}, false
	}
	addrs, err := s.r.inv.Addresses().List(ctx)
	if err != nil {
		return staticIPFacts{listErr: fmt.Errorf("listing Elastic IPs, %w", err)}, false
	}
	f := staticIPFacts{tags: tags, record: record, deleting: deleting,
		instanceID: s.instanceID, primary: s.primaryENI(), addrs: addrs}
	if len(tags) > 0 {
		f.candidate, f.haveCandidate = s.r.inv.Addresses().Reservable(s.cn.Name, tags)
	}
	if f.primary != nil {
		if held, ok := onPrimary(addrs, f.primary); ok {
			f.primaryVouched = s.r.inv.Addresses().Vouches(held.AllocationID)
		}
	}
	return f, true
}

// decideStaticIP decides the node's static IP from f alone: it makes no
// call.
func decideStaticIP(f staticIPFacts) staticIPStep {
	if f.record != nil && !keepStaticIP(f) {
		return staticIPStep{release: true}
	}
	if f.deleting {
		return staticIPStep{} // a new NodeRouting will be made; associate then
	}
	if f.primary == nil {
		return staticIPStep{err: fmt.Errorf("no primary ENI of %s in EC2's view yet to carry a static IP", f.instanceID), reason: ReasonInstanceNotFound}
	}
	if held, ok := onPrimary(f.addrs, f.primary); ok {
		if !cloud.MatchTags(held.Tags, f.tags) {
			return staticIPStep{err: fmt.Errorf("%w: the primary address %s of %s already has Elastic IP %s (%s), which does not carry the static-ip-tags %s; disassociate it to let enipam assign one",
				errStaticIPBlocked, f.primary.PrimaryIP, f.primary.ID, held.PublicIP, held.AllocationID, inventory.TagsString(f.tags)), reason: ReasonStaticIPConflict}
		}
		// Ours from a process that died before recording it, or the user's
		// own tagged address: either way, the node's static IP.
		return staticIPStep{record: &enipamv1alpha1.NodeStaticIP{AllocationID: held.AllocationID, PublicIP: held.PublicIP.String(),
			InstanceID: f.instanceID, ENIID: f.primary.ID, AssociationID: held.AssociationID}, unvouched: !f.primaryVouched}
	}
	a := &staticIPAssociation{tags: f.tags, primary: f.primary, instanceID: f.instanceID}
	if rec := f.record; rec != nil {
		if i := slices.IndexFunc(f.addrs, func(a cloud.Address) bool { return a.AllocationID == rec.AllocationID }); i >= 0 && !f.addrs[i].Associated() {
			a.pick = f.addrs[i]
		}
	}
	return staticIPStep{associate: a}
}

// executeStaticIP carries out a static-IP step; false when it failed
// (s.staticErr says why).
func (s *deciding) executeStaticIP(step staticIPStep) bool {
	switch {
	case step.release:
		s.staticIPRetried(staticIPRelease)
	case step.associate == nil:
		s.staticIPRetried(staticIPNone)
	}
	switch {
	case step.err != nil:
		s.staticFailed(step.err, step.reason)
		return false
	case step.release:
		// The node stops reporting the address in the write, ahead of
		// the calls (act, disassociate); the record stays until they
		// went through, so a process that dies on the way decides the
		// release again.
		rec := *s.routing.Spec.StaticIP
		if s.cn.Status.IPAM.AssignedStaticIP == rec.PublicIP {
			s.cn.Status.IPAM.AssignedStaticIP = ""
		}
		s.acts.disassociate = &rec
	case step.record != nil:
		// The record goes with the reconcile's write of the NodeRouting's
		// spec (writeRouting, with the finalizer), after the CiliumNode's.
		// The node reports the address once a record of it is stored (the
		// association's ID, learnt after the call, may be what this write
		// adds): else the next reconcile, at once, reads it and reports it
		// here.
		// Cilium's agent takes the report for the node's static IP at
		// once, so it waits for a describe that vouches for the
		// association (staticIPStep.unvouched).
		switch {
		case step.unvouched:
			s.requeueWithin(s.r.opts.ConsistencyGrace)
		case recorded(s.routingRead, step.record):
			s.cn.Status.IPAM.AssignedStaticIP = step.record.PublicIP
		}
		s.routing.Spec.StaticIP = step.record
	case step.associate != nil:
		return s.associateStaticIP(step.associate)
	}
	return true
}

// errStaticIPBlocked marks static-IP failures that only a change fixes.
var errStaticIPBlocked = errors.New("static IP blocked")

// associateStaticIP prepares the association of a free tagged Elastic
// IP (a.pick, or the one the read found reservable, which the address
// book reserves for the node once the decision is over (take), until the
// executor made the call) with the primary address: the executor, after
// the CiliumNode's write, records it in the NodeRouting, then asks EC2
// (act, associate). EC2's answer, the association's ID, is recorded by
// the next reconcile, at once, which finds the address on the primary
// address (decideStaticIP) and writes it in
// status.ipam.assigned-static-ip: the CiliumNode is never written after
// the call. False when it cannot be made.
func (s *deciding) associateStaticIP(a *staticIPAssociation) bool {
	pick, reserve := a.pick, false
	if pick.AllocationID == "" {
		if pick, reserve = s.staticIP.candidate, s.staticIP.haveCandidate; !reserve {
			s.staticIPRetried(staticIPNone)
			s.staticFailed(fmt.Errorf("%w: no free Elastic IP carries the static-ip-tags %s (EC2's view is refreshed every resync)",
				errStaticIPBlocked, inventory.TagsString(a.tags)), ReasonStaticIPUnavailable)
			return false
		}
	}
	primary := a.primary
	rec := enipamv1alpha1.NodeStaticIP{AllocationID: pick.AllocationID, PublicIP: pick.PublicIP.String(), InstanceID: a.instanceID, ENIID: primary.ID}
	// The last association's failure stands while it is tried again.
	s.staticIPRetried(staticIPAssociate)
	s.acts.associate = &staticIPCall{pick: pick, primary: primary, rec: rec, reserve: reserve}
	return true
}

// associate has the executor make the Elastic IP's association (act):
// the NodeRouting records it first, so an association made by a process
// that dies right after is found, and released with the node; a record
// refused means no association. False when it failed (s.staticErr says
// why, and memory.staticIPFailed for the next reconcile's write).
func (s *nodeSync) associate(ctx context.Context, a *staticIPCall) bool {
	defer s.r.inv.Addresses().Unreserve(s.cn.Name)
	if err := s.r.recordStaticIP(ctx, s.routing, &a.rec); err != nil {
		s.staticIPDone(staticIPAssociate, err)
		s.staticFailed(err, ReasonEC2Error)
		return false
	}
	if _, err := s.exec().associateAddress(ctx, a.pick, a.primary); err != nil {
		if errors.Is(err, cloud.ErrInUse) {
			// Taken meanwhile by someone else (the executor learnt
			// where): pick again.
			s.requeueWithin(attachCheckInterval)
		}
		err = fmt.Errorf("associating Elastic IP %s with %s, %w", a.pick.PublicIP, a.primary.ID, err)
		s.staticIPDone(staticIPAssociate, err)
		s.staticFailed(err, ReasonEC2Error)
		return false
	}
	s.staticIPDone(staticIPAssociate, nil)
	s.r.events.Eventf(s.cn, nil, "Normal", ReasonStaticIPAssigned, "StaticIP", "Elastic IP %s (%s) associated with %s on %s", a.rec.PublicIP, a.rec.AllocationID, a.primary.PrimaryIP, a.primary.ID)
	s.r.log.Info("static IP associated", "node", s.cn.Name, "instance", a.rec.InstanceID, "eni", a.primary.ID, "eip", a.rec.PublicIP)
	return true
}

// disassociate has the executor release the recorded Elastic IP (act):
// it undoes the association when EC2 still has the address on the
// recorded ENI, then clears the NodeRouting's record and finalizer; false
// when it failed (s.staticErr says why, and memory.staticIPFailed for
// the next reconcile's write), the record kept for the next reconcile to
// decide the release again.
func (s *nodeSync) disassociate(ctx context.Context, rec *enipamv1alpha1.NodeStaticIP) bool {
	err := s.exec().releaseAddress(ctx, rec)
	if err == nil {
		err = s.r.clearStaticIP(ctx, s.routing)
	}
	s.staticIPDone(staticIPRelease, err)
	if err != nil {
		s.staticFailed(err, ReasonEC2Error)
		return false
	}
	s.r.events.Eventf(s.cn, nil, "Normal", ReasonStaticIPReleased, "StaticIP", "Elastic IP %s (%s) released from %s", rec.PublicIP, rec.AllocationID, rec.InstanceID)
	return true
}

// recorded reports whether the NodeRouting as read (nr) stores a record
// of rec's association, behind the finalizer: the same address on the
// same ENI of the same instance (the association's ID, learnt after the
// call, may still be missing), which a release finds and undoes.
func recorded(nr *enipamv1alpha1.NodeRouting, rec *enipamv1alpha1.NodeStaticIP) bool {
	if nr == nil || nr.Spec.StaticIP == nil || !controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) {
		return false
	}
	have := nr.Spec.StaticIP
	return have.AllocationID == rec.AllocationID && have.PublicIP == rec.PublicIP && have.InstanceID == rec.InstanceID && have.ENIID == rec.ENIID
}

// keepStaticIP reports whether the recorded static IP still serves the
// node: same instance, tags still asked for and still on the address,
// and the address not taken elsewhere.
func keepStaticIP(f staticIPFacts) bool {
	rec := f.record
	if len(f.tags) == 0 || rec.InstanceID != f.instanceID || f.deleting {
		return false
	}
	i := slices.IndexFunc(f.addrs, func(a cloud.Address) bool { return a.AllocationID == rec.AllocationID })
	if i < 0 || !cloud.MatchTags(f.addrs[i].Tags, f.tags) {
		return false
	}
	a := f.addrs[i]
	return !a.Associated() || (f.primary != nil && a.ENIID == f.primary.ID)
}

// staticFailed records why the node's static IP is not served: the
// operator-status (unless the pool has a reason of its own), an event
// once, and a slow retry — only a change (a freed or newly tagged Elastic
// IP, seen at the next resync) helps most of these.
func (s *deciding) staticFailed(err error, reason string) {
	s.staticErr = err
	s.r.warn(s.cn, s.mem, reason, err.Error())
	if errors.Is(err, errStaticIPBlocked) {
		s.requeueWithin(s.r.opts.BlockedRetry)
	} else {
		s.requeueWithin(s.r.retryAfter(s.mem.failures))
	}
	s.r.log.Info("static IP not served", "node", s.cn.Name, "instance", s.instanceID, "reason", reason, "error", err)
}

// primaryENI returns the instance's primary ENI (device 0 of card 0).
func (s *deciding) primaryENI() *cloud.ENI {
	for i := range s.snap.ENIs {
		if e := &s.snap.ENIs[i]; e.DeviceIndex == 0 && e.NetworkCard == 0 && e.InstanceID == s.instanceID {
			return e
		}
	}
	return nil
}

// onPrimary finds the Elastic IP associated with the primary ENI's
// primary address.
func onPrimary(addrs []cloud.Address, primary *cloud.ENI) (cloud.Address, bool) {
	for _, a := range addrs {
		if a.Associated() && a.ENIID == primary.ID && a.PrivateIP == primary.PrimaryIP {
			return a, true
		}
	}
	return cloud.Address{}, false
}

// recordStaticIP puts rec into the NodeRouting's spec, with the
// finalizer, in one apply of the operator's word and only when needed; nr
// is updated in place. The spec is the operator's alone: the record names
// what the operator may disassociate, so no node may write it. The
// executor applies it on its own, after the reconcile's write of the
// spec, because it must be stored before EC2 is asked to associate; the
// apply carries the whole spec as it stands, under the same field
// manager.
func (r *Reconciler) recordStaticIP(ctx context.Context, nr *enipamv1alpha1.NodeRouting, rec *enipamv1alpha1.NodeStaticIP) error {
	if controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) && sameJSON(nr.Spec.StaticIP, rec) {
		return nil
	}
	lock := !controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer)
	prev := nr.Spec.StaticIP
	nr.Spec.StaticIP = rec
	if err := r.applyRouting(ctx, nr, lock); err != nil {
		nr.Spec.StaticIP = prev // not recorded: no later apply may claim it
		return fmt.Errorf("recording static IP %s in NodeRouting %s, %w", rec.PublicIP, nr.Name, err)
	}
	return nil
}

// releaseStaticIP undoes the association the NodeRouting's record names
// (executor.releaseAddress), then clears the record and the finalizer
// (clearStaticIP): the release of a node whose CiliumNode is gone, with
// no CiliumNode to write.
func (r *Reconciler) releaseStaticIP(ctx context.Context, nr *enipamv1alpha1.NodeRouting) error {
	if rec := nr.Spec.StaticIP; rec != nil {
		x := &executor{r: r, node: &ciliumv2.CiliumNode{}, instanceID: rec.InstanceID}
		x.node.Name = nr.Name
		if err := x.releaseAddress(ctx, rec); err != nil {
			return err
		}
	}
	return r.clearStaticIP(ctx, nr)
}

// clearStaticIP removes the NodeRouting's record and finalizer, in one
// write that never makes the object again; nr is updated in place.
func (r *Reconciler) clearStaticIP(ctx context.Context, nr *enipamv1alpha1.NodeRouting) error {
	if !controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) && nr.Spec.StaticIP == nil {
		return nil
	}
	// The one write of the spec that is not an apply: a removal under an
	// optimistic lock, which an apply cannot make (the apiserver makes an
	// object gone meanwhile again, whatever resourceVersion an apply
	// names). Removing, it leaves no owner behind: the fields go with
	// enipam-operator's ownership.
	orig := nr.DeepCopy()
	// The answer is decoded into a spec.enis of nr's own, not the one a
	// copy of nr may share (copyRouting).
	nr.Spec.ENIs = orig.Spec.ENIs
	nr.Spec.StaticIP = nil
	controllerutil.RemoveFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer)
	if err := r.client.Patch(ctx, nr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		orig.DeepCopyInto(nr) // still recorded: a later apply keeps it
		return fmt.Errorf("clearing the static IP of NodeRouting %s, %w", nr.Name, err)
	}
	r.rememberApplied(nr)
	return nil
}

// releaseGone releases the static IP of a node whose CiliumNode is gone
// or going: its NodeRouting goes with it, held by the finalizer until
// then.
func (r *Reconciler) releaseGone(ctx context.Context, name string) error {
	nr := &enipamv1alpha1.NodeRouting{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, nr); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) && nr.Spec.StaticIP == nil {
		return nil
	}
	return r.releaseStaticIP(ctx, nr)
}
