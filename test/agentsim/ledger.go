package agentsim

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// ViolationKind names a broken promise of the CiliumNode IPAM contract.
type ViolationKind string

const (
	// DoubleAllocation: an IP was handed to a pod while another pod, on the
	// same node or another one, still held it.
	DoubleAllocation ViolationKind = "double-allocation"
	// RemovedWhileUsed: an IP left spec.ipam.pool while a pod (or the
	// router or health endpoint) held it.
	RemovedWhileUsed ViolationKind = "removed-while-used"
	// ReleasedWithoutReady: a free IP left spec.ipam.pool although the agent
	// had not answered ready-for-release for it.
	ReleasedWithoutReady ViolationKind = "released-without-ready"
	// HandedBeforeRouted: an IP was handed to a pod although, when it
	// entered the pool, the node's enipam-agent had not reported it routed
	// on its ENI (NodeRouting status).
	HandedBeforeRouted ViolationKind = "handed-before-routed"
)

// Violation is one recorded breach, kept for failure messages.
type Violation struct {
	Kind  ViolationKind
	Node  string
	IP    string
	Owner string
	// Other names the previous holder ("node owner") of a double allocation.
	Other string
	At    time.Time
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s: %s on %s (owner %q)", v.Kind, v.IP, v.Node, v.Owner)
	if v.Other != "" {
		s += ", already held by " + v.Other
	}
	return s
}

// Violations counts breaches by kind.
type Violations struct {
	DoubleAllocation     int
	RemovedWhileUsed     int
	ReleasedWithoutReady int
	HandedBeforeRouted   int
}

// Total is the number of breaches of any kind; a correct operator keeps it 0.
func (v Violations) Total() int {
	return v.DoubleAllocation + v.RemovedWhileUsed + v.ReleasedWithoutReady + v.HandedBeforeRouted
}

// WaitOutcome says how a wait for a free IP ended.
type WaitOutcome int

const (
	// WaitSatisfied: an IP arrived and the pod got it.
	WaitSatisfied WaitOutcome = iota
	// WaitTimedOut: Options.AllocateTimeout passed first.
	WaitTimedOut
	// WaitAbandoned: the pod was deleted, its agent removed or the Sim
	// stopped before an IP arrived.
	WaitAbandoned
)

// maxDetails bounds the violations kept with their details; counts are
// always complete.
const maxDetails = 1000

// holder is a pod (or router/health endpoint) holding an IP on a node.
type holder struct {
	node, owner string
}

// Ledger is the global account of every simulated agent: which pod holds
// which IP across all nodes, the violations, the pod allocations and the
// waits. It is safe for concurrent use. Share one Ledger between Sims (see
// Options.Ledger) to detect an IP in use on nodes of both.
type Ledger struct {
	mu          sync.Mutex
	holders     map[string][]holder
	counts      Violations
	details     []Violation
	allocations int
	waits       []time.Duration
	outcomes    [3]int

	// The routed-before-handed check: what each node's agent listed as
	// routed, the latest NodeRouting revision seen per node, the handouts
	// waiting for that watch to catch up, and how many were judged.
	routes        map[routeKey][]listing
	routes6       map[prefixKey][]listing
	routingRV     map[string]uint64
	pendingRoutes []routedCheck
	routedChecks  int
	// routingSeen and the watch errors say what the routing watch saw.
	routingSeen     map[string]routingSeen
	watchErrors     int
	watchErrorTexts []string
	// routingObserved are the revisions taken of each node's
	// NodeRouting, in order; routingSteady the spans a list after a
	// watch gap showed it unchanged through; routingGaps the watch's
	// gaps; unjudged the handouts whose verdict a gap hides.
	routingObserved map[string][]uint64
	routingSteady   map[string][]listing
	routingGaps     []watchGap
	unjudged        int
	unjudgedTexts   []string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{holders: map[string][]holder{}, routes: map[routeKey][]listing{}, routes6: map[prefixKey][]listing{}, routingRV: map[string]uint64{}, routingSeen: map[string]routingSeen{}, routingObserved: map[string][]uint64{}, routingSteady: map[string][]listing{}}
}

// take records that owner on node now holds ip, and a DoubleAllocation if
// someone else already held it. Re-taking by the same holder is no breach.
func (l *Ledger) take(node, ip, owner string, pod bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pod {
		l.allocations++
	}
	hs := l.holders[ip]
	for _, h := range hs {
		if h.node == node && h.owner == owner {
			return
		}
	}
	if len(hs) > 0 {
		other := hs[len(hs)-1]
		l.recordLocked(Violation{Kind: DoubleAllocation, Node: node, IP: ip, Owner: owner, Other: other.node + " " + other.owner, At: now})
	}
	l.holders[ip] = append(hs, holder{node: node, owner: owner})
}

// drop records that owner on node no longer holds ip.
func (l *Ledger) drop(node, ip, owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	hs := slices.DeleteFunc(l.holders[ip], func(h holder) bool { return h.node == node && h.owner == owner })
	if len(hs) == 0 {
		delete(l.holders, ip)
		return
	}
	l.holders[ip] = hs
}

// violation records a breach found by an agent.
func (l *Ledger) violation(v Violation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(v)
}

func (l *Ledger) recordLocked(v Violation) {
	switch v.Kind {
	case DoubleAllocation:
		l.counts.DoubleAllocation++
	case RemovedWhileUsed:
		l.counts.RemovedWhileUsed++
	case ReleasedWithoutReady:
		l.counts.ReleasedWithoutReady++
	case HandedBeforeRouted:
		l.counts.HandedBeforeRouted++
	}
	if len(l.details) < maxDetails {
		l.details = append(l.details, v)
	}
}

// wait records one finished wait of a pod for a free IP.
func (l *Ledger) wait(d time.Duration, outcome WaitOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits = append(l.waits, d)
	l.outcomes[outcome]++
}

// Violations returns the breaches counted so far.
func (l *Ledger) Violations() Violations {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts
}

// ViolationDetails returns the first breaches (at most 1000) in the order
// they were found.
func (l *Ledger) ViolationDetails() []Violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.details)
}

// Allocations is the number of IPs handed to pods (router and health
// excluded), on all nodes since the ledger was made.
func (l *Ledger) Allocations() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.allocations
}

// Waits summarizes the finished waits. Waits still under way are not in
// it: see Figures.Waits.Pending.
func (l *Ledger) Waits() WaitFigures {
	l.mu.Lock()
	ds := slices.Clone(l.waits)
	w := WaitFigures{
		Count:     len(l.waits),
		Satisfied: l.outcomes[WaitSatisfied],
		TimedOut:  l.outcomes[WaitTimedOut],
		Abandoned: l.outcomes[WaitAbandoned],
	}
	l.mu.Unlock()
	slices.Sort(ds)
	w.P50, w.P99 = Percentile(ds, 50), Percentile(ds, 99)
	if len(ds) > 0 {
		w.Max = ds[len(ds)-1]
	}
	return w
}

// WaitDurations returns the duration of every finished wait, in the order
// they finished.
func (l *Ledger) WaitDurations() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.waits)
}

// Percentile returns the p-th percentile (0 < p <= 100, nearest rank) of
// sorted durations, or 0 when there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}
