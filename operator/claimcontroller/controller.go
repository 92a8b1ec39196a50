// Package claimcontroller keeps StaticIPClaims: it checks what users ask
// (an address in a subnet enipam serves, held by nobody else), records
// where the address is (status: address, subnet, zone, node, ENI, phase,
// the Ready condition with the pool controller's word on a placement
// under way, read from the claim's status.placement, the one status field
// it does not write), serves the claim's Elastic IP (spec.publicIP:
// allocated, associated with the address, released), applies the
// reclaim policies,
// and holds its finalizer until no pool stamps the address any more. It
// never writes a CiliumNode, and its only EC2 calls are the claims'
// Elastic IPs: moving and stamping addresses is the pool controller's,
// the one writer of every pool (package poolcontroller).
package claimcontroller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
)

// Options tune the controller.
type Options struct {
	// Cluster names the cluster in the tags of the ENIs the operator
	// creates: an address on such an ENI is not someone else's.
	Cluster string
	// Recheck is how often a claim that waits (an address held by
	// someone else, a placement under way) is looked at again without
	// any event.
	Recheck time.Duration
	// PublicIPRetry is how often a claim's Elastic IP is checked again
	// when it is associated, or when only a change can help (an empty
	// pool, the account's quota, an address taken by someone else).
	PublicIPRetry time.Duration
	// Pods reads single pods, uncached (the manager's API reader): the
	// operator keeps no cache of a cluster's pods, whose size grows with
	// the cluster. A claim whose pod holds its address in a pool needs no
	// read; the others are read when their claim is looked at. Nil reads
	// through the controller's client.
	Pods client.Reader
	// Now is the controller's clock; nil is time.Now. A simulation that
	// calls Reconcile step by step drives its own.
	Now func() time.Time
	// Term names the operator's term: the pool controller's notes
	// (status.placement) are acted on only when written in this term
	// (poolcontroller.Options.Term), never when left by an earlier one.
	Term string
}

// Reconciler serves StaticIPClaims. Build it with New.
type Reconciler struct {
	client client.Client
	api    cloud.API
	inv    *inventory.Inventory
	events events.EventRecorder
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	// wrongAddress counts the pods found with another address than their
	// claim's (checkPodAddress).
	wrongAddress atomic.Int64
	// publicWait: claim owner → when its Elastic IP, refused for want of
	// a change (an empty pool, the quota), is tried again, and for which
	// generation of the claim's spec.
	publicWait sync.Map
	// phases times each claim's phase for the metrics (Collect).
	phases phaseClock
}

// New returns a reconciler calling api for the claims' Elastic IPs; it
// does nothing until registered with a manager.
func New(c client.Client, api cloud.API, inv *inventory.Inventory, rec events.EventRecorder, opts Options, log *slog.Logger) *Reconciler {
	if opts.Recheck <= 0 {
		opts.Recheck = 10 * time.Second
	}
	if opts.PublicIPRetry <= 0 {
		opts.PublicIPRetry = time.Minute
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	return &Reconciler{client: c, api: api, inv: inv, events: rec, opts: opts, log: log, now: now}
}

// Event reasons on claims; stable, for alerting.
const (
	EventInvalid  = "Invalid"
	EventPlaced   = "Placed"
	EventReleased = "Released"
)

// Reconcile serves one claim.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &enipamv1alpha1.StaticIPClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.phases.forget(req.Namespace + "/" + req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	select {
	case <-r.inv.Synced():
	default:
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if c.DeletionTimestamp != nil {
		return r.release(ctx, c)
	}
	if !controllerutil.ContainsFinalizer(c, enipamv1alpha1.StaticIPClaimFinalizer) {
		orig := c.DeepCopy()
		controllerutil.AddFinalizer(c, enipamv1alpha1.StaticIPClaimFinalizer)
		if err := r.client.Patch(ctx, c, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer of claim %s, %w", c.Owner(), err)
		}
	}
	// The pod is looked at once per reconcile: the reclaim policy and the
	// status judge on the same look, so a pod seen by one is not missed
	// by the other.
	pod := &podLook{}
	if done, err := r.reclaim(ctx, c, pod); done || err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.writeStatus(ctx, c, pod)
	if err != nil {
		return res, err
	}
	// The unused clock as written (it may have started just now) says
	// when the claim is looked at again, whatever else did or did not.
	var after time.Duration
	if left, ok := unusedLeft(c, r.now()); ok {
		after = max(left, 100*time.Millisecond)
	}
	public, err := r.publicIP(ctx, c)
	for _, d := range []time.Duration{after, public} {
		if d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d
		}
	}
	return res, err
}

