// Package tracker keeps, for enipam-scheduler, what decides whether a node
// has an address for one more pod: each node's CiliumNode pool (digested
// with the node's ENIs: its status.eni.enis and its NodeRouting's
// spec.enis), the operator's capacity report (NodeRouting
// spec.capacity), the pods promised an address there but not started
// yet, and the StaticIPClaims (where each static address is, and whether
// the operator checked it). It reads only informer caches and answers
// from memory.
//
// A pod is promised an address on a node, and counted against its free
// ones, while it is:
//
//   - bound or nominated there, with no address yet (a pod watch with a
//     field selector: only such pods reach the tracker);
//   - started there (it left that watch) but not yet listed by Cilium's
//     agent in status.ipam.used, which it rewrites at most every 15 s by
//     default; for at most StartedGrace;
//   - held: the scheduler may just have placed it there, and its Binding
//     has not been seen yet (Hold); until the pod is seen bound or
//     nominated, or for at most HoldTTL.
//
// A pod that takes an entry of its own there (room.OwnEntry: a static
// address stamped for it, or its claim's first placement under way on
// the node the claim asks for) is counted against no free address there;
// of the first placements there on a marked entry alone, all but as many
// as the pool has marks are (a mark may be another claim's).
//
// Cilium's agent names a used address's owner "namespace/name", without
// the pod's UID, so a pod counts as listed only once an address of that
// owner appears in the list after the tracker first saw the pod: an
// earlier pod of the same name (a StatefulSet pod deleted and recreated
// at once) may still be listed on the node. Erring that way costs at
// most a count too many: a pod given the very address its predecessor
// had, without the address leaving the list between two of the agent's
// writes, counts until StartedGrace after it started; and a pod already
// bound with its address listed when the scheduler starts counts until
// then too if the CiliumNode was read before the pod.
package tracker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// Config tunes how long uncertain promises are kept.
type Config struct {
	// HoldTTL bounds how long a pod the scheduler may have placed counts
	// against the nodes it passed on, when its placement is never seen.
	HoldTTL time.Duration
	// StartedGrace bounds how long a pod that got its address counts
	// until Cilium's agent lists it in status.ipam.used. Keep it above the
	// agent's CiliumNode update interval (Helm ipam.ciliumNodeUpdateRate,
	// 15 s by default).
	StartedGrace time.Duration
}

// DefaultConfig returns the defaults: holds of 30 s (a Binding is
// normally seen within milliseconds; slow binds set the pod's nominated
// node, seen sooner), and 45 s, three of Cilium's default update
// intervals, for started pods.
func DefaultConfig() Config {
	return Config{HoldTTL: 30 * time.Second, StartedGrace: 45 * time.Second}
}

// Validate reports invalid settings.
func (c Config) Validate() error {
	var errs []error
	if c.HoldTTL <= 0 {
		errs = append(errs, fmt.Errorf("hold TTL must be positive, got %v", c.HoldTTL))
	}
	if c.StartedGrace <= 0 {
		errs = append(errs, fmt.Errorf("started-pod grace must be positive, got %v", c.StartedGrace))
	}
	return errors.Join(errs...)
}

// Tracker is the scheduler's view of every node's addresses. Build it
// with New, run it with Start; View and Hold may be called from any
// goroutine.
type Tracker struct {
	c   client.WithWatch
	cfg Config
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	pools map[string]*room.Pool
	// nodes holds each CiliumNode as last digested into pools, and enis
	// each NodeRouting's spec.enis (both as stripped, shared with the
	// informers' stores): room.Digest reads both, so a change of either
	// digests the node's pool again.
	nodes   map[string]*ciliumv2.CiliumNode
	enis    map[string][]enipamv1alpha1.NodeENI
	caps    map[string]*enipamv1alpha1.NodeCapacity
	pods    *waiting.Set
	started *waiting.Started
	holds   map[types.UID]*hold
	held    map[string]map[types.UID]*hold // node → holds passing it
	claims  map[string]room.Claim          // "namespace/name" → claim
	// seq counts the handlers' calls: the order in which the tracker saw
	// pods and pool changes (room.Pool.UsedBy). sights holds, by owner
	// ("namespace/name"), the pod of that name the tracker follows and
	// when it first saw it: a name can be reused (a StatefulSet pod
	// recreated) while its earlier pod is still listed as used.
	seq     uint64
	sights  map[string]sight
	changed chan struct{}
	synced  []cache.InformerSynced
}

// hold is a pod the scheduler may have placed on any of nodes.
type hold struct {
	owner string // "namespace/name"
	nodes []string
	at    time.Time
}

