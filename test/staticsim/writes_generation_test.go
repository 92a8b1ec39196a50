package staticsim

import (
	"context"
	"encoding/json"
	"testing"

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

// TestWriterNumbersGenerations holds the writer, with generations on as
// the simulation runs it, to kube-apiserver's rule for a kind with a
// status subresource: an object created by an apply starts at 1; a
// write through the main resource (merge patch, update, apply) that
// changes the spec makes the next generation; one that changes only
// metadata, or the same spec again, does not; a status write never
// does; a generation a client writes is ignored. The placement note's
// generation key (claims.CurrentNote) rests on this.
func TestWriterNumbersGenerations(t *testing.T) {
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	statusObjs := []client.Object{&enipamv1alpha1.StaticIPClaim{}, &enipamv1alpha1.NodeRouting{}}
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace, Generation: 1},
		Spec: enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.16.200"}}
	fc := fake.NewClientBuilder().WithScheme(scheme).WithGlobalResourceVersionCounter().WithObjectTracker(tracker).
		WithStatusSubresource(statusObjs...).WithObjects(claim).Build()
	wr, err := newWriter(fc, tracker, scheme, statusObjs...)
	if err != nil {
		t.Fatal(err)
	}
	wr.generations = true
	unhandled := 0
	c := interceptor.NewClient(fc, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if h, err := wr.apply(obj, p); h {
				return err
			}
			if h, err := wr.patch(obj, p, false); h {
				return err
			}
			unhandled++
			return c.Patch(ctx, obj, p, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if h, err := wr.update(obj, false); h {
				return err
			}
			unhandled++
			return c.Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if h, err := wr.patch(obj, p, true); h {
				return err
			}
			unhandled++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	ctx := context.Background()
	claimKey := client.ObjectKey{Namespace: namespace, Name: "db-0"}
	getClaim := func() *enipamv1alpha1.StaticIPClaim {
		cl := &enipamv1alpha1.StaticIPClaim{}
		if err := c.Get(ctx, claimKey, cl); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	apply := func(spec enipamv1alpha1.NodeRoutingSpec) int64 {
		data, err := json.Marshal(map[string]any{"apiVersion": enipamv1alpha1.GroupVersion.String(), "kind": "NodeRouting",
			"metadata": map[string]any{"name": "node-1"}, "spec": spec})
		if err != nil {
			t.Fatal(err)
		}
		nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
		if err := c.Patch(ctx, nr, client.RawPatch(types.ApplyPatchType, data), client.FieldOwner("enipam-operator"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		stored := &enipamv1alpha1.NodeRouting{}
		if err := c.Get(ctx, client.ObjectKey{Name: "node-1"}, stored); err != nil {
			t.Fatal(err)
		}
		return stored.Generation
	}
	steps := []struct {
		name  string
		write func() int64
		want  int64
	}{
		{"a spec merge patch (the extender's bind)", func() int64 {
			if err := c.Patch(ctx, &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeName":"node-2"}}`))); err != nil {
				t.Fatal(err)
			}
			return getClaim().Generation
		}, 2},
		{"the same spec again", func() int64 {
			if err := c.Patch(ctx, &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: namespace}},
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeName":"node-2"}}`))); err != nil {
				t.Fatal(err)
			}
			return getClaim().Generation
		}, 2},
		{"metadata alone (a finalizer)", func() int64 {
			cl := getClaim()
			base := cl.DeepCopy()
			cl.Finalizers = append(cl.Finalizers, "enipam.io/test")
			if err := c.Patch(ctx, cl, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			return getClaim().Generation
		}, 2},
		{"a status patch", func() int64 {
			cl := getClaim()
			base := cl.DeepCopy()
			cl.Status.Address, cl.Status.NodeName = "10.0.16.200", "node-2"
			if err := c.Status().Patch(ctx, cl, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			return getClaim().Generation
		}, 2},
		{"an update changing the spec, with a generation of the client's own", func() int64 {
			cl := getClaim()
			cl.Spec.Address, cl.Generation = "10.0.16.201", 40
			if err := c.Update(ctx, cl); err != nil {
				t.Fatal(err)
			}
			return getClaim().Generation
		}, 3},
		{"an update of metadata alone", func() int64 {
			cl := getClaim()
			cl.Labels = map[string]string{"a": "b"}
			if err := c.Update(ctx, cl); err != nil {
				t.Fatal(err)
			}
			return getClaim().Generation
		}, 3},
		{"an apply that creates", func() int64 {
			return apply(enipamv1alpha1.NodeRoutingSpec{ExcludeInterfaceTags: map[string]string{"a": "b"}})
		}, 1},
		{"the same apply again", func() int64 {
			return apply(enipamv1alpha1.NodeRoutingSpec{ExcludeInterfaceTags: map[string]string{"a": "b"}})
		}, 1},
		{"an apply changing the spec", func() int64 { return apply(enipamv1alpha1.NodeRoutingSpec{}) }, 2},
	}
	for _, s := range steps {
		if got := s.write(); got != s.want {
			t.Errorf("%s: generation %d, want %d", s.name, got, s.want)
		}
	}
	if unhandled > 0 {
		t.Errorf("%d writes went to the fake client, which numbers no generation", unhandled)
	}
	if got := getClaim().Status.Address; got != "10.0.16.200" {
		t.Errorf("the status write was lost: address %q", got)
	}
}