// writeStatus computes the claim's status and writes it when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, pod *podLook) (ctrl.Result, error) {
	st, requeue := r.status(ctx, c, pod)
	if stamps, err := r.stampedOn(ctx, c.Owner()); err == nil && st.Phase != enipamv1alpha1.ClaimInvalid {
		r.checkPodAddress(ctx, c, st, stamps)
	}
	r.tell(c, st)
	r.phases.observe(c.Owner(), st.Phase, r.now())
	if sameStatus(&c.Status, st) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	orig := c.DeepCopy()
	c.Status = *st
	if err := r.client.Status().Patch(ctx, c, client.MergeFrom(orig)); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing the status of claim %s, %w", c.Owner(), err)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// tell emits an event when the claim turns Invalid (for a new reason) or
// its address lands on a new node.
func (r *Reconciler) tell(c *enipamv1alpha1.StaticIPClaim, st *enipamv1alpha1.StaticIPClaimStatus) {
	old := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
	cur := meta.FindStatusCondition(st.Conditions, enipamv1alpha1.ClaimReady)
	if cur == nil {
		return
	}
	changed := old == nil || old.Reason != cur.Reason || old.Message != cur.Message
	switch {
	case st.Phase == enipamv1alpha1.ClaimInvalid && changed:
		r.events.Eventf(c, nil, corev1.EventTypeWarning, EventInvalid, "Check", "%s: %s", cur.Reason, cur.Message)
	case st.Phase == enipamv1alpha1.ClaimBound && (c.Status.Phase != enipamv1alpha1.ClaimBound || c.Status.NodeName != st.NodeName):
		r.events.Eventf(c, nil, corev1.EventTypeNormal, EventPlaced, "Place", "%s", cur.Message)
	}
}

