package chart

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/schedtest"
)

// TestSchedulerServiceAccountDoesItsJobAndNothingElse: the chart's RBAC
// for enipam-scheduler's pod, against the real apiserver, impersonating
// its ServiceAccount with nothing but what the chart binds to it.
//
// First the real kube-scheduler 1.37.1 runs under that identity with the
// configuration the chart renders, and the extender beside it with the
// chart's arguments: it wins its Lease in the release namespace, the
// extender's caches sync (CiliumNodes, NodeRoutings, pods by field
// selector), a pod that opted in is bound to the node with a free
// address, and a pod that can only go to a node without a CiliumNode gets
// a FailedScheduling event naming the reason. Neither logs a refusal.
//
// A static-IP pod (annotation enipam.io/static-ip) makes bind create its
// StaticIPClaim asking for the node; it is bound once the node's pool holds
// its address stamped (the test plays enipam-operator).
//
// Then, call by call: reading pools and capacities (a CiliumNode and a
// NodeRouting by name too: bind confirms a settled address), claims and
// pods, creating claims and asking them for a node are allowed; writing
// CiliumNodes, NodeRoutings, ENIPolicies or a claim's status, deleting
// claims, reading Secrets, creating pods, patching Nodes and writing
// other Leases are refused.
func TestSchedulerServiceAccountDoesItsJobAndNothingElse(t *testing.T) {
	installRBAC(t)
	user := "system:serviceaccount:" + rbacNamespace + ":rbac-scheduler"
	cfg := as(t, "rbac-scheduler", authorizationv1.ResourceAttributes{Group: "enipam.io", Resource: "noderoutings", Verb: "watch"})

	// Two nodes: one with a CiliumNode holding a free address and room to
	// grow, one without a CiliumNode.
	const label = "enipam.io/rbac-scheduler"
	var nodes []string
	for _, name := range []string{"rbac-sched-pool", "rbac-sched-bare"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{label: "yes", "kubernetes.io/hostname": name}}}
		if err := env.Client.Create(bg, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(bg, n) })
		n.Spec.Taints = nil // the apiserver's not-ready taint; no lifecycle controller here
		if err := env.Client.Update(bg, n); err != nil {
			t.Fatal(err)
		}
		room := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
		n.Status.Capacity, n.Status.Allocatable = room, room
		if err := env.Client.Status().Update(bg, n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, name)
	}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: nodes[0]}}
	if err := env.Client.Create(bg, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, cn) })
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.42.10": {Resource: "eni-rbac"}}
	if err := env.Client.Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: nodes[0]},
		Spec: enipamv1alpha1.NodeRoutingSpec{Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 1, CanGrow: true}}}
	if err := env.Client.Create(bg, nr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, nr) })

	// The real kube-scheduler and the extender under the ServiceAccount.
	parts, err := schedtest.Render(bg, rbacNamespace, "--set", "fullnameOverride=rbac")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	sched, err := schedtest.Start(bg, parts, schedtest.Options{Kubeconfig: kubeconfig, As: user, BinDir: env.BinDir, Dir: t.TempDir(), Log: logTo(&logs)})
	if err != nil {
		t.Fatalf("%v\nextender:\n%s", err, logs.String())
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := sched.Stop(); err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-scheduler:\n%s\nextender:\n%s", sched.KubeScheduler.Tail(80), logs.String())
		}
		stop()
	})

	pod := func(name string, selector map[string]string, annotations ...string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: name, Annotations: map[string]string{}},
			Spec: corev1.PodSpec{SchedulerName: "enipam-scheduler", NodeSelector: selector,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		for i := 0; i+1 < len(annotations); i += 2 {
			p.Annotations[annotations[i]] = annotations[i+1]
		}
		if err := env.Client.Create(bg, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(bg, p, client.GracePeriodSeconds(0)) })
		return p
	}
	placed := pod("rbac-sched-placed", map[string]string{label: "yes"})
	refused := pod("rbac-sched-refused", map[string]string{"kubernetes.io/hostname": nodes[1]})

	eventually(t, "the pod bound to the node with a free address", time.Minute, func() bool {
		err := env.Client.Get(bg, client.ObjectKeyFromObject(placed), placed)
		return err == nil && placed.Spec.NodeName == nodes[0]
	})
	eventually(t, "the other pod's FailedScheduling event", time.Minute, func() bool {
		var list eventsv1.EventList
		if err := env.Client.List(bg, &list, client.InNamespace(rbacNamespace)); err != nil {
			return false
		}
		return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Name == refused.Name && e.Reason == "FailedScheduling" && strings.Contains(e.Note, "no CiliumNode")
		})
	})

	// A static-IP pod: bind creates its claim asking for the node, and
	// binds it once the node's pool holds its address stamped (played here
	// as enipam-operator would).
	static := pod("rbac-sched-static", map[string]string{"kubernetes.io/hostname": nodes[0]}, enipamv1alpha1.StaticIPAnnotation, "true")
	claim := &enipamv1alpha1.StaticIPClaim{}
	eventually(t, "the static-IP pod's claim created by bind", time.Minute, func() bool {
		return env.Client.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "rbac-sched-static"}, claim) == nil && claim.Spec.NodeName == nodes[0]
	})
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(cn), cn); err != nil {
		t.Fatal(err)
	}
	// The operator writes status before spec: the ENI holding the
	// address first, then the stamped entry (bind settles a stamp only
	// once its ENI holds the address).
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-rbac": {ID: "eni-rbac", Number: 1,
		Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr("10.0.42.10")), ciliumip.AddrFrom(netip.MustParseAddr("10.0.42.12"))}}}
	if err := env.Client.Status().Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	cn.Spec.IPAM.Pool["10.0.42.12"] = ipamtypes.AllocationIP{Resource: "eni-rbac", Owner: rbacNamespace + "/rbac-sched-static"}
	if err := env.Client.Update(bg, cn); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the static-IP pod bound once its address is stamped", time.Minute, func() bool {
		err := env.Client.Get(bg, client.ObjectKeyFromObject(static), static)
		return err == nil && static.Spec.NodeName == nodes[0]
	})
	t.Cleanup(func() {
		claim.Finalizers = nil
		_ = env.Client.Update(bg, claim)
		_ = env.Client.Delete(bg, claim)
	})

	var lease coordinationv1.Lease
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "enipam-scheduler"}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Errorf("kube-scheduler's Lease: %v %+v", err, lease.Spec)
	}
	stop()
	for name, out := range map[string]string{"kube-scheduler": sched.KubeScheduler.Tail(100000), "extender": logs.String()} {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s met a refusal: %s", name, line)
			}
		}
	}

	// Call by call.
	c := asClient(t, cfg)
	allowed(t, "list CiliumNodes", c.List(bg, &ciliumv2.CiliumNodeList{}))
	allowed(t, "get a CiliumNode", c.Get(bg, client.ObjectKey{Name: nodes[0]}, &ciliumv2.CiliumNode{}))
	allowed(t, "list NodeRoutings", c.List(bg, &enipamv1alpha1.NodeRoutingList{}))
	allowed(t, "get a NodeRouting", c.Get(bg, client.ObjectKey{Name: nodes[0]}, &enipamv1alpha1.NodeRouting{}))
	allowed(t, "list pods without an address", c.List(bg, &corev1.PodList{}, &client.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.podIP", "")}))
	allowed(t, "list StaticIPClaims", c.List(bg, &enipamv1alpha1.StaticIPClaimList{}))
	ownClaim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "rbac-sched-claim"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	allowed(t, "create a StaticIPClaim", c.Create(bg, ownClaim))
	t.Cleanup(func() { _ = env.Client.Delete(bg, ownClaim) })
	asked := ownClaim.DeepCopy()
	asked.Spec.NodeName = nodes[0]
	allowed(t, "merge-patch a StaticIPClaim's spec.nodeName", c.Patch(bg, asked, client.MergeFrom(ownClaim)))
	statused := asked.DeepCopy()
	statused.Status.Phase = enipamv1alpha1.ClaimBound
	denied(t, "patch a StaticIPClaim's status", c.Status().Patch(bg, statused, client.MergeFrom(asked)))
	denied(t, "delete a StaticIPClaim", c.Delete(bg, asked.DeepCopy()))
	for what, kind := range map[string]client.ObjectList{"CiliumNodes": &ciliumv2.CiliumNodeList{}, "NodeRoutings": &enipamv1alpha1.NodeRoutingList{}, "pods": &corev1.PodList{}, "StaticIPClaims": &enipamv1alpha1.StaticIPClaimList{}} {
		w, err := c.Watch(bg, kind)
		allowed(t, "watch "+what, err)
		if err == nil {
			w.Stop()
		}
	}

	current := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(cn), current); err != nil {
		t.Fatal(err)
	}
	grown := current.DeepCopy()
	grown.Spec.IPAM.Pool["10.0.42.11"] = ipamtypes.AllocationIP{Resource: "eni-rbac"}
	denied(t, "patch a CiliumNode's pool", c.Patch(bg, grown, client.MergeFrom(current)))
	denied(t, "patch a CiliumNode's status", c.Status().Patch(bg, grown, client.MergeFrom(current)))
	denied(t, "create a CiliumNode", c.Create(bg, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "rbac-sched-created"}}))
	currentNR := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(bg, client.ObjectKeyFromObject(nr), currentNR); err != nil {
		t.Fatal(err)
	}
	claimed := currentNR.DeepCopy()
	claimed.Spec.Capacity.CanGrow = false
	denied(t, "patch a NodeRouting's capacity", c.Patch(bg, claimed, client.MergeFrom(currentNR)))
	denied(t, "patch a NodeRouting's status", c.Status().Patch(bg, claimed, client.MergeFrom(currentNR)))
	denied(t, "list ENIPolicies", c.List(bg, &enipamv1alpha1.ENIPolicyList{}))
	denied(t, "get a Secret", c.Get(bg, client.ObjectKey{Namespace: rbacNamespace, Name: "anything"}, &corev1.Secret{}))
	denied(t, "list Secrets", c.List(bg, &corev1.SecretList{}))
	denied(t, "create a pod", c.Create(bg, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "rbac-sched-own"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}))
	node := &corev1.Node{}
	if err := env.Client.Get(bg, client.ObjectKey{Name: nodes[0]}, node); err != nil {
		t.Fatal(err)
	}
	labelled := node.DeepCopy()
	labelled.Labels["enipam.io/rbac-scheduler"] = "no"
	denied(t, "patch a Node", c.Patch(bg, labelled, client.MergeFrom(node)))
	denied(t, "update a ConfigMap", c.Update(bg, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "rbac-scheduler"}}))
	other := &coordinationv1.Lease{}
	other.Namespace, other.Name = rbacNamespace, "not-the-schedulers"
	if err := env.Client.Create(bg, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(bg, other) })
	denied(t, "update another Lease", c.Update(bg, other.DeepCopy()))
}
