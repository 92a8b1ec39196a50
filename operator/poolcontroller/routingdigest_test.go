package poolcontroller

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestSpecENIsGivenBackWhereTheCacheDropsThem: the operator's cache keeps
// no NodeRouting's spec.enis (DropSpecENIs), only their digest. A
// reconcile reading such an object has the list again before it decides:
// from the CiliumNode's status.eni.enis when that is their copy (no read
// of the apiserver), else from the apiserver, uncached, once (the list
// read is then the node's base, and the next reconcile reads nothing);
// and an apply of the node's capacity on that read carries the ENIs as
// they were, never an empty list that would unroute the node.
func TestSpecENIsGivenBackWhereTheCacheDropsThem(t *testing.T) {
	addr := func(s string) ciliumip.Addr { return ciliumip.AddrFrom(netip.MustParseAddr(s)) }
	eni := awstypes.ENI{ID: "eni-1", MAC: "02:00:00:00:00:01", Number: 1, IP: addr("10.0.0.4"),
		Addresses: []ciliumip.Addr{addr("10.0.0.6"), addr("10.0.0.5")}}
	eni.Subnet.ID, eni.Subnet.CIDR = "subnet-1", ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.0.0/24"))
	eni.VPC.PrimaryCIDR = ciliumip.PrefixFrom(netip.MustParsePrefix("10.0.0.0/16"))
	listed := []enipamv1alpha1.NodeENI{specENI(&eni, nil)}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-1": eni} // the copy
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", Generation: 4, OwnerReferences: ownerRefs(nil, cn)},
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", ENIs: listed}}
	var applied [][]enipamv1alpha1.NodeENI // spec.enis of each apply
	w := newRoutingWorld(t, nr)
	// The cache: what the apiserver holds, as the transform keeps it.
	w.intercept(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if nr, ok := obj.(*enipamv1alpha1.NodeRouting); ok {
				DropSpecENIs(nr)
			}
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if patch.Type() == types.ApplyPatchType {
				data, err := patch.Data(obj)
				if err != nil {
					return err
				}
				var cfg routingApply
				if err := json.Unmarshal(data, &cfg); err != nil {
					return err
				}
				applied = append(applied, cfg.Spec.ENIs)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	reads := 0
	w.r.opts.Routings = interceptor.NewClient(w.base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads++
			return c.Get(ctx, key, obj, opts...)
		},
	})
	if got := w.stored(); !equality.Semantic.DeepEqual(got.Spec.ENIs, listed) {
		t.Fatalf("stored spec.enis %+v, want %+v", got.Spec.ENIs, listed)
	}
	probe := &enipamv1alpha1.NodeRouting{}
	if err := w.r.client.Get(context.Background(), types.NamespacedName{Name: "n1"}, probe); err != nil || probe.Spec.ENIs != nil || probe.Spec.ENIsDigest == "" {
		t.Fatalf("the cache's copy keeps spec.enis %+v (digest %x, error %v); want none and their digest", probe.Spec.ENIs, probe.Spec.ENIsDigest, err)
	}
	s := w.reconcile(cn, 0, nil)
	if w.r.memory("n1").routingApplied != nil {
		t.Fatal("the reconcile applied the NodeRouting, which it had no need to")
	}
	if !equality.Semantic.DeepEqual(s.routingRead.Spec.ENIs, listed) || !equality.Semantic.DeepEqual(s.routing.Spec.ENIs, listed) || reads != 0 {
		t.Errorf("with status.eni.enis their copy: spec.enis read %+v, standing %+v, %d uncached reads; want %+v and 0 reads",
			s.routingRead.Spec.ENIs, s.routing.Spec.ENIs, reads, listed)
	}

	// The status's copy waits (a joining node): read once, uncached, and
	// the capacity applied on that read keeps the ENIs.
	joining := cn.DeepCopy()
	joining.Status.ENI.ENIs = nil
	capacity := &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 2}
	w.reconcile(joining, 0, func(s *nodeSync) { s.routing.Spec.Capacity = capacity.DeepCopy() })
	if len(applied) != 1 || !equality.Semantic.DeepEqual(applied[0], listed) {
		t.Errorf("applied spec.enis %+v, want one apply of %+v", applied, listed)
	}
	got := w.stored()
	if !equality.Semantic.DeepEqual(got.Spec.ENIs, listed) || !equality.Semantic.DeepEqual(got.Spec.Capacity, capacity) || reads != 1 {
		t.Errorf("with the copy waiting: stored spec.enis %+v, capacity %+v after %d uncached reads; want %+v, %+v and 1 read",
			got.Spec.ENIs, got.Spec.Capacity, reads, listed, capacity)
	}
	s = w.reconcile(joining, 0, nil)
	if !equality.Semantic.DeepEqual(s.routingRead.Spec.ENIs, listed) || reads != 1 {
		t.Errorf("the next reconcile: spec.enis read %+v after %d uncached reads; want %+v and still 1 read", s.routingRead.Spec.ENIs, reads, listed)
	}
}

