package poolcontroller

import (
	"context"
	"maps"
	"strings"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
)

// SetupWithManager registers the controller: CiliumNodes (prioritized by
// need), their Nodes (providerID and labels), their NodeRoutings (the
// agent's reports) and the attachments EC2 completes (both ahead of
// everything: they let addresses into a pool), the nodes whose new ENI
// waited for empty nodes (once none is), ENIPolicies (every node),
// StaticIPClaims and the pods of their names (the nodes their addresses
// concern), and, with a pod watch, the pods bound to a node without an
// address (that node, ahead of idle ones). The cache indexes of package claims must be registered
// first (claims.Register).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr)
	if r.opts.Demand != nil {
		b = b.WatchesRawSource(r.demandSource())
	}
	return b.
		Named("ciliumnode").
		WatchesRawSource(source.Kind(mgr.GetCache(), &ciliumv2.CiliumNode{}, r.nodeHandler())).
		WatchesRawSource(r.wakeSource()).
		WatchesRawSource(r.attachedSource()).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		}), builder.WithPredicates(nodeChanged)).
		Watches(&enipamv1alpha1.NodeRouting{}, r.routingHandler(), builder.WithPredicates(routingReported)).
		Watches(&enipamv1alpha1.ENIPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allNodes), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&enipamv1alpha1.StaticIPClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimNodes), builder.WithPredicates(claimChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.Workers}).
		Complete(r)
}

// nodeHandler enqueues a CiliumNode with a priority from its pool, so a
// thousand idle nodes never delay one whose pods wait.
func (r *Reconciler) nodeHandler() handler.TypedEventHandler[*ciliumv2.CiliumNode, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], cn *ciliumv2.CiliumNode) {
		p := r.priority(cn)
		if cn.DeletionTimestamp == nil {
			// Counted empty until its first reconcile says otherwise: a
			// node that just joined has waited for no token yet.
			r.needs.estimate(cn.Name, p == priorityStarving)
		}
		enqueue(q, cn.Name, p)
	}
	return handler.TypedFuncs[*ciliumv2.CiliumNode, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*ciliumv2.CiliumNode], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*ciliumv2.CiliumNode], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectNew)
			r.wakeTargets(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*ciliumv2.CiliumNode], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object.Name, priorityIdle)
		},
	}
}

// wakeTargets enqueues, ahead of every other node, the node each claimed
// address that just left this node's pool is asked onto: it waits for no
// pool to list the address before it takes it from EC2.
func (r *Reconciler) wakeTargets(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], old, cur *ciliumv2.CiliumNode) {
	for ip, e := range old.Spec.IPAM.Pool {
		if _, still := cur.Spec.IPAM.Pool[ip]; still || e.Owner == "" {
			continue
		}
		ns, name, ok := strings.Cut(e.Owner, "/")
		c := &enipamv1alpha1.StaticIPClaim{}
		if !ok || r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c) != nil {
			continue
		}
		if c.Spec.NodeName != "" && c.Spec.NodeName != cur.Name {
			enqueue(q, c.Spec.NodeName, priorityPoolReady)
		}
	}
}

// priority estimates a node's urgency from the object alone (the node's
// own knobs, else the defaults; policies are not consulted here).
func (r *Reconciler) priority(cn *ciliumv2.CiliumNode) int {
	cfg := policy.Resolve(cn, nil, r.opts.Defaults)
	v := poolView{cn: cn}
	available, used := v.counts()
	switch {
	case available <= used:
		return priorityStarving
	case pool.Needed(available, used, cfg.Knobs) > 0:
		return priorityDeficit
	}
	return priorityIdle
}

// routingHandler enqueues the node of a NodeRouting whose agent reported,
// ahead of every other node: addresses it reports routed may be ready for
// the pool, a write away. It also times the ENIs the report lists.
func (r *Reconciler) routingHandler() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		nr, ok := o.(*enipamv1alpha1.NodeRouting)
		if !ok {
			return
		}
		now := r.now()
		for _, e := range nr.Status.ENIs {
			r.handoffs.sawRouted(e.ID, now)
		}
		enqueue(q, nr.Name, priorityPoolReady)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// attachedSource enqueues, ahead of every other node, the node of each ENI
