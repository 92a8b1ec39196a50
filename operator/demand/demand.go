// Package demand is enipam-operator's pod watch: per node, the pods that
// will take an address from its pool but have none yet, and when pods
// arrived on it. Cilium's agent lists the addresses pods use in
// status.ipam.used at most once per ipam.ciliumNodeUpdateRate (15 s by
// default, daemon/cmd/daemon_main.go; pkg/ipam/crd.go newNodeStore
// refreshes the CiliumNode through a trigger with that MinInterval,
// refreshNodeTrigger), but a pod is known from the moment it
// is bound to a node, before kubelet creates its sandbox and makes the
// CNI call: sizing the pool for it then leaves only one EC2 round trip to
// cover, not the agent's reporting lag.
//
// The watch is cheap: the apiserver sends only the pods bound to a node,
// not on the host network, without an address and not finished (field
// selectors spec.nodeName, spec.hostNetwork, status.podIP, status.phase,
// all selectable fields of Pods), and the cache keeps of each only its
// identity, node, deletion mark and static-address request: a
// waiting.Pod, the model of pods waiting for an address that the
// scheduler's tracker shares (internal/waiting).
// A pod leaves the watch (a delete event) when it gets its address, ends
// or is deleted.
//
// A pod counts toward its node's demand while it is bound there, not
// being deleted and not static-IP (a pod annotated enipam.io/static-ip
// gets an owner-stamped address of its own, outside the dynamic pool),
// and Cilium's agent does not list it in status.ipam.used; and after it
// got its address, until the agent lists it, for at most StartedGrace.
package demand

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/internal/waiting"
)

// Options tune the watch.
type Options struct {
	// StartedGrace bounds how long a pod that got its address keeps
	// counting until Cilium's agent lists it in status.ipam.used. Keep it
	// above the agent's update interval (ipam.ciliumNodeUpdateRate, 15 s
	// by default).
	StartedGrace time.Duration
	// History is how long arrivals are remembered: at least the longest
	// memory the adaptive headroom asks for.
	History time.Duration
	// MaxArrivals bounds the arrivals remembered per node (the most
	// recent are kept).
	MaxArrivals int
}

// DefaultOptions: three of Cilium's default update intervals for started
// pods; ten minutes and 256 arrivals of history per node.
func DefaultOptions() Options {
	return Options{StartedGrace: 45 * time.Second, History: 10 * time.Minute, MaxArrivals: 256}
}

// Validate reports invalid options.
func (o Options) Validate() error {
	if o.StartedGrace <= 0 || o.History <= 0 || o.MaxArrivals <= 0 {
		return fmt.Errorf("demand watch: started grace, history and max arrivals must be positive, got %v, %v, %d", o.StartedGrace, o.History, o.MaxArrivals)
	}
	return nil
}

// Selector asks the apiserver for the pods that may still take a pool
// address: bound to a node, not on the host network, no address yet, not
// finished.
var Selector = waiting.BoundSelector

// Watch keeps every node's demand from the pod watch. Build it with New,
// run it with Start; Waiting, Arrivals and HasSynced may be called from
// any goroutine.
type Watch struct {
	c    client.WithWatch
	opts Options
	log  *slog.Logger
	now  func() time.Time

	mu       sync.Mutex
	pods     *waiting.Set
	started  *waiting.Started
	arrivals map[string][]time.Time // node → when pods were bound there, oldest first
	notify   []func(node string)
	synced   cache.InformerSynced
}

// New returns an inert Watch reading through c.
func New(c client.WithWatch, opts Options, log *slog.Logger) *Watch {
	return &Watch{
		c: c, opts: opts, log: log, now: time.Now,
		pods:     waiting.NewSet(),
		started:  waiting.NewStarted(opts.StartedGrace),
		arrivals: map[string][]time.Time{},
	}
}

