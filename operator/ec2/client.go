// Package ec2 is the operator's adapter to EC2 through aws-sdk-go-v2: it
// implements cloud.API, and it is the only package that sees SDK types.
//
// Every call passes one chokepoint (Client.call): a client-side token
// bucket per action shaped like EC2's own, a timer, the call, the mapping
// of EC2's error code to a cloud sentinel, a metric, and — for throttling
// and server-side failures only — a retry with jittered exponential
// backoff that passes the bucket again. The SDK's own retryer is switched
// off on purpose: its retries would bypass the buckets, and its retry
// quota fails calls outright under sustained throttling.
package ec2

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/enipam/enipam/operator/cloud"
)

// Options tune the adapter.
type Options struct {
	// Endpoint overrides EC2's endpoint (an emulator, a VPC endpoint).
	Endpoint string
	// RateScale scales the refill rate and burst of every client-side
	// bucket; 1 uses EC2's documented defaults.
	RateScale float64
	// InitialBucketFill is the share (0 to 1) of each client-side bucket
	// available at the first call of its action. 0, the default, starts
	// empty: a fresh process ramps up at EC2's refill rate instead of
	// bursting into account buckets its predecessor may have drained (see
	// Buckets).
	InitialBucketFill float64
	// MaxAttempts bounds the attempts of one call (throttling and 5xx are
	// retried).
	MaxAttempts int
	// BaseBackoff and MaxBackoff bound the jittered exponential backoff.
	BaseBackoff, MaxBackoff time.Duration
	// CallTimeout bounds one attempt.
	CallTimeout time.Duration
}

// SetInitialBucketFill sets the share of its burst each client-side
// bucket not used yet starts with (see Buckets).
func (c *Client) SetInitialBucketFill(fill float64) { c.buckets.SetInitialFill(fill) }

// NewENITokens is how many new ENIs (a Create and an Attach each) the
// client-side buckets would serve now without making any caller wait.
func (c *Client) NewENITokens() int {
	return int(min(c.buckets.Tokens(CreateNetworkInterface), c.buckets.Tokens(AttachNetworkInterface)))
}

// DefaultOptions are EC2's default buckets starting empty, 8 attempts and
// backoff from 200 ms to 20 s.
func DefaultOptions() Options {
	return Options{RateScale: 1, MaxAttempts: 8, BaseBackoff: 200 * time.Millisecond, MaxBackoff: 20 * time.Second, CallTimeout: 60 * time.Second}
}

// Client implements cloud.API on EC2.
type Client struct {
	sdk     SDK
	opts    Options
	buckets *Buckets
	metrics *Metrics
	sleep   func(context.Context, time.Duration) error
}

var _ cloud.API = (*Client)(nil)

// New returns a client for the region and credentials of cfg. Metrics are
// registered on reg.
func New(cfg aws.Config, opts Options, reg prometheus.Registerer) (*Client, error) {
	cfg = cfg.Copy()
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	cfg.HTTPClient = newHTTPClient()
	sdk := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
	})
	return NewFromSDK(newSDKMethods(sdk), opts, reg)
}

// NewFromSDK returns a client that calls EC2 through sdk, with the
// chokepoint of New (buckets, retries, error mapping, metrics on reg);
// opts.Endpoint is not used. New passes the SDK's own client; tests pass
// an in-memory EC2.
func NewFromSDK(sdk SDK, opts Options, reg prometheus.Registerer) (*Client, error) {
	if opts.RateScale <= 0 {
		return nil, fmt.Errorf("EC2 rate scale must be positive, got %v", opts.RateScale)
	}
	if opts.InitialBucketFill < 0 || opts.InitialBucketFill > 1 {
		return nil, fmt.Errorf("EC2 initial bucket fill must be in [0, 1], got %v", opts.InitialBucketFill)
	}
	opts.MaxAttempts = max(opts.MaxAttempts, 1)
	metrics, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Client{sdk: sdk, opts: opts, buckets: NewBuckets(opts.RateScale, opts.InitialBucketFill), metrics: metrics, sleep: sleepCtx}, nil
}

// call runs one logical EC2 call through the chokepoint.
func (c *Client) call(ctx context.Context, action Action, fn func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		waited, err := c.buckets.Wait(ctx, action)
		c.metrics.limiterWait.WithLabelValues(string(action)).Observe(waited.Seconds())
		if err != nil {
			return err
		}
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		err = classify(string(action), fn(actx))
		cancel()
		c.metrics.observe(string(action), err, time.Since(start))
		if err == nil {
			return nil
		}
		if errors.Is(err, cloud.ErrThrottled) {
			c.metrics.throttled.WithLabelValues(string(action)).Inc()
		}
		if !cloud.Retryable(err) || attempt >= c.opts.MaxAttempts || ctx.Err() != nil {
			return err
		}
		if err := c.sleep(ctx, c.backoff(attempt)); err != nil {
			return err
		}
	}
}

// backoff is full-jitter exponential: uniform in [0, min(max, base·2^n)).
func (c *Client) backoff(attempt int) time.Duration {
	ceiling := c.opts.BaseBackoff << min(attempt-1, 20)
	if ceiling <= 0 || ceiling > c.opts.MaxBackoff {
		ceiling = c.opts.MaxBackoff
	}
	return time.Duration(rand.Int64N(int64(ceiling))) + time.Millisecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
