package staticsim

import (
	"context"
	"fmt"
	"slices"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/extender"
	"github.com/enipam/enipam/scheduler/room"
	"github.com/enipam/enipam/scheduler/tracker"
)

// pod is what a kubelet runs: the pod object's UID, the node it was bound
// to, and the address its CNI ADD got ("" until then). A pod whose object
// is gone (deleted, force-deleted, or its node terminated) keeps its
// address on its node until the kubelet's CNI DEL.
type pod struct {
	owner, name, uid, node, ip string
}

// statefulSet is the one StatefulSet of the world: replicas db-0 …, each
// annotated for a static address (reclaim Retain); deployment's pods
// (web-0 …, as many) take ordinary addresses beside them.
const (
	statefulSet = "db"
	deployment  = "web"
)

// ensurePods is the StatefulSet controller: a replica whose pod object is
// gone is created again, same name, new UID, not bound (the ordinary
// pods are recreated the same way, for simplicity).
func (w *world) ensurePods(replicas int) {
	ctx := context.Background()
	for i := range 2 * replicas {
		name := fmt.Sprintf("%s-%d", statefulSet, i)
		static := i < replicas
		if !static {
			name = fmt.Sprintf("%s-%d", deployment, i-replicas)
		}
		p := &corev1.Pod{}
		if w.store.get(client.ObjectKey{Namespace: namespace, Name: name}, p) {
			continue
		}
		p = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			UID:         types.UID(fmt.Sprintf("%s-%d", name, w.rng.Uint32())),
			Annotations: map[string]string{enipamv1alpha1.StaticIPAnnotation: "true"}}}
		if static {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: statefulSet,
				UID: "uid-sts-" + statefulSet, Controller: ptrTo(true)}}
		} else {
			p.Annotations = nil
		}
		if i == 0 {
			// The first replica has an Elastic IP: allocated, or from
			// the pool the nodes' static-ip-tags draw from.
			p.Annotations[enipamv1alpha1.PublicIPAnnotation] = w.claimEIP
		}
		if err := w.c.Create(ctx, p); err == nil {
			w.logf("statefulset: pod %s created (%s)", name, p.UID)
		}
	}
}

// schedState is what the extender reads, straight from the apiserver
// (enipam-scheduler's tracker caches the same objects).
type schedState struct{ w *world }

var _ extender.State = schedState{}

func (s schedState) Synced() bool { return true }

func (s schedState) View(*corev1.Pod, []string, time.Time) ([]room.Node, <-chan struct{}) {
	return nil, nil
}

func (s schedState) Hold(*corev1.Pod, []string) {}

// Claim is the extender's view of the claim (tracker.ClaimOf).
func (s schedState) Claim(ns, name string) (room.Claim, bool) {
	c := &enipamv1alpha1.StaticIPClaim{}
	if !s.w.store.get(client.ObjectKey{Namespace: ns, Name: name}, c) {
		return room.Claim{}, false
	}
	return tracker.ClaimOf(c), true
}

func (s schedState) Intent(uid types.UID) (waiting.Intent, bool) {
	var list corev1.PodList
	s.w.store.list(&list)
	for _, p := range list.Items {
		if p.UID == uid {
			return waiting.Intent{Static: p.Annotations[enipamv1alpha1.StaticIPAnnotation]}, true
		}
	}
	return waiting.Intent{}, false
}

// Settled answers with no channel: the simulation's bind never waits,
// it answers at once and kube-scheduler tries again at a later step.
func (s schedState) Settled(node, owner string) (string, <-chan struct{}) {
	cn := &ciliumv2.CiliumNode{}
	if !s.w.store.get(client.ObjectKey{Name: node}, cn) {
		return "", nil
	}
	nr := &enipamv1alpha1.NodeRouting{}
	s.w.store.get(client.ObjectKey{Name: node}, nr)
	return room.Digest(cn, nr.Spec.ENIs).Settled[owner], nil
}

