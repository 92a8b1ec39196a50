package ciliumnode

import (
	"context"
	"log/slog"
	"sync"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watcher keeps the latest copy of one CiliumNode. It lists and watches
// with a metadata.name field selector, so the apiserver sends it that
// object alone: a node's agent never receives the cluster's CiliumNodes.
type Watcher struct {
	c    client.WithWatch
	name string
	log  *slog.Logger

	mu     sync.Mutex
	cur    *ciliumv2.CiliumNode
	synced func() bool
}

// NewWatcher returns a Watcher of the CiliumNode called name. It does
// nothing until Start.
func NewWatcher(c client.WithWatch, name string, log *slog.Logger) *Watcher {
	return &Watcher{c: c, name: name, log: log.With("node", name)}
}

// Start watches until ctx ends. notify is called after every change of
// the object (created, updated, deleted) from the watch's goroutine; it
// must not block.
func (w *Watcher) Start(ctx context.Context, notify func()) error {
	sel := fields.OneTermEqualSelector("metadata.name", w.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			list := &ciliumv2.CiliumNodeList{}
			return list, w.c.List(ctx, list, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return w.c.Watch(ctx, &ciliumv2.CiliumNodeList{}, &client.ListOptions{Raw: &opts})
		},
	}
	set := func(obj any) {
		cn, ok := obj.(*ciliumv2.CiliumNode)
		if !ok || cn.Name != w.name {
			return
		}
		w.mu.Lock()
		w.cur = cn
		w.mu.Unlock()
		notify()
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &ciliumv2.CiliumNode{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			DeleteFunc: func(any) {
				w.log.Info("CiliumNode deleted; routing left as it is")
				w.mu.Lock()
				w.cur = nil
				w.mu.Unlock()
				notify()
			},
		},
	})
	w.mu.Lock()
	w.synced = ctrl.HasSynced
	w.mu.Unlock()
	ctrl.RunWithContext(ctx)
	return nil
}

// Synced reports whether the first list has been received: before it,
// "no CiliumNode" means "not known yet", not "absent".
func (w *Watcher) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced != nil && w.synced()
}

// Current returns the latest CiliumNode seen, or nil if there is none
// (not created yet, or deleted). The object is shared: read, never modify.
func (w *Watcher) Current() *ciliumv2.CiliumNode {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}
