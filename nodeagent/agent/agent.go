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

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/named"
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
	cnWatch *named.Watcher[*ciliumv2.CiliumNode]
	nrWatch *named.Watcher[*enipamv1alpha1.NodeRouting]
	client  client.Client
	events  kubernetes.Interface
	scheme  *runtime.Scheme
	metrics *Metrics
	now     func() time.Time

	// kick wakes the loop when the NodeRouting or the CiliumNode changed,
	// linkKick when a managed ENI's link or the primary's did; one pending
	// wake-up is enough, later ones coalesce.
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
	// macs are the MACs of the managed ENIs and the primary ENI, whose
	// link changes matter.
	macs map[string]bool
	// lastRetained, lastDraining and lastMissingNR are what was last
	// logged about retained addresses, draining ENIs and a missing
	// NodeRouting, so a lasting condition is logged once.
	lastRetained  string
	lastDraining  string
	lastMissingNR bool
	// written is the last report written, and the resourceVersion of the
	// NodeRouting it was written over, so a resync before the watch
	// delivers the write does not write it again.
	written *writtenReport
	// lostWrite is true after a status write that failed without an
	// answer saying it did not land: it may have, so the watch's copy and
	// written may both be older than the stored status.
	lostWrite bool
	// noRoutesField is when the apiserver last refused a report for
	// status.routesSpecENIs not being in the stored CRD's schema (a chart
	// upgraded without its CRDs): until schemaRetry has passed the agent
	// reports without the field, as an earlier agent, and the operator
	// keeps the CiliumNode's status.eni.enis current for it.
	// schemaLogged: the refusal has been logged.
	noRoutesField time.Time
	schemaLogged  bool
	// taintPending is true until the start-up taint has been removed.
	taintPending bool
	// watchEndpoints: an endpoint query is not answered absent yet, so
	// every link's change wakes the loop.
	watchEndpoints bool
	// remapsPending: a remap query is not answered landed yet, so the
	// metadata is read again after RemapPoll.
	remapsPending bool
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
	// StatusWrites counts the writes of the NodeRouting status.
	StatusWrites int
	// TaintRemoved is true once the start-up taint is off the Node (or
	// there was none to remove).
	TaintRemoved bool
	// CleanedUp is true while the NodeRouting asks for enipam's routing to
	// be removed and the last pass removed it all.
	CleanedUp bool
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
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
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
		cfg:  cfg,
		log:  log,
		host: host,
		conv: routing.NewConverger(host, cfg.Routing),
		cnWatch: named.NewWatcher(c, "CiliumNode", cfg.NodeName,
			func() *ciliumv2.CiliumNode { return &ciliumv2.CiliumNode{} },
			func() client.ObjectList { return &ciliumv2.CiliumNodeList{} }, log),
		nrWatch: named.NewWatcher(c, "NodeRouting", cfg.NodeName,
			func() *enipamv1alpha1.NodeRouting { return &enipamv1alpha1.NodeRouting{} },
			func() client.ObjectList { return &enipamv1alpha1.NodeRoutingList{} }, log),
		client:       c,
		taintPending: cfg.StartupTaintKey != "",
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

