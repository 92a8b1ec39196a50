package poolcontroller

import (
	"sync"
	"time"
)

// handoffs time each new ENI's way into its node's pool: when EC2's
// describe first showed it attached, when the node's agent was first seen
// reporting it routed, and when a write first put its addresses in the
// pool. Attached and routed is the moment the addresses could be pooled;
// what passes from there to the pool is the operator's own delay, with no
// EC2 call left to make.
type handoffs struct {
	mu       sync.Mutex
	attached map[string]time.Time
	routed   map[string]time.Time
}

// handoffMemory is how long an ENI's moments are kept waiting for the
// other ones (an ENI never pooled: deleted, or its node gone).
const handoffMemory = 15 * time.Minute

func newHandoffs() *handoffs {
	return &handoffs{attached: map[string]time.Time{}, routed: map[string]time.Time{}}
}

// sawAttached records when EC2's describe first showed eni attached.
func (h *handoffs) sawAttached(eni string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.attached[eni]; !ok {
		h.attached[eni] = at
	}
}

// sawRouted records when the node's agent was first seen reporting eni
// routed; only ENIs whose attachment was seen completing are timed.
func (h *handoffs) sawRouted(eni string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.routed[eni]; !ok {
		h.routed[eni] = at
	}
}

// pooled returns when eni's addresses were attached and routed, ready for
// the pool that listed them at at; false when the ENI's attachment or
// routing was not seen by this process (an ENI older than it) or the ENI
// was timed before. The ENI is forgotten.
func (h *handoffs) pooled(eni string, at time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	attached, okA := h.attached[eni]
	routed, okR := h.routed[eni]
	delete(h.attached, eni)
	delete(h.routed, eni)
	for id, t := range h.attached {
		if at.Sub(t) > handoffMemory {
			delete(h.attached, id)
		}
	}
	for id, t := range h.routed {
		if at.Sub(t) > handoffMemory {
			delete(h.routed, id)
		}
	}
	if !okA || !okR {
		return time.Time{}, false
	}
	if routed.After(attached) {
		return routed, true
	}
	return attached, true
}
