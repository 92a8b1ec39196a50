package agentsim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ChurnReport is what a churn run did.
type ChurnReport struct {
	Seed uint64
	Ran  time.Duration
	// Arrivals: pods created by the Poisson arrivals and InitialPods;
	// BurstPods: by bursts.
	Arrivals, BurstPods int
	// Unplaced arrivals found their node full and were not created.
	Unplaced int
	// Started pods got an IP; Failed pods' allocation ended without one
	// (timeout, agent removed).
	Started, Failed int
	// Departures: pods deleted during the run, waiting or not.
	Departures int
	// PeakPods: most pods alive at once, waiting or holding an IP.
	PeakPods int
	// PodsAtEnd alive when the run ended, WaitingAtEnd of them still
	// waiting for an IP; DeletedAtEnd by DeleteAtEnd.
	PodsAtEnd, WaitingAtEnd, DeletedAtEnd int
}

// churnPod is a pod the churn created.
type churnPod struct {
	owner   string
	agent   *Agent
	running bool
}

// Churn drives pods onto the Ready agents of a Sim. One goroutine and one
// timer run the whole schedule; allocations complete through callbacks.
type Churn struct {
	sim    *Sim
	cfg    ChurnConfig
	plan   *planner
	extra  chan Burst
	podSeq int
	evSeq  int
	bursts int

	mu      sync.Mutex
	pods    map[string]*churnPod
	perNode map[*Agent]int
	report  ChurnReport
}

// NewChurn returns a churn over sim's Ready agents; Run starts it.
func NewChurn(sim *Sim, cfg ChurnConfig) *Churn {
	if cfg.Namespace == "" {
		cfg.Namespace = "churn"
	}
	if cfg.MaxPodsPerNode == 0 {
		cfg.MaxPodsPerNode = DefaultMaxPodsPerNode
	}
	return &Churn{
		sim:     sim,
		cfg:     cfg,
		plan:    newPlanner(cfg),
		extra:   make(chan Burst, 16),
		pods:    map[string]*churnPod{},
		perNode: map[*Agent]int{},
		report:  ChurnReport{Seed: cfg.Seed},
	}
}

// Burst scales a deployment up now, during Run; it blocks if many bursts
// are already queued.
func (c *Churn) Burst(b Burst) { c.extra <- b }

// idlePoll is how often arrivals look again for Ready nodes when none is.
const idlePoll = 50 * time.Millisecond

// Run drives the churn until cfg.Duration has passed or ctx ends, and
// reports what it did. Pods stay on their nodes afterwards unless
// cfg.DeleteAtEnd.
func (c *Churn) Run(ctx context.Context) (ChurnReport, error) {
	if c.cfg.ArrivalRate < 0 || (c.cfg.ArrivalRate > 0 && c.cfg.Lifetime == nil && c.cfg.MeanLifetime <= 0) {
		return ChurnReport{}, errors.New("churn needs a non-negative arrival rate and a lifetime")
	}
	start := time.Now()
	var end <-chan time.Time
	if c.cfg.Duration > 0 {
		t := time.NewTimer(c.cfg.Duration)
		defer t.Stop()
		end = t.C
	}
	var events eventHeap
	for i := range c.cfg.Bursts {
		c.push(&events, event{at: start.Add(c.cfg.Bursts[i].At), burst: &c.cfg.Bursts[i]})
	}
	for range c.cfg.InitialPods {
		n := c.sim.readyCount()
		for i := range n {
			a, _ := c.sim.readyAt(i)
			_, lifetime := c.plan.pick(1)
			c.place(&events, a, lifetime, start, false)
		}
	}
	nextArrival := time.Time{}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		for events.Len() > 0 && !events[0].at.After(now) {
			c.fire(&events, heap.Pop(&events).(event), now)
		}
		var wake time.Time
		nextArrival, wake = c.arrive(&events, nextArrival, now)
		if events.Len() > 0 && events[0].at.Before(wake) {
			wake = events[0].at
		}
		timer.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			return c.finish(start), nil
		case <-end:
			return c.finish(start), nil
		case b := <-c.extra:
			c.fire(&events, event{burst: &b}, time.Now())
		case <-timer.C:
		}
	}
}

