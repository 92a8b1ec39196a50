// Package pool is the operator's pure arithmetic and planning: how many IPs
// a node needs or has in excess (Cilium-compatible), and what to ask the
// cloud for to get them. Nothing here does I/O; the controller feeds it a
// snapshot and executes the plan it returns.
package pool

// Knobs are Cilium's pool-size settings, resolved for one node (see
// package policy for where each value comes from).
type Knobs struct {
	// PreAllocate is the number of free IPs kept ahead of the pods.
	PreAllocate int
	// MinAllocate is the smallest pool a node gets, whatever it uses.
	MinAllocate int
	// MaxAllocate caps the pool; 0 means no cap.
	MaxAllocate int
	// MaxAboveWatermark is how many IPs beyond the need one allocation may
	// take, to save later calls.
	MaxAboveWatermark int
	// AgentEndpoints is how many IPs cilium-agent takes for itself as it
	// starts (router and health). A fresh node's first allocation includes
	// them, so the agent's start does not cost a second call; Cilium's own
	// operator leaves them to a second round.
	AgentEndpoints int
}

// Needed returns how many IPs the pool lacks: enough to keep PreAllocate
// free above the used ones and to reach MinAllocate, capped so the pool
// never exceeds MaxAllocate. It is never negative. available counts the
// pool IPs the agent may hand out (those in the release handshake are not).
// This is Cilium's calculateNeededIPs.
func Needed(available, used int, k Knobs) int {
	needed := max(k.PreAllocate+used-available, k.MinAllocate-available)
	if k.MaxAllocate > 0 && available+needed > k.MaxAllocate {
		needed = k.MaxAllocate - available
	}
	return max(needed, 0)
}

// ToAllocate returns how many IPs one allocation should ask for when the
// pool lacks needed: the need plus MaxAboveWatermark (plus AgentEndpoints
// on a fresh node, one with an empty pool and nothing used), within
// MaxAllocate. It returns 0 when nothing is needed: the watermark never
// triggers an allocation on its own.
func ToAllocate(available, used, needed int, k Knobs) int {
	if needed <= 0 {
		return 0
	}
	n := needed + k.MaxAboveWatermark
	if available == 0 && used == 0 {
		n += k.AgentEndpoints
	}
	if k.MaxAllocate > 0 && available+n > k.MaxAllocate {
		n = k.MaxAllocate - available
	}
	return max(n, needed)
}

// Excess returns how many free IPs the pool holds beyond what the knobs
// keep: Cilium's calculateExcessIPs. IPs taken at bootstrap up to
// MinAllocate + MaxAboveWatermark are never excess while the node's use
// stays within that.
func Excess(available, used int, k Knobs) int {
	floor := k.MinAllocate + k.MaxAboveWatermark
	if used <= floor {
		if available <= floor {
			return 0
		}
		if used+k.PreAllocate <= floor {
			return available - floor
		}
	}
	return max(available-used-k.PreAllocate-k.MaxAboveWatermark, 0)
}