// Start runs the agent until ctx ends: it watches the NodeRouting and the
// CiliumNode, waits for the first list of both, converges fully, then
// converges again on every change, every resync interval, and on a
// backoff while something is missing or failing. After each converge it
// reports in the NodeRouting's status what is routed, and once routing is
// ready it removes the start-up taint. Without a NodeRouting it touches
// nothing. When ctx ends it marks the NodeRouting not ready (AgentStopped),
// leaving the routing in place. While the NodeRouting carries the cleanup
// annotation (enipamv1alpha1.AnnotationCleanup) it removes the node's
// routing instead and routes nothing. It returns nil when ctx ends, or an
// error if it cannot start. Start must be called once.
func (a *Agent) Start(ctx context.Context) error {
	a.setStatus(func(s *Status) {
		s.Running, s.Heartbeat, s.NotReady = true, a.now(), "waiting for the NodeRouting and the CiliumNode"
	})
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
		if err := a.nrWatch.Start(ctx, a.wake); err != nil {
			a.log.Error("watching the NodeRouting", "err", err)
		}
	})
	wg.Go(func() {
		if err := a.cnWatch.Start(ctx, a.wake); err != nil {
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
	if !cache.WaitForCacheSync(ctx.Done(), a.nrWatch.Synced, a.cnWatch.Synced) {
		return nil // ctx ended first
	}
	a.log.Info("watching the NodeRouting and the CiliumNode; first converge")
	defer a.reportStopped()

	resync := time.NewTicker(a.cfg.ResyncInterval)
	defer resync.Stop()
	retry := time.NewTimer(0) // the first converge, right away
	defer retry.Stop()
	remap := time.NewTimer(a.cfg.RemapPoll)
	remap.Stop()
	defer remap.Stop()
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
		case <-remap.C:
			// A remap asked about has not landed: the metadata alone is
			// read again, not the kernel.
			a.reportRemaps(ctx)
			if a.remapsArePending() {
				remap.Reset(a.cfg.RemapPoll)
			}
			continue
		}
		a.setStatus(func(s *Status) { s.Heartbeat = a.now() })
		ok := a.pass(ctx, trigger, recorder)
		if a.remapsArePending() {
			remap.Reset(a.cfg.RemapPoll)
		}
		if ok {
			backoff = a.cfg.LinkWaitBackoff
			continue
		}
		retry.Reset(backoff)
		backoff = min(2*backoff, a.cfg.ResyncInterval)
	}
}

// pass is one turn of the loop: converge if both objects are there, report,
// untaint. It returns false when something is left to do sooner than the
// next resync.
func (a *Agent) pass(ctx context.Context, trigger string, rec record.EventRecorder) bool {
	cn, haveCN := a.cnWatch.Current()
	nr, haveNR := a.nrWatch.Current()
	if !haveNR {
		a.noNodeRouting(cn, rec)
		return true // its creation wakes the loop
	}
	if a.lastMissingNR {
		a.lastMissingNR = false
		a.log.Info("NodeRouting found", "instance", nr.Spec.InstanceID)
	}
	if cleanupRequest(nr) != "" {
		return a.cleanup(ctx, cn, nr, trigger, rec)
	}
	if a.Status().CleanedUp {
		a.log.Info("cleanup annotation removed; routing the node again")
		a.setStatus(func(s *Status) { s.CleanedUp = false })
	}
	if !haveCN {
		a.setStatus(func(s *Status) { s.Ready, s.NotReady = false, "CiliumNode not found" })
		a.metrics.ready.Set(0)
		return true
	}
	res, ready, err := a.converge(ctx, cn, nr, trigger, rec)
	if ctx.Err() != nil {
		return true
	}
	if werr := a.report(ctx, nr, res, err); werr != nil {
		a.log.Error("writing the NodeRouting status", "err", werr)
		return false
	}
	if ready && a.taintPending {
		if terr := a.removeStartupTaint(ctx, cn, rec); terr != nil {
			a.log.Error("removing the start-up taint", "taint", a.cfg.StartupTaintKey, "err", terr)
			return false
		}
	}
	return ready
}

// noNodeRouting holds everything while the node has no NodeRouting: the
// operator has not taken the node on (yet), so nothing new is routed and
// nothing is removed.
func (a *Agent) noNodeRouting(cn *ciliumv2.CiliumNode, rec record.EventRecorder) {
	msg := fmt.Sprintf("NodeRouting %s not found: waiting for enipam-operator to create it; routing nothing new, removing nothing", a.cfg.NodeName)
	a.setStatus(func(s *Status) { s.Ready, s.NotReady = false, msg })
	a.metrics.ready.Set(0)
	if a.lastMissingNR {
		return
	}
	a.lastMissingNR = true
	a.log.Warn(msg)
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: a.cfg.NodeName}
	if cn != nil {
		ref = reference(cn)
	}
	rec.Event(ref, corev1.EventTypeWarning, ReasonNodeRoutingMissing, msg)
}

// wake asks the loop for a converge without blocking the watch.
func (a *Agent) wake() { signal(a.kick) }

// linkChanged wakes the loop if the link belongs to a managed ENI; the
// links of pods (one veth each) come and go without costing a converge,
// except while an endpoint query waits for its endpoint to go.
func (a *Agent) linkChanged(mac net.HardwareAddr) {
	a.mu.Lock()
	ours := a.macs[string(mac)] || a.watchEndpoints
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