// sight is when the tracker first saw a pod (seq), and when it left the
// pod watch with an address (left; zero before).
type sight struct {
	uid  types.UID
	seq  uint64
	left time.Time
}

// New returns an inert Tracker reading through c.
func New(c client.WithWatch, cfg Config, log *slog.Logger) *Tracker {
	return &Tracker{
		c: c, cfg: cfg, log: log, now: time.Now,
		pools:   map[string]*room.Pool{},
		nodes:   map[string]*ciliumv2.CiliumNode{},
		enis:    map[string][]enipamv1alpha1.NodeENI{},
		caps:    map[string]*enipamv1alpha1.NodeCapacity{},
		pods:    waiting.NewSet(),
		started: waiting.NewStarted(cfg.StartedGrace),
		holds:   map[types.UID]*hold{},
		held:    map[string]map[types.UID]*hold{},
		claims:  map[string]room.Claim{},
		sights:  map[string]sight{},
		changed: make(chan struct{}),
	}
}

// Start runs the four informers, and sweeps expired promises, until ctx
// ends.
func (t *Tracker) Start(ctx context.Context) error {
	pods := t.informer(&corev1.Pod{}, &corev1.PodList{}, waiting.Selector, waiting.Slim, cache.ResourceEventHandlerFuncs{
		AddFunc:    t.podSeen,
		UpdateFunc: func(_, obj any) { t.podSeen(obj) },
		DeleteFunc: t.podGone,
	})
	nodes := t.informer(&ciliumv2.CiliumNode{}, &ciliumv2.CiliumNodeList{}, "", stripCiliumNode, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.ciliumNodeSeen(nil, obj) },
		UpdateFunc: t.ciliumNodeSeen,
		DeleteFunc: t.ciliumNodeGone,
	})
	routings := t.informer(&enipamv1alpha1.NodeRouting{}, &enipamv1alpha1.NodeRoutingList{}, "", stripNodeRouting, cache.ResourceEventHandlerFuncs{
		AddFunc:    t.routingSeen,
		UpdateFunc: func(_, obj any) { t.routingSeen(obj) },
		DeleteFunc: t.routingGone,
	})
	claims := t.informer(&enipamv1alpha1.StaticIPClaim{}, &enipamv1alpha1.StaticIPClaimList{}, "", stripClaim, cache.ResourceEventHandlerFuncs{
		AddFunc:    t.claimSeen,
		UpdateFunc: func(_, obj any) { t.claimSeen(obj) },
		DeleteFunc: t.claimGone,
	})
	t.mu.Lock()
	t.synced = []cache.InformerSynced{pods.HasSynced, nodes.HasSynced, routings.HasSynced, claims.HasSynced}
	t.mu.Unlock()

	var wg sync.WaitGroup
	for _, ctrl := range []cache.Controller{pods, nodes, routings, claims} {
		wg.Go(func() { ctrl.RunWithContext(ctx) })
	}
	sweep := time.NewTicker(min(t.cfg.HoldTTL, t.cfg.StartedGrace))
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-sweep.C:
			t.sweep()
		}
	}
}

// informer lists and watches one kind (with a field selector if sel is
// set), keeping what strip leaves of each object.
func (t *Tracker) informer(obj client.Object, list client.ObjectList, sel string, strip cache.TransformFunc, h cache.ResourceEventHandler) cache.Controller {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			l := list.DeepCopyObject().(client.ObjectList)
			return l, t.c.List(ctx, l, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			return t.c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), &client.ListOptions{Raw: &opts})
		},
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: obj, Handler: h, Transform: strip,
	})
	return ctrl
}

// Synced reports whether every informer has its first list: before, an
// absent CiliumNode or pod means "not known yet".
func (t *Tracker) Synced() bool {
	t.mu.Lock()
	synced := t.synced
	t.mu.Unlock()
	if len(synced) == 0 {
		return false
	}
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}

