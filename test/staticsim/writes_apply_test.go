package staticsim

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
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

// TestWriterAppliesAsTheFakeClient runs the same writes of a NodeRouting
// through the fake client with its field-managed tracker (server-side
// apply as the apiserver does it) and through the writer over the plain
// tracker the simulation uses: every answer and stored object (less the
// managedFields the writer does not keep) must be the same. The writes
// are the operator's applies as enipam-operator (the one applier of the
// spec): one that creates the object with a finalizer, an exclude tag and
// an endpoint query; the agent's status patch; one that drops the
// finalizer, the tag and the query and adds a capacity; one under a
// stale resourceVersion (a conflict); one under the current one; and the
// same again (no change, a new version all the same). Only the first
// apply's resourceVersion differs: see writer.apply.
func TestWriterAppliesAsTheFakeClient(t *testing.T) {
	handled := 0
	build := func(fast bool) client.WithWatch {
		scheme, err := operator.Scheme()
		if err != nil {
			t.Fatal(err)
		}
		statusObjs := []client.Object{&enipamv1alpha1.NodeRouting{}}
		b := fake.NewClientBuilder().WithScheme(scheme).WithGlobalResourceVersionCounter().WithStatusSubresource(statusObjs...)
		if !fast {
			return b.Build()
		}
		tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
		fc := b.WithObjectTracker(tracker).Build()
		wr, err := newWriter(fc, tracker, scheme, statusObjs...)
		if err != nil {
			t.Fatal(err)
		}
		return interceptor.NewClient(fc, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				if h, err := wr.apply(obj, p); h {
					handled++
					return err
				}
				return c.Patch(ctx, obj, p, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if h, err := wr.patch(obj, p, true); h {
					handled++
					return err
				}
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		})
	}
	ctx := context.Background()
	key := client.ObjectKey{Name: "node-1"}
	owner := metav1.OwnerReference{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: "node-1", UID: "uid-cn-node-1"}
	apply := func(c client.Client, rv string, finalizers []string, spec enipamv1alpha1.NodeRoutingSpec) (client.Object, error) {
		data, err := json.Marshal(map[string]any{
			"apiVersion": enipamv1alpha1.GroupVersion.String(), "kind": "NodeRouting",
			"metadata": map[string]any{"name": "node-1", "resourceVersion": rv, "finalizers": finalizers,
				"ownerReferences": []metav1.OwnerReference{owner}},
			"spec": spec,
		})
		if err != nil {
			t.Fatal(err)
		}
		nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
		err = c.Patch(ctx, nr, client.RawPatch(types.ApplyPatchType, data),
			client.FieldOwner(enipamv1alpha1.FieldManagerOperator), client.ForceOwnership)
		nr.ManagedFields = nil
		return nr, err
	}
	current := func(c client.Client) string {
		nr := &enipamv1alpha1.NodeRouting{}
		if err := c.Get(ctx, key, nr); err != nil {
			t.Fatal(err)
		}
		return nr.ResourceVersion
	}
	later := enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", FirstInterfaceIndex: 1,
		Capacity: &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 4, CanGrow: true, Subnets: []string{"subnet-1"}}}
	writes := []struct {
		name  string
		write func(c client.Client) (client.Object, error)
	}{
		{"apply creating the object", func(c client.Client) (client.Object, error) {
			return apply(c, "", []string{enipamv1alpha1.NodeStaticIPFinalizer}, enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1", FirstInterfaceIndex: 1,
				ExcludeInterfaceTags: map[string]string{"skip": "yes"}, EndpointQueries: []string{"10.0.16.9"},
				StaticIP: &enipamv1alpha1.NodeStaticIP{AllocationID: "eipalloc-1", InstanceID: "i-1"}})
		}},
		{"the agent's status patch", func(c client.Client) (client.Object, error) {
			nr := &enipamv1alpha1.NodeRouting{}
			_ = c.Get(ctx, key, nr)
			orig := nr.DeepCopy()
			nr.Status.RoutedENIs, nr.Status.ENIs = 1, []enipamv1alpha1.RoutedENI{{ID: "eni-1", Number: 1, IPs: []string{"10.0.16.9"}}}
			return nr, c.Status().Patch(ctx, nr, client.MergeFrom(orig))
		}},
		{"apply dropping the finalizer, the tag and the query", func(c client.Client) (client.Object, error) {
			return apply(c, "", nil, later)
		}},
		{"apply under a stale resourceVersion", func(c client.Client) (client.Object, error) {
			later.FirstInterfaceIndex = 2
			return apply(c, "1", nil, later)
		}},
		{"apply under the current resourceVersion", func(c client.Client) (client.Object, error) {
			return apply(c, current(c), nil, later)
		}},
		{"the same apply again", func(c client.Client) (client.Object, error) {
			return apply(c, "", nil, later)
		}},
	}
	slow, fast := build(false), build(true)
	for i, w := range writes {
		so, serr := w.write(slow)
		fo, ferr := w.write(fast)
		if fmt.Sprint(serr) != fmt.Sprint(ferr) {
			t.Errorf("%s: the fake client answers %v, the writer %v", w.name, serr, ferr)
		}
		if i == 0 {
			// The fake stores an object an apply created with no
			// resourceVersion; the apiserver, and the writer, number it.
			if so.GetResourceVersion() != "" || fo.GetResourceVersion() == "" {
				t.Errorf("%s: resourceVersions %q (fake) and %q (writer), want none and one", w.name, so.GetResourceVersion(), fo.GetResourceVersion())
			}
			fo.SetResourceVersion("")
		}
		if !reflect.DeepEqual(so, fo) {
			t.Errorf("%s: the fake client leaves\n  %+v\nthe writer\n  %+v", w.name, so, fo)
		}
		var sn, fn enipamv1alpha1.NodeRouting
		serrN, ferrN := slow.Get(ctx, key, &sn), fast.Get(ctx, key, &fn)
		sn.ManagedFields = nil
		if i == 0 {
			fn.ResourceVersion = ""
		}
		if !reflect.DeepEqual(sn, fn) || fmt.Sprint(serrN) != fmt.Sprint(ferrN) {
			t.Errorf("%s: stored objects differ:\n  fake   %+v %v\n  writer %+v %v", w.name, sn, serrN, fn, ferrN)
		}
	}
	if handled != len(writes) {
		t.Errorf("the writer took %d of the %d writes, want all", handled, len(writes))
	}
}