// OnChange registers f, called with a node's name (without the Watch's
// lock) whenever the pods it waits for change. Register before Start.
func (w *Watch) OnChange(f func(node string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notify = append(w.notify, f)
}

// Start runs the watch until ctx ends.
func (w *Watch) Start(ctx context.Context) error {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = Selector
			list := &corev1.PodList{}
			return list, w.c.List(ctx, list, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = Selector
			return w.c.Watch(ctx, &corev1.PodList{}, &client.ListOptions{Raw: &opts})
		},
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Transform:     waiting.Slim,
		Handler: cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { w.seen(obj, !initial) },
			UpdateFunc: func(_, obj any) { w.seen(obj, false) },
			DeleteFunc: w.gone,
		},
	})
	w.mu.Lock()
	w.synced = ctrl.HasSynced
	w.mu.Unlock()
	sweep := time.NewTicker(w.opts.StartedGrace)
	defer sweep.Stop()
	done := make(chan struct{})
	go func() {
		ctrl.RunWithContext(ctx)
		close(done)
	}()
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case <-sweep.C:
			w.sweep()
		}
	}
}

// HasSynced reports whether the watch has listed the pods once: before,
// no demand is known.
func (w *Watch) HasSynced() bool {
	w.mu.Lock()
	synced := w.synced
	w.mu.Unlock()
	return synced != nil && synced()
}

// Waiting returns how many pods bound to node will take an address from
// its pool and are not listed by Cilium's agent as using one: those
// without an address (not being deleted, not static-IP), and those that
// got one in the last StartedGrace. listed says whether the agent's
// status.ipam.used names an owner ("namespace/name").
func (w *Watch) Waiting(node string, listed func(owner string) bool) int {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, p := range w.pods.On(node) {
		if !p.Deleting() && !p.Static() && !listed(p.Owner()) {
			n++
		}
	}
	return n + w.started.Count(node, now, listed)
}

// Arrivals returns when pods that take a pool address were bound to node
// within the last since, oldest first (a copy).
func (w *Watch) Arrivals(node string, since time.Duration) []time.Time {
	from := w.now().Add(-since)
	w.mu.Lock()
	defer w.mu.Unlock()
	all := w.arrivals[node]
	i, _ := slices.BinarySearchFunc(all, from, func(t, from time.Time) int { return t.Compare(from) })
	return slices.Clone(all[i:])
}

// Counts reports the pods the watch follows and the nodes it remembers
// arrivals of, for diagnostics.
func (w *Watch) Counts() (pods, nodes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pods.Len(), len(w.arrivals)
}

// seen files a pod without an address under its node; arrived says it
// came into the watch now (bound now), not in the first list.
func (w *Watch) seen(obj any, arrived bool) {
	p, ok := obj.(*waiting.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	old := w.pods.Put(p)
	known := old != nil
	if arrived && !known && !p.Deleting() && !p.Static() {
		w.arrived(p.Node, w.now())
	}
	changed := !known || old.Deleting() != p.Deleting() || old.Static() != p.Static()
	notify := w.notify
	w.mu.Unlock()
	if changed {
		for _, f := range notify {
			f(p.Node)
		}
	}
}

// gone handles a pod that left the watch: deleted, finished, or given its
// address. One that was not being deleted has most likely started: it
// keeps counting until the agent lists it, or for StartedGrace.
func (w *Watch) gone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*waiting.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	if old := w.pods.Remove(p.UID); old != nil {
		p = old
	}
	if !p.Deleting() && !p.Static() {
		w.started.Add(p.Node, p.Owner(), w.now())
	}
	notify := w.notify
	w.mu.Unlock()
	for _, f := range notify {
		f(p.Node)
	}
}

// arrived records an arrival on node. Callers hold w.mu.
func (w *Watch) arrived(node string, at time.Time) {
	a := append(w.arrivals[node], at)
	if len(a) > w.opts.MaxArrivals {
		a = slices.Delete(a, 0, len(a)-w.opts.MaxArrivals)
	}
	w.arrivals[node] = a
}

// sweep forgets expired started pods and arrivals older than History.
func (w *Watch) sweep() {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started.Sweep(now)
	from := now.Add(-w.opts.History)
	for node, a := range w.arrivals {
		i := 0
		for i < len(a) && a[i].Before(from) {
			i++
		}
		if i == len(a) {
			delete(w.arrivals, node)
			continue
		}
		if i > 0 {
			w.arrivals[node] = slices.Clone(a[i:])
		}
	}
}
