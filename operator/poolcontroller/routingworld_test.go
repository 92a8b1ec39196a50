package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/policy"
)

// routingWorld is node n1 (instance i-1) with its NodeRouting in a fake
// apiserver, and a Reconciler that reads and writes it, through the
// interceptors a test sets for how its cache or apiserver behaves: the
// setup the tests of the NodeRouting's read and apply share.
type routingWorld struct {
	t    *testing.T
	base client.WithWatch // the apiserver, seen through no interceptor
	r    *Reconciler
	cn   *ciliumv2.CiliumNode // n1, as a reconcile that reads nothing else sees it
	// stale, while set, is what laggingCache shows of n1's NodeRouting.
	stale *enipamv1alpha1.NodeRouting
	// applies counts the server-side applies laggingCache passes on.
	applies int
}

// newRoutingWorld is n1's world with nr stored, its reconciler reading
// the apiserver directly until the test intercepts it.
func newRoutingWorld(t *testing.T, nr *enipamv1alpha1.NodeRouting) *routingWorld {
	base := fakeAPIServer(t, nr)
	return &routingWorld{t: t, base: base, r: routingReconciler(base),
		cn: &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}}}
}

// fakeAPIServer holds objs, with the status subresource of CiliumNodes
// and NodeRoutings, as their CRDs declare it.
func fakeAPIServer(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := ciliumv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.NodeRouting{}).Build()
}

// routingReconciler is a Reconciler on c, on the wall clock, its log
// discarded.
func routingReconciler(c client.Client) *Reconciler {
	return &Reconciler{client: c, now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil)), nodes: map[string]*memory{}}
}

// intercept makes the reconciler reach the apiserver through funcs.
func (w *routingWorld) intercept(funcs interceptor.Funcs) {
	w.r.client = interceptor.NewClient(w.base, funcs)
}

// laggingCache is a cache that shows w.stale while it is set (the writes
// since not delivered) in front of an apiserver that makes a new
// generation on each change of the spec; it counts the applies.
func (w *routingWorld) laggingCache() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if w.stale != nil {
				w.stale.DeepCopyInto(obj.(*enipamv1alpha1.NodeRouting))
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			before := &enipamv1alpha1.NodeRouting{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); err != nil {
				return err
			}
			if patch.Type() == types.ApplyPatchType {
				w.applies++
			}
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			nr := obj.(*enipamv1alpha1.NodeRouting)
			if equality.Semantic.DeepEqual(before.Spec, nr.Spec) {
				return nil
			}
			nr.Generation = before.Generation + 1 // as the apiserver does
			return c.Update(ctx, nr)
		},
	}
}

// read is a reconcile of n1 on instance i-1 under first interface index
// first, begun with cn, that has read its NodeRouting and decided on it.
func (w *routingWorld) read(cn *ciliumv2.CiliumNode, first int) *nodeSync {
	w.t.Helper()
	s := testSync(w.r, cn, deciding{mem: w.r.memory("n1"), cn: cn.DeepCopy()})
	s.instanceID = "i-1"
	s.cfg = policy.Config{}
	s.cfg.FirstInterfaceIndex = first
	if err := s.readDecideRouting(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return s
}

// reconcile is read, then decide's change to what was decided (none when
// nil), then the NodeRouting's write.
func (w *routingWorld) reconcile(cn *ciliumv2.CiliumNode, first int, decide func(s *nodeSync)) *nodeSync {
	w.t.Helper()
	s := w.read(cn, first)
	if decide != nil {
		decide(s)
	}
	if err := s.writeRouting(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return s
}

// stored is n1's NodeRouting as the apiserver holds it.
func (w *routingWorld) stored() *enipamv1alpha1.NodeRouting {
	w.t.Helper()
	got := &enipamv1alpha1.NodeRouting{}
	if err := w.base.Get(context.Background(), types.NamespacedName{Name: "n1"}, got); err != nil {
		w.t.Fatal(err)
	}
	return got
}
