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

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
)

// A claim's Elastic IP (spec.publicIP). The rules that keep it safe:
//
//   - it is associated only with the claim's address while that address
//     is Bound: stamped for the claim's pod in the pool of the node whose
//     ENI EC2 has it on, out of any handshake. Cilium's agent gives a
//     stamped entry to that pod only (pkg/ipam/crd.go,
//     nodeStore.allocateNext), so the public address never reaches
//     another pod;
//   - it follows the address: EC2 moves the association when the address
//     is reassigned to another ENI (AssignPrivateIpAddresses), and the
//     address leaves the old pool before that, so the old node can never
//     hand it out with the Elastic IP on it. Once Bound on the new node,
//     the association is checked there and made again if EC2 lost it;
//   - the claim's pool stamp stays while status.publicIP records anything
//     (claims.FromObject), so a released claim's address goes back to the
//     pool only after its Elastic IP left it;
//   - status.publicIP is written before AllocateAddress (the intent: EC2
//     takes no idempotency token for it, so an allocation whose answer
//     was lost is found again by its tags) and before AssociateAddress
//     (the ENI); an operator killed at any point resumes from the record
//     and EC2, and allocates or associates nothing twice.

// Event reasons of a claim's Elastic IP.
const (
	EventPublicIPAssociated  = "PublicIPAssociated"
	EventPublicIPReleased    = "PublicIPReleased"
	EventPublicIPUnavailable = "PublicIPUnavailable"
	EventPublicIPInvalid     = "PublicIPInvalid"
)

// errPublicIPNotNow marks a public IP step that waits for a change (a
// free Elastic IP, a quota raised, a user's fix): retried on the slow
// recheck, never in a loop.
var errPublicIPNotNow = errors.New("public IP not available now")

// publicIP runs the claim's Elastic IP step on the claim as writeStatus
// left it, and says how soon to look again.
func (r *Reconciler) publicIP(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (time.Duration, error) {
	req, rec := c.Spec.PublicIP, c.Status.PublicIP
	if req == nil {
		return r.releasePublicIP(ctx, c)
	}
	if c.Status.Phase == enipamv1alpha1.ClaimInvalid {
		return 0, nil // nothing moves for a claim that cannot be honoured
	}
	if w, ok := r.publicWait.Load(c.Owner()); ok {
		if w := w.(publicWait); w.generation == c.Generation && r.now().Before(w.until) {
			return w.until.Sub(r.now()), nil
		}
		r.publicWait.Delete(c.Owner())
	}
	book := r.inv.Addresses()
	addrs, err := book.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing Elastic IPs, %w", err)
	}
	if rec != nil && !fits(rec, req, addrs) {
		// The request changed: the old Elastic IP goes first.
		if _, err := r.releasePublicIP(ctx, c); err != nil {
			return 0, err
		}
		return time.Millisecond, nil
	}
	ip, _ := netip.ParseAddr(c.Status.Address)
	eni := c.Status.ENIID
	if c.Status.Phase != enipamv1alpha1.ClaimBound || !ip.IsValid() || eni == "" {
		return r.opts.Recheck, r.waitForAddress(ctx, c, addrs, ip)
	}
	if loc := r.inv.Locate(ip); loc.InPrefix {
		return r.opts.PublicIPRetry, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPUnavailable, EventPublicIPUnavailable,
			fmt.Sprintf("%s lies in a /28 prefix delegated to %s; EC2 maps Elastic IPs to secondary addresses only", ip, loc.ENI.ID))
	}
	if rec == nil || rec.AllocationID == "" {
		if rec, err = r.choosePublicIP(ctx, c, req, addrs, ip, eni); rec == nil || err != nil {
			return r.publicRetry(c, err)
		}
		if addrs, err = book.List(ctx); err != nil {
			return 0, fmt.Errorf("listing Elastic IPs, %w", err)
		}
	}
	a, ok := findAddress(addrs, rec.AllocationID)
	if !ok {
		// Younger than the cache, or released behind enipam's back.
		if err := book.Refresh(ctx); err != nil {
			return 0, fmt.Errorf("listing Elastic IPs, %w", err)
		}
		if addrs, err = book.List(ctx); err != nil {
			return 0, fmt.Errorf("listing Elastic IPs, %w", err)
		}
		if a, ok = findAddress(addrs, rec.AllocationID); !ok {
			r.events.Eventf(c, nil, corev1.EventTypeWarning, EventPublicIPUnavailable, "PublicIP", "Elastic IP %s (%s) no longer exists in EC2; taking another", rec.PublicIP, rec.AllocationID)
			return time.Millisecond, r.writePublicIP(ctx, c, nil, nil)
		}
	}
	switch {
	case a.Associated() && a.PrivateIP == ip && a.ENIID == eni:
		return r.opts.PublicIPRetry, r.associated(ctx, c, rec, a)
	case a.Associated() && a.PrivateIP == ip:
		// A cache has not seen the move EC2 made with the address: the
		// Elastic IPs', or the ENIs' behind status.eniID.
		if err := r.inv.RefreshENIs(ctx, []string{eni, a.ENIID}); err != nil {
			return 0, err
		}
		return time.Second, book.Refresh(ctx)
	case a.Associated():
		return r.takenElsewhere(ctx, c, req, rec, a)
	}
	if other, ok := onAddress(addrs, eni, ip); ok {
		return r.opts.PublicIPRetry, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPTaken, EventPublicIPInvalid,
			fmt.Sprintf("%s already has Elastic IP %s (%s), which is not the claim's; disassociate it to let enipam associate %s", ip, other.PublicIP, other.AllocationID, a.PublicIP))
	}
	return r.associate(ctx, c, rec, a, eni, ip)
}

