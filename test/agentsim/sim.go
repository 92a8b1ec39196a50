package agentsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// Sim runs simulated agents for many nodes against one apiserver: one
// CiliumNode informer for all of them, one queue of status writes, one
// client rate limit. Create it with New, Start it, then AddAgent per node.
// Its methods are safe for concurrent use.
type Sim struct {
	opts   Options
	log    *slog.Logger
	client client.WithWatch
	writes writeCounters

	mu       sync.RWMutex
	agents   map[string]*Agent
	ready    []string // names of started agents, sorted
	samples  []IdleSample
	queue    workqueue.TypedDelayingInterface[string]
	informer cache.SharedIndexInformer
	started  bool
	done     chan struct{}
	// routing plays enipam-agent on every node, unless opts.NoRouting.
	routing *RoutingSim
}

// New returns a Sim that will reach the apiserver through cfg, with its own
// client bounded by opts.QPS and opts.Burst. It makes no request yet.
func New(cfg *rest.Config, opts Options) (*Sim, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("agent simulator options, %w", err)
	}
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ciliumv2.AddToScheme, enipamv1alpha1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building the agent simulator's client, %w", err)
	}
	s := &Sim{
		opts:   opts,
		log:    opts.Logger,
		client: c,
		agents: map[string]*Agent{},
		done:   make(chan struct{}),
	}
	if !opts.NoRouting {
		ro := opts.Routing
		if ro.Logger == nil {
			ro.Logger = opts.Logger
		}
		if opts.EndpointRoutes && ro.Endpoints == nil {
			ro.Endpoints = s.holds
		}
		if s.routing, err = NewRoutingSim(cfg, ro); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// holds reports whether a pod's endpoint on node holds ip: it was handed
// out there and not released yet.
func (s *Sim) holds(node string, ip netip.Addr) bool {
	a := s.Agent(node)
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.allocated[ip.String()]
	return ok
}

// released tells the node's simulated enipam-agent that an endpoint went
// (its link goes with it, which wakes the real agent).
func (s *Sim) released(node string) {
	if s.routing != nil && s.opts.EndpointRoutes {
		s.routing.Kick(node)
	}
}

// Start watches all CiliumNodes and starts the status writers and the idle
// sampler. It returns once the informer has synced; everything stops when
// ctx ends (Done is closed then), and waiting pods are abandoned with
// ErrStopped.
func (s *Sim) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("agent simulator already started")
	}
	s.started = true
	s.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{})
	s.informer = newCiliumNodeInformer(s.client, s.log)
	s.mu.Unlock()

	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.dispatch(obj) },
		UpdateFunc: func(_, obj any) { s.dispatch(obj) },
		DeleteFunc: s.dispatchDelete,
	}); err != nil {
		return err
	}
	// The ledger's routed-before-handed check follows every node's
	// NodeRouting, whoever reports there (the RoutingSim or a real agent).
	routings := newNodeRoutingInformer(s.client, s.opts.Ledger.routingListed)
	observe := func(obj any) {
		if nr, ok := obj.(*enipamv1alpha1.NodeRouting); ok {
			s.opts.Ledger.observeRouting(nr.Name, parseRV(nr.ResourceVersion), &nr.Status)
		}
	}
	if _, err := routings.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return err
	}
	if err := routings.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if ctx.Err() == nil {
			s.opts.Ledger.routingWatchError(err, parseRV(r.LastSyncResourceVersion()))
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.informer.RunWithContext(ctx) })
	wg.Go(func() { routings.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced, routings.HasSynced) {
		s.queue.ShutDown()
		wg.Wait()
		close(s.done)
		return fmt.Errorf("syncing the CiliumNode informer, %w", context.Cause(ctx))
	}
	if s.routing != nil {
		if err := s.routing.Start(ctx); err != nil {
			s.queue.ShutDown()
			wg.Wait()
			close(s.done)
			return err
		}
	}
	// Agents added before Start see their CiliumNode now.
	for _, a := range s.Agents() {
		s.catchUp(a)
	}
	w := &statusWriter{c: s.client, queue: s.queue, agent: s.Agent, counters: &s.writes, log: s.log}
	for range s.opts.Writers {
		wg.Go(func() { w.run(ctx) })
	}
	if s.opts.SampleInterval > 0 {
		wg.Go(func() { s.sample(ctx) })
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
		for _, a := range s.Agents() {
			a.stop(false)
		}
		wg.Wait()
		close(s.done)
	}()
	return nil
}

