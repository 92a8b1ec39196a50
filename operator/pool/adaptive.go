package pool

import (
	"slices"
	"time"
)

// The adaptive headroom: how many free addresses a node keeps beyond its
// demand (the pods using an address, and the pods bound to it still
// waiting for one), learnt from the pods that arrived on it. The
// operator sees a pod the moment it is bound, before its CNI call, so a
// pool only has to cover the pods that arrive while an allocation is
// under way: those within one lead time.

// Bounds of the lead time: how long one allocation takes to reach the
// pool (EC2's bucket wait and call, the node agent's routing report, the
// CiliumNode write).
const (
	// DefaultLead is assumed until a node's allocations were measured.
	DefaultLead = time.Second
	// MinLead and MaxLead bound what measurements may teach.
	MinLead = 250 * time.Millisecond
	MaxLead = time.Minute
	// MinMemory is the shortest past the headroom learns from.
	MinMemory = time.Minute
)

// Headroom returns the adaptive headroom of a node: the larger of its
// burst, the most pods bound to it within any one lead time, and its
// rate, the pods bound to it per second, times the lead time (rounded up);
// both over the last memory; at most limit. arrivals are the times pods
// were bound to the node, oldest first; those before now-memory are
// ignored. A node that saw no arrival in that time gets 0. lead is
// clamped to [MinLead, MaxLead] (DefaultLead when zero), memory to at
// least MinMemory.
func Headroom(arrivals []time.Time, now time.Time, lead, memory time.Duration, limit int) int {
	lead = clampLead(lead)
	memory = max(memory, MinMemory)
	since := now.Add(-memory)
	first := 0
	for first < len(arrivals) && !arrivals[first].After(since) {
		first++
	}
	recent := arrivals[first:]
	if len(recent) == 0 || limit <= 0 {
		return 0
	}
	burst, from := 0, 0
	for i, at := range recent {
		for at.Sub(recent[from]) >= lead {
			from++
		}
		burst = max(burst, i-from+1)
	}
	// ceil(n × lead / memory) in integers, so a rate just above a whole
	// number of pods per lead time rounds up.
	n, l, m := int64(len(recent)), int64(lead), int64(memory)
	byRate := int((n*l + m - 1) / m)
	return min(max(burst, byRate), limit)
}

// LeadSamples is how many recent allocation times a node's lead time is
// the median of.
const LeadSamples = 5

// Lead is a node's lead time: the median of its recent allocation times
// (one slow allocation, stuck behind something else, does not rule it),
// DefaultLead before any was measured, within [MinLead, MaxLead].
func Lead(recent []time.Duration) time.Duration {
	if len(recent) == 0 {
		return DefaultLead
	}
	sorted := slices.Clone(recent)
	slices.Sort(sorted)
	return clampLead(sorted[len(sorted)/2])
}

// RecordLead adds a measured allocation time to recent, keeping the last
// LeadSamples.
func RecordLead(recent []time.Duration, took time.Duration) []time.Duration {
	recent = append(recent, took)
	if len(recent) > LeadSamples {
		recent = slices.Delete(recent, 0, len(recent)-LeadSamples)
	}
	return recent
}

func clampLead(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultLead
	}
	return min(max(d, MinLead), MaxLead)
}

// AgentStart is how many pool addresses Cilium's agent waits for before it
// starts serving pods (pkg/ipam/crd.go, hasMinimumIPsInPool): the
// CiliumNode's own min-allocate, else its own pre-allocate, else 2 (the
// router's and the health endpoint's, with health checking on, Cilium's
// default).
func AgentStart(nodeMinAllocate, nodePreAllocate int) int {
	switch {
	case nodeMinAllocate > 0:
		return nodeMinAllocate
	case nodePreAllocate > 0:
		return nodePreAllocate
	}
	return 2
}

// AdaptiveKnobs returns the knobs the pool math runs with under the
// adaptive headroom: headroom free addresses ahead of the demand, capped
// by PreAllocate; each allocation taking half a headroom (rounded up)
// more than the need (on top of MaxAboveWatermark), so EC2 sees one call
// per half headroom of pods rather than one per pod, and what lies in
// that band is never excess (a whole headroom more would keep free, on
// average, a quarter of a headroom more for every node); a pool of at least MinAllocate and
// of what the agent waits for to start (agentStart), which also covers
// the addresses the agent takes for itself, so no extra is added for
// them; MaxAllocate as set.
func AdaptiveKnobs(k Knobs, headroom, agentStart int) Knobs {
	out := k
	out.PreAllocate = min(max(headroom, 0), k.PreAllocate)
	out.MaxAboveWatermark = k.MaxAboveWatermark + (out.PreAllocate+1)/2
	out.MinAllocate = max(k.MinAllocate, agentStart)
	if k.MaxAllocate > 0 {
		out.MinAllocate = min(out.MinAllocate, k.MaxAllocate)
	}
	out.AgentEndpoints = 0
	return out
}
