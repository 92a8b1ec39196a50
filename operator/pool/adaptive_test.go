package pool

import (
	"testing"
	"time"
)

// TestHeadroom: the adaptive headroom is the larger of a node's burst
// (most arrivals within one lead time) and its rate times the lead time,
// over the memory, within the cap; a node that saw nothing keeps nothing.
func TestHeadroom(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ago := func(ds ...time.Duration) []time.Time {
		out := make([]time.Time, len(ds))
		for i, d := range ds {
			out[i] = now.Add(-d)
		}
		return out
	}
	s := time.Second
	// every returns n arrivals spaced gap apart, the last at now.
	every := func(n int, gap time.Duration) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = now.Add(-time.Duration(n-1-i) * gap)
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		arrivals     []time.Time
		lead, memory time.Duration
		limit        int
		want         int
	}{
		{"no arrival keeps nothing", nil, s, time.Minute, 8, 0},
		{"arrivals older than the memory are forgotten", ago(90*s, 61*s), s, time.Minute, 8, 0},
		{"one pod a minute ago keeps one", ago(59 * s), s, time.Minute, 8, 1},
		{"sparse arrivals: a burst of one", ago(50*s, 40*s, 30*s, 20*s, 10*s), s, time.Minute, 8, 1},
		{"three pods within one lead time", ago(30*s, 20*s+300*time.Millisecond, 20*s+200*time.Millisecond, 20*s), s, time.Minute, 8, 3},
		{"pods exactly one lead time apart are two windows", ago(2*s, s, 0), s, time.Minute, 8, 1},
		{"a longer lead time widens the window", ago(2*s, s, 0), 2500 * time.Millisecond, time.Minute, 8, 3},
		{"a steady rate: as many as arrive within one lead time", every(120, 500*time.Millisecond), 10 * s, time.Minute, 50, 20},
		{"a steady rate, rounded up", every(31, 2*s), 3 * s, time.Minute, 8, 2},
		{"capped by the limit", every(40, 100*time.Millisecond), s, time.Minute, 8, 8},
		{"a zero limit keeps nothing", ago(s), s, time.Minute, 0, 0},
		{"zero lead means the default lead", ago(1500*time.Millisecond, 600*time.Millisecond, 0), 0, time.Minute, 8, 2},
		{"a memory below the minimum is the minimum", ago(55 * s), s, 10 * s, 8, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Headroom(tc.arrivals, now, tc.lead, tc.memory, tc.limit); got != tc.want {
				t.Errorf("Headroom(%d arrivals, lead %v, memory %v, limit %d) = %d, want %d", len(tc.arrivals), tc.lead, tc.memory, tc.limit, got, tc.want)
			}
		})
	}
}

// TestLead: the lead time is the median of the last allocations, so one
// allocation stuck behind something else does not rule it; within its
// bounds.
func TestLead(t *testing.T) {
	ms := time.Millisecond
	record := func(ds ...time.Duration) []time.Duration {
		var recent []time.Duration
		for _, d := range ds {
			recent = RecordLead(recent, d)
		}
		return recent
	}
	for _, tc := range []struct {
		name   string
		recent []time.Duration
		want   time.Duration
	}{
		{"none measured", nil, DefaultLead},
		{"one measure", record(800 * ms), 800 * ms},
		{"one slow allocation among fast ones", record(900*ms, time.Minute, 700*ms), 900 * ms},
		{"only the last five count", record(9*time.Second, 9*time.Second, 9*time.Second, ms*600, ms*600, ms*700, ms*700, ms*800), 700 * ms},
		{"never below the minimum", record(10 * ms), MinLead},
		{"never above the maximum", record(time.Hour), MaxLead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Lead(tc.recent); got != tc.want {
				t.Errorf("Lead(%v) = %v, want %v", tc.recent, got, tc.want)
			}
		})
	}
	if got := len(record(1, 2, 3, 4, 5, 6, 7)); got != LeadSamples {
		t.Errorf("%d samples kept, want %d", got, LeadSamples)
	}
}

