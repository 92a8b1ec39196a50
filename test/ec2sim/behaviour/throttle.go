package behaviour

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// ThrottleConfig shapes EC2's request throttling: one token bucket per action
// (and one more per action for its unfiltered, unpaginated form), each call
// taking a token, refilled at a steady rate. A call finding its bucket empty
// is answered RequestLimitExceeded with HTTP 503.
type ThrottleConfig struct {
	Enabled bool `json:"enabled"`
	// Scale multiplies every bucket's size and refill rate; 0 means 1.
	Scale float64 `json:"scale,omitempty"`
	// Buckets override EC2's defaults, keyed by action name, or by
	// "<Action>/unfiltered" for the unfiltered bucket.
	Buckets map[string]BucketConfig `json:"buckets,omitempty"`
}

// BucketConfig is one token bucket: Size tokens at most, RefillPerSecond
// tokens added each second.
type BucketConfig struct {
	Size            float64 `json:"size"`
	RefillPerSecond float64 `json:"refillPerSecond"`
}

// Validate rejects negative sizes, rates and scale.
func (c ThrottleConfig) Validate() error {
	if c.Scale < 0 {
		return fmt.Errorf("scale %v is negative", c.Scale)
	}
	for k, b := range c.Buckets {
		if b.Size < 0 || b.RefillPerSecond < 0 {
			return fmt.Errorf("bucket %s: negative size or refill", k)
		}
	}
	return nil
}

// unfilteredSuffix marks the bucket of an unfiltered, unpaginated describe.
const unfilteredSuffix = "/unfiltered"

// DefaultBucket is EC2's documented bucket for an action; unfiltered selects
// the bucket of unfiltered and unpaginated DescribeInstances,
// DescribeNetworkInterfaces and DescribeSecurityGroups.
func DefaultBucket(action string, unfiltered bool) BucketConfig {
	switch {
	case unfiltered:
		return BucketConfig{Size: 50, RefillPerSecond: 10}
	case strings.HasPrefix(action, "Describe"):
		return BucketConfig{Size: 100, RefillPerSecond: 20}
	case action == "CreateTags" || action == "DeleteTags":
		return BucketConfig{Size: 100, RefillPerSecond: 10}
	case action == "CreateNetworkInterface" || action == "DeleteNetworkInterface" ||
		action == "AssignPrivateIpAddresses" || action == "UnassignPrivateIpAddresses" ||
		action == "ModifyNetworkInterfaceAttribute":
		return BucketConfig{Size: 100, RefillPerSecond: 5}
	default:
		return BucketConfig{Size: 50, RefillPerSecond: 5}
	}
}

// unfilteredCapable lists the actions EC2 throttles harder when called
// without filters or pagination.
var unfilteredCapable = map[string]bool{
	"DescribeInstances": true, "DescribeNetworkInterfaces": true, "DescribeSecurityGroups": true,
}

type bucket struct {
	tokens float64
	last   time.Time
	cfg    BucketConfig
}

// Throttler holds the live buckets. Changing the config refills every
// bucket.
type Throttler struct {
	mu      sync.Mutex
	now     func() time.Time
	cfg     ThrottleConfig
	buckets map[string]*bucket
}

// NewThrottler returns the buckets of cfg on the clock now.
func NewThrottler(now func() time.Time, cfg ThrottleConfig) *Throttler {
	t := &Throttler{now: now}
	t.Set(cfg)
	return t
}

// Set replaces the configuration and refills every bucket.
func (t *Throttler) Set(cfg ThrottleConfig) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cfg = cfg
	t.buckets = map[string]*bucket{}
}

// Config returns the configuration.
func (t *Throttler) Config() ThrottleConfig {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg
}

// Allow takes a token from the action's bucket, reporting false when it is
// empty. unfiltered selects the separate bucket of unfiltered describes.
func (t *Throttler) Allow(action string, unfiltered bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.cfg.Enabled {
		return true
	}
	key := action
	if unfiltered && unfilteredCapable[action] {
		key += unfilteredSuffix
	} else {
		unfiltered = false
	}
	now := t.now()
	b := t.buckets[key]
	if b == nil {
		cfg, ok := t.cfg.Buckets[key]
		if !ok {
			cfg = DefaultBucket(action, unfiltered)
		}
		if scale := t.cfg.Scale; scale > 0 {
			cfg.Size *= scale
			cfg.RefillPerSecond *= scale
		}
		b = &bucket{tokens: cfg.Size, last: now, cfg: cfg}
		t.buckets[key] = b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.cfg.Size, b.tokens+elapsed.Seconds()*b.cfg.RefillPerSecond)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
