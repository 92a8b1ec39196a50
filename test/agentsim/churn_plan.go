package agentsim

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// DefaultMaxPodsPerNode is the kubelet's default max-pods.
const DefaultMaxPodsPerNode = 110

// ChurnConfig describes pod churn over the Ready agents of a Sim.
type ChurnConfig struct {
	// Seed makes the schedule repeatable: the same seed over the same set
	// of Ready nodes draws the same arrivals, nodes, lifetimes and bursts.
	Seed uint64
	// ArrivalRate is pods per second per Ready node; each node's arrivals
	// form a Poisson process. Zero: bursts only.
	ArrivalRate float64
	// Lifetime draws how long a pod lives, from its arrival; nil means
	// ExponentialLifetime(MeanLifetime), so departures match arrivals at
	// ArrivalRate × MeanLifetime pods per node.
	Lifetime     func(*rand.Rand) time.Duration
	MeanLifetime time.Duration
	// InitialPods are started on every Ready node at the beginning, with
	// lifetimes drawn as above, to begin near the steady state.
	InitialPods int
	// MaxPodsPerNode: a node with this many pods takes no more, the pod
	// counts as unplaced (default DefaultMaxPodsPerNode).
	MaxPodsPerNode int
	// Bursts scale deployments up during the run.
	Bursts []Burst
	// Duration of the run; zero runs until the context ends.
	Duration time.Duration
	// Namespace of the pods (default "churn"); owners are namespace/name.
	Namespace string
	// DeleteAtEnd deletes every pod still there when the run ends.
	DeleteAtEnd bool
}

// Burst is a deployment scaled up by Pods at once, its pods spread over the
// Ready nodes in turn from a random one, as a scheduler spreading replicas.
type Burst struct {
	// At is the time after the start of the run; ignored by Churn.Burst.
	At time.Duration
	// Pods created at once.
	Pods int
	// Hold deletes the pods this long after the burst (the deployment
	// scaled back); zero keeps them until the run ends.
	Hold time.Duration
	// Name of the deployment, prefix of its pods' names (default burst-<n>).
	Name string
}

// ExponentialLifetime draws lifetimes with the given mean.
func ExponentialLifetime(mean time.Duration) func(*rand.Rand) time.Duration {
	return func(r *rand.Rand) time.Duration { return time.Duration(r.ExpFloat64() * float64(mean)) }
}

// UniformLifetime draws lifetimes evenly between lo and hi.
func UniformLifetime(lo, hi time.Duration) func(*rand.Rand) time.Duration {
	return func(r *rand.Rand) time.Duration { return lo + time.Duration(r.Float64()*float64(hi-lo)) }
}

// planner draws the random part of the churn, from the seed alone. Its
// draws come in the order the churn asks for them: gap, pick, gap, pick...
type planner struct {
	rng      *rand.Rand
	rate     float64
	lifetime func(*rand.Rand) time.Duration
}

func newPlanner(cfg ChurnConfig) *planner {
	lifetime := cfg.Lifetime
	if lifetime == nil {
		lifetime = ExponentialLifetime(cfg.MeanLifetime)
	}
	return &planner{
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x656e6970616d)),
		rate:     cfg.ArrivalRate,
		lifetime: lifetime,
	}
}

// gap draws the time to the next arrival over nodes Ready nodes. The
// superposition of one Poisson process per node at rate r is one process
// at nodes × r whose every arrival lands on a node chosen evenly (pick).
func (p *planner) gap(nodes int) time.Duration {
	return time.Duration(p.rng.ExpFloat64() / (p.rate * float64(nodes)) * float64(time.Second))
}

// pick draws the node (an index into the Ready nodes, sorted by name) and
// the lifetime of an arriving pod.
func (p *planner) pick(nodes int) (node int, lifetime time.Duration) {
	return p.rng.IntN(nodes), p.lifetime(p.rng)
}

// start draws where a burst starts spreading, over nodes Ready nodes.
func (p *planner) start(nodes int) int { return p.rng.IntN(nodes) }

// event is a departure or a burst due at a time.
type event struct {
	at    time.Time
	seq   int // keeps equal times in the order they were planned
	owner string
	burst *Burst
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

var _ heap.Interface = (*eventHeap)(nil)