// publicWait holds a claim's Elastic IP back until a retry.
type publicWait struct {
	generation int64
	until      time.Time
}

// publicRetry turns a failed choice into a requeue: when only a change
// helps, no EC2 call for the claim until PublicIPRetry has passed (or its
// spec changed), whatever wakes it meanwhile; with the controller's
// backoff otherwise.
func (r *Reconciler) publicRetry(c *enipamv1alpha1.StaticIPClaim, err error) (time.Duration, error) {
	if errors.Is(err, errPublicIPNotNow) {
		r.publicWait.Store(c.Owner(), publicWait{generation: c.Generation, until: r.now().Add(r.opts.PublicIPRetry)})
		return r.opts.PublicIPRetry, nil
	}
	if err == nil {
		return r.opts.PublicIPRetry, nil
	}
	return 0, err
}

// waitForAddress reports a claim whose address is not Bound yet: an
// Elastic IP associated with the address stays (it moves with it).
func (r *Reconciler) waitForAddress(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, addrs []cloud.Address, ip netip.Addr) error {
	rec := c.Status.PublicIP
	if rec != nil && rec.AllocationID != "" {
		if a, ok := findAddress(addrs, rec.AllocationID); ok && a.Associated() && a.PrivateIP == ip {
			return r.setPublicCondition(ctx, c, metav1.ConditionTrue, enipamv1alpha1.ReasonPublicIPAssociated,
				fmt.Sprintf("%s maps to %s, which is moving; EC2 moves the association with it", a.PublicIP, ip))
		}
	}
	return r.setPublicCondition(ctx, c, metav1.ConditionFalse, enipamv1alpha1.ReasonPublicIPWaiting,
		"the Elastic IP is associated once the claim's address is Bound on the node of its pod")
}

