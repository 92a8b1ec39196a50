package poolcontroller

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestNodeRoutingSpecWrittenOncePerReconcile: a node whose policy moved
// its first interface index to 1, and one of whose static addresses
// leaves with its pod gone, has its NodeRouting's spec written in one
// patch carrying both, with an optimistic lock (the endpoint query's
// generation is the one that patch made); a reconcile with nothing new
// writes nothing.
func TestNodeRoutingSpecWrittenOncePerReconcile(t *testing.T) {
	w := newRoutingWorld(t, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 3},
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1"}})
	var patches []client.Patch
	w.intercept(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches = append(patches, patch)
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	reconcile := func(queries []string) *nodeSync {
		return w.reconcile(w.cn, 1, func(s *nodeSync) { s.askEndpoints(queries) })
	}

	s := reconcile([]string{"10.0.1.10"})
	if len(patches) != 1 {
		t.Fatalf("%d NodeRouting patches, want 1", len(patches))
	}
	got := w.stored()
	if got.Spec.FirstInterfaceIndex != 1 || !slices.Equal(got.Spec.EndpointQueries, []string{"10.0.1.10"}) {
		t.Errorf("spec %+v, want first interface index 1 and the query", got.Spec)
	}
	if data, err := patches[0].Data(s.routing); err != nil || !strings.Contains(string(data), `"resourceVersion"`) {
		t.Errorf("patch %s (%v), want an optimistic lock (resourceVersion)", data, err)
	}
	if g, ok := s.mem.asked["10.0.1.10"]; !ok || g != got.Generation {
		t.Errorf("asked %v, want 10.0.1.10 at the written generation %d", s.mem.asked, got.Generation)
	}

	reconcile([]string{"10.0.1.10"})
	if len(patches) != 1 {
		t.Errorf("%d NodeRouting patches after a reconcile with nothing new, want still 1", len(patches))
	}
}
