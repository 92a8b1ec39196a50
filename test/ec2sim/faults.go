package ec2sim

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

// faults holds the live rules and the generator their rates draw from.
type faults struct {
	mu    sync.Mutex
	rules []FaultRule
	rng   *rand.Rand
}

func newFaults(seed uint64, cfg FaultConfig) *faults {
	f := &faults{rng: rand.New(rand.NewPCG(seed, 0x6661756c7473))}
	f.set(cfg)
	return f
}

func (f *faults) set(cfg FaultConfig) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append([]FaultRule(nil), cfg.Rules...)
}

func (f *faults) config() FaultConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FaultConfig{Rules: append([]FaultRule(nil), f.rules...)}
}

// fire returns the error to answer action with, or nil to serve it.
func (f *faults) fire(action string) *APIError {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.rules {
		r := &f.rules[i]
		if r.Action != "" && r.Action != "*" && r.Action != action {
			continue
		}
		if r.Count > 0 {
			e := r.err()
			r.Count--
			if r.Count == 0 {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
			}
			return e
		}
		if r.Rate > 0 && f.rng.Float64() < r.Rate {
			return r.err()
		}
	}
	return nil
}

func (r FaultRule) err() *APIError {
	e := apiErr(r.Code, "%s", r.Message)
	if r.Message == "" {
		e.Message = "Injected fault."
	}
	if r.HTTPStatus != 0 {
		e.HTTPStatus = r.HTTPStatus
	}
	return e
}