// choosePublicIP records the claim's Elastic IP: allocated (the intent
// written first), the one named, or a free one of the tagged pool. It
// returns nil when there is none now (the condition says why).
func (r *Reconciler) choosePublicIP(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, req *enipamv1alpha1.PublicIPRequest, addrs []cloud.Address, ip netip.Addr, eni string) (*enipamv1alpha1.ClaimPublicIP, error) {
	book := r.inv.Addresses()
	var pick cloud.Address
	allocated := false
	switch {
	case req.Allocate:
		var err error
		if pick, err = r.allocate(ctx, c); err != nil {
			return nil, err
		}
		allocated = true
	case req.AllocationID != "":
		a, ok := findAddress(addrs, req.AllocationID)
		if !ok {
			if err := book.Refresh(ctx); err != nil {
				return nil, fmt.Errorf("listing Elastic IPs, %w", err)
			}
			fresh, err := book.List(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing Elastic IPs, %w", err)
			}
			if a, ok = findAddress(fresh, req.AllocationID); !ok {
				return nil, errors.Join(errPublicIPNotNow, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPNotFound, EventPublicIPInvalid,
					fmt.Sprintf("Elastic IP %s does not exist in the account and region", req.AllocationID)))
			}
		}
		if a.Associated() && a.PrivateIP != ip {
			return nil, errors.Join(errPublicIPNotNow, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPTaken, EventPublicIPInvalid,
				fmt.Sprintf("Elastic IP %s (%s) is associated with %s on %s; disassociate it to let enipam use it", a.PublicIP, a.AllocationID, a.PrivateIP, a.ENIID)))
		}
		pick = a
	default:
		if a, ok := onAddress(addrs, eni, ip); ok && cloud.MatchTags(a.Tags, req.PoolTags) {
			pick = a // associated by hand, or by a life that lost its record
			break
		}
		holder := "claim " + c.Owner()
		defer book.Unreserve(holder)
		a, ok := book.Reserve(holder, req.PoolTags)
		if !ok {
			return nil, errors.Join(errPublicIPNotNow, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPUnavailable, EventPublicIPUnavailable,
				fmt.Sprintf("no free Elastic IP carries the tags %s (EC2's view is refreshed every resync)", inventory.TagsString(req.PoolTags))))
		}
		pick = a
	}
	rec := &enipamv1alpha1.ClaimPublicIP{AllocationID: pick.AllocationID, PublicIP: pick.PublicIP.String(), Allocated: allocated}
	if err := r.writePublicIP(ctx, c, rec, nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// allocate returns the Elastic IP allocated for the claim: one a life
// that lost AllocateAddress' answer allocated, found by its tags after
// the intent was recorded, or a new one.
func (r *Reconciler) allocate(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (cloud.Address, error) {
	if c.Status.PublicIP == nil {
		// The intent, before EC2 is asked.
		if err := r.writePublicIP(ctx, c, &enipamv1alpha1.ClaimPublicIP{Allocated: true}, nil); err != nil {
			return cloud.Address{}, err
		}
	}
	book := r.inv.Addresses()
	if err := book.Refresh(ctx); err != nil {
		return cloud.Address{}, fmt.Errorf("listing Elastic IPs, %w", err)
	}
	if found := book.Tagged(r.claimTags(c)); len(found) > 0 {
		return found[0], nil
	}
	tags := r.claimTags(c)
	tags[cloud.TagManagedBy] = cloud.ManagedBy
	tags[cloud.TagCreatedAt] = r.now().UTC().Format(time.RFC3339)
	a, err := r.api.AllocateAddress(ctx, tags)
	switch {
	case errors.Is(err, cloud.ErrAddressLimit), errors.Is(err, cloud.ErrUnauthorized):
		return cloud.Address{}, errors.Join(errPublicIPNotNow, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPUnavailable, EventPublicIPUnavailable,
			fmt.Sprintf("allocating an Elastic IP: %v", err)))
	case err != nil:
		return cloud.Address{}, fmt.Errorf("allocating an Elastic IP for claim %s, %w", c.Owner(), err)
	}
	book.RecordAllocated(a)
	r.log.Info("Elastic IP allocated", "claim", c.Owner(), "eip", a.PublicIP, "allocation", a.AllocationID)
	return a, nil
}

// associate records the ENI, then associates the Elastic IP with the
// claim's address on it.
func (r *Reconciler) associate(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, rec *enipamv1alpha1.ClaimPublicIP, a cloud.Address, eni string, ip netip.Addr) (time.Duration, error) {
	next := *rec
	next.ENIID, next.AssociationID = eni, ""
	if err := r.writePublicIP(ctx, c, &next, nil); err != nil {
		return 0, err
	}
	book := r.inv.Addresses()
	assoc, err := r.api.AssociateAddress(ctx, a.AllocationID, eni, ip, false)
	switch {
	case errors.Is(err, cloud.ErrInUse), errors.Is(err, cloud.ErrNotFound):
		// Taken meanwhile, or the ENI not seen yet by EC2's describes:
		// look again before the next try.
		_ = book.Refresh(ctx)
		_ = r.inv.RefreshENIs(ctx, []string{eni})
		r.log.Info("associating an Elastic IP was refused; looking again", "claim", c.Owner(), "eip", a.PublicIP, "eni", eni, "ip", ip, "error", err)
		return time.Second, nil
	case errors.Is(err, cloud.ErrInvalid), errors.Is(err, cloud.ErrUnauthorized):
		// The address is not where the cache says, or EC2 will not map
		// it: said once, tried again after PublicIPRetry.
		_ = r.inv.RefreshENIs(ctx, []string{eni})
		return r.publicRetry(c, errors.Join(errPublicIPNotNow, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPUnavailable, EventPublicIPUnavailable,
			fmt.Sprintf("associating Elastic IP %s with %s on %s: %v", a.PublicIP, ip, eni, err))))
	case err != nil:
		return 0, fmt.Errorf("associating Elastic IP %s with %s on %s, %w", a.PublicIP, ip, eni, err)
	}
	book.RecordAssociated(a.AllocationID, assoc, eni, "", ip)
	a.AssociationID, a.ENIID, a.PrivateIP = assoc, eni, ip
	r.log.Info("Elastic IP associated", "claim", c.Owner(), "eip", a.PublicIP, "eni", eni, "ip", ip)
	return r.opts.PublicIPRetry, r.associated(ctx, c, &next, a)
}