// newExtender builds enipam-scheduler's extender over the world; its
// Bindings set the pod's node (the fake apiserver has no binding
// subresource).
func (w *world) newExtender() (*extender.Extender, error) {
	writer := interceptor.NewClient(w.c, interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			b, ok := subObj.(*corev1.Binding)
			if sub != "binding" || !ok {
				return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
			}
			p := &corev1.Pod{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), p); err != nil {
				return err
			}
			if p.UID != b.UID || p.Spec.NodeName != "" {
				return apierrors.NewConflict(corev1.Resource("pods"), p.Name, fmt.Errorf("pod %s is not the one to bind", p.Name))
			}
			p.Spec.NodeName = b.Target.Name
			return c.Update(ctx, p)
		},
	})
	cfg := extender.DefaultConfig()
	return extender.New(schedState{w}, writer, cfg, prometheus.NewRegistry(), w.log)
}

// schedule is kube-scheduler with the extender: one pending pod, a node
// chosen by the seed among the schedulable ones, and the extender's bind
// (which answers at once: bound, or an error and a retry at a later
// step).
func (w *world) schedule() {
	ctx := context.Background()
	var list corev1.PodList
	w.store.list(&list)
	var pending []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return
	}
	slices.SortFunc(pending, func(a, b corev1.Pod) int { return cmpString(a.Name, b.Name) })
	p := pending[w.rng.IntN(len(pending))]
	var ready []string
	for _, n := range w.nodes {
		if !n.gone && !n.cordoned {
			ready = append(ready, n.name)
		}
	}
	if len(ready) == 0 {
		return
	}
	target := ready[w.rng.IntN(len(ready))]
	// The extender's prioritize scores the node its claim is asked onto
	// (where it is stamped or on its way) above any other: kube-scheduler
	// mostly retries there.
	c := &enipamv1alpha1.StaticIPClaim{}
	if w.store.get(client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, c) && slices.Contains(ready, c.Spec.NodeName) && w.rng.IntN(5) > 0 {
		target = c.Spec.NodeName
	}
	// The context is done: Bind places the claim and looks once.
	done, cancel := context.WithCancel(ctx)
	cancel()
	res := w.ext.Bind(done, &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: target})
	if res.Error == "" {
		w.binds++
		w.logf("scheduler: %s bound to %s", p.Name, target)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// kubelet runs node's pods: a CNI DEL for every pod whose object is gone
// or now another pod (the kubelet stops the container), then a CNI ADD
// for one bound pod not running yet.
func (w *world) kubelet(name string) {
	ctx := context.Background()
	a := w.agents[name]
	var list corev1.PodList
	w.store.list(&list)
	live := map[string]*corev1.Pod{}
	for i := range list.Items {
		live[string(list.Items[i].UID)] = &list.Items[i]
	}
	for _, uid := range slices.Sorted(mapsKeys(w.pods)) {
		p := w.pods[uid]
		if p.node == name && live[uid] == nil {
			a.release(uid)
			delete(w.pods, uid)
			w.changes++
			w.logf("kubelet %s: %s stopped (CNI DEL of %s)", name, p.owner, p.ip)
		}
	}
	for _, p := range list.Items {
		owner := p.Namespace + "/" + p.Name
		if p.Spec.NodeName != name || p.DeletionTimestamp != nil || w.pods[string(p.UID)] != nil || w.runsHere(name, owner) {
			// Not here, running already, or the same name still runs
			// here: the kubelet stops that one first.
			continue
		}
		ip := a.allocateNext(w, owner, string(p.UID))
		if ip == "" {
			continue
		}
		w.stolen(owner, ip, name)
		w.changes++
		w.pods[string(p.UID)] = &pod{owner: owner, name: p.Name, uid: string(p.UID), node: name, ip: ip}
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		p.Status.Phase = corev1.PodRunning
		_ = w.c.Status().Update(ctx, &p)
		w.starts++
		w.logf("kubelet %s: %s started with %s", name, owner, ip)
		return
	}
}

// runsHere reports whether a pod named owner runs on node.
func (w *world) runsHere(node, owner string) bool {
	for _, p := range w.pods {
		if p.node == node && p.owner == owner {
			return true
		}
	}
	return false
}