// whose attachment EC2 shows completed (named by the ENI's node tag): its
// addresses may be ready for the pool, a write away.
func (r *Reconciler) attachedSource() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.inv.OnAttached(func(e cloud.ENI) { r.attached(q, e) })
		return nil
	})
}

// attached enqueues the node of an ENI whose attachment completed, ahead
// of every other node, and times the ENI.
func (r *Reconciler) attached(q workqueue.TypedRateLimitingInterface[reconcile.Request], e cloud.ENI) {
	r.handoffs.sawAttached(e.ID, r.now())
	if node := e.Tags[TagNode]; node != "" {
		enqueue(q, node, priorityPoolReady)
	}
}

func (r *Reconciler) allNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	var list ciliumv2.CiliumNodeList
	if err := r.client.List(ctx, &list); err != nil {
		r.log.Error("listing CiliumNodes after a policy change", "error", err)
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return out
}

// nodeChanged passes Node events that matter: creation, deletion, and
// changes of providerID or labels (the kubelet's heartbeats do not).
var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return o.Spec.ProviderID != n.Spec.ProviderID || !maps.Equal(o.Labels, n.Labels)
	},
}

// reported is what conditions say, less the generation they were written
// at: each write of the operator's spec bumps it, and the agent's next
// report says so, which tells the operator nothing new.
func reported(conds []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		c.ObservedGeneration = 0
		out[i] = c
	}
	return out
}

// routingReported passes NodeRouting events that can let addresses into a
// pool or a claimed one out of it: a changed report of the agent (routed
// ENIs, conditions, endpoints, remaps; the operator's own writes, all in the
// spec, do not), and the start of its deletion (a static
// IP's finalizer waits for the operator).
var routingReported = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*enipamv1alpha1.NodeRouting), e.ObjectNew.(*enipamv1alpha1.NodeRouting)
		return !sameJSON(o.Status.ENIs, n.Status.ENIs) || !sameJSON(reported(o.Status.Conditions), reported(n.Status.Conditions)) ||
			!sameJSON(o.Status.Endpoints, n.Status.Endpoints) || !sameJSON(o.Status.Remaps, n.Status.Remaps) ||
			(o.DeletionTimestamp == nil && n.DeletionTimestamp != nil)
	},
}

// claimChanged passes claim events but an update that changes only
// status.placement: the controller's own notes to the claim controller,
// which change nothing of a pool.
var claimChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*enipamv1alpha1.StaticIPClaim)
		n, okN := e.ObjectNew.(*enipamv1alpha1.StaticIPClaim)
		if !okO || !okN {
			return true
		}
		o, n = o.DeepCopy(), n.DeepCopy()
		o.Status.Placement, n.Status.Placement = nil, nil
		o.ResourceVersion, n.ResourceVersion = "", ""
		o.ManagedFields, n.ManagedFields = nil, nil
		return !equality.Semantic.DeepEqual(o, n)
	},
}

// claimNodes maps a claim to the nodes its address concerns: the one it
// is asked onto, the one it is recorded on, and any whose pool stamps it.
func (r *Reconciler) claimNodes(ctx context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*enipamv1alpha1.StaticIPClaim)
	if !ok {
		return nil
	}
	names := map[string]bool{}
	for _, n := range []string{c.Spec.NodeName, c.Status.NodeName} {
		if n != "" {
			names[n] = true
		}
	}
	var nodes ciliumv2.CiliumNodeList
	if err := r.client.List(ctx, &nodes, client.MatchingFields{claims.IndexPoolOwner: c.Owner()}, client.UnsafeDisableDeepCopy); err == nil {
		for i := range nodes.Items {
			names[nodes.Items[i].Name] = true
		}
	}
	out := make([]reconcile.Request, 0, len(names))
	for n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}
