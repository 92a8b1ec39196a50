package claimcontroller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
)

// releasePublicIP undoes what status.publicIP records: the association
// with the claim's address goes, then an Elastic IP enipam allocated for
// the claim is released to AWS (with any other carrying the claim's tags:
// an allocation whose answer a killed life lost); one of the user's stays
// allocated. Only then is the record cleared, which lets the pool
// controller return the address to the pool. EC2 is described afresh
// first: the association may be younger than the cache.
func (r *Reconciler) releasePublicIP(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (after time.Duration, err error) {
	rec := c.Status.PublicIP
	if rec == nil {
		return 0, r.writePublicIP(ctx, c, nil, nil)
	}
	defer func() {
		if err != nil && c.Status.PublicIP != nil {
			// Said in the condition; retried with the controller's backoff.
			_ = r.setPublicCondition(ctx, c, metav1.ConditionFalse, enipamv1alpha1.ReasonPublicIPReleasing, err.Error())
		}
	}()
	book := r.inv.Addresses()
	if err := book.Refresh(ctx); err != nil {
		return 0, fmt.Errorf("listing Elastic IPs, %w", err)
	}
	addrs, err := book.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing Elastic IPs, %w", err)
	}
	var ids []string
	if rec.AllocationID != "" {
		ids = append(ids, rec.AllocationID)
	}
	if rec.Allocated {
		for _, a := range book.Tagged(r.claimTags(c)) {
			if !slices.Contains(ids, a.AllocationID) {
				ids = append(ids, a.AllocationID)
			}
		}
	}
	addr := c.Spec.Address
	if addr == "" {
		addr = c.Status.Address
	}
	ip, _ := netip.ParseAddr(addr)
	for _, id := range ids {
		a, ok := findAddress(addrs, id)
		if !ok {
			continue
		}
		// A user's Elastic IP mapped to another address is in another
		// use now: left as it is.
		if a.Associated() && (rec.Allocated || a.PrivateIP == ip) {
			if err := r.api.DisassociateAddress(ctx, a.AssociationID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
				return 0, fmt.Errorf("disassociating Elastic IP %s from %s, %w", a.PublicIP, a.PrivateIP, err)
			}
			book.RecordDisassociated(id)
			r.log.Info("Elastic IP disassociated", "claim", c.Owner(), "eip", a.PublicIP, "eni", a.ENIID, "ip", a.PrivateIP)
		}
		if !rec.Allocated {
			r.events.Eventf(c, nil, corev1.EventTypeNormal, EventPublicIPReleased, "PublicIP", "Elastic IP %s (%s) disassociated; it stays allocated", a.PublicIP, id)
			continue
		}
		switch err := r.api.ReleaseAddress(ctx, id); {
		case err == nil, errors.Is(err, cloud.ErrNotFound):
			book.RecordReleased(id)
			r.events.Eventf(c, nil, corev1.EventTypeNormal, EventPublicIPReleased, "PublicIP", "Elastic IP %s (%s) released to AWS", a.PublicIP, id)
			r.log.Info("Elastic IP released", "claim", c.Owner(), "eip", a.PublicIP, "allocation", id)
		case errors.Is(err, cloud.ErrInUse):
			// Associated again since the describe: look again.
			return time.Second, book.Refresh(ctx)
		default:
			return 0, fmt.Errorf("releasing Elastic IP %s, %w", a.PublicIP, err)
		}
	}
	return 0, r.writePublicIP(ctx, c, nil, nil)
}

// writePublicIP writes rec into status.publicIP and cond (when given)
// as the PublicIPReady condition, with an optimistic lock: a record is
// written before EC2 is asked, so it must land on the claim as read (a
// claim deleted meanwhile is read again first). Without a request or
// with the claim going, the condition goes with the record. c is updated
// in place; nothing is written when nothing changed.
func (r *Reconciler) writePublicIP(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, rec *enipamv1alpha1.ClaimPublicIP, cond *metav1.Condition) error {
	orig := c.DeepCopy()
	c.Status.PublicIP = rec
	switch {
	case cond != nil:
		cond.Type, cond.ObservedGeneration = enipamv1alpha1.ClaimPublicIPReady, c.Generation
		meta.SetStatusCondition(&c.Status.Conditions, *cond)
	case rec == nil && (c.Spec.PublicIP == nil || c.DeletionTimestamp != nil):
		meta.RemoveStatusCondition(&c.Status.Conditions, enipamv1alpha1.ClaimPublicIPReady)
	}
	if sameStatus(&orig.Status, &c.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, c, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		*c = *orig
		return fmt.Errorf("recording the public IP of claim %s, %w", c.Owner(), err)
	}
	return nil
}

// setPublicCondition sets the PublicIPReady condition, keeping the
// record.
func (r *Reconciler) setPublicCondition(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, status metav1.ConditionStatus, reason, msg string) error {
	return r.writePublicIP(ctx, c, c.Status.PublicIP, &metav1.Condition{Status: status, Reason: reason, Message: msg})
}

// publicFailed reports why the claim has no Elastic IP on its address:
// the condition, and a Warning event when the reason or message is new.
// Nothing is moved.
func (r *Reconciler) publicFailed(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, reason, event, msg string) error {
	old := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimPublicIPReady)
	if old == nil || old.Reason != reason || old.Message != msg {
		r.events.Eventf(c, nil, corev1.EventTypeWarning, event, "PublicIP", "%s: %s", reason, msg)
		r.log.Info("public IP not served", "claim", c.Owner(), "reason", reason, "why", msg)
	}
	return r.setPublicCondition(ctx, c, metav1.ConditionFalse, reason, msg)
}