// Routing returns the simulated enipam-agents (nil with
// Options.NoRouting), to stop and start them per node.
func (s *Sim) Routing() *RoutingSim { return s.routing }

// Done is closed once the Sim has stopped after its context ended.
func (s *Sim) Done() <-chan struct{} { return s.done }

// Ledger is where violations and waits of every agent are counted.
func (s *Sim) Ledger() *Ledger { return s.opts.Ledger }

// AddAgent starts simulating the agent of the named node (its CiliumNode
// has the same name) and returns it; an agent already there is returned as
// is. The CiliumNode may come later: the agent waits for it.
func (s *Sim) AddAgent(name string) *Agent {
	s.mu.Lock()
	if a, ok := s.agents[name]; ok {
		s.mu.Unlock()
		return a
	}
	a := newAgent(name, agentDeps{
		ledger:          s.opts.Ledger,
		log:             s.log,
		interval:        s.opts.UpdateInterval,
		allocateTimeout: s.opts.AllocateTimeout,
		enqueue:         func(name string, delay time.Duration) { s.queue.AddAfter(name, delay) },
		onReady:         s.markReady,
		onRelease:       s.released,
		v4:              s.opts.families().v4,
		v6:              s.opts.families().v6,
	})
	s.agents[name] = a
	s.mu.Unlock()
	s.catchUp(a)
	return a
}

// RemoveAgent stops the named node's agent, as when the node goes away: its
// waiting pods are abandoned and its IPs no longer count as held.
func (s *Sim) RemoveAgent(name string) {
	s.mu.Lock()
	a, ok := s.agents[name]
	delete(s.agents, name)
	if i, found := slices.BinarySearch(s.ready, name); found {
		s.ready = slices.Delete(s.ready, i, i+1)
	}
	s.mu.Unlock()
	if ok {
		a.stop(true)
	}
}

// Agent returns the named node's agent, or nil.
func (s *Sim) Agent(name string) *Agent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.agents[name]
}

// Agents returns every agent, in no particular order.
func (s *Sim) Agents() []*Agent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Agent, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a)
	}
	return out
}

// ReadyNames returns the names of the Ready agents, sorted.
func (s *Sim) ReadyNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.ready)
}

// WaitReady blocks until at least n agents are Ready or ctx ends.
func (s *Sim) WaitReady(ctx context.Context, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.RLock()
		got := len(s.ready)
		s.mu.RUnlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d agents ready, %w", got, n, ctx.Err())
		case <-t.C:
		}
	}
}

// readyAt returns the ready agent at index i of ReadyNames (modulo their
// number) and how many there are; nil if none.
func (s *Sim) readyAt(i int) (*Agent, int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.ready)
	if n == 0 {
		return nil, 0
	}
	return s.agents[s.ready[i%n]], n
}

// readyCount is how many agents are Ready.
func (s *Sim) readyCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.ready)
}

func (s *Sim) markReady(a *Agent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents[a.name] != a {
		return
	}
	if i, found := slices.BinarySearch(s.ready, a.name); !found {
		s.ready = slices.Insert(s.ready, i, a.name)
	}
	s.log.Debug("agent ready", "node", a.name)
}

// catchUp feeds an agent the CiliumNode the informer already holds.
func (s *Sim) catchUp(a *Agent) {
	s.mu.RLock()
	inf := s.informer
	s.mu.RUnlock()
	if inf == nil {
		return
	}
	if obj, ok, _ := inf.GetStore().GetByKey(a.name); ok {
		if cn, ok := obj.(*ciliumv2.CiliumNode); ok {
			a.observe(cn)
		}
	}
}

func (s *Sim) dispatch(obj any) {
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return
	}
	if a := s.Agent(cn.Name); a != nil {
		a.observe(cn)
	}
}

func (s *Sim) dispatchDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cn, ok := obj.(*ciliumv2.CiliumNode)
	if !ok {
		return
	}
	if a := s.Agent(cn.Name); a != nil {
		a.observeDeleted()
	}
}
