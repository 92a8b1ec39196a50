package poolcontroller

import (
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestNodeRoutingApplyTakesNothingBackWhileTheCacheLags: the operator
// applies its whole word on a NodeRouting, so an apply built on a read
// older than its last write would take that write back. A node whose
// capacity one reconcile applied is reconciled again, for a change of
// its policy's first interface index, while the cache still shows the
// object before that write (no capacity, the older generation): the
// second apply carries the new index and keeps the capacity. With a
// cache that caught up, the same holds and nothing more is written.
func TestNodeRoutingApplyTakesNothingBackWhileTheCacheLags(t *testing.T) {
	w := newRoutingWorld(t, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", FirstInterfaceIndex: 1}})
	w.intercept(w.laggingCache())
	capacity := &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4, CanGrow: true}

	w.stale = w.stored()
	w.reconcile(w.cn, 1, func(s *nodeSync) { s.routing.Spec.Capacity = capacity.DeepCopy() })
	w.reconcile(w.cn, 2, nil) // the cache still shows the object before the capacity
	got := w.stored()
	if got.Spec.FirstInterfaceIndex != 2 || !equality.Semantic.DeepEqual(got.Spec.Capacity, capacity) {
		t.Errorf("after a reconcile over a lagging cache: first interface index %d, capacity %+v; want 2 and %+v",
			got.Spec.FirstInterfaceIndex, got.Spec.Capacity, capacity)
	}
	if w.applies != 2 {
		t.Errorf("%d applies, want 2", w.applies)
	}

	w.stale = nil // the cache caught up
	w.reconcile(w.cn, 2, nil)
	if got := w.stored(); got.Spec.FirstInterfaceIndex != 2 || !equality.Semantic.DeepEqual(got.Spec.Capacity, capacity) || w.applies != 2 {
		t.Errorf("with the cache caught up: first interface index %d, capacity %+v, %d applies; want 2, %+v and still 2",
			got.Spec.FirstInterfaceIndex, got.Spec.Capacity, w.applies, capacity)
	}
}

// TestAppliedNodeRoutingKeepsOnlyTheApplyBase: every node keeps the
// apiserver's answer to its last NodeRouting apply while the cache lags;
// what is kept is what the next apply builds on (UID, generation,
// finalizers, spec), not the answer's managed fields or the agent's
// status, which made it a second copy of every NodeRouting.
func TestAppliedNodeRoutingKeepsOnlyTheApplyBase(t *testing.T) {
	r := &Reconciler{nodes: map[string]*memory{}}
	r.memory("n1")
	answer := &enipamv1alpha1.NodeRouting{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", Generation: 4, Finalizers: []string{"enipam.io/elastic-ip"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: enipamv1alpha1.FieldManagerOperator, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}},
			OwnerReferences: []metav1.OwnerReference{{Kind: "CiliumNode", Name: "n1"}}},
		Spec:   enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", FirstInterfaceIndex: 1, Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27}},
		Status: enipamv1alpha1.NodeRoutingStatus{ObservedGeneration: 3, ENIs: []enipamv1alpha1.RoutedENI{{ID: "eni-1", IPs: []string{"10.0.0.5"}}}},
	}
	r.rememberApplied(answer)
	kept := r.nodes["n1"].routingApplied
	want := &appliedRouting{UID: "uid-1", Generation: 4, Finalizers: []string{"enipam.io/elastic-ip"}, Spec: answer.Spec}
	if !equality.Semantic.DeepEqual(kept, want) {
		t.Fatalf("kept %+v, want %+v", kept, want)
	}
	answer.Spec.Capacity.MaxIPs, answer.Finalizers[0] = 1, "changed"
	if kept.Spec.Capacity.MaxIPs != 27 || kept.Finalizers[0] != "enipam.io/elastic-ip" {
		t.Error("the kept spec or finalizers share storage with the answer")
	}
}

// TestAppliedBaseDropsTheENIsOnceTheCacheShowsTheApply: the base of a
// node's next apply keeps spec.enis while the cache lags behind that
// apply (the read then stands on the base, at the base's generation:
// only the cache's own generation tells), and keeps the rest of the spec
// alone once the cache shows it, the cache keeping spec.enis itself:
// with no copy of the ENIs in status.eni.enis, as every node in shape
// has none.
func TestAppliedBaseDropsTheENIsOnceTheCacheShowsTheApply(t *testing.T) {
	r := &Reconciler{nodes: map[string]*memory{}}
	mem := r.memory("n1")
	eni := awstypes.ENI{ID: "eni-1", MAC: "02:00:00:00:00:01", Number: 1, IP: ciliumip.AddrFrom(netip.MustParseAddr("10.0.0.4")),
		Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr("10.0.0.5")), ciliumip.AddrFrom(netip.MustParseAddr("10.0.0.6"))}}
	eni.Subnet.ID, eni.Subnet.CIDR = "subnet-1", ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.0.0/24"))
	applied := &appliedRouting{UID: "uid-1", Generation: 4,
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27},
			ENIs: []enipamv1alpha1.NodeENI{specENI(&eni, nil)}}}
	mem.routingApplied = applied
	cn := &ciliumv2.CiliumNode{}
	s := testSync(r, cn, deciding{mem: mem})
	// trim trims the base over a cache showing generation cached, the
	// read at the base's generation where the cache lags.
	trim := func(cached int64) {
		s.routingCached = cached
		s.routingRead = &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", Generation: max(cached, 4)}}
		s.trimApplied()
	}
	trim(3)
	if len(mem.routingApplied.Spec.ENIs) != 1 {
		t.Fatal("the base dropped spec.enis while the cache lags behind the apply")
	}
	trim(4)
	if got := mem.routingApplied; got.Spec.ENIs != nil || got.Spec.Capacity == nil || got.Spec.Capacity.MaxIPs != 27 || got.UID != "uid-1" || got.Generation != 4 {
		t.Fatalf("base %+v, want the same without spec.enis", got)
	}
	if len(applied.Spec.ENIs) != 1 {
		t.Error("the trim changed the earlier base in place")
	}
}
