// Package extender is enipam-scheduler's core: the filter and prioritize
// verbs of a kube-scheduler extender (k8s.io/kube-scheduler/extender/v1,
// JSON over HTTP), answered from the tracker's caches with no call to the
// cloud or the apiserver.
//
// Filter keeps the nodes that have an address for the pod: a free pool
// entry not promised to pods placed there before it, one on its way, or
// room to grow (room.Assess). Pods on the host network need none and pass
// everywhere. Refused nodes come back as FailedAndUnresolvableNodes with
// the reason in words: preemption cannot help, since kube-scheduler would
// evict pods without asking the extender whether that frees an address.
//
// Prioritize scores what filter passed: 10 for an address there now, 6
// for one on its way, 3 where the operator must first allocate.
//
// kube-scheduler binds a pod asynchronously after choosing its node, and
// tells the extender nothing of its choice. So filter holds every pod it
// passes against each node it passed on (tracker.Hold) until the pod's
// placement is seen; a node refused only because of holds placed within
// SettleTimeout is looked at again as soon as the watches move, up to
// that timeout, before it is refused.
package extender

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/internal/waiting"
	"github.com/enipam/enipam/scheduler/room"
)

// State is what the extender reads: tracker.Tracker.
type State interface {
	// Synced reports whether the caches hold their first lists.
	Synced() bool
	// View returns the named nodes as seen for placing pod, and a channel
	// closed at the next change.
	View(pod *corev1.Pod, names []string, youngSince time.Time) ([]room.Node, <-chan struct{})
	// Hold records that the scheduler may place pod on any of nodes.
	Hold(pod *corev1.Pod, nodes []string)
	// Claim returns the named StaticIPClaim.
	Claim(namespace, name string) (room.Claim, bool)
	// Intent returns what a pod not started yet asks of a static address.
	Intent(uid types.UID) (waiting.Intent, bool)
	// Settled returns the address node's pool holds stamped for owner
	// with no handshake under way, and a channel closed at the next
	// change.
	Settled(node, owner string) (string, <-chan struct{})
}

// Config tunes the verbs.
type Config struct {
	// SettleTimeout is how long filter may wait for placements the
	// scheduler just made to be seen, before refusing a node on their
	// account. 0 never waits.
	SettleTimeout time.Duration
	// BindTimeout is how long bind waits for a static-IP pod's address to
	// be placed on its node before it fails (the scheduler retries the
	// pod). Keep it under kube-scheduler's httpTimeout for the extender.
	BindTimeout time.Duration
}

// DefaultConfig returns the defaults: a Binding is normally seen within
// milliseconds, so a second covers a loaded apiserver; a static address
// moves within Cilium's handshake (its agent answers at most every 15 s
// by default) and an EC2 call, so 25 s.
func DefaultConfig() Config { return Config{SettleTimeout: time.Second, BindTimeout: 25 * time.Second} }

// Extender answers kube-scheduler's calls. Build it with New.
type Extender struct {
	state  State
	writer client.Client
	// intents remembers what static-IP pods filter saw ask (by UID), for
	// a bind that comes before the tracker's pod watch has seen the pod.
	intents sync.Map
	cfg     Config
	metrics *metrics
	log     *slog.Logger
	now     func() time.Time
}

// New returns an Extender over state, registering its metrics on reg.
// The bind verb writes through writer: StaticIPClaims (create, and
// spec.nodeName) and pods' Bindings; and it reads through it, uncached, the
// CiliumNode and NodeRouting that confirm a static IP settled on the node
// (confirmSettled), so writer must be a client that reads from the
// apiserver.
func New(state State, writer client.Client, cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Extender, error) {
	m, err := newMetrics(reg, state)
	if err != nil {
		return nil, err
	}
	return &Extender{state: state, writer: writer, cfg: cfg, metrics: m, log: log, now: time.Now}, nil
}

// ErrNotSynced is the filter's error before the caches hold their first
// lists: kube-scheduler retries the pod later rather than place it blind.
var ErrNotSynced = errors.New("enipam-scheduler's caches are not synced yet")