// arrive creates the pods whose arrival is due and returns when the next
// one is (zero if not drawn yet) and when to look again. Arrivals follow
// from the previous one, not from now, so a late wake-up keeps the rate.
func (c *Churn) arrive(events *eventHeap, next, now time.Time) (time.Time, time.Time) {
	if c.cfg.ArrivalRate == 0 {
		return time.Time{}, now.Add(time.Hour)
	}
	for {
		n := c.sim.readyCount()
		if n == 0 {
			return time.Time{}, now.Add(idlePoll)
		}
		if next.IsZero() {
			next = now.Add(c.plan.gap(n))
		}
		if next.After(now) {
			return next, next
		}
		node, lifetime := c.plan.pick(n)
		a, _ := c.sim.readyAt(node)
		c.place(events, a, lifetime, next, false)
		next = next.Add(c.plan.gap(n))
	}
}

// fire runs a due event: a departure or a burst.
func (c *Churn) fire(events *eventHeap, ev event, now time.Time) {
	if ev.burst == nil {
		c.depart(ev.owner)
		return
	}
	b := *ev.burst
	n := c.sim.readyCount()
	if n == 0 || b.Pods <= 0 {
		return
	}
	c.bursts++
	if b.Name == "" {
		b.Name = fmt.Sprintf("burst-%d", c.bursts)
	}
	first := c.plan.start(n)
	for i := range b.Pods {
		a, _ := c.sim.readyAt(first + i)
		hold := b.Hold
		if hold == 0 {
			hold = -1
		}
		c.placeNamed(events, a, fmt.Sprintf("%s-%d", b.Name, i), hold, now, true)
	}
}

// place creates a pod named from the sequence on a; see placeNamed.
func (c *Churn) place(events *eventHeap, a *Agent, lifetime time.Duration, at time.Time, burst bool) {
	c.podSeq++
	c.placeNamed(events, a, fmt.Sprintf("pod-%d", c.podSeq), lifetime, at, burst)
}

// placeNamed creates pod name on a, deleted lifetime after at (never if
// negative), unless a is full.
func (c *Churn) placeNamed(events *eventHeap, a *Agent, name string, lifetime time.Duration, at time.Time, burst bool) {
	if a == nil {
		return
	}
	owner := c.cfg.Namespace + "/" + name
	c.mu.Lock()
	if c.perNode[a] >= c.cfg.MaxPodsPerNode {
		c.report.Unplaced++
		c.mu.Unlock()
		return
	}
	if burst {
		c.report.BurstPods++
	} else {
		c.report.Arrivals++
	}
	p := &churnPod{owner: owner, agent: a}
	c.pods[owner] = p
	c.perNode[a]++
	c.report.PeakPods = max(c.report.PeakPods, len(c.pods))
	c.mu.Unlock()
	if lifetime >= 0 {
		c.push(events, event{at: at.Add(lifetime), owner: owner})
	}
	a.AllocateAsync(owner, func(r Result) { c.allocated(p, r) })
}

// allocated takes the outcome of a pod's allocation.
func (c *Churn) allocated(p *churnPod, r Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pods[p.owner] != p {
		return // deleted while waiting
	}
	if r.Err != nil {
		c.report.Failed++
		c.forgetLocked(p)
		return
	}
	p.running = true
	c.report.Started++
}

// depart deletes a pod, waiting or not.
func (c *Churn) depart(owner string) {
	c.mu.Lock()
	p := c.pods[owner]
	if p == nil {
		c.mu.Unlock()
		return
	}
	c.forgetLocked(p)
	c.report.Departures++
	c.mu.Unlock()
	p.agent.Release(owner)
}

func (c *Churn) forgetLocked(p *churnPod) {
	delete(c.pods, p.owner)
	c.perNode[p.agent]--
}

func (c *Churn) push(events *eventHeap, ev event) {
	c.evSeq++
	ev.seq = c.evSeq
	heap.Push(events, ev)
}

// finish closes the report, deleting the remaining pods if asked.
func (c *Churn) finish(start time.Time) ChurnReport {
	c.mu.Lock()
	var left []*churnPod
	for _, p := range c.pods {
		c.report.PodsAtEnd++
		if !p.running {
			c.report.WaitingAtEnd++
		}
		if c.cfg.DeleteAtEnd {
			left = append(left, p)
		}
	}
	for _, p := range left {
		c.forgetLocked(p)
	}
	c.report.DeletedAtEnd = len(left)
	c.report.Ran = time.Since(start)
	report := c.report
	c.mu.Unlock()
	for _, p := range left {
		p.agent.Release(p.owner)
	}
	return report
}