// release returns a deleted claim's address to the pool: its Elastic IP
// is released first, then the pool controller removes its stamp (the
// claim reads as released), and the finalizer goes once no pool stamps
// it.
func (r *Reconciler) release(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, enipamv1alpha1.StaticIPClaimFinalizer) {
		r.phases.forget(c.Owner())
		return ctrl.Result{}, nil
	}
	r.phases.observe(c.Owner(), enipamv1alpha1.ClaimReleasing, r.now())
	// The Elastic IP leaves the address before the address leaves the
	// claim: the pool keeps the stamp while status.publicIP records one.
	if after, err := r.releasePublicIP(ctx, c); err != nil || c.Status.PublicIP != nil {
		return ctrl.Result{RequeueAfter: max(after, time.Second)}, err
	}
	nodes, err := r.stampedOn(ctx, c.Owner())
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(nodes) > 0 {
		st := c.Status.DeepCopy()
		st.Phase = enipamv1alpha1.ClaimReleasing
		setReady(st, metav1.ConditionFalse, enipamv1alpha1.ReasonReleasing, fmt.Sprintf("%s goes back to node %s's pool", st.Address, nodes[0].node))
		if !sameStatus(&c.Status, st) {
			orig := c.DeepCopy()
			c.Status = *st
			if err := r.client.Status().Patch(ctx, c, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	orig := c.DeepCopy()
	controllerutil.RemoveFinalizer(c, enipamv1alpha1.StaticIPClaimFinalizer)
	if err := r.client.Patch(ctx, c, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer of claim %s, %w", c.Owner(), err)
	}
	r.phases.forget(c.Owner())
	r.log.Info("static address released", "claim", c.Owner(), "ip", c.Status.Address)
	return ctrl.Result{}, nil
}

// reclaim applies the claim's reclaim policy: it deletes the claim when
// the policy releases the address (done). How long until it may is
// unusedLeft's, read from the status the reconcile writes.
func (r *Reconciler) reclaim(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, pod *podLook) (done bool, err error) {
	switch c.Spec.ReclaimPolicy {
	case enipamv1alpha1.ReclaimWithStatefulSet:
		why, err := r.statefulSetReleases(ctx, c)
		if err != nil || why == "" {
			return false, err
		}
		return true, r.drop(ctx, c, why)
	case enipamv1alpha1.ReclaimAfterUnused:
		if left, ok := unusedLeft(c, r.now()); !ok || left > 0 {
			return false, nil
		}
		if exists, err := r.lookAtPod(ctx, c, pod); err != nil || exists {
			return false, err
		}
		return true, r.drop(ctx, c, fmt.Sprintf("no pod %s for %s", c.Owner(), c.Spec.UnusedTTL.Duration))
	}
	return false, nil
}

// unusedLeft is how long an AfterUnused claim's address stays unused
// before it is released (<= 0: it may be now), by the clock its status
// records (status.lastUsed: when the claim was first seen without a pod);
// ok is false when no clock runs.
func unusedLeft(c *enipamv1alpha1.StaticIPClaim, now time.Time) (left time.Duration, ok bool) {
	if c.Spec.ReclaimPolicy != enipamv1alpha1.ReclaimAfterUnused || c.Spec.UnusedTTL == nil || c.Status.LastUsed == nil {
		return 0, false
	}
	return c.Status.LastUsed.Add(c.Spec.UnusedTTL.Duration).Sub(now), true
}

// drop deletes a claim its policy released.
func (r *Reconciler) drop(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, why string) error {
	r.events.Eventf(c, nil, corev1.EventTypeNormal, EventReleased, "Reclaim", "%s (%s): %s", c.Status.Address, c.Spec.ReclaimPolicy, why)
	r.log.Info("reclaim policy releases a static address", "claim", c.Owner(), "ip", c.Status.Address, "policy", c.Spec.ReclaimPolicy, "why", why)
	if err := r.client.Delete(ctx, c, client.Preconditions{UID: &c.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting claim %s, %w", c.Owner(), err)
	}
	return nil
}

// statefulSetReleases says why a WithStatefulSet claim's address goes:
// its StatefulSet is gone, or scaled below the pod's ordinal; "" when
// it stays. A claim of a StatefulSet it has no owner reference to yet
// gets one, so deleting the StatefulSet deletes the claim.
func (r *Reconciler) statefulSetReleases(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (string, error) {
	set, ordinal, ok := statefulSetOf(c.Name)
	if !ok {
		return "", nil
	}
	sts := &appsv1.StatefulSet{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: set}, sts)
	ref := metav1.GetControllerOf(c)
	for i := range c.OwnerReferences {
		if c.OwnerReferences[i].Kind == "StatefulSet" {
			ref = &c.OwnerReferences[i]
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		if ref != nil && ref.Name == set {
			return fmt.Sprintf("StatefulSet %s is gone", set), nil
		}
		return "", nil
	case err != nil:
		return "", err
	case ref != nil && ref.UID != sts.UID:
		return fmt.Sprintf("StatefulSet %s was replaced", set), nil
	}
	if ref == nil {
		orig := c.DeepCopy()
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
		})
		if err := r.client.Patch(ctx, c, client.MergeFrom(orig)); err != nil {
			return "", fmt.Errorf("adding the owner reference of claim %s, %w", c.Owner(), err)
		}
	}
	start := int32(0)
	if sts.Spec.Ordinals != nil {
		start = sts.Spec.Ordinals.Start
	}
	replicas := ptr.Deref(sts.Spec.Replicas, 1)
	if ordinal < int(start) || ordinal >= int(start+replicas) {
		return fmt.Sprintf("StatefulSet %s has %d replicas from ordinal %d", set, replicas, start), nil
	}
	return "", nil
}

// podLook is what one reconcile learned of its claim's pod.
type podLook struct {
	asked, exists bool
	err           error
}

// lookAtPod reports whether a pod of the claim's name exists, asking the
// apiserver on the reconcile's first look only (look).
func (r *Reconciler) lookAtPod(ctx context.Context, c *enipamv1alpha1.StaticIPClaim, look *podLook) (bool, error) {
	if !look.asked {
		look.exists, look.err = r.podExists(ctx, c)
		look.asked = true
	}
	return look.exists, look.err
}

// podExists reports whether a pod of the claim's name exists, read
// uncached (Options.Pods).
func (r *Reconciler) podExists(ctx context.Context, c *enipamv1alpha1.StaticIPClaim) (bool, error) {
	reader := r.opts.Pods
	if reader == nil {
		reader = r.client
	}
	pod := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	err := reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, pod)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// stamp is a pool entry stamped with a claim's owner.
type stamp struct {
	node, ip  string
	eni       string
	handshake bool
	// used: Cilium's agent lists it held by the claim's pod; other: held
	// by another pod (it got the entry before the agent saw the stamp; the
	// pool controller drops such a stamp).
	used, other bool
}

// stampedOn lists the pool entries stamped with owner.
func (r *Reconciler) stampedOn(ctx context.Context, owner string) ([]stamp, error) {
	var nodes ciliumv2.CiliumNodeList
	if err := r.client.List(ctx, &nodes, client.MatchingFields{claims.IndexPoolOwner: owner}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []stamp
	for i := range nodes.Items {
		cn := &nodes.Items[i]
		for ip, e := range cn.Spec.IPAM.Pool {
			if e.Owner == owner {
				_, hs := cn.Status.IPAM.ReleaseIPs[ip]
				by := cn.Status.IPAM.Used[ip].Owner
				out = append(out, stamp{node: cn.Name, ip: ip, eni: e.Resource, handshake: hs, used: by == owner, other: by != "" && by != owner})
			}
		}
	}
	return out, nil
}
