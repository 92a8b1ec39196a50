package behaviour

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// LatencyConfig is how long the emulated EC2 takes to answer: a duration
// drawn uniformly from the action's Range (or Default) before the call is
// served. All zero by default.
type LatencyConfig struct {
	Default Range            `json:"default"`
	Actions map[string]Range `json:"actions,omitempty"`
}

// Validate rejects negative durations.
func (c LatencyConfig) Validate() error {
	if err := c.Default.Validate(); err != nil {
		return fmt.Errorf("default: %w", err)
	}
	for a, r := range c.Actions {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}

// RealisticLatency is what EC2 answers in from inside a region: describes in
// 50-150 ms, mutating calls in 150-400 ms, for actions (the actions served).
func RealisticLatency(actions []string) LatencyConfig {
	mutating := Range{Min: Duration(150 * time.Millisecond), Max: Duration(400 * time.Millisecond)}
	c := LatencyConfig{Default: mutating, Actions: map[string]Range{}}
	for _, a := range actions {
		if strings.HasPrefix(a, "Describe") {
			c.Actions[a] = Range{Min: Duration(50 * time.Millisecond), Max: Duration(150 * time.Millisecond)}
		}
	}
	return c
}

// Latencies draws per-call delays from a seeded generator.
type Latencies struct {
	mu  sync.Mutex
	cfg LatencyConfig
	rng *rand.Rand
}

// NewLatencies returns the delays of cfg, drawn from a generator seeded
// with seed.
func NewLatencies(seed uint64, cfg LatencyConfig) *Latencies {
	return &Latencies{cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0x6c6174656e6379))}
}

// Set replaces the configuration.
func (l *Latencies) Set(cfg LatencyConfig) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
}

// Config returns the configuration.
func (l *Latencies) Config() LatencyConfig {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

func (l *Latencies) draw(action string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.cfg.Actions[action]
	if !ok {
		r = l.cfg.Default
	}
	return r.Sample(l.rng)
}

// Wait sleeps for the action's latency or until ctx ends.
func (l *Latencies) Wait(ctx context.Context, action string) {
	d := l.draw(action)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