// View returns what is known of each named node for placing pod: pool,
// capacity, and the promises of other pods (holds placed after
// youngSince counted as Young). The channel is closed at the next change
// that may free room: a pod placed, started or gone, a pool or capacity
// written.
func (t *Tracker) View(pod *corev1.Pod, names []string, youngSince time.Time) ([]room.Node, <-chan struct{}) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]room.Node, len(names))
	for i, name := range names {
		n := room.Node{Name: name, Pool: t.pools[name], Capacity: t.caps[name]}
		// A pod whose address is in use, or that takes an entry of its
		// own here (a static IP stamped for it, or its claim's first
		// placement under way here: the agent hands it that entry, which
		// Free does not count), takes no free address. Of the first
		// placements here on a mark alone (room.OwnMark), at most the
		// pool's marks take none: a mark may be another claim's.
		marked := 0
		own := func(owner string) room.Entry {
			if c, ok := t.claims[owner]; ok {
				return room.OwnEntry(n.Pool, name, owner, &c)
			}
			return room.OwnEntry(n.Pool, name, owner, nil)
		}
		takes := func(owner string) bool {
			switch own(owner) {
			case room.OwnStamp:
				return false
			case room.OwnMark:
				marked++
				return false
			}
			return true
		}
		for _, p := range t.pods.On(name) {
			if p.UID != pod.UID && !p.Deleting() && !t.hasAddress(n.Pool, p.Owner()) && takes(p.Owner()) {
				n.Promised++
			}
		}
		n.Promised += t.started.Count(name, now, func(owner string) bool {
			return t.hasAddress(n.Pool, owner) || own(owner) != room.FreeEntry
		})
		for uid, h := range t.held[name] {
			if uid == pod.UID || now.Sub(h.at) > t.cfg.HoldTTL || t.filedOn(uid, name) || !takes(h.owner) {
				continue
			}
			n.Held++
			if h.at.After(youngSince) {
				n.Young++
			}
		}
		if n.Pool != nil {
			n.Promised += max(0, marked-n.Pool.Marked)
		}
		n.Promised += n.Held
		out[i] = n
	}
	return out, t.changed
}

// filedOn reports whether the pod is counted on node already, bound or
// nominated there: a nominated pod (by preemption) that filter passes
// again is held too, and must not count twice there. Callers hold t.mu.
func (t *Tracker) filedOn(uid types.UID, node string) bool {
	p, ok := t.pods.Get(uid)
	return ok && p.Target() == node
}

// Hold records that the scheduler may place pod on any of nodes, which
// it passed on, until the pod is seen bound or nominated, is deleted, is
// held again, or HoldTTL passes. A pod already bound is not held.
func (t *Tracker) Hold(pod *corev1.Pod, nodes []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropHold(pod.UID)
	if p, ok := t.pods.Get(pod.UID); (ok && p.Node != "") || len(nodes) == 0 {
		return
	}
	h := &hold{owner: pod.Namespace + "/" + pod.Name, nodes: nodes, at: t.now()}
	t.holds[pod.UID] = h
	for _, n := range nodes {
		if t.held[n] == nil {
			t.held[n] = map[types.UID]*hold{}
		}
		t.held[n][pod.UID] = h
	}
}

// Claim returns the named StaticIPClaim as placement sees it.
func (t *Tracker) Claim(namespace, name string) (room.Claim, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.claims[namespace+"/"+name]
	if p := t.pools[c.Holder]; ok && p != nil && c.Address != "" {
		c.Pinned = p.InPrefix(c.Address)
	}
	return c, ok
}

// Intent returns what a pod the tracker follows (not started yet) asks of
// a static address.
func (t *Tracker) Intent(uid types.UID) (waiting.Intent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pods.Get(uid)
	if !ok {
		return waiting.Intent{}, false
	}
	return p.Intent, true
}

// Settled returns the address node's pool holds stamped for owner with
// no release handshake ("" if none), and a channel closed at the next
// change.
func (t *Tracker) Settled(node, owner string) (string, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pools[node]; p != nil {
		return p.Settled[owner], t.changed
	}
	return "", t.changed
}

// Counts reports the pods without an address the tracker follows and the
// holds it keeps, for metrics.
func (t *Tracker) Counts() (pods, holds int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods.Len(), len(t.holds)
}

// dropHold forgets uid's hold. Callers hold t.mu.
func (t *Tracker) dropHold(uid types.UID) {
	h, ok := t.holds[uid]
	if !ok {
		return
	}
	delete(t.holds, uid)
	for _, n := range h.nodes {
		delete(t.held[n], uid)
		if len(t.held[n]) == 0 {
			delete(t.held, n)
		}
	}
}

// notify wakes the waiters of View's channel. Callers hold t.mu.
func (t *Tracker) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// sweep forgets expired holds and started pods.
func (t *Tracker) sweep() {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, h := range t.holds {
		if now.Sub(h.at) > t.cfg.HoldTTL {
			t.dropHold(uid)
		}
	}
	t.started.Sweep(now)
	for owner, s := range t.sights {
		if !s.left.IsZero() && now.Sub(s.left) > t.cfg.StartedGrace {
			delete(t.sights, owner)
		}
	}
}
