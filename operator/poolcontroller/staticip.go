package poolcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// syncStaticIP associates an Elastic IP with the node's primary address
// when its CiliumNode asks for one, reports it in
// status.ipam.assigned-static-ip, and releases what the node no longer
// asks for. Failures land in s.staticErr, never blocking the pool.
func (s *nodeSync) syncStaticIP(ctx context.Context) {
	tags := s.cn.Spec.IPAM.StaticIPTags
	if s.routing == nil || (len(tags) == 0 && s.routing.Spec.StaticIP == nil) {
		return
	}
	book := s.r.inv.Addresses()
	addrs, err := book.List(ctx)
	if err != nil {
		s.staticFailed(fmt.Errorf("listing Elastic IPs, %w", err), ReasonEC2Error)
		return
	}
	primary := s.primaryENI()
	if rec := s.routing.Spec.StaticIP; rec != nil && !s.keepStaticIP(rec, addrs, primary) {
		if err := s.r.releaseStaticIP(ctx, s.routing); err != nil {
			s.staticFailed(err, ReasonEC2Error)
			return
		}
		if s.cn.Status.IPAM.AssignedStaticIP == rec.PublicIP {
			s.cn.Status.IPAM.AssignedStaticIP = ""
		}
		s.r.events.Eventf(s.cn, nil, "Normal", ReasonStaticIPReleased, "StaticIP", "Elastic IP %s (%s) released from %s", rec.PublicIP, rec.AllocationID, rec.InstanceID)
		if len(tags) == 0 {
			return
		}
		if addrs, err = book.List(ctx); err != nil {
			s.staticFailed(fmt.Errorf("listing Elastic IPs, %w", err), ReasonEC2Error)
			return
		}
	}
	if s.routing.DeletionTimestamp != nil {
		return // a new NodeRouting will be made; associate then
	}
	if primary == nil {
		s.staticFailed(fmt.Errorf("no primary ENI of %s in EC2's view yet to carry a static IP", s.instanceID), ReasonInstanceNotFound)
		return
	}
	if held, ok := onPrimary(addrs, primary); ok {
		if !cloud.MatchTags(held.Tags, tags) {
			s.staticFailed(fmt.Errorf("%w: the primary address %s of %s already has Elastic IP %s (%s), which does not carry the static-ip-tags %s; disassociate it to let enipam assign one",
				errStaticIPBlocked, primary.PrimaryIP, primary.ID, held.PublicIP, held.AllocationID, inventory.TagsString(tags)), ReasonStaticIPConflict)
			return
		}
		// Ours from a process that died before recording it, or the user's
		// own tagged address: either way, the node's static IP.
		rec := &enipamv1alpha1.NodeStaticIP{AllocationID: held.AllocationID, PublicIP: held.PublicIP.String(), InstanceID: s.instanceID, ENIID: primary.ID, AssociationID: held.AssociationID}
		if err := s.r.recordStaticIP(ctx, s.routing, rec); err != nil {
			s.staticFailed(err, ReasonEC2Error)
			return
		}
		s.cn.Status.IPAM.AssignedStaticIP = rec.PublicIP
		return
	}
	s.associateStaticIP(ctx, addrs, primary)
}

// errStaticIPBlocked marks static-IP failures that only a change fixes.
var errStaticIPBlocked = errors.New("static IP blocked")

// associateStaticIP picks a free tagged Elastic IP (the recorded one if it
// is still free), records it, and associates it with the primary address.
func (s *nodeSync) associateStaticIP(ctx context.Context, addrs []cloud.Address, primary *cloud.ENI) {
	book := s.r.inv.Addresses()
	defer book.Unreserve(s.cn.Name)
	var pick cloud.Address
	if rec := s.routing.Spec.StaticIP; rec != nil {
		if i := slices.IndexFunc(addrs, func(a cloud.Address) bool { return a.AllocationID == rec.AllocationID }); i >= 0 && !addrs[i].Associated() {
			pick = addrs[i]
		}
	}
	tags := s.cn.Spec.IPAM.StaticIPTags
	if pick.AllocationID == "" {
		var ok bool
		if pick, ok = book.Reserve(s.cn.Name, tags); !ok {
			s.staticFailed(fmt.Errorf("%w: no free Elastic IP carries the static-ip-tags %s (EC2's view is refreshed every resync)",
				errStaticIPBlocked, inventory.TagsString(tags)), ReasonStaticIPUnavailable)
			return
		}
	}
	// Written before EC2 is asked: an association made by a process that
	// dies right after is then found, and released with the node.
	rec := &enipamv1alpha1.NodeStaticIP{AllocationID: pick.AllocationID, PublicIP: pick.PublicIP.String(), InstanceID: s.instanceID, ENIID: primary.ID}
	if err := s.r.recordStaticIP(ctx, s.routing, rec); err != nil {
		s.staticFailed(err, ReasonEC2Error)
		return
	}
	assoc, err := s.r.api.AssociateAddress(ctx, pick.AllocationID, primary.ID, primary.PrimaryIP, false)
	if err != nil {
		if errors.Is(err, cloud.ErrInUse) {
			// Taken meanwhile by someone else: learn where, pick again.
			_ = book.Refresh(ctx)
			s.requeueWithin(attachCheckInterval)
		}
		s.staticFailed(fmt.Errorf("associating Elastic IP %s with %s, %w", pick.PublicIP, primary.ID, err), ReasonEC2Error)
		return
	}
	book.RecordAssociated(pick.AllocationID, assoc, primary.ID, s.instanceID, primary.PrimaryIP)
	rec.AssociationID = assoc
	if err := s.r.recordStaticIP(ctx, s.routing, rec); err != nil {
		// The association is made and the record names it: the next
		// reconcile finds it on the primary address and records it.
		s.r.log.Info("recording a static IP's association failed", "node", s.cn.Name, "error", err)
	}
	s.cn.Status.IPAM.AssignedStaticIP = rec.PublicIP
	s.r.events.Eventf(s.cn, nil, "Normal", ReasonStaticIPAssigned, "StaticIP", "Elastic IP %s (%s) associated with %s on %s", rec.PublicIP, rec.AllocationID, primary.PrimaryIP, primary.ID)
	s.r.log.Info("static IP associated", "node", s.cn.Name, "instance", s.instanceID, "eni", primary.ID, "eip", rec.PublicIP)
}

