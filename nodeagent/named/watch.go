// Package named watches one cluster-scoped object by name: the agent's
// CiliumNode and its NodeRouting. It lists and watches with a
// metadata.name field selector, so the apiserver sends that object alone
// (a node's agent never receives the cluster's objects) and the agent
// needs no get verb.
package named

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watcher keeps the latest copy of one object of type T.
type Watcher[T client.Object] struct {
	c       client.WithWatch
	name    string
	kind    string
	newObj  func() T
	newList func() client.ObjectList
	log     *slog.Logger

	mu     sync.Mutex
	cur    T
	has    bool
	synced func() bool
}

// NewWatcher returns a Watcher of the object of kind called name; newObj
// and newList make empty values of its type and list type. It does nothing
// until Start.
func NewWatcher[T client.Object](c client.WithWatch, kind, name string, newObj func() T, newList func() client.ObjectList, log *slog.Logger) *Watcher[T] {
	return &Watcher[T]{c: c, name: name, kind: kind, newObj: newObj, newList: newList, log: log.With("kind", kind)}
}

// Start watches until ctx ends. notify is called after every change of
// the object (created, updated, deleted) from the watch's goroutine; it
// must not block.
func (w *Watcher[T]) Start(ctx context.Context, notify func()) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return w.list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = w.selector()
			return w.c.Watch(ctx, w.newList(), &client.ListOptions{Raw: &opts})
		},
	}
	set := func(obj any) {
		o, ok := obj.(T)
		if !ok || o.GetName() != w.name {
			return
		}
		w.mu.Lock()
		w.cur, w.has = o, true
		w.mu.Unlock()
		notify()
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    w.newObj(),
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			DeleteFunc: func(any) {
				w.log.Info("object deleted", "name", w.name)
				var zero T
				w.mu.Lock()
				w.cur, w.has = zero, false
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
// "no object" means "not known yet", not "absent".
func (w *Watcher[T]) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced != nil && w.synced()
}

// Current returns the latest object seen, and false if there is none
// (not created yet, or deleted). The object is shared: read, never modify.
func (w *Watcher[T]) Current() (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur, w.has
}

// Read lists the object from the apiserver afresh, as the watch lists it
// (no get verb), leaving the watch's copy alone; false if there is none.
// The object is the caller's.
func (w *Watcher[T]) Read(ctx context.Context) (T, bool, error) {
	var zero T
	list, err := w.list(ctx, metav1.ListOptions{})
	if err != nil {
		return zero, false, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return zero, false, err
	}
	for _, item := range items {
		if o, ok := item.(T); ok && o.GetName() == w.name {
			return o, true, nil
		}
	}
	return zero, false, nil
}

// list lists with opts, narrowed to the object by its name.
func (w *Watcher[T]) list(ctx context.Context, opts metav1.ListOptions) (client.ObjectList, error) {
	opts.FieldSelector = w.selector()
	list := w.newList()
	return list, w.c.List(ctx, list, &client.ListOptions{Raw: &opts})
}

// selector selects the object by its name: the apiserver sends no other.
func (w *Watcher[T]) selector() string {
	return fields.OneTermEqualSelector("metadata.name", w.name).String()
}
