package staticsim

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator"
)

// TestWriterIsTheFakeClient runs the same writes through the fake client
// and through the writer, on two apiservers with the same objects: every
// answer, error, stored object and resourceVersion must be the same.
// The writes cover a status patch and a spec patch made from the stored
// object and from a stale one, the optimistic lock winning and losing,
// status and spec updates, an update with a stale resourceVersion, a
// kind without a status subresource, and a finalizer's removal from an
// object being deleted.
func TestWriterIsTheFakeClient(t *testing.T) {
	// handled counts the writes the writer took (not left to the fake).
	handled := 0
	build := func(fast bool) client.WithWatch {
		scheme, err := operator.Scheme()
		if err != nil {
			t.Fatal(err)
		}
		tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
		statusObjs := []client.Object{&ciliumv2.CiliumNode{}, &enipamv1alpha1.StaticIPClaim{}}
		fc := fake.NewClientBuilder().WithScheme(scheme).WithGlobalResourceVersionCounter().WithObjectTracker(tracker).
			WithStatusSubresource(statusObjs...).
			WithObjects(
				&ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
					Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{PreAllocate: 2, Pool: ipamtypes.AllocationMap{"10.0.16.5": {Resource: "eni-1"}}}}},
				&enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace, Finalizers: []string{"enipam.io/test"}}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
			).Build()
		if !fast {
			return fc
		}
		wr, err := newWriter(fc, tracker, scheme, statusObjs...)
		if err != nil {
			t.Fatal(err)
		}
		took := func(h bool) bool {
			if h {
				handled++
			}
			return h
		}
		return interceptor.NewClient(fc, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				if handled, err := wr.patch(obj, p, false); took(handled) {
					return err
				}
				return c.Patch(ctx, obj, p, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if handled, err := wr.update(obj, false); took(handled) {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if handled, err := wr.patch(obj, p, true); took(handled) {
					return err
				}
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if handled, err := wr.update(obj, true); took(handled) {
					return err
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
	}
	ctx := context.Background()
	nodeKey, claimKey := client.ObjectKey{Name: "node-1"}, client.ObjectKey{Namespace: namespace, Name: "db-0"}
	// Each write reads what it needs from c and writes; it returns the
	// object it wrote (as the client left it) and the error.
	writes := []struct {
		name  string
		write func(c client.Client) (client.Object, error)
	}{
		{"status patch from the stored object", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			orig := cn.DeepCopy()
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.16.5": "marked-for-release"}
			cn.Spec.IPAM.PreAllocate = 9 // not written through status
			return cn, c.Status().Patch(ctx, cn, client.MergeFrom(orig))
		}},
		{"spec patch from a stale object", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			orig := cn.DeepCopy()
			orig.ResourceVersion = "1"
			orig.Spec.IPAM.Pool = nil
			cn.Spec.IPAM.Pool["10.0.16.6"] = ipamtypes.AllocationIP{Resource: "eni-1", Owner: "default/db-0"}
			cn.Status.IPAM.ReleaseIPs = nil // not written through the main resource
			return cn, c.Patch(ctx, cn, client.MergeFrom(orig))
		}},
		{"optimistic spec patch, current", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			orig := cn.DeepCopy()
			delete(cn.Spec.IPAM.Pool, "10.0.16.5")
			return cn, c.Patch(ctx, cn, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		}},
		{"optimistic status patch, stale", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			orig := cn.DeepCopy()
			orig.ResourceVersion = "2"
			cn.Status.IPAM.OperatorStatus.Error = "late"
			return cn, c.Status().Patch(ctx, cn, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		}},
		{"status update", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.16.6": {Owner: "default/db-0", Resource: "eni-1"}}
			cn.Spec.IPAM.PreAllocate = 7
			return cn, c.Status().Update(ctx, cn)
		}},
		{"spec update, stale", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			cn.ResourceVersion = "3"
			cn.Spec.IPAM.PreAllocate = 5
			return cn, c.Update(ctx, cn)
		}},
		{"spec update", func(c client.Client) (client.Object, error) {
			cn := &ciliumv2.CiliumNode{}
			_ = c.Get(ctx, nodeKey, cn)
			cn.Spec.IPAM.PreAllocate = 5
			cn.Status.IPAM.Used = nil
			return cn, c.Update(ctx, cn)
		}},
		{"status patch of a kind without status subresource", func(c client.Client) (client.Object, error) {
			n := &corev1.Node{}
			_ = c.Get(ctx, client.ObjectKey{Name: "node-1"}, n)
			orig := n.DeepCopy()
			n.Status.Phase = corev1.NodeRunning
			return n, c.Status().Patch(ctx, n, client.MergeFrom(orig))
		}},
		{"raw merge patch", func(c client.Client) (client.Object, error) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
			return n, c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`)))
		}},
		{"claim status patched by the claim controller", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{}
			_ = c.Get(ctx, claimKey, cl)
			orig := cl.DeepCopy()
			cl.Status.Address, cl.Status.Phase = "10.0.16.5", enipamv1alpha1.ClaimPlacing
			return cl, c.Status().Patch(ctx, cl, client.MergeFrom(orig))
		}},
		// The pool controller's note: a raw merge patch of
		// status.placement alone, every field spelled out.
		{"placement note written", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}}
			return cl, c.Status().Patch(ctx, cl, client.RawPatch(types.MergePatchType,
				[]byte(`{"status":{"placement":{"address":"10.0.16.5","node":"node-1","observedGeneration":1,"term":"t","reason":"Placing","message":"m"}}}`)))
		}},
		{"placement note rewritten", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}}
			return cl, c.Status().Patch(ctx, cl, client.RawPatch(types.MergePatchType,
				[]byte(`{"status":{"placement":{"address":"","node":"node-1","observedGeneration":1,"term":"t","reason":"AddressTaken","message":""}}}`)))
		}},
		{"placement note removed", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}}
			return cl, c.Status().Patch(ctx, cl, client.RawPatch(types.MergePatchType, []byte(`{"status":{"placement":null}}`)))
		}},
		{"claim deleted", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}}
			return cl, c.Delete(ctx, cl)
		}},
		{"claim status patched while deleted", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{}
			_ = c.Get(ctx, claimKey, cl)
			orig := cl.DeepCopy()
			cl.Status.Address = "10.0.16.6"
			return cl, c.Status().Patch(ctx, cl, client.MergeFrom(orig))
		}},
		{"finalizer removed from the deleted claim", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{}
			_ = c.Get(ctx, claimKey, cl)
			orig := cl.DeepCopy()
			cl.Finalizers = nil
			return cl, c.Patch(ctx, cl, client.MergeFrom(orig))
		}},
		{"patch of a claim gone", func(c client.Client) (client.Object, error) {
			cl := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}}
			return cl, c.Patch(ctx, cl, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"address":"10.0.16.7"}}`)))
		}},
	}
	slow, fast := build(false), build(true)
	for _, w := range writes {
		so, serr := w.write(slow)
		fo, ferr := w.write(fast)
		if fmt.Sprint(serr) != fmt.Sprint(ferr) {
			t.Errorf("%s: the fake client answers %v, the writer %v", w.name, serr, ferr)
		}
		if !reflect.DeepEqual(so, fo) {
			t.Errorf("%s: the fake client leaves\n  %+v\nthe writer\n  %+v", w.name, so, fo)
		}
		var sn, fn ciliumv2.CiliumNode
		serrN, ferrN := slow.Get(ctx, nodeKey, &sn), fast.Get(ctx, nodeKey, &fn)
		var sc, fc enipamv1alpha1.StaticIPClaim
		serrC, ferrC := slow.Get(ctx, claimKey, &sc), fast.Get(ctx, claimKey, &fc)
		var sk, fk corev1.Node
		serrK, ferrK := slow.Get(ctx, nodeKey, &sk), fast.Get(ctx, nodeKey, &fk)
		if !reflect.DeepEqual(sn, fn) || !reflect.DeepEqual(sc, fc) || !reflect.DeepEqual(sk, fk) ||
			fmt.Sprint(serrN, serrC, serrK) != fmt.Sprint(ferrN, ferrC, ferrK) {
			t.Errorf("%s: stored objects differ:\n  fake   %+v\n  writer %+v\n  fake   %+v %v\n  writer %+v %v\n  fake   %+v\n  writer %+v",
				w.name, sn, fn, sc, serrC, fc, ferrC, sk, fk)
		}
	}
	// Every write went through the writer but three: the delete, the
	// patch of the claim gone and the status patch of a kind without a
	// status subresource.
	if handled != len(writes)-3 {
		t.Errorf("the writer took %d of the %d writes, want %d", handled, len(writes), len(writes)-3)
	}
}
