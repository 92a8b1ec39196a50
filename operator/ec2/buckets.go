package ec2

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// Bucket is a token bucket: Burst tokens, refilled at Refill per second.
type Bucket struct {
	Burst  int
	Refill float64
}

// EC2's documented per-action defaults (per account and region).
var (
	describeBucket  = Bucket{Burst: 100, Refill: 20}
	mutatingBucket  = Bucket{Burst: 50, Refill: 5}
	interfaceBucket = Bucket{Burst: 100, Refill: 5}
	tagsBucket      = Bucket{Burst: 100, Refill: 10}
)

// DefaultBucket returns EC2's default bucket for an action.
func DefaultBucket(action string) Bucket {
	switch action {
	case "CreateNetworkInterface", "DeleteNetworkInterface", "AssignPrivateIpAddresses",
		"UnassignPrivateIpAddresses", "ModifyNetworkInterfaceAttribute":
		return interfaceBucket
	case "CreateTags", "DeleteTags":
		return tagsBucket
	}
	if len(action) > 8 && action[:8] == "Describe" {
		return describeBucket
	}
	return mutatingBucket
}

// Buckets holds one client-side limiter per action, so one busy action
// never starves another, as with EC2's own accounting.
type Buckets struct {
	scale    float64
	limiters map[string]*rate.Limiter
}

// NewBuckets returns EC2's default buckets with refill and burst scaled.
func NewBuckets(scale float64) *Buckets {
	b := &Buckets{scale: scale, limiters: map[string]*rate.Limiter{}}
	for _, action := range actions {
		d := DefaultBucket(action)
		b.limiters[action] = rate.NewLimiter(rate.Limit(d.Refill*scale), max(1, int(float64(d.Burst)*scale)))
	}
	return b
}

// Wait blocks until the action's bucket grants a token and returns how
// long that took. Waiters are served in arrival order.
func (b *Buckets) Wait(ctx context.Context, action string) (time.Duration, error) {
	l, ok := b.limiters[action]
	if !ok {
		panic("ec2: no bucket for action " + action) // every action is listed below
	}
	start := time.Now()
	err := l.Wait(ctx)
	return time.Since(start), err
}

// actions are the EC2 actions the adapter calls.
var actions = []string{
	"DescribeVpcs", "DescribeSubnets", "DescribeSecurityGroups", "DescribeInstances",
	"DescribeNetworkInterfaces", "DescribeInstanceTypes",
	"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
	"DeleteNetworkInterface", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses",
}
