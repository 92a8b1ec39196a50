package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// StatusReconciler keeps every ENIPolicy's status true: whether it is
// accepted, how many nodes it governs, and which other policies override
// it on some nodes. It recomputes all policies at once (one queue key),
// since one label change can move a node between policies.
type StatusReconciler struct {
	client client.Client
	events events.EventRecorder
	// problems are the pool controller's word on nodes without a family
	// their policy asks for (nil: none known).
	problems *FamilyProblems
}

// WithFamilyProblems has the IPFamilies conditions say which nodes get
// no address of a family their policy asks for, as problems tells.
func (r *StatusReconciler) WithFamilyProblems(problems *FamilyProblems) *StatusReconciler {
	r.problems = problems
	return r
}

// NewStatusReconciler returns the status controller.
func NewStatusReconciler(c client.Client, rec events.EventRecorder) *StatusReconciler {
	return &StatusReconciler{client: c, events: rec}
}

var allPolicies = reconcile.Request{NamespacedName: types.NamespacedName{Name: "all"}}

// SetupWithManager registers the controller.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{allPolicies}
	})
	labelsChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	}}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("enipolicy-status").
		Watches(&enipamv1alpha1.ENIPolicy{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, all, builder.WithPredicates(labelsChanged))
	if r.problems != nil {
		b = b.WatchesRawSource(source.Channel(r.problems.wake, all))
	}
	return b.Complete(r)
}

// Reconcile recomputes every policy's status.
func (r *StatusReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var policies enipamv1alpha1.ENIPolicyList
	if err := r.client.List(ctx, &policies); err != nil {
		return reconcile.Result{}, err
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, err
	}
	governed := map[string]int32{}
	overriddenBy := map[string]map[string]int{} // loser → winner → nodes
	for i := range nodes.Items {
		win, others := Select(policies.Items, nodes.Items[i].Labels)
		if win == nil {
			continue
		}
		governed[win.Name]++
		for _, o := range others {
			if overriddenBy[o.Name] == nil {
				overriddenBy[o.Name] = map[string]int{}
			}
			overriddenBy[o.Name][win.Name]++
		}
	}
	for i := range policies.Items {
		p := &policies.Items[i]
		next := p.DeepCopy()
		next.Status.ObservedGeneration = p.Generation
		next.Status.MatchedNodes = governed[p.Name]
		accepted := metav1.Condition{Type: enipamv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
			Reason: enipamv1alpha1.ReasonValid, Message: "in use for the nodes it matches", ObservedGeneration: p.Generation}
		if p.Spec.NodeSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector); err != nil {
				accepted.Status, accepted.Reason = metav1.ConditionFalse, enipamv1alpha1.ReasonInvalidSelector
				accepted.Message = fmt.Sprintf("nodeSelector: %v", err)
			}
		}
		apimeta.SetStatusCondition(&next.Status.Conditions, accepted)
		families := FamiliesCondition(p)
		if n, first := r.problems.Of(p.Name); n > 0 && families.Status == metav1.ConditionTrue && enipamv1alpha1.WantsIPv6(p.Spec.IPFamilies) {
			families.Status, families.Reason, families.Message = metav1.ConditionFalse, enipamv1alpha1.ReasonIPv6Unavailable, summary(n, first)
		}
		apimeta.SetStatusCondition(&next.Status.Conditions, families)
		conflict := metav1.Condition{Type: enipamv1alpha1.ConditionConflict, Status: metav1.ConditionFalse,
			Reason: enipamv1alpha1.ReasonNoOverlap, Message: "no other policy overrides this one", ObservedGeneration: p.Generation}
		if winners := overriddenBy[p.Name]; len(winners) > 0 {
			var parts []string
			for _, w := range slices.Sorted(maps.Keys(winners)) {
				parts = append(parts, fmt.Sprintf("%s on %d nodes", w, winners[w]))
			}
			conflict.Status, conflict.Reason = metav1.ConditionTrue, enipamv1alpha1.ReasonOverlap
			conflict.Message = "overridden by " + strings.Join(parts, ", ") + " (lower priority, then name, wins)"
		}
		apimeta.SetStatusCondition(&next.Status.Conditions, conflict)
		if equality.Semantic.DeepEqual(p.Status, next.Status) {
			continue
		}
		if was := apimeta.FindStatusCondition(p.Status.Conditions, enipamv1alpha1.ConditionConflict); conflict.Status == metav1.ConditionTrue &&
			(was == nil || was.Message != conflict.Message) {
			r.events.Eventf(p, nil, corev1.EventTypeWarning, "PolicyConflict", "Select", "%s", conflict.Message)
		}
		if err := r.client.Status().Patch(ctx, next, client.MergeFrom(p)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// FamiliesCondition is the policy's IPFamilies condition from its spec
// alone: whether the pools carry the families its ipFamilies asks for.
// An invalid value leaves the pools IPv4 as if unset. The status
// controller turns it False (IPv6Unavailable) when some of the policy's
// nodes can get no IPv6 (FamilyProblems); a node's IPv4 is never failed
// for its IPv6.
func FamiliesCondition(p *enipamv1alpha1.ENIPolicy) metav1.Condition {
	c := metav1.Condition{Type: enipamv1alpha1.ConditionIPFamilies, Status: metav1.ConditionTrue,
		Reason: enipamv1alpha1.ReasonFamiliesPooled, Message: "pools carry IPv4", ObservedGeneration: p.Generation}
	families := p.Spec.IPFamilies
	switch err := enipamv1alpha1.ValidateIPFamilies(families); {
	case err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, enipamv1alpha1.ReasonInvalidFamilies
		c.Message = err.Error() + "; pools carry IPv4 as with ipFamilies unset"
	case enipamv1alpha1.WantsIPv6(families) && slices.Contains(families, enipamv1alpha1.IPv4Family):
		c.Message = "pools carry IPv4 and a window of an IPv6 /80 on each node's primary ENI"
	case enipamv1alpha1.WantsIPv6(families):
		c.Message = "pools carry a window of an IPv6 /80 on each node's primary ENI, and no IPv4"
	}
	return c
}
