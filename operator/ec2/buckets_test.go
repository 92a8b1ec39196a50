package ec2

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeClock stands still unless a test moves it; a sleep returns at once,
// so every Wait made at one instant reserves the next token of the bucket
// and reports how far in the future that token is. It starts far in the
// future so that deadlines derived from it never expire in real time.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(context.Context, time.Duration) error { return nil }

func newFakeBuckets(fill float64) (*Buckets, *fakeClock) {
	c := &fakeClock{t: time.Date(2100, 1, 1, 12, 0, 0, 0, time.UTC)}
	return newBuckets(1, fill, c.now, c.sleep), c
}

// granted counts the tokens the action's bucket hands out within window
// of now to callers all asking at once, and takes them: each caller's
// deadline is the end of the window, so the first one refused takes none.
func granted(t *testing.T, b *Buckets, clock *fakeClock, action Action, window time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), clock.t.Add(window))
	defer cancel()
	for n := 0; ; n++ {
		if _, err := b.Wait(ctx, action); err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			return n
		}
		if n > 100000 {
			t.Fatalf("%s: more than %d tokens within %s", action, n, window)
		}
	}
}

// TestFreshProcessSendsNoFasterThanEC2Refills: a process that starts now,
// with a backlog of Assigns, Attaches and describes, is granted in its
// first ten seconds what EC2 refills in ten seconds (5/s, 5/s, 20/s) and
// no burst on top: with EC2's buckets drained by its predecessor, none of
// its calls is refused.
func TestFreshProcessSendsNoFasterThanEC2Refills(t *testing.T) {
	b, clock := newFakeBuckets(0)
	const window = 10*time.Second + 100*time.Millisecond
	for action, want := range map[Action]int{
		"AssignPrivateIpAddresses":  50,
		"CreateNetworkInterface":    50,
		"AttachNetworkInterface":    50,
		"DescribeNetworkInterfaces": 202,
	} {
		if got := granted(t, b, clock, action, window); got != want {
			t.Errorf("%s: %d tokens granted in the first %s, want %d (EC2's refill only)", action, got, window, want)
		}
	}
}

// TestInitialFillIsGrantedAtOnce: with a fill of 0.1 a fresh process may
// send a tenth of the burst at once (10 Assigns), and with 1 the whole
// burst (100), as before the ramp-up existed.
func TestInitialFillIsGrantedAtOnce(t *testing.T) {
	for fill, want := range map[float64]int{0: 0, 0.1: 10, 1: 100} {
		b, clock := newFakeBuckets(fill)
		if got := granted(t, b, clock, "AssignPrivateIpAddresses", 0); got != want {
			t.Errorf("fill %v: %d Assigns granted at once, want %d", fill, got, want)
		}
	}
}

// TestBucketsRampUpFromFirstUseThenBurstAsEC2: a standby replica elected a
// minute after it started sends its first Assign then, and its Assign
// bucket starts empty at that moment, whatever its describes did before.
// Once it has been idle for burst/refill (20 s), the whole burst of 100 is
// there again: the steady state is EC2's bucket.
func TestBucketsRampUpFromFirstUseThenBurstAsEC2(t *testing.T) {
	b, clock := newFakeBuckets(0)
	granted(t, b, clock, "DescribeInstances", time.Second)
	clock.t = clock.t.Add(time.Minute)
	if got := granted(t, b, clock, "AssignPrivateIpAddresses", 0); got != 0 {
		t.Fatalf("%d Assigns granted at once on first use a minute after start, want 0", got)
	}
	if got := granted(t, b, clock, "AssignPrivateIpAddresses", time.Second); got != 5 {
		t.Fatalf("%d Assigns granted in the first second, want 5", got)
	}
	// The tokens reserved above are spent by +1 s; 20 s more fill the
	// bucket.
	clock.t = clock.t.Add(21 * time.Second)
	if got := granted(t, b, clock, "AssignPrivateIpAddresses", 0); got != 100 {
		t.Fatalf("%d Assigns granted at once after 20 s idle, want the burst of 100", got)
	}
}

