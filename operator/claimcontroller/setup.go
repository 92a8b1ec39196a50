package claimcontroller

import (
	"context"
	"strings"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// SetupWithManager registers the controller: claims; the pods of their
// names (the old pod gone, the AfterUnused clock); CiliumNodes (stamps
// appearing and leaving); StatefulSets (scaled, deleted). The pool
// controller's notes arrive as updates of the claims themselves
// (status.placement). The indexes of package claims must be registered
// first (claims.Register).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("staticipclaim").
		For(&enipamv1alpha1.StaticIPClaim{}).
		Watches(&ciliumv2.CiliumNode{}, handler.EnqueueRequestsFromMapFunc(stampedClaims)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.setClaims), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// stampedClaims maps a CiliumNode to the claims whose owners its pool
// stamps (the old and the new object are both mapped on an update).
func stampedClaims(_ context.Context, o client.Object) []reconcile.Request {
	cn, ok := o.(*ciliumv2.CiliumNode)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, e := range cn.Spec.IPAM.Pool {
		if ns, name, ok := strings.Cut(e.Owner, "/"); ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}

// setClaims maps a StatefulSet to the claims of its pods' names.
func (r *Reconciler) setClaims(ctx context.Context, o client.Object) []reconcile.Request {
	var list enipamv1alpha1.StaticIPClaimList
	if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if set, _, ok := statefulSetOf(list.Items[i].Name); ok && set == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: list.Items[i].Name}})
		}
	}
	return out
}
