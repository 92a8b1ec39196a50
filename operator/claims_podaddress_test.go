package operator_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claimcontroller"
)

// TestAStaticPodWithAnotherAddressIsRestarted: db-0's address is stamped
// on node-1, but its pod (of StatefulSet db) started before Cilium's
// agent saw the stamp and got an ordinary address. The claim controller
// finds it (status.ipam.used against the claim), says so in the claim's
// condition, with an event and the count of such pods, and deletes the
// pod so its StatefulSet recreates it; the new pod gets its own address.
func TestAStaticPodWithAnotherAddressIsRestarted(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{})
	w.target("db-0", "node-1")
	w.until(l, "db-0 bound on node-1", func() bool { return w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound })
	_, ip := w.stampedOn("default/db-0")
	ctx := context.Background()
	other := w.freeEntry("node-1")
	w.used["node-1"][other] = "default/db-0" // the agent's answer before it saw the stamp
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "uid-db", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "node-1"}}
	if err := w.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP = other
	if err := w.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	w.agentStep("node-1")
	_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
	if r := meta.FindStatusCondition(w.claim("db-0").Status.Conditions, enipamv1alpha1.ClaimReady); r == nil || r.Reason != enipamv1alpha1.ReasonPodHasOtherAddress {
		t.Errorf("claim condition %+v, want %s", r, enipamv1alpha1.ReasonPodHasOtherAddress)
	}
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod with %s is still there (%v), want it deleted", other, err)
	}
	if !w.hasEvent(claimcontroller.EventWrongAddress) {
		t.Error("no event says the pod had another address")
	}
	if got := wrongAddresses(t, l.claims); got != 1 {
		t.Errorf("wrong-address count %v, want 1", got)
	}

	// Its StatefulSet recreates it; Cilium hands it the stamped entry.
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", true)
	if got := w.allocate("node-1", "default/db-0"); got != ip {
		t.Errorf("the new pod got %s, want %s", got, ip)
	}
	for range 3 {
		w.step(l)
	}
	if c := w.claim("db-0"); c.Status.Phase != enipamv1alpha1.ClaimBound {
		t.Errorf("claim %s after the restart", c.Status.Phase)
	}
	if got := wrongAddresses(t, l.claims); got != 1 {
		t.Errorf("wrong-address count %v after the restart, want 1", got)
	}
}

// wrongAddresses reads the claim controller's count of pods found with
// another address than their claim's.
func wrongAddresses(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "enipam_static_ip_wrong_address_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no enipam_static_ip_wrong_address_total")
	return 0
}

// TestAPodRunningBeforeItsClaimWithAnotherAddressIsRestarted is the
// regression test for seed 39108 of the static-IP simulation: pod db-0
// (of StatefulSet db) runs on node-2 with an ordinary address (its
// earlier claim was deleted while it ran). A claim db-0 is then made
// asking for an address of node-1's pool; no bind asked it for a node
// (spec.nodeName is empty), so the address is stamped where it is and
// the claim is Bound, while its pod runs elsewhere with another address
// for good. The claim controller reads the pod to learn its node, finds
// it there with another address, and deletes it so its StatefulSet
// recreates it, and the extender moves the address to it.
func TestAPodRunningBeforeItsClaimWithAnotherAddressIsRestarted(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	ctx := context.Background()
	other := w.freeEntry("node-2")
	w.used["node-2"][other] = "default/db-0"
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "uid-db", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "node-2"}}
	if err := w.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP = other
	if err := w.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	want := w.freeEntry("node-1")
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{Address: want})
	w.until(l, "the pod running with another address deleted", func() bool {
		return apierrors.IsNotFound(w.c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
	})
	if c := w.claim("db-0"); c.Status.Address != want || c.Spec.NodeName != "" {
		t.Errorf("claim address %q node %q, want %s and no node asked", c.Status.Address, c.Spec.NodeName, want)
	}
	if !w.hasEvent(claimcontroller.EventWrongAddress) {
		t.Error("no event says the pod had another address")
	}
	if got := wrongAddresses(t, l.claims); got != 1 {
		t.Errorf("wrong-address count %v, want 1", got)
	}
}
