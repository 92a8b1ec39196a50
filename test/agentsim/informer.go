package agentsim

import (
	"context"
	"log/slog"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newCiliumNodeInformer returns one informer over every CiliumNode. Each
// real agent watches only its own (a field selector on its name); thousands
// of such watches in one process would measure the simulator, not the
// operator, so all simulated agents share this one.
func newCiliumNodeInformer(c client.WithWatch, log *slog.Logger) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &ciliumv2.CiliumNodeList{}
			err := c.List(ctx, list, &client.ListOptions{Raw: &opts, Limit: opts.Limit, Continue: opts.Continue})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &ciliumv2.CiliumNodeList{}, &client.ListOptions{Raw: &opts})
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &ciliumv2.CiliumNode{}, 0, cache.Indexers{})
	// Managed fields are most of a small object's size and of no use here.
	// A status update without them keeps the server's.
	if err := inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}); err != nil {
		log.Warn("informer transform not set", "error", err)
	}
	return inf
}
