package ec2sim

import (
	"github.com/enipam/enipam/test/ec2sim/behaviour"
	"github.com/enipam/enipam/test/ec2sim/wire"
)

// The behaviour layer (package behaviour: throttling, latency, injected
// faults, and the durations they and the State's timing are made of),
// under the names scenarios and callers use.
type (
	// ThrottleConfig is behaviour.ThrottleConfig.
	ThrottleConfig = behaviour.ThrottleConfig
	// BucketConfig is behaviour.BucketConfig.
	BucketConfig = behaviour.BucketConfig
	// LatencyConfig is behaviour.LatencyConfig.
	LatencyConfig = behaviour.LatencyConfig
	// FaultConfig is behaviour.FaultConfig.
	FaultConfig = behaviour.FaultConfig
	// FaultRule is behaviour.FaultRule.
	FaultRule = behaviour.FaultRule
	// Duration is behaviour.Duration.
	Duration = behaviour.Duration
	// Range is behaviour.Range.
	Range = behaviour.Range
)

// DefaultBucket is EC2's documented bucket for an action (see
// behaviour.DefaultBucket).
func DefaultBucket(action string, unfiltered bool) BucketConfig {
	return behaviour.DefaultBucket(action, unfiltered)
}

// RealisticLatency is what EC2 answers in from inside a region, for every
// action the emulator serves: describes in 50-150 ms, mutating calls in
// 150-400 ms.
func RealisticLatency() LatencyConfig { return behaviour.RealisticLatency(wire.ActionNames()) }
