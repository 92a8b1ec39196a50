package wire

import (
	"maps"
	"sync"
)

// Counters count EC2 calls by action since start or the last reset. Calls
// counts every request naming the action, whatever became of it; Throttled
// counts those refused by the token bucket; Errors counts the other error
// answers by action and code, injected faults included. So the calls served
// successfully are Calls - Throttled - sum(Errors). Requests naming no known
// action count under the action "Unknown".
type Counters struct {
	Calls     map[string]int64            `json:"calls"`
	Throttled map[string]int64            `json:"throttled"`
	Errors    map[string]map[string]int64 `json:"errors"`
}

// ErrorCount is the number of errors with code answered to action.
func (c Counters) ErrorCount(action, code string) int64 { return c.Errors[action][code] }

// Succeeded is the number of action's calls that were served without error.
func (c Counters) Succeeded(action string) int64 {
	n := c.Calls[action] - c.Throttled[action]
	for _, v := range c.Errors[action] {
		n -= v
	}
	return n
}

func newCountersValue() Counters {
	return Counters{Calls: map[string]int64{}, Throttled: map[string]int64{}, Errors: map[string]map[string]int64{}}
}

type counters struct {
	mu sync.Mutex
	c  Counters
}

func newCounters() *counters { return &counters{c: newCountersValue()} }

func (c *counters) call(action string) {
	c.mu.Lock()
	c.c.Calls[action]++
	c.mu.Unlock()
}

func (c *counters) throttled(action string) {
	c.mu.Lock()
	c.c.Throttled[action]++
	c.mu.Unlock()
}

func (c *counters) failed(action, code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.c.Errors[action]
	if m == nil {
		m = map[string]int64{}
		c.c.Errors[action] = m
	}
	m[code]++
}

func (c *counters) snapshot() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Counters{Calls: maps.Clone(c.c.Calls), Throttled: maps.Clone(c.c.Throttled), Errors: map[string]map[string]int64{}}
	for a, m := range c.c.Errors {
		out.Errors[a] = maps.Clone(m)
	}
	return out
}

func (c *counters) reset() {
	c.mu.Lock()
	c.c = newCountersValue()
	c.mu.Unlock()
}
