package agent

import "time"

// SetClock replaces the agent's clock; call it before Start.
func SetClock(a *Agent, now func() time.Time) { a.now = now }
