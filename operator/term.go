package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crleaderelection "sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/enipam/enipam/operator/demand"
	"github.com/enipam/enipam/operator/inventory"
)

// Leader election timing, controller-runtime's defaults. A leader that
// cannot renew its Lease for renewDeadline stops acting; another replica
// takes the Lease no sooner than leaseDuration after the last renewal it
// saw, so a term must have stopped within leaseDuration-renewDeadline:
// termStopGrace is less, and a term that overruns it ends the process.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	termStopGrace = 3 * time.Second
)

// term is what acts while the replica holds the Lease: the components
// newTerm wires on a manager of their own. A term runs once; a replica
// that loses the Lease builds a fresh one (a new inventory synced from
// EC2, new controllers reading the shared caches) for its next term.
type term struct {
	mgr    manager.Manager
	inv    *inventory.Inventory
	reg    *termRegisterer
	demand *termDemand
}

// release takes the term's collectors out of the registry and its
// callbacks off the pod watch.
func (t *term) release() {
	t.reg.release()
	if t.demand != nil {
		t.demand.close()
	}
}

// OnTerm registers f, told true when a term starts acting and false once
// every controller of the term has returned (no EC2 call of it is in
// flight). For tests and diagnostics; call it before Run.
func (o *Operator) OnTerm(f func(acting bool)) { o.onTerm = f }

// lead runs terms until ctx ends: at once without leader election, else
// each time this replica acquires the Lease. Losing the Lease stops the
// term and the replica stands by for the Lease again; only a term that
// fails or does not stop in time ends the process.
func (o *Operator) lead(ctx context.Context) error {
	if !o.opts.LeaderElect {
		return o.act(ctx, o.next)
	}
	lock, err := o.leaseLock()
	if err != nil {
		return err
	}
	for {
		acted, err := o.elect(ctx, lock)
		if err != nil || ctx.Err() != nil {
			return err
		}
		if !acted {
			continue
		}
		o.log.Info("lost the Lease: stopped acting, standing by for it again")
		if o.next, err = o.build(); err != nil {
			return fmt.Errorf("building the next term, %w", err)
		}
	}
}

// elect waits for the Lease and runs o.next while holding it. It returns
// once the term has stopped and the Lease is lost (or released, when ctx
// ended): acted says whether the term ran.
func (o *Operator) elect(ctx context.Context, lock resourcelock.Interface) (acted bool, err error) {
	// The elector's context ends only after the term stopped, so a
	// replica shutting down releases its Lease once it no longer acts,
	// never before.
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	var (
		mu               sync.Mutex
		started, stopped bool
		done             = make(chan struct{})
		termErr          error
	)
	defer context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			leCancel()
		}
	})()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.opts.LeaderElectionID,
		Callbacks: leaderelection.LeaderCallbacks{
			// termCtx ends when a renewal fails.
			OnStartedLeading: func(termCtx context.Context) {
				defer close(done)
				mu.Lock()
				if stopped || ctx.Err() != nil {
					mu.Unlock()
					leCancel()
					return
				}
				started = true
				mu.Unlock()
				termCtx, cancel := context.WithCancel(termCtx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				termErr = o.act(termCtx, o.next)
				leCancel() // the term is over: give the Lease up if still held
			},
			// Called when Run returns: it must not return before the term
			// stopped.
			OnStoppedLeading: func() {
				mu.Lock()
				stopped = true
				wait := started
				mu.Unlock()
				if wait {
					<-done
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("leader election, %w", err)
	}
	le.Run(leCtx)
	mu.Lock()
	defer mu.Unlock()
	return started, termErr
}

// act runs t until ctx ends and every component of it has returned.
func (o *Operator) act(ctx context.Context, t *term) error {
	select {
	case <-o.elected:
	default:
		close(o.elected)
	}
	o.log.Info("leading: acting")
	if o.onTerm != nil {
		o.onTerm(true)
	}
	err := t.mgr.Start(ctx)
	t.release()
	if err != nil {
		err = fmt.Errorf("term ended, %w", err)
	}
	o.log.Info("stopped acting", "error", err)
	if o.onTerm != nil {
		o.onTerm(false)
	}
	return err
}

// leaseLock is the replica's Lease lock as controller-runtime builds it:
// an identity of host name and a fresh UUID, a client timeout of half the
// renew deadline, and the leader-election events recorded on the Lease.
func (o *Operator) leaseLock() (resourcelock.Interface, error) {
	lock, err := crleaderelection.NewResourceLock(o.mgr.GetConfig(), o.mgr, crleaderelection.Options{
		LeaderElection:          true,
		LeaderElectionID:        o.opts.LeaderElectionID,
		LeaderElectionNamespace: o.opts.LeaderNamespace,
		RenewDeadline:           renewDeadline,
	})
	if err != nil {
		return nil, fmt.Errorf("leader election lock, %w", err)
	}
	return lock, nil
}

// sharedCache is the outer manager's cache lent to a term: the outer
// manager starts and stops it, a term only waits for it to sync.
type sharedCache struct{ cache.Cache }

// Start blocks until ctx ends: the cache already runs.
func (sharedCache) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// termRegisterer registers a term's collectors in the operator's
// registry and takes them out again when the term ends, so the next
// term's take their place.
type termRegisterer struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	cs  []prometheus.Collector
}

func (r *termRegisterer) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cs = append(r.cs, c)
	return nil
}

func (r *termRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *termRegisterer) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, have := range r.cs {
		if have == c {
			r.cs = append(r.cs[:i], r.cs[i+1:]...)
			break
		}
	}
	return r.reg.Unregister(c)
}

func (r *termRegisterer) release() {
	r.mu.Lock()
	cs := r.cs
	r.cs = nil
	r.mu.Unlock()
	for _, c := range cs {
		r.reg.Unregister(c)
	}
}

// demandRelay hands the pod watch, which outlives terms, to each term:
// a term's change callbacks leave with it.
type demandRelay struct {
	*demand.Watch
	mu sync.Mutex
	fs map[*termDemand][]func(node string)
}

// fire calls the callbacks of the terms that have not ended.
func (r *demandRelay) fire(node string) {
	r.mu.Lock()
	var fs []func(string)
	for _, tf := range r.fs {
		fs = append(fs, tf...)
	}
	r.mu.Unlock()
	for _, f := range fs {
		f(node)
	}
}

func (r *demandRelay) term() *termDemand { return &termDemand{Watch: r.Watch, relay: r} }

// termDemand is the pod watch as one term sees it (poolcontroller.Demand).
type termDemand struct {
	*demand.Watch
	relay *demandRelay
}

// OnChange registers f for the term's lifetime.
func (d *termDemand) OnChange(f func(node string)) {
	d.relay.mu.Lock()
	defer d.relay.mu.Unlock()
	if d.relay.fs == nil {
		d.relay.fs = map[*termDemand][]func(string){}
	}
	d.relay.fs[d] = append(d.relay.fs[d], f)
}

func (d *termDemand) close() {
	d.relay.mu.Lock()
	defer d.relay.mu.Unlock()
	delete(d.relay.fs, d)
}
