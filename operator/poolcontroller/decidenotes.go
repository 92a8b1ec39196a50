package poolcontroller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// decisionEnv is what the node's decision (deciding's methods) sees of
// its surroundings: a clock that reads the decision's moment, the
// options' values, and notes that record what it would log, count and
// tell. It holds no client, no Reconciler and no coordinator shared
// between nodes: the notes are emitted (emit) by the reconcile once the
// decision is made.
type decisionEnv struct {
	clock func() time.Time
	opts  Options
	// log records its lines in notes.logs.
	log      *slog.Logger
	metrics  metricNotes
	events   eventNotes
	families familyNotes
	notes    *notes
}

// notes are what a decision logged, counted and told, to be emitted.
type notes struct {
	logs   []slog.Record
	events []eventNote
	// state is the node's state for enipam_nodes, set: decided.
	state    string
	stateSet bool
	// family is the node's word for the policies' IPFamilies condition
	// (familySet: decided).
	family    familyNote
	familySet bool
	// node is the pool's sizes for the node's gauges (nil: none).
	node *nodeObservation
	// latencies are allocation latencies observed, in seconds.
	latencies []float64
	// fastMoves counts the static addresses moved fast; consolidations
	// the consolidations done, by kind.
	fastMoves      float64
	consolidations []string
}

// eventNote is an event on the node to emit.
type eventNote struct {
	obj                            runtime.Object
	eventType, reason, action, msg string
}

// familyNote is the node's word for FamilyProblems.Set.
type familyNote struct{ node, policy, msg string }

// nodeObservation is Metrics.observeNode's arguments.
type nodeObservation struct {
	node, policy                                      string
	available, used, waiting, headroom, needed, short int
}

// newDecisionEnv returns an environment whose clock is clock, whose
// options are opts' values (their clients and hooks left out), and whose
// log notes the lines at level and above: those the controller's logger
// emits (logLevel), so that a line it would drop costs nothing.
func newDecisionEnv(clock func() time.Time, opts Options, level slog.Level) *decisionEnv {
	n := &notes{}
	opts = optionValues(opts)
	return &decisionEnv{clock: clock, opts: opts, log: slog.New(&noteHandler{n: n, level: level}),
		metrics: metricNotes{n: n, consolidations: labeledNotes{n: n}, staticFastMoves: counterNote{n: n}, allocationLatency: histogramNote{n: n}},
		events:  eventNotes{n: n}, families: familyNotes{n: n}, notes: n}
}

func (e *decisionEnv) now() time.Time { return e.clock() }

// optionValues are opts' values, their client and hooks left out.
func optionValues(opts Options) Options {
	opts.Pods, opts.Demand, opts.NewENITokens, opts.Now = nil, nil, nil, nil
	return opts
}

// warn notes a warning event on the node, once per change of reason
// (Reconciler.warn).
func (e *decisionEnv) warn(obj runtime.Object, mem *memory, reason, note string) {
	if mem.lastWarning == reason+note {
		return
	}
	mem.lastWarning = reason + note
	e.event(obj, "Warning", reason, note)
}

// event notes an event on the node.
func (e *decisionEnv) event(obj runtime.Object, eventType, reason, note string) {
	e.events.Eventf(obj, nil, eventType, reason, "Allocate", "%s", note)
}

// setState notes the node's outcome for enipam_nodes.
func (e *decisionEnv) setState(_ *memory, state string) {
	e.notes.state, e.notes.stateSet = state, true
}

// retryAfter is Reconciler.retryAfter on the options' values.
func (e *decisionEnv) retryAfter(failures int) time.Duration {
	return retryAfter(e.opts, failures)
}

// take returns the notes so far and starts new ones.
func (e *decisionEnv) take() notes {
	n := *e.notes
	*e.notes = notes{}
	return n
}

// noteHandler records log records in notes; the reconcile hands them to
// the controller's logger (emit), whose level decides.
type noteHandler struct {
	n     *notes
	level slog.Level
}

func (h *noteHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *noteHandler) Handle(_ context.Context, r slog.Record) error {
	h.n.logs = append(h.n.logs, r.Clone())
	return nil
}
func (h *noteHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *noteHandler) WithGroup(string) slog.Handler      { return h }

type eventNotes struct{ n *notes }

// Eventf notes an event.
func (e eventNotes) Eventf(obj runtime.Object, _ runtime.Object, eventType, reason, action, note string, args ...any) {
	e.n.events = append(e.n.events, eventNote{obj: obj, eventType: eventType, reason: reason, action: action, msg: fmt.Sprintf(note, args...)})
}

type familyNotes struct{ n *notes }

// Set notes the node's word for the policies' IPFamilies condition.
func (f familyNotes) Set(node, policy, msg string) {
	f.n.family, f.n.familySet = familyNote{node: node, policy: policy, msg: msg}, true
}

// metricNotes note the metrics a decision observes, by the names of
// Metrics' fields.
type metricNotes struct {
	n                 *notes
	consolidations    labeledNotes
	staticFastMoves   counterNote
	allocationLatency histogramNote
}

func (m metricNotes) observeNode(node, policy string, available, used, waiting, headroom, needed, short int) {
	m.n.node = &nodeObservation{node: node, policy: policy, available: available, used: used, waiting: waiting,
		headroom: headroom, needed: needed, short: short}
}

type labeledNotes struct{ n *notes }

func (l labeledNotes) WithLabelValues(kind ...string) consolidationNote {
	return consolidationNote{n: l.n, kind: kind[0]}
}

type consolidationNote struct {
	n    *notes
	kind string
}

func (c consolidationNote) Inc() { c.n.consolidations = append(c.n.consolidations, c.kind) }

type counterNote struct{ n *notes }

func (c counterNote) Add(v float64) { c.n.fastMoves += v }

type histogramNote struct{ n *notes }

func (h histogramNote) Observe(v float64) { h.n.latencies = append(h.n.latencies, v) }

// logLevel is the lowest of slog's levels the controller's logger
// emits (above Error when it emits none).
func logLevel(l *slog.Logger) slog.Level {
	ctx := context.Background()
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if l.Enabled(ctx, lv) {
			return lv
		}
	}
	return slog.LevelError + 1
}

// emit hands the notes to the controller: its logger, event recorder,
// metrics, node states and FamilyProblems.
func (r *Reconciler) emit(mem *memory, n notes) {
	ctx := context.Background()
	for _, rec := range n.logs {
		if r.log.Enabled(ctx, rec.Level) {
			_ = r.log.Handler().Handle(ctx, rec)
		}
	}
	for _, e := range n.events {
		r.events.Eventf(e.obj, nil, e.eventType, e.reason, e.action, "%s", e.msg)
	}
	if n.familySet {
		if r.onShared != nil {
			r.onShared("families")
		}
		r.families.Set(n.family.node, n.family.policy, n.family.msg)
	}
	if n.stateSet {
		r.setState(mem, n.state)
	}
	if r.metrics == nil {
		return
	}
	if r.onShared != nil && (n.node != nil || len(n.latencies) > 0 || n.fastMoves != 0 || len(n.consolidations) > 0) {
		r.onShared("metrics")
	}
	if o := n.node; o != nil {
		r.metrics.observeNode(o.node, o.policy, o.available, o.used, o.waiting, o.headroom, o.needed, o.short)
	}
	for _, v := range n.latencies {
		r.metrics.allocationLatency.Observe(v)
	}
	if n.fastMoves != 0 {
		r.metrics.staticFastMoves.Add(n.fastMoves)
	}
	for _, kind := range n.consolidations {
		r.metrics.consolidations.WithLabelValues(kind).Inc()
	}
}