// keepStaticIP reports whether the recorded static IP still serves the
// node: same instance, tags still asked for and still on the address,
// and the address not taken elsewhere.
func (s *nodeSync) keepStaticIP(rec *enipamv1alpha1.NodeStaticIP, addrs []cloud.Address, primary *cloud.ENI) bool {
	tags := s.cn.Spec.IPAM.StaticIPTags
	if len(tags) == 0 || rec.InstanceID != s.instanceID || s.routing.DeletionTimestamp != nil {
		return false
	}
	i := slices.IndexFunc(addrs, func(a cloud.Address) bool { return a.AllocationID == rec.AllocationID })
	if i < 0 || !cloud.MatchTags(addrs[i].Tags, tags) {
		return false
	}
	a := addrs[i]
	return !a.Associated() || (primary != nil && a.ENIID == primary.ID)
}

// staticFailed records why the node's static IP is not served: the
// operator-status (unless the pool has a reason of its own), an event
// once, and a slow retry — only a change (a freed or newly tagged Elastic
// IP, seen at the next resync) helps most of these.
func (s *nodeSync) staticFailed(err error, reason string) {
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
func (s *nodeSync) primaryENI() *cloud.ENI {
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

// recordStaticIP puts the finalizer and rec into the NodeRouting's spec,
// one write and only when needed; nr is updated in place. The spec is the
// operator's alone: the record names what the operator may disassociate,
// so no node may write it.
func (r *Reconciler) recordStaticIP(ctx context.Context, nr *enipamv1alpha1.NodeRouting, rec *enipamv1alpha1.NodeStaticIP) error {
	if controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) && sameJSON(nr.Spec.StaticIP, rec) {
		return nil
	}
	orig := nr.DeepCopy()
	nr.Spec.StaticIP = rec
	if err := r.client.Patch(ctx, nr, finalizerPatch(orig, controllerutil.AddFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer))); err != nil {
		return fmt.Errorf("recording static IP %s in NodeRouting %s, %w", rec.PublicIP, nr.Name, err)
	}
	return nil
}

// releaseStaticIP undoes the association the NodeRouting's record names,
// when EC2 still has the address on the recorded ENI (anything else was
// changed by someone else, and is left alone), then clears the record and
// the finalizer, in one write. EC2's view is described afresh first: the association
// may be younger than the cache.
func (r *Reconciler) releaseStaticIP(ctx context.Context, nr *enipamv1alpha1.NodeRouting) error {
	if rec := nr.Spec.StaticIP; rec != nil {
		book := r.inv.Addresses()
		if err := book.Refresh(ctx); err != nil {
			return fmt.Errorf("listing Elastic IPs, %w", err)
		}
		addrs, err := book.List(ctx)
		if err != nil {
			return fmt.Errorf("listing Elastic IPs, %w", err)
		}
		if i := slices.IndexFunc(addrs, func(a cloud.Address) bool { return a.AllocationID == rec.AllocationID }); i >= 0 {
			if a := addrs[i]; a.Associated() && a.ENIID == rec.ENIID {
				if err := r.api.DisassociateAddress(ctx, a.AssociationID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
					return fmt.Errorf("disassociating Elastic IP %s from %s, %w", a.PublicIP, a.ENIID, err)
				}
				book.RecordDisassociated(a.AllocationID)
				r.log.Info("static IP released", "node", nr.Name, "instance", rec.InstanceID, "eni", rec.ENIID, "eip", rec.PublicIP)
			}
		}
	}
	if controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) || nr.Spec.StaticIP != nil {
		orig := nr.DeepCopy()
		nr.Spec.StaticIP = nil
		if err := r.client.Patch(ctx, nr, finalizerPatch(orig, controllerutil.RemoveFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer))); err != nil {
			return fmt.Errorf("clearing the static IP of NodeRouting %s, %w", nr.Name, err)
		}
	}
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

// finalizerPatch is a merge patch from orig, under an optimistic lock when
// the finalizers changed: a merge patch replaces the whole list.
func finalizerPatch(orig client.Object, finalizersChanged bool) client.Patch {
	if finalizersChanged {
		return client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	}
	return client.MergeFrom(orig)
}
