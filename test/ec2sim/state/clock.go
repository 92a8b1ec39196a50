package state

import (
	"sync"
	"time"
)

// ManualClock is a clock a test moves by hand: pass its Now to NewState
// or WithClock, and attach delays, consistency windows, token buckets and
// IMDS token expiry are stepped through without sleeping. It is safe for
// concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{t: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
