package claimcontroller

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// podGoesAfter answers a claim's uncached pod reads: the pod exists for
// the first looks of them, then it is gone.
type podGoesAfter struct {
	client.Reader
	looks, reads int
}

func (p *podGoesAfter) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	p.reads++
	if p.reads <= p.looks {
		return nil
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
}

// TestAfterUnusedClockRunsWhenThePodGoesBetweenLooks: claim ns/db-0
// (AfterUnused, 20 s) is stamped on n1, its clock started 5 s ago when
// its pod went. A new pod of the name runs when a reconcile first asks
// and is gone right after (scaled down and up within the TTL, and down
// again). Every reconcile leaves the claim to be looked at again while
// it is not released, and the claim is released, no sooner than the TTL
// after its pod was last seen. Reconciles are driven by their own
// RequeueAfter only (no other event arrives).
func TestAfterUnusedClockRunsWhenThePodGoesBetweenLooks(t *testing.T) {
	const addr = "10.0.16.20"
	ttl := 20 * time.Second
	c, base := newNoteWorld(t)
	ctx := context.Background()
	cn := &ciliumv2.CiliumNode{}
	if err := c.Get(ctx, client.ObjectKey{Name: "n1"}, cn); err != nil {
		t.Fatal(err)
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{addr: {Resource: "eni-1", Owner: "ns/db-0"}}
	if err := c.Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	cn.Status.IPAM.Used = nil
	if err := c.Status().Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	key := client.ObjectKey{Namespace: "ns", Name: "db-0"}
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Finalizers: []string{enipamv1alpha1.StaticIPClaimFinalizer}},
		Spec: enipamv1alpha1.StaticIPClaimSpec{NodeName: "n1", ReclaimPolicy: enipamv1alpha1.ReclaimAfterUnused, UnusedTTL: &metav1.Duration{Duration: ttl}}}
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	orig := claim.DeepCopy()
	claim.Status.Address, claim.Status.Phase, claim.Status.NodeName = addr, enipamv1alpha1.ClaimBound, "n1"
	claim.Status.LastUsed = &metav1.Time{Time: now.Add(-5 * time.Second)}
	if err := c.Status().Patch(ctx, claim, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}

	pods := &podGoesAfter{looks: 1}
	clock := now
	r := New(c, base.api, base.inv, events.NewFakeRecorder(100), Options{Cluster: "test", Term: noteTerm, Pods: pods,
		Now: func() time.Time { return clock }}, base.log)
	for i := 0; ; i++ {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			t.Fatal(err)
		}
		got := &enipamv1alpha1.StaticIPClaim{}
		if err := c.Get(ctx, key, got); apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil) {
			if clock.Before(now.Add(ttl)) {
				t.Errorf("released at +%s, sooner than %s after its pod was last seen (+0s)", clock.Sub(now), ttl)
			}
			t.Logf("released at +%s after %d reconciles", clock.Sub(now), i+1)
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 {
			t.Fatalf("reconcile %d at +%s left the claim (lastUsed %v, pod reads %d) to no later look: it is never released",
				i+1, clock.Sub(now), got.Status.LastUsed, pods.reads)
		}
		if i == 10 {
			t.Fatalf("not released after %d reconciles (+%s)", i+1, clock.Sub(now))
		}
		clock = clock.Add(res.RequeueAfter)
	}
}
