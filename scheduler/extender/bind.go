package extender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// Bind binds a pod to the node kube-scheduler chose. A pod without a
// static address is bound at once. For a static-IP pod, the node is asked
// for first: the pod's StaticIPClaim gets spec.nodeName (the claim is
// created from the pod's StaticIPAnnotation if it has none); then Bind
// waits, up to BindTimeout, until that node's pool holds the claim's
// address stamped with the pod as owner and out of any release handshake
// (enipam-operator moved and stamped it; Cilium's agent will give the pod
// that address and no other), and only then creates the Binding. On a
// timeout the answer is an error naming where the placement stands, and
// kube-scheduler retries the pod; nothing is undone, so the retry finds
// the placement further along.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) *extenderv1.ExtenderBindingResult {
	owner := args.PodNamespace + "/" + args.PodName
	intent := e.intent(args.PodUID)
	defer e.intents.Delete(args.PodUID)
	claim, hasClaim := e.state.Claim(args.PodNamespace, args.PodName)
	if hasClaim || intent.Static != "" {
		start := e.now()
		err := e.placeStatic(ctx, args, intent, hasClaim, &claim)
		e.metrics.staticBinds.WithLabelValues(result(err)).Observe(e.now().Sub(start).Seconds())
		if err != nil {
			e.log.Info("bind: static address not placed", "pod", owner, "node", args.Node, "error", err)
			return &extenderv1.ExtenderBindingResult{Error: err.Error()}
		}
	}
	err := e.writer.SubResource("binding").Create(ctx,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: args.PodUID}},
		&corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: args.PodUID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
		})
	if err != nil {
		return &extenderv1.ExtenderBindingResult{Error: fmt.Sprintf("binding pod %s to %s: %v", owner, args.Node, err)}
	}
	if e.log.Enabled(ctx, slog.LevelDebug) {
		e.log.Debug("bound", "pod", owner, "node", args.Node, "static", hasClaim || intent.Static != "")
	}
	return &extenderv1.ExtenderBindingResult{}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// placeStatic asks for the pod's node in its claim and waits for the
// settled stamp there.
//
// The caches may lag the objects: another bind (or a user) may have
// asked the claim for another node since, or it may be being released;
// and a pool seen with the address settled on the node may have started
// to let it go since. So the claim is always asked for the node, even
// when the cache says it asks for it already, and the answer of that
// write, the claim as it is now, decides: a claim being released fails
// the bind at once instead of after BindTimeout, and a claim that asked
// for another node asks for this one. Then a stamp the cache shows
// settled on the node is confirmed by reading the node's CiliumNode from
// the apiserver, after that write: only a pool that holds it settled
// then, when the claim asks for the node, lets the pod be bound. Cost: a
// PATCH per static bind (no change, no write and no watch event, when
// the claim names the node already) and a GET of the node's CiliumNode
// and one of its NodeRouting each time the cache shows the address
// settled (once, unless the apiserver disagrees: then again at most every
// confirmInterval).
func (e *Extender) placeStatic(ctx context.Context, args *extenderv1.ExtenderBindingArgs, intent waiting.Intent, hasClaim bool, claim *room.Claim) error {
	owner := args.PodNamespace + "/" + args.PodName
	switch {
	case hasClaim && claim.Deleting:
		return releasing(owner)
	case hasClaim && claim.Invalid != "":
		return fmt.Errorf("static IP claim %s: %s", owner, claim.Invalid)
	case !hasClaim:
		c, err := claimFor(args, intent)
		if err != nil {
			return err
		}
		err = e.writer.Create(ctx, c)
		if err == nil {
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating static IP claim %s, %w", owner, err)
		}
		fallthrough
	default:
		patch := fmt.Appendf(nil, `{"spec":{"nodeName":%q}}`, args.Node)
		c := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName}}
		if err := e.writer.Patch(ctx, c, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("asking static IP claim %s for node %s, %w", owner, args.Node, err)
		}
		if c.DeletionTimestamp != nil {
			return releasing(owner)
		}
	}
	wait, cancel := context.WithTimeout(ctx, e.cfg.BindTimeout)
	defer cancel()
	var again <-chan time.Time // set while a confirmation waits to be retried
	for {
		ip, changed := e.state.Settled(args.Node, owner)
		if ip != "" && again == nil {
			ok, err := e.confirmSettled(wait, args.Node, owner)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
			again = time.After(confirmInterval)
		}
		// A claim the operator found invalid for its current spec, or
		// being released, will not be placed: say so now rather than at
		// the timeout.
		if c, ok := e.state.Claim(args.PodNamespace, args.PodName); ok {
			switch {
			case c.Deleting:
				return releasing(owner)
			case c.Checked && c.Invalid != "":
				return fmt.Errorf("static IP claim %s: %s", owner, c.Invalid)
			}
		}
		select {
		case <-changed:
		case <-again:
			again = nil
		case <-wait.Done():
			why := "enipam-operator has not placed it yet"
			if c, ok := e.state.Claim(args.PodNamespace, args.PodName); ok && c.Status != "" {
				why = c.Status
			}
			return fmt.Errorf("the static IP of pod %s is not on node %s after %s: %s", owner, args.Node, e.cfg.BindTimeout, why)
		}
	}
}

