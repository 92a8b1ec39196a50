package poolcontroller_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// BenchmarkReconcileNodeInShape is one reconcile of a node in shape:
// node-1 (an m5.large, first-interface-index 1, pre-allocate 8) has its
// pool full, every address routed and half of them used, so a reconcile
// decides nothing, writes nothing and calls no EC2 API. It measures
// what a reconcile costs at rest, the read, the decision and its take
// included (the fake apiserver's copies are the same in every version).
func BenchmarkReconcileNodeInShape(b *testing.B) {
	fi, pre := int32(1), int32(8)
	w := newWritesRig(b, enipamv1alpha1.ENIPolicySpec{FirstInterfaceIndex: &fi, PreAllocate: &pre}, ciliumv2.NodeSpec{}, 0, nil)
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: writesNode}}
	// Bring the node into shape: its pool filled, routed and 4 used,
	// then reconciled until one reconcile writes nothing and calls no
	// EC2 API.
	quiet := 0
	for i := 0; quiet < 5; i++ {
		if i == 200 {
			b.Fatalf("node-1 not in shape after %d reconciles", i)
		}
		called, before, after := w.reconcile()
		w.route(after)
		cn := after.DeepCopy()
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		for n, ip := range slices.Sorted(maps.Keys(cn.Spec.IPAM.Pool)) {
			if n < 4 {
				cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "ns/pod-" + ip, Resource: cn.Spec.IPAM.Pool[ip].Resource}
			}
		}
		quiet++
		if called || len(after.Spec.IPAM.Pool) < 8 || before.ResourceVersion != after.ResourceVersion {
			quiet = 0
		}
		if !equality.Semantic.DeepEqual(cn.Status.IPAM.Used, after.Status.IPAM.Used) {
			quiet = 0
			if err := w.base.Status().Update(ctx, cn); err != nil {
				b.Fatal(err)
			}
		}
		// The inventory learns of an attachment from its describe of
		// attaching ENIs, once a second: in shape is quiet for longer.
		time.Sleep(300 * time.Millisecond)
	}
	writes := w.apiWrites.total("*v2.CiliumNode") + w.apiWrites.total("*v2.CiliumNode/status")
	w.j.take()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := w.r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got := w.apiWrites.total("*v2.CiliumNode") + w.apiWrites.total("*v2.CiliumNode/status"); got != writes {
		b.Errorf("%d CiliumNode writes while in shape, want none", got-writes)
	}
	if steps := w.j.take(); len(steps) != 0 {
		b.Errorf("EC2 calls or writes while in shape: %v", steps)
	}
}
