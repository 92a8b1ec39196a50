package ec2

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
func DefaultBucket(action Action) Bucket {
	switch action {
	case CreateNetworkInterface, DeleteNetworkInterface, AssignPrivateIpAddresses,
		UnassignPrivateIpAddresses, ModifyNetworkInterfaceAttribute:
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
//
// A bucket starts with initialFill of its burst, at the first call of its
// action, and refills at EC2's rate from then on. EC2's buckets belong to
// the account and region, not to this process: the process that just
// crashed, or the leader this replica replaces, may have left them empty,
// and EC2 tells no one how full they are. A fresh process that starts
// with full buckets sends a whole burst into buckets that may be drained
// and gets it refused with RequestLimitExceeded, retries included (one
// restart sent 771 Assigns, 524 refused). Starting empty (the default)
// never sends faster than EC2 refills, so nothing is refused even when
// EC2's bucket is dry; what it costs, when EC2's bucket was full after
// all, is one burst spread over the first burst/refill seconds of a
// backlog (20 s for Assign and Create, 10 s for Attach, 5 s for
// describes), once per process. A small fraction instead of zero would
// save little of that and be refused whenever EC2 is dry. The start is
// taken at first use, not at construction, so a standby replica elected
// long after it started ramps up too.
//
// The fill can be set until a bucket's first use (SetInitialFill): the
// operator starts its buckets full when its first EC2 sync finds no ENI
// of its cluster (no predecessor can have drained the account's buckets
// on its behalf: a new cluster's first scale-up keeps EC2's burst) and
// empty otherwise.
type Buckets struct {
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error
	buckets map[Action]*bucket
	// fill is the initial fill, in millionths, for buckets not used yet.
	fill atomic.Int64
}

// SetInitialFill sets the share (0 to 1) of its burst each bucket not
// used yet starts with.
func (b *Buckets) SetInitialFill(fill float64) {
	b.fill.Store(int64(min(max(fill, 0), 1) * 1e6))
}

// bucket is one action's limiter, full until its first use.
type bucket struct {
	limiter *rate.Limiter
	start   sync.Once
	// started: the initial fill was taken (the first use happened).
	started atomic.Bool
}

// NewBuckets returns EC2's default buckets with refill and burst scaled,
// each starting with initialFill (0 to 1) of its burst at first use.
func NewBuckets(scale, initialFill float64) *Buckets {
	return newBuckets(scale, initialFill, time.Now, sleepCtx)
}

func newBuckets(scale, initialFill float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *Buckets {
	b := &Buckets{now: now, sleep: sleep, buckets: map[Action]*bucket{}}
	b.SetInitialFill(initialFill)
	for _, action := range actions {
		d := DefaultBucket(action)
		burst := max(1, int(float64(d.Burst)*scale))
		b.buckets[action] = &bucket{limiter: rate.NewLimiter(rate.Limit(d.Refill*scale), burst)}
	}
	return b
}

// Wait blocks until the action's bucket grants a token and returns how
// long that took. Waiters are served in arrival order. A wait that would
// outlast ctx's deadline fails at once and takes no token.
func (b *Buckets) Wait(ctx context.Context, action Action) (time.Duration, error) {
	bk, ok := b.buckets[action]
	if !ok {
		panic("ec2: no bucket for action " + action) // every action is listed below
	}
	now := b.now()
	bk.start.Do(func() {
		// A new limiter is full; taking what is above the initial fill
		// leaves it there, refilling from now.
		initial := int(float64(bk.limiter.Burst()) * float64(b.fill.Load()) / 1e6)
		if drain := bk.limiter.Burst() - initial; drain > 0 {
			bk.limiter.ReserveN(now, drain)
		}
		bk.started.Store(true)
	})
	r := bk.limiter.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay == 0 {
		return 0, nil
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(now) < delay {
		r.CancelAt(now)
		return 0, fmt.Errorf("%s would wait %s for its client-side bucket, beyond the deadline, %w", action, delay, context.DeadlineExceeded)
	}
	if err := b.sleep(ctx, delay); err != nil {
		r.CancelAt(b.now())
		return b.now().Sub(now), err
	}
	return delay, nil
}

// Tokens is how many calls of action its bucket would grant now without
// waiting, net of those already waiting (negative when callers wait): a
// bucket not used yet holds its initial fill.
func (b *Buckets) Tokens(action Action) float64 {
	bk, ok := b.buckets[action]
	if !ok {
		panic("ec2: no bucket for action " + action) // every action is listed below
	}
	if !bk.started.Load() {
		return float64(bk.limiter.Burst()) * float64(b.fill.Load()) / 1e6
	}
	return bk.limiter.TokensAt(b.now())
}