// confirmInterval is how often bind reads a node's CiliumNode again while
// its cache shows the pod's address settled there and the apiserver does
// not.
const confirmInterval = time.Second

// confirmSettled reads node's CiliumNode from the apiserver and reports
// whether its pool holds an entry stamped for owner, settled
// (room.Pool.Settled): out of any release handshake, on an ENI that holds
// it. The ENIs are the CiliumNode's status.eni.enis and the node's
// NodeRouting spec.enis, an ENI in both as spec.enis has it
// (room.Digest), so the NodeRouting is read too: status.eni.enis may be
// empty, or an older copy.
func (e *Extender) confirmSettled(ctx context.Context, node, owner string) (bool, error) {
	cn := &ciliumv2.CiliumNode{}
	switch err := e.writer.Get(ctx, client.ObjectKey{Name: node}, cn); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading node %s's CiliumNode for the static IP of pod %s, %w", node, owner, err)
	}
	nr := &enipamv1alpha1.NodeRouting{}
	switch err := e.writer.Get(ctx, client.ObjectKey{Name: node}, nr); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading node %s's NodeRouting for the static IP of pod %s, %w", node, owner, err)
	}
	return room.Digest(cn, nr.Spec.ENIs).Settled[owner] != "", nil
}

// claimFor is the claim a pod's StaticIPAnnotation asks for, with the
// Elastic IP its PublicIPAnnotation asks for.
func claimFor(args *extenderv1.ExtenderBindingArgs, intent waiting.Intent) (*enipamv1alpha1.StaticIPClaim, error) {
	c := &enipamv1alpha1.StaticIPClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName},
		Spec:       enipamv1alpha1.StaticIPClaimSpec{NodeName: args.Node, ReclaimPolicy: enipamv1alpha1.ReclaimRetain},
	}
	switch p := enipamv1alpha1.ReclaimPolicy(intent.Static); p {
	case "true":
	case enipamv1alpha1.ReclaimRetain, enipamv1alpha1.ReclaimWithStatefulSet, enipamv1alpha1.ReclaimAfterUnused:
		c.Spec.ReclaimPolicy = p
	default:
		return nil, fmt.Errorf("annotation %s=%q: want true, %s, %s or %s", enipamv1alpha1.StaticIPAnnotation, intent.Static,
			enipamv1alpha1.ReclaimRetain, enipamv1alpha1.ReclaimWithStatefulSet, enipamv1alpha1.ReclaimAfterUnused)
	}
	if c.Spec.ReclaimPolicy == enipamv1alpha1.ReclaimAfterUnused {
		ttl, err := time.ParseDuration(intent.UnusedTTL)
		if err != nil || ttl <= 0 {
			return nil, errors.Join(fmt.Errorf("annotation %s=%q: reclaim policy AfterUnused needs a positive duration", enipamv1alpha1.StaticIPUnusedTTLAnnotation, intent.UnusedTTL), err)
		}
		c.Spec.UnusedTTL = &metav1.Duration{Duration: ttl}
	}
	public, err := enipamv1alpha1.ParsePublicIPAnnotation(intent.PublicIP)
	if err != nil {
		return nil, err
	}
	c.Spec.PublicIP = public
	if c.Spec.ReclaimPolicy == enipamv1alpha1.ReclaimWithStatefulSet && intent.StatefulSet != "" {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: intent.StatefulSet, UID: intent.SetUID}}
	}
	return c, nil
}

// releasing is the bind's error for a pod whose static IP claim is being
// released.
func releasing(owner string) error {
	return fmt.Errorf("static IP claim %s is being released; the pod waits until it is gone", owner)
}
