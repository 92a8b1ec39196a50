package agentsim

import (
	"context"
	"slices"
	"strings"
	"time"
)

// NodeFigures are one agent's figures.
type NodeFigures struct {
	Name  string
	Ready bool
	// AddedAt: the agent was added (the node joined); ReadyAt: it became
	// Ready (zero if not yet).
	AddedAt, ReadyAt time.Time
	// Pods holding an IP; PendingWaits: pods waiting for one.
	Pods, PendingWaits int
	// PoolIPs in spec.ipam.pool; UsedIPs of them held (router and health
	// included); IdleIPs = PoolIPs - UsedIPs.
	PoolIPs, UsedIPs, IdleIPs int
	// Allocations to pods; Waits that ended (satisfied or not).
	Allocations, Waits int
	WaitTotal, WaitMax time.Duration
	// Writes of the CiliumNode status that succeeded, that met a conflict,
	// that failed otherwise.
	Writes, WriteConflicts, FailedWrites int
	// Violations found on this node.
	Violations int
}

// WaitFigures summarize pods' waits for a free IP. Durations count
// finished waits only.
type WaitFigures struct {
	// Count = Satisfied + TimedOut + Abandoned.
	Count, Satisfied, TimedOut, Abandoned int
	// Pending waits are still under way (Figures only).
	Pending       int
	P50, P99, Max time.Duration
}

// IdleSample is the fleet's pools at one moment.
type IdleSample struct {
	At                        time.Time
	Nodes                     int
	PoolIPs, UsedIPs, IdleIPs int
}

// IdlePerNode is the mean number of idle IPs per node.
func (s IdleSample) IdlePerNode() float64 {
	if s.Nodes == 0 {
		return 0
	}
	return float64(s.IdleIPs) / float64(s.Nodes)
}

// Figures are a Sim's aggregate figures. Allocations, Waits and Violations
// come from the Ledger (so include removed agents and any Sim sharing it);
// the rest from the Sim's current agents and its own writes.
type Figures struct {
	Nodes, ReadyNodes int
	// Allocations to pods (router and health excluded).
	Allocations int
	Waits       WaitFigures
	// CiliumNode status writes of all agents.
	Writes, WriteConflicts, FailedWrites int
	// UsedLag: from a change of an agent's IPs to the write carrying it.
	UsedLag LagFigures
	// The pools now, over all agents.
	PoolIPs, UsedIPs, IdleIPs int
	// IdleSamples taken every Options.SampleInterval since Start.
	IdleSamples []IdleSample
	Violations  Violations
	// RoutedChecks: handouts judged against the node agents' routing
	// reports (routed before handed), and those still waiting for the
	// NodeRouting watch to catch up.
	RoutedChecks, RoutedPending int
	// RoutedUnjudged: of RoutedChecks, those without a verdict, as the
	// node's routing status at the revision they were pooled in fell in
	// a gap of the ledger's NodeRouting watch (Ledger.RoutedUnjudged).
	RoutedUnjudged int
}

// Figures returns the agent's figures now.
func (a *Agent) Figures() NodeFigures {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := NodeFigures{
		Name:           a.name,
		Ready:          a.started,
		AddedAt:        a.addedAt,
		ReadyAt:        a.readyAt,
		PendingWaits:   len(a.pending),
		Allocations:    a.counters.allocations,
		Waits:          a.counters.waits,
		WaitTotal:      a.counters.waitTotal,
		WaitMax:        a.counters.waitMax,
		Writes:         a.counters.writes,
		WriteConflicts: a.counters.conflicts,
		FailedWrites:   a.counters.failedWrites,
		Violations:     a.counters.violations,
	}
	for _, w := range a.pending {
		if w.infra {
			f.PendingWaits--
		}
	}
	for owner := range a.owners {
		if owner != RouterOwner && owner != HealthOwner {
			f.Pods++
		}
	}
	if a.node != nil {
		f.PoolIPs = len(a.node.Spec.IPAM.Pool)
		for ip := range a.allocated {
			if _, ok := a.node.Spec.IPAM.Pool[ip]; ok {
				f.UsedIPs++
			}
		}
	}
	f.IdleIPs = f.PoolIPs - f.UsedIPs
	return f
}

// NodeFigures returns every agent's figures, sorted by name.
func (s *Sim) NodeFigures() []NodeFigures {
	agents := s.Agents()
	out := make([]NodeFigures, 0, len(agents))
	for _, a := range agents {
		out = append(out, a.Figures())
	}
	slices.SortFunc(out, func(x, y NodeFigures) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Figures returns the aggregate figures now.
func (s *Sim) Figures() Figures {
	l := s.opts.Ledger
	f := Figures{
		Allocations:    l.Allocations(),
		Waits:          l.Waits(),
		Writes:         int(s.writes.writes.Load()),
		WriteConflicts: int(s.writes.conflicts.Load()),
		FailedWrites:   int(s.writes.failed.Load()),
		UsedLag:        s.writes.lags.summary(),
		Violations:     l.Violations(),
	}
	f.RoutedChecks, f.RoutedPending = l.RoutedChecks()
	f.RoutedUnjudged, _ = l.RoutedUnjudged()
	for _, a := range s.Agents() {
		n := a.Figures()
		f.Nodes++
		if n.Ready {
			f.ReadyNodes++
		}
		f.Waits.Pending += n.PendingWaits
		f.PoolIPs += n.PoolIPs
		f.UsedIPs += n.UsedIPs
		f.IdleIPs += n.IdleIPs
	}
	s.mu.RLock()
	f.IdleSamples = slices.Clone(s.samples)
	s.mu.RUnlock()
	return f
}

// SampleIdle measures the pools of all Ready agents now and keeps the
// sample with the others.
func (s *Sim) SampleIdle() IdleSample {
	sample := IdleSample{At: time.Now()}
	for _, a := range s.Agents() {
		n := a.Figures()
		if !n.Ready {
			continue
		}
		sample.Nodes++
		sample.PoolIPs += n.PoolIPs
		sample.UsedIPs += n.UsedIPs
		sample.IdleIPs += n.IdleIPs
	}
	s.mu.Lock()
	s.samples = append(s.samples, sample)
	s.mu.Unlock()
	return sample
}

func (s *Sim) sample(ctx context.Context) {
	t := time.NewTicker(s.opts.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.SampleIdle()
		}
	}
}
