package bench

import (
	"maps"
	"slices"
	"time"

	"github.com/enipam/enipam/operator/ec2"
)

// LowerBound is the least time EC2's default buckets allow for calls
// (action → count), starting from full buckets: for each action, the
// tokens needed beyond the burst divided by the refill rate; the slowest
// action bounds the whole. It returns that time and the action.
func LowerBound(calls map[string]int) (time.Duration, string) {
	var worst time.Duration
	var by string
	for _, action := range slices.Sorted(maps.Keys(calls)) {
		b := ec2.DefaultBucket(ec2.Action(action))
		beyond := calls[action] - b.Burst
		if beyond <= 0 {
			continue
		}
		if d := time.Duration(float64(beyond) / b.Refill * float64(time.Second)); d > worst {
			worst, by = d, action
		}
	}
	return worst, by
}
