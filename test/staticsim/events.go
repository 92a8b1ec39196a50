package staticsim

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// deletePod deletes a pod drawn by the seed: gracefully (the kubelet's
// CNI DEL first, then the object goes) or by force (the object goes at
// once; the container runs on until the kubelet's next sync). The
// StatefulSet controller creates it again at a later step.
func (w *world) deletePod(graceful bool) string {
	ctx := context.Background()
	var list corev1.PodList
	if w.store.list(&list); len(list.Items) == 0 {
		return ""
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return cmpString(a.Name, b.Name) })
	p := &list.Items[w.rng.IntN(len(list.Items))]
	if graceful {
		if r := w.pods[string(p.UID)]; r != nil {
			w.agents[r.node].release(r.uid)
			delete(w.pods, r.uid)
		}
	}
	if err := w.c.Delete(ctx, p); err == nil {
		w.logf("pod %s deleted on %q (graceful: %v)", p.Name, p.Spec.NodeName, graceful)
	}
	return p.Name
}

// createClaim creates a claim as a user would, with spec.address, for a
// replica that has none: an address another claim records, an entry of a
// pool, or one of the subnet nobody uses, drawn by the seed.
func (w *world) createClaim(replicas int) string {
	ctx := context.Background()
	name := fmt.Sprintf("%s-%d", statefulSet, w.rng.IntN(replicas+1))
	if w.store.get(client.ObjectKey{Namespace: namespace, Name: name}, &enipamv1alpha1.StaticIPClaim{}) {
		return ""
	}
	var candidates []string
	switch w.rng.IntN(3) {
	case 0:
		for addr := range w.claimedAddresses() {
			candidates = append(candidates, addr)
		}
	case 1:
		var nodes ciliumv2.CiliumNodeList
		w.store.list(&nodes)
		for _, cn := range nodes.Items {
			for ip := range cn.Spec.IPAM.Pool {
				candidates = append(candidates, ip)
			}
		}
	}
	slices.Sort(candidates)
	addr := ""
	if len(candidates) > 0 {
		addr = candidates[w.rng.IntN(len(candidates))]
	} else {
		// The pod subnet's .200–.249: no ENI draws them before its
		// first two hundred addresses.
		base := netip.MustParsePrefix(podSubnet).Addr().As4()
		base[3] = byte(200 + w.rng.IntN(50))
		addr = netip.AddrFrom4(base).String()
	}
	c := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: enipamv1alpha1.StaticIPClaimSpec{Address: addr, ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	if err := w.c.Create(ctx, c); err == nil {
		w.logf("claim %s created for %s", name, addr)
	}
	return name
}

// deleteClaim deletes a claim drawn by the seed (its finalizer holds it
// until the operator released it).
func (w *world) deleteClaim() string {
	ctx := context.Background()
	var list enipamv1alpha1.StaticIPClaimList
	if w.store.list(&list); len(list.Items) == 0 {
		return ""
	}
	c := &list.Items[w.rng.IntN(len(list.Items))]
	if err := w.c.Delete(ctx, c); err == nil {
		w.logf("claim %s deleted (address %q)", c.Name, c.Status.Address)
	}
	return c.Name
}

// cordon cordons a node drawn by the seed and drains it (its pods are
// deleted gracefully), or uncordons a cordoned one.
func (w *world) cordon() string {
	ctx := context.Background()
	n := w.nodeNamed(w.pickNode(true))
	obj := &corev1.Node{}
	if !w.store.get(client.ObjectKey{Name: n.name}, obj) {
		return n.name
	}
	n.cordoned = !n.cordoned
	obj.Spec.Unschedulable = n.cordoned
	_ = w.c.Update(ctx, obj)
	w.logf("node %s cordoned: %v", n.name, n.cordoned)
	if !n.cordoned {
		return n.name
	}
	var pods corev1.PodList
	w.store.list(&pods)
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != n.name {
			continue
		}
		if r := w.pods[string(p.UID)]; r != nil {
			w.agents[n.name].release(r.uid)
			delete(w.pods, r.uid)
		}
		_ = w.c.Delete(ctx, p)
		w.logf("drain: pod %s deleted", p.Name)
	}
	return n.name
}

// terminate terminates a node's instance, while at least two others
// live: its pods and their addresses are gone with it; the pod GC deletes
// its pods' objects, the node lifecycle its Node and CiliumNode.
func (w *world) terminate() string {
	live := w.liveNodes()
	if len(live) <= 2 {
		return ""
	}
	ctx := context.Background()
	n := w.nodeNamed(live[w.rng.IntN(len(live))])
	w.ec2Changes++
	if err := w.state.TerminateInstance(n.instance); err != nil {
		w.violate("terminating %s: %v", n.instance, err)
		return n.name
	}
	n.gone = true
	for _, uid := range keys(w.pods) {
		if w.pods[uid].node == n.name {
			delete(w.pods, uid)
		}
	}
	w.agents[n.name] = newAgent(n.name)
	var pods corev1.PodList
	w.store.list(&pods)
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == n.name {
			_ = w.c.Delete(ctx, &pods.Items[i])
		}
	}
	for _, obj := range []client.Object{&corev1.Node{}, &ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}} {
		obj.SetName(n.name)
		_ = w.c.Delete(ctx, obj)
	}
	w.logf("node %s terminated (instance %s)", n.name, n.instance)
	return n.name
}