// TestSpecENIsDigest: the digest tells lists apart by every field the
// JSON of spec.enis carries, and takes an empty list or map for one left
// out, as the JSON does.
func TestSpecENIsDigest(t *testing.T) {
	one := enipamv1alpha1.NodeENI{ID: "eni-1", MAC: "02:00:00:00:00:01", Number: 1, PrimaryIP: "10.0.0.4", SubnetID: "subnet-1",
		SubnetCIDR: "10.0.0.0/24", VPCCIDRs: []string{"10.0.0.0/16"}, Addresses: []string{"10.0.0.5"}, Prefixes: []string{"10.0.1.0/28"},
		IPv6Prefixes: []string{"2600::/80"}, Tags: map[string]string{"a": "b"}}
	d := digestSpecENIs([]enipamv1alpha1.NodeENI{one})
	for name, change := range map[string]func(e *enipamv1alpha1.NodeENI){
		"id": func(e *enipamv1alpha1.NodeENI) { e.ID = "eni-2" }, "mac": func(e *enipamv1alpha1.NodeENI) { e.MAC = "02:00:00:00:00:02" },
		"number": func(e *enipamv1alpha1.NodeENI) { e.Number = 2 }, "primary": func(e *enipamv1alpha1.NodeENI) { e.PrimaryIP = "10.0.0.9" },
		"subnet": func(e *enipamv1alpha1.NodeENI) { e.SubnetID = "subnet-2" }, "cidr": func(e *enipamv1alpha1.NodeENI) { e.SubnetCIDR = "10.0.2.0/24" },
		"vpc":       func(e *enipamv1alpha1.NodeENI) { e.VPCCIDRs = append(e.VPCCIDRs, "10.1.0.0/16") },
		"addresses": func(e *enipamv1alpha1.NodeENI) { e.Addresses = []string{"10.0.0.5", "10.0.0.6"} },
		"moved":     func(e *enipamv1alpha1.NodeENI) { e.Addresses, e.Prefixes = nil, []string{"10.0.0.5", "10.0.1.0/28"} },
		"prefixes":  func(e *enipamv1alpha1.NodeENI) { e.Prefixes = nil }, "ipv6": func(e *enipamv1alpha1.NodeENI) { e.IPv6Prefixes = nil },
		"tag": func(e *enipamv1alpha1.NodeENI) { e.Tags = map[string]string{"a": "c"} },
	} {
		e := one
		e.Tags = map[string]string{"a": "b"}
		change(&e)
		if digestSpecENIs([]enipamv1alpha1.NodeENI{e}) == d {
			t.Errorf("%s: a changed entry has the same digest", name)
		}
	}
	if digestSpecENIs([]enipamv1alpha1.NodeENI{one, one}) == d || digestSpecENIs(nil) == d {
		t.Error("lists of other lengths have the same digest")
	}
	empty := enipamv1alpha1.NodeENI{ID: "eni-1", VPCCIDRs: []string{}, Tags: map[string]string{}}
	if digestSpecENIs([]enipamv1alpha1.NodeENI{empty}) != digestSpecENIs([]enipamv1alpha1.NodeENI{{ID: "eni-1"}}) {
		t.Error("an empty list or map is not taken for one left out")
	}
}
