package e2e

import (
	"context"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// cleanupAPI deletes what a test created, once its operator stopped.
// NodeRoutings go too, and the next test starts only once they are gone:
// no garbage collector runs here to follow their owner reference to the
// CiliumNode, and one left behind would carry its agent's report (ENIs
// routed) into the next test's node of that name. A finalizer (an
// Elastic IP association) would hold one for ever, the operator being
// stopped: it is removed first.
func cleanupAPI(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	_ = c.DeleteAllOf(ctx, &ciliumv2.CiliumNode{})
	_ = c.DeleteAllOf(ctx, &corev1.Node{})
	_ = c.DeleteAllOf(ctx, &enipamv1alpha1.ENIPolicy{})
	_ = c.DeleteAllOf(ctx, &eventsv1.Event{}, client.InNamespace("default"))
	var routings enipamv1alpha1.NodeRoutingList
	_ = c.List(ctx, &routings)
	for i := range routings.Items {
		if nr := &routings.Items[i]; len(nr.Finalizers) > 0 {
			nr.Finalizers = nil
			_ = c.Update(ctx, nr)
		}
	}
	_ = c.DeleteAllOf(ctx, &enipamv1alpha1.NodeRouting{})
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		if err := c.List(ctx, &routings); err != nil {
			t.Errorf("listing the NodeRoutings left: %v", err)
			return
		}
		for _, nr := range routings.Items {
			left = append(left, nr.Name)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("NodeRoutings left after the test: %v", left)
	}
}

// TestCleanupLeavesNoNodeRouting: a NodeRouting a test leaves behind, one
// of them held by the Elastic IP finalizer, is gone once the test's
// cleanup ran.
func TestCleanupLeavesNoNodeRouting(t *testing.T) {
	ctx := context.Background()
	for _, nr := range []*enipamv1alpha1.NodeRouting{
		{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-left"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-held", Finalizers: []string{enipamv1alpha1.NodeStaticIPFinalizer}}},
	} {
		nr.Spec.FirstInterfaceIndex = 1
		if err := env.Client.Create(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	cleanupAPI(t)
	var routings enipamv1alpha1.NodeRoutingList
	if err := env.Client.List(ctx, &routings); err != nil {
		t.Fatal(err)
	}
	for _, nr := range routings.Items {
		t.Errorf("NodeRouting %s left by the cleanup", nr.Name)
	}
}

// TestNamespaceCleanupLetsTheOperatorReleaseTheClaims: StatefulSet web of
// one pod with a Retain claim and an allocated Elastic IP, running. The
// static tests' namespace cleanup, called while the operator runs, leaves
// the claim to it: once the claim is gone, ec2sim holds no Elastic IP
// (released, not left associated with the address) and the address is an
// ordinary pool address again, as the next test's invariants need.
func TestNamespaceCleanupLetsTheOperatorReleaseTheClaims(t *testing.T) {
	w := newStaticWorld(t)
	w.statefulSetWith("web", 1, map[string]string{
		enipamv1alpha1.StaticIPAnnotation: string(enipamv1alpha1.ReclaimRetain),
		enipamv1alpha1.PublicIPAnnotation: "allocate",
	})
	node, ip := w.running("web-0", 2*time.Minute)
	eip, _ := w.publicOn("web-0", node, time.Minute)
	t.Logf("web-0 on %s with %s, public %s (%s)", node, ip, eip.PublicIP, eip.AllocationID)

	w.cleanupNamespace()
	var claims enipamv1alpha1.StaticIPClaimList
	if err := env.Client.List(w.ctx, &claims, client.InNamespace(w.ns)); err != nil || len(claims.Items) != 0 {
		t.Fatalf("claims left after the cleanup: %d (%v)", len(claims.Items), err)
	}
	for _, a := range w.elasticIPs() {
		t.Errorf("Elastic IP %s (%s) left after the cleanup, associated with %q on %q", a.PublicIP, a.AllocationID, a.PrivateIPAddress, a.NetworkInterfaceID)
	}
	w.eventually(ip+" an ordinary pool address again", 30*time.Second, func() bool {
		pools, owner := w.inPool(ip)
		return len(pools) == 1 && owner == ""
	})
}
