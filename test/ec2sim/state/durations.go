package state

import "github.com/enipam/enipam/test/ec2sim/behaviour"

// The durations the State's timing is made of are the behaviour layer's.
type (
	// Duration is behaviour.Duration.
	Duration = behaviour.Duration
	// Range is behaviour.Range.
	Range = behaviour.Range
)