// Filter keeps the nodes of args that have an address for args.Pod. The
// answer names nodes the way they were asked for (NodeNames when
// kube-scheduler caches nodes for the extender, else Nodes).
func (e *Extender) Filter(ctx context.Context, args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	pod := args.Pod
	if pod == nil {
		return &extenderv1.ExtenderFilterResult{Error: "no pod in the filter request"}
	}
	names := nodeNames(args)
	if pod.Spec.HostNetwork {
		return filterResult(args, names, nil)
	}
	if !e.state.Synced() {
		return &extenderv1.ExtenderFilterResult{Error: ErrNotSynced.Error()}
	}
	owner := pod.Namespace + "/" + pod.Name
	claim, static, err := e.static(pod)
	if static {
		e.remember(pod)
	}
	if err != nil {
		return &extenderv1.ExtenderFilterResult{Error: err.Error()}
	}
	if static && (claim.Address != "" || claim.Invalid != "") {
		return e.filterStatic(args, pod, names, &claim)
	}
	assess := e.assessor(owner, claim, static)
	start := e.now()
	deadline := start.Add(e.cfg.SettleTimeout)
	var (
		nodes    []room.Node
		verdicts []room.Verdict
		waited   bool
	)
	for {
		var changed <-chan struct{}
		nodes, changed = e.state.View(pod, names, e.now().Add(-e.cfg.SettleTimeout))
		verdicts = assessAll(nodes, assess)
		left := deadline.Sub(e.now())
		if left <= 0 || !refusedForHolds(nodes, verdicts, assess) {
			break
		}
		waited = true
		timer := time.NewTimer(left)
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	if waited {
		e.metrics.settleWaits.Inc()
		e.metrics.settleSeconds.Observe(e.now().Sub(start).Seconds())
	}

	var passed []string
	failed := extenderv1.FailedNodesMap{}
	for i, v := range verdicts {
		if v.Kind.Fits() {
			passed = append(passed, nodes[i].Name)
			continue
		}
		failed[nodes[i].Name] = v.Reason
		e.metrics.refusals.WithLabelValues(v.Kind.String()).Inc()
	}
	e.state.Hold(pod, passed)
	if e.log.Enabled(ctx, slog.LevelDebug) {
		e.log.Debug("filter", "pod", owner, "nodes", len(names), "passed", len(passed), "refused", len(failed), "waited", waited)
	}
	return filterResult(args, passed, failed)
}

// Prioritize scores each node of args for args.Pod on the extender scale
// (0 to extenderv1.MaxExtenderPriority).
func (e *Extender) Prioritize(_ context.Context, args *extenderv1.ExtenderArgs) (extenderv1.HostPriorityList, error) {
	pod := args.Pod
	if pod == nil {
		return nil, errors.New("no pod in the prioritize request")
	}
	names := nodeNames(args)
	out := make(extenderv1.HostPriorityList, len(names))
	if pod.Spec.HostNetwork {
		for i, n := range names {
			out[i] = extenderv1.HostPriority{Host: n}
		}
		return out, nil
	}
	if !e.state.Synced() {
		return nil, ErrNotSynced
	}
	nodes, _ := e.state.View(pod, names, e.now())
	claim, static, err := e.static(pod)
	verdicts := assessAll(nodes, e.assessor(pod.Namespace+"/"+pod.Name, claim, static && err == nil))
	for i, v := range verdicts {
		out[i] = extenderv1.HostPriority{Host: nodes[i].Name, Score: v.Score}
	}
	return out, nil
}

// assessor judges a node for owner's pod: as a static-IP pod of claim
// when static, else as any pod.
func (e *Extender) assessor(owner string, claim room.Claim, static bool) func(*room.Node) room.Verdict {
	if static {
		return func(n *room.Node) room.Verdict { return room.AssessStatic(n, owner, &claim) }
	}
	return func(n *room.Node) room.Verdict { return room.Assess(n, owner) }
}

func assessAll(nodes []room.Node, assess func(*room.Node) room.Verdict) []room.Verdict {
	out := make([]room.Verdict, len(nodes))
	for i := range nodes {
		out[i] = assess(&nodes[i])
	}
	return out
}

// refusedForHolds reports whether some refused node would fit but for
// young holds: placements the scheduler has likely just made elsewhere,
// about to be seen.
// The node is judged again as the pod is (assess: a static-IP pod's
// claim and zone too), so a node refused whatever its holds, such as one
// outside the claim's zone, is not waited for.
func refusedForHolds(nodes []room.Node, verdicts []room.Verdict, assess func(*room.Node) room.Verdict) bool {
	for i, v := range verdicts {
		if v.Kind.Fits() || nodes[i].Young == 0 {
			continue
		}
		n := nodes[i]
		n.Promised -= n.Young
		if assess(&n).Kind.Fits() {
			return true
		}
	}
	return false
}

// nodeNames lists the candidate nodes of args in either form.
func nodeNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	if args.Nodes == nil {
		return nil
	}
	out := make([]string, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		out[i] = args.Nodes.Items[i].Name
	}
	return out
}

// filterResult answers with the passed nodes in the form they were asked
// in, and the refused ones as unresolvable.
func filterResult(args *extenderv1.ExtenderArgs, passed []string, failed extenderv1.FailedNodesMap) *extenderv1.ExtenderFilterResult {
	res := &extenderv1.ExtenderFilterResult{FailedAndUnresolvableNodes: failed}
	if args.NodeNames != nil || args.Nodes == nil {
		names := append([]string{}, passed...)
		res.NodeNames = &names
		return res
	}
	keep := make(map[string]bool, len(passed))
	for _, n := range passed {
		keep[n] = true
	}
	list := &corev1.NodeList{}
	for i := range args.Nodes.Items {
		if keep[args.Nodes.Items[i].Name] {
			list.Items = append(list.Items, args.Nodes.Items[i])
		}
	}
	res.Nodes = list
	return res
}
