package behaviour

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// FaultConfig injects errors into calls. Rules are tried in order; the first
// that fires answers the call with its error instead of serving it.
type FaultConfig struct {
	Rules []FaultRule `json:"rules,omitempty"`
}

// FaultRule fails calls of Action ("" or "*" for every action) with Code.
// With Count > 0 it fails the next Count matching calls and is then spent;
// otherwise each matching call fails with probability Rate.
type FaultRule struct {
	Action  string `json:"action,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	// HTTPStatus defaults to EC2's status for Code (503 for
	// RequestLimitExceeded and Unavailable, 500 for InternalError, 403 for
	// UnauthorizedOperation, else 400).
	HTTPStatus int     `json:"httpStatus,omitempty"`
	Rate       float64 `json:"rate,omitempty"`
	Count      int     `json:"count,omitempty"`
}

// Validate checks that each rule has a code and fires sometimes.
func (c FaultConfig) Validate() error {
	for i, r := range c.Rules {
		switch {
		case r.Code == "":
			return fmt.Errorf("rules[%d]: code is empty", i)
		case r.Rate < 0 || r.Rate > 1:
			return fmt.Errorf("rules[%d]: rate %v outside 0..1", i, r.Rate)
		case r.Count < 0:
			return fmt.Errorf("rules[%d]: count is negative", i)
		case r.Count == 0 && r.Rate == 0:
			return fmt.Errorf("rules[%d]: neither count nor rate is set", i)
		case r.HTTPStatus != 0 && (r.HTTPStatus < 400 || r.HTTPStatus > 599):
			return fmt.Errorf("rules[%d]: httpStatus %d is not an error status", i, r.HTTPStatus)
		}
	}
	return nil
}

// Faults holds the live rules and the generator their rates draw from.
type Faults struct {
	mu    sync.Mutex
	rules []FaultRule
	rng   *rand.Rand
}

// NewFaults returns the rules of cfg, their rates drawn from a generator
// seeded with seed.
func NewFaults(seed uint64, cfg FaultConfig) *Faults {
	f := &Faults{rng: rand.New(rand.NewPCG(seed, 0x6661756c7473))}
	f.Set(cfg)
	return f
}

// Set replaces the rules.
func (f *Faults) Set(cfg FaultConfig) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append([]FaultRule(nil), cfg.Rules...)
}

// Config returns the live rules (spent ones are gone).
func (f *Faults) Config() FaultConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FaultConfig{Rules: append([]FaultRule(nil), f.rules...)}
}

// Fire returns the rule whose error answers a call of action, and false
// to serve the call.
func (f *Faults) Fire(action string) (FaultRule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.rules {
		r := &f.rules[i]
		if r.Action != "" && r.Action != "*" && r.Action != action {
			continue
		}
		if r.Count > 0 {
			fired := *r
			r.Count--
			if r.Count == 0 {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
			}
			return fired, true
		}
		if r.Rate > 0 && f.rng.Float64() < r.Rate {
			return *r, true
		}
	}
	return FaultRule{}, false
}