// associated records an association EC2 shows on the claim's address
// on the ENI it is on.
func (r *Reconciler) associated(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, rec *enipamv1alpha1.ClaimPublicIP, a cloud.Address) error {
	next := *rec
	next.ENIID, next.AssociationID = a.ENIID, a.AssociationID
	old := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimPublicIPReady)
	cond := &metav1.Condition{Type: enipamv1alpha1.ClaimPublicIPReady, Status: metav1.ConditionTrue, Reason: enipamv1alpha1.ReasonPublicIPAssociated,
		Message: fmt.Sprintf("%s maps to %s on %s", a.PublicIP, a.PrivateIP, a.ENIID)}
	if err := r.writePublicIP(ctx, c, &next, cond); err != nil {
		return err
	}
	if old == nil || old.Status != metav1.ConditionTrue || old.Message != cond.Message {
		r.events.Eventf(c, nil, corev1.EventTypeNormal, EventPublicIPAssociated, "PublicIP", "Elastic IP %s (%s) maps to %s on %s", a.PublicIP, a.AllocationID, a.PrivateIP, a.ENIID)
	}
	return nil
}

// takenElsewhere handles the claim's Elastic IP associated with another
// address than the claim's: someone else's doing. A pool address is
// given up (another is taken); a named or allocated one is reported and
// left alone.
func (r *Reconciler) takenElsewhere(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, req *enipamv1alpha1.PublicIPRequest, rec *enipamv1alpha1.ClaimPublicIP, a cloud.Address) (time.Duration, error) {
	msg := fmt.Sprintf("Elastic IP %s (%s) is associated with %s on %s, not with the claim's address", a.PublicIP, a.AllocationID, a.PrivateIP, a.ENIID)
	if len(req.PoolTags) > 0 && !rec.Allocated {
		r.events.Eventf(c, nil, corev1.EventTypeWarning, EventPublicIPUnavailable, "PublicIP", "%s; taking another of the pool", msg)
		return time.Millisecond, r.writePublicIP(ctx, c, nil, nil)
	}
	return r.opts.PublicIPRetry, r.publicFailed(ctx, c, enipamv1alpha1.ReasonPublicIPTaken, EventPublicIPInvalid, msg+"; disassociate it to let enipam associate it again")
}

// claimTags are the tags that name the claim on an Elastic IP allocated
// for it.
func (r *Reconciler) claimTags(c *enipamv1alpha1.StaticIPClaim) map[string]string {
	return map[string]string{cloud.TagCluster: r.opts.Cluster, cloud.TagClaim: c.Owner(), cloud.TagClaimUID: string(c.UID)}
}

// fits reports whether the recorded Elastic IP is what the request asks
// for.
func fits(rec *enipamv1alpha1.ClaimPublicIP, req *enipamv1alpha1.PublicIPRequest, addrs []cloud.Address) bool {
	switch {
	case req.Allocate:
		return rec.Allocated
	case req.AllocationID != "":
		return !rec.Allocated && rec.AllocationID == req.AllocationID
	}
	if rec.Allocated {
		return false
	}
	a, ok := findAddress(addrs, rec.AllocationID)
	return !ok || cloud.MatchTags(a.Tags, req.PoolTags)
}

func findAddress(addrs []cloud.Address, allocationID string) (cloud.Address, bool) {
	i := slices.IndexFunc(addrs, func(a cloud.Address) bool { return a.AllocationID == allocationID })
	if i < 0 {
		return cloud.Address{}, false
	}
	return addrs[i], true
}

// onAddress finds the Elastic IP associated with ip on the ENI.
func onAddress(addrs []cloud.Address, eni string, ip netip.Addr) (cloud.Address, bool) {
	i := slices.IndexFunc(addrs, func(a cloud.Address) bool { return a.Associated() && a.ENIID == eni && a.PrivateIP == ip })
	if i < 0 {
		return cloud.Address{}, false
	}
	return addrs[i], true
}