// TestAdaptiveKnobs: the learnt headroom replaces pre-allocate (which caps
// it), and half a headroom more (rounded up) is taken by each
// allocation; the pool never
// goes below what the agent waits for at start, nor above max-allocate;
// the agent's endpoints are within that floor.
func TestAdaptiveKnobs(t *testing.T) {
	for _, tc := range []struct {
		name               string
		k                  Knobs
		headroom, agentMin int
		want               Knobs
	}{
		{"headroom below the cap", Knobs{PreAllocate: 8, AgentEndpoints: 2}, 2, 2, Knobs{PreAllocate: 2, MinAllocate: 2, MaxAboveWatermark: 1}},
		{"headroom capped by pre-allocate", Knobs{PreAllocate: 4}, 9, 2, Knobs{PreAllocate: 4, MinAllocate: 2, MaxAboveWatermark: 2}},
		{"an odd headroom rounds its half up", Knobs{PreAllocate: 8}, 3, 2, Knobs{PreAllocate: 3, MinAllocate: 2, MaxAboveWatermark: 2}},
		{"min-allocate above the agent's start", Knobs{PreAllocate: 8, MinAllocate: 10}, 0, 2, Knobs{PreAllocate: 0, MinAllocate: 10}},
		{"the node's own pre-allocate is what the agent waits for", Knobs{PreAllocate: 6}, 1, AgentStart(0, 6), Knobs{PreAllocate: 1, MinAllocate: 6, MaxAboveWatermark: 1}},
		{"floor within max-allocate", Knobs{PreAllocate: 8, MaxAllocate: 1}, 0, 2, Knobs{PreAllocate: 0, MinAllocate: 1, MaxAllocate: 1}},
		{"a watermark set comes on top", Knobs{PreAllocate: 8, MaxAboveWatermark: 3}, 1, 2, Knobs{PreAllocate: 1, MinAllocate: 2, MaxAboveWatermark: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AdaptiveKnobs(tc.k, tc.headroom, tc.agentMin); got != tc.want {
				t.Errorf("AdaptiveKnobs(%+v, %d, %d) = %+v, want %+v", tc.k, tc.headroom, tc.agentMin, got, tc.want)
			}
		})
	}
}

// TestAgentStart: what Cilium's agent waits for, as crd.go's
// hasMinimumIPsInPool decides it.
func TestAgentStart(t *testing.T) {
	for _, tc := range []struct{ min, pre, want int }{{0, 0, 2}, {0, 8, 8}, {4, 8, 4}} {
		if got := AgentStart(tc.min, tc.pre); got != tc.want {
			t.Errorf("AgentStart(%d, %d) = %d, want %d", tc.min, tc.pre, got, tc.want)
		}
	}
}

// TestDemandSizesTheAdaptivePool: a node whose pods are all host-network
// or static-IP (no arrival, no demand) holds its floor and nothing more;
// a bound pod waiting for an address is covered before it asks; when its
// arrivals are forgotten, what the node holds beyond its pods is excess.
func TestDemandSizesTheAdaptivePool(t *testing.T) {
	now := time.Now()
	k := Knobs{PreAllocate: 8, AgentEndpoints: 2}
	quiet := AdaptiveKnobs(k, Headroom(nil, now, time.Second, time.Minute, k.PreAllocate), AgentStart(0, 0))
	if got := Needed(0, 0, quiet); got != 2 {
		t.Errorf("a fresh quiet node needs %d, want the agent's 2", got)
	}
	if got := ToAllocate(0, 0, 2, quiet); got != 2 {
		t.Errorf("a fresh quiet node allocates %d, want 2", got)
	}
	if got := Needed(2, 2, quiet); got != 0 {
		t.Errorf("a quiet node with its agent started needs %d, want 0", got)
	}
	// One pod bound (demand 1), two arrivals seen within a second.
	busy := AdaptiveKnobs(k, Headroom([]time.Time{now.Add(-time.Second / 2), now}, now, time.Second, time.Minute, k.PreAllocate), 2)
	if got := Needed(2, 2+1, busy); got != 3 {
		t.Errorf("a node with a bound pod and a burst of 2 needs %d, want 3", got)
	}
	if got := ToAllocate(2, 2+1, 3, busy); got != 4 {
		t.Errorf("it allocates %d, want 4: the need and half a headroom more", got)
	}
	if got := Excess(2+4, 2+1, busy); got != 0 {
		t.Errorf("right after, %d are excess, want 0: the band above the headroom is no excess", got)
	}
	// Its pods gone and its arrivals forgotten: 6 addresses, 2 used.
	later := AdaptiveKnobs(k, Headroom([]time.Time{now}, now.Add(2*time.Minute), time.Second, time.Minute, k.PreAllocate), 2)
	if got := Excess(6, 2, later); got != 4 {
		t.Errorf("excess after demand fell = %d, want 4", got)
	}
}
