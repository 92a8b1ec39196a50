package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/nodeagent/routing"
)

// Triggers of a converge, as labelled in metrics and logs.
const (
	triggerStart  = "start"
	triggerNode   = "node"
	triggerResync = "resync"
	triggerRetry  = "retry"
	triggerLink   = "link"
)

// LinkWatcher is a Host that can announce link changes (kernel.Kernel
// can). With one, the agent converges as soon as a managed ENI's link
// appears, changes or goes, instead of on its backoff.
type LinkWatcher interface {
	WatchLinks(ctx context.Context, log *slog.Logger, fn func(mac net.HardwareAddr)) error
}

// Agent runs the node's routing. Build it with New, run it with Start.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	host    routing.Host
	conv    *routing.Converger
	watcher *ciliumnode.Watcher
	events  kubernetes.Interface
	scheme  *runtime.Scheme
	metrics *Metrics
	now     func() time.Time

	// kick wakes the loop when the CiliumNode changed, linkKick when a
	// managed ENI's link did; one pending wake-up is enough, later ones
	// coalesce.
	kick, linkKick chan struct{}

	mu     sync.Mutex
	status Status
	// missingSince is when each managed ENI's link was first seen missing;
	// reported marks those already announced by an event.
	missingSince map[string]time.Time
	reported     map[string]bool
	// lastFailure and lastProblems are the messages of the last events
	// raised, so a lasting condition is announced once rather than on every
	// retry (which would also eat the recorder's per-object event budget).
	lastFailure, lastProblems string
	// macs are the MACs of the managed ENIs, whose link changes matter.
	macs map[string]bool
}

// Status is the agent's view of the node's routing, for readiness and tests.
type Status struct {
	// Running is true between Start and its return.
	Running bool
	// Heartbeat is when the loop last woke up.
	Heartbeat time.Time
	// Converges counts completed converges.
	Converges int
	// Ready is true after a converge that succeeded with every managed
	// ENI's link present, until one that did not.
	Ready bool
	// NotReady says why Ready is false.
	NotReady string
	// Last is the result of the last converge.
	Last routing.Result
}

// New returns an inert Agent for cfg acting on host, talking to the
// apiserver of kube, registering its metrics on reg.
func New(cfg Config, kube *rest.Config, host routing.Host, reg prometheus.Registerer, log *slog.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := ciliumv2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(kube, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client, %w", err)
	}
	cs, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes clientset, %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering metrics, %w", err)
	}
	log = log.With("node", cfg.NodeName)
	return &Agent{
		cfg:          cfg,
		log:          log,
		host:         host,
		conv:         routing.NewConverger(host, cfg.Routing),
		watcher:      ciliumnode.NewWatcher(c, cfg.NodeName, log),
		events:       cs,
		scheme:       scheme,
		metrics:      m,
		now:          time.Now,
		kick:         make(chan struct{}, 1),
		linkKick:     make(chan struct{}, 1),
		status:       Status{NotReady: "not started"},
		missingSince: map[string]time.Time{},
		reported:     map[string]bool{},
	}, nil
}

// Status returns a snapshot of the agent's state.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// Start runs the agent until ctx ends: it watches the CiliumNode, waits for
// the first list, converges fully, then converges again on every change,
// every resync interval, and on a backoff while something is missing or
// failing. It returns nil when ctx ends, or an error if it cannot start.
// Start must be called once.
func (a *Agent) Start(ctx context.Context) error {
	a.setStatus(func(s *Status) { s.Running, s.Heartbeat, s.NotReady = true, a.now(), "waiting for the CiliumNode" })
	defer a.setStatus(func(s *Status) { s.Running, s.Ready, s.NotReady = false, false, "stopped" })

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.events.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(a.scheme, corev1.EventSource{Component: "enipam-agent", Host: a.cfg.NodeName})

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := a.watcher.Start(ctx, a.wake); err != nil {
			a.log.Error("watching the CiliumNode", "err", err)
		}
	})
	if lw, ok := a.host.(LinkWatcher); ok {
		wg.Go(func() {
			if err := lw.WatchLinks(ctx, a.log, a.linkChanged); err != nil {
				a.log.Warn("cannot subscribe to link changes; relying on retries", "err", err)
			}
		})
	}
	if !cache.WaitForCacheSync(ctx.Done(), a.watcher.Synced) {
		return nil // ctx ended first
	}
	a.log.Info("watching the CiliumNode; first converge")

	resync := time.NewTicker(a.cfg.ResyncInterval)
	defer resync.Stop()
	retry := time.NewTimer(0) // the first converge, right away
	defer retry.Stop()
	backoff := a.cfg.LinkWaitBackoff
	trigger := triggerStart
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
			trigger = triggerNode
		case <-a.linkKick:
			trigger = triggerLink
		case <-resync.C:
			trigger = triggerResync
		case <-retry.C:
			if trigger != triggerStart {
				trigger = triggerRetry
			}
		}
		a.setStatus(func(s *Status) { s.Heartbeat = a.now() })
		cn := a.watcher.Current()
		if cn == nil {
			a.setStatus(func(s *Status) { s.Ready, s.NotReady = false, "CiliumNode not found" })
			continue
		}
		if a.converge(ctx, cn, trigger, recorder) {
			backoff = a.cfg.LinkWaitBackoff
			continue
		}
		retry.Reset(backoff)
		backoff = min(2*backoff, a.cfg.ResyncInterval)
	}
}

// wake asks the loop for a converge without blocking the watch.
func (a *Agent) wake() { signal(a.kick) }

// linkChanged wakes the loop if the link belongs to a managed ENI; the
// links of pods (one veth each) come and go without costing a converge.
func (a *Agent) linkChanged(mac net.HardwareAddr) {
	a.mu.Lock()
	ours := a.macs[string(mac)]
	a.mu.Unlock()
	if ours {
		signal(a.linkKick)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