// TestWaitBeyondDeadlineFailsAndTakesNoToken: a call whose context ends
// before its token would come fails at once, and the token stays for the
// next caller.
func TestWaitBeyondDeadlineFailsAndTakesNoToken(t *testing.T) {
	b, clock := newFakeBuckets(0)
	ctx, cancel := context.WithDeadline(context.Background(), clock.t.Add(100*time.Millisecond))
	defer cancel()
	if _, err := b.Wait(ctx, "AttachNetworkInterface"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait beyond the deadline: %v, want DeadlineExceeded", err)
	}
	waited, err := b.Wait(context.Background(), "AttachNetworkInterface")
	if err != nil || waited != 200*time.Millisecond {
		t.Fatalf("next Wait waited %s (%v), want the first token at 200ms", waited, err)
	}
}

// TestNewRejectsFillOutsideZeroToOne: the fill is a share of the burst.
func TestNewRejectsFillOutsideZeroToOne(t *testing.T) {
	for _, fill := range []float64{-0.1, 1.5} {
		opts := DefaultOptions()
		opts.InitialBucketFill = fill
		if _, err := New(aws.Config{Region: "us-east-1"}, opts, prometheus.NewRegistry()); err == nil {
			t.Errorf("fill %v accepted", fill)
		}
	}
	if DefaultOptions().InitialBucketFill != 0 {
		t.Errorf("default fill %v, want 0 (start empty)", DefaultOptions().InitialBucketFill)
	}
}

// TestFillSetBeforeFirstUse: the operator sets the fill after its first
// EC2 sync, when the describes' buckets are already in use. Buckets used
// before keep the fill they started with; the others start with the new
// one (a new cluster: the whole burst of 100 Assigns at once).
func TestFillSetBeforeFirstUse(t *testing.T) {
	b, clock := newFakeBuckets(0)
	if got := granted(t, b, clock, "DescribeNetworkInterfaces", 0); got != 0 {
		t.Fatalf("%d describes at once from an empty start", got)
	}
	b.SetInitialFill(1)
	if got := granted(t, b, clock, "AssignPrivateIpAddresses", 0); got != 100 {
		t.Errorf("%d Assigns at once after SetInitialFill(1), want the burst of 100", got)
	}
	if got := granted(t, b, clock, "DescribeNetworkInterfaces", 0); got != 0 {
		t.Errorf("%d describes at once: a bucket already in use must keep its start", got)
	}
}

// TestTokensCountWhatABucketGrantsNow: a bucket not used yet holds its
// initial fill (an Attach bucket full: 50; empty: 0); each call takes one,
// callers beyond the burst count below zero (they wait), and EC2's refill
// (5 a second) brings it back.
func TestTokensCountWhatABucketGrantsNow(t *testing.T) {
	empty, _ := newFakeBuckets(0)
	if got := empty.Tokens(AttachNetworkInterface); got != 0 {
		t.Errorf("empty bucket, not used yet: %v tokens, want 0", got)
	}
	b, clock := newFakeBuckets(1)
	if got := b.Tokens(AttachNetworkInterface); got != 50 {
		t.Errorf("full bucket, not used yet: %v tokens, want 50", got)
	}
	for range 60 {
		if _, err := b.Wait(context.Background(), AttachNetworkInterface); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Tokens(AttachNetworkInterface); got != -10 {
		t.Errorf("after 60 Attaches at once: %v tokens, want -10", got)
	}
	if got := b.Tokens(CreateNetworkInterface); got != 100 {
		t.Errorf("Create's bucket, not used: %v tokens, want 100", got)
	}
	clock.t = clock.t.Add(4 * time.Second)
	if got := b.Tokens(AttachNetworkInterface); got != 10 {
		t.Errorf("4 s later: %v tokens, want 10", got)
	}
}
