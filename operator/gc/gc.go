// Package gc collects leaked ENIs and Elastic IPs. ENIs: unattached ENIs
// carrying the operator's cluster tag, left behind by a crash between
// Create and Attach or by an instance that terminated before
// delete-on-termination was set. EC2 gives no ENI age, so the operator
// tags each ENI it creates with the time (cloud.TagCreatedAt). An ENI
// whose tag says it is younger than MinAge is never collected, however
// many passes saw it: its creator may still be attaching it. One with an
// older tag is deleted on the first pass that sees it; one without a
// readable tag (missing, garbled, or implausibly far in the future) only
// once it was seen unattached on two consecutive passes and MinAge has
// passed since the first of them. Never while the pool controller is
// attaching it or retrying its attach (inventory.InFlight).
// Elastic IPs: those allocated for StaticIPClaims that no claim records
// (addresses.go), by the rule of age or of two passes.
package gc

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
)

// Options tune the collector.
type Options struct {
	// Cluster is the value of the cluster tag that marks ENIs as ours.
	Cluster string
	// Interval is the time between passes.
	Interval time.Duration
	// MaxPerPass bounds the deletions of one pass (and, apart, the
	// releases of Elastic IPs), so a flood of leaks never starves the
	// allocations of EC2's buckets.
	MaxPerPass int
	// MinAge is how old (by its creation tag) an unattached ENI, or an
	// Elastic IP no claim records, must be to be taken for a leak: long
	// enough for the reconcile that created it, or a later one, to attach
	// or adopt it, and for the cache of claims to show a record just
	// written. An ENI younger than that by its tag is never collected; an
	// ENI without a readable tag must have been seen on two consecutive
	// passes, the first at least MinAge ago.
	MinAge time.Duration
}

// Collector deletes leaked ENIs and releases leaked Elastic IPs.
type Collector struct {
	api    cloud.API
	inv    *inventory.Inventory
	claims client.Reader
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	// seen: unattached ENIs of the last pass that were not collected,
	// with when they were first seen in the unbroken run of passes.
	seen map[string]time.Time
	// seenAddrs: Elastic IPs no claim recorded on the last pass.
	seenAddrs map[string]bool

	collected      prometheus.Counter
	leaked         prometheus.Gauge
	addrsCollected prometheus.Counter
	addrsLeaked    prometheus.Gauge
}

// New returns a collector reading StaticIPClaims through claims (nil:
// Elastic IPs are not collected); it does nothing until Start.
func New(api cloud.API, inv *inventory.Inventory, claims client.Reader, opts Options, reg prometheus.Registerer, log *slog.Logger) (*Collector, error) {
	c := &Collector{
		api: api, inv: inv, claims: claims, opts: opts, log: log, now: time.Now, seen: map[string]time.Time{}, seenAddrs: map[string]bool{},
		collected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_enis_collected_total", Help: "Leaked ENIs deleted by the collector.",
		}),
		leaked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "enipam_leaked_enis", Help: "Unattached ENIs with this cluster's tag seen by the last collector pass.",
		}),
		addrsCollected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "enipam_eips_collected_total", Help: "Leaked Elastic IPs (allocated for claims, recorded by none) released by the collector.",
		}),
		addrsLeaked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "enipam_leaked_eips", Help: "Elastic IPs allocated for claims and recorded by none, seen by the last collector pass.",
		}),
	}
	for _, m := range []prometheus.Collector{c.collected, c.leaked, c.addrsCollected, c.addrsLeaked} {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start runs a pass every interval once the inventory is synced.
func (c *Collector) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-c.inv.Synced():
	}
	ticker := time.NewTicker(c.opts.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if _, err := c.Pass(ctx); err != nil {
				c.log.Error("collection pass", "error", err)
			}
		}
	}
}

// Pass deletes the leaked ENIs (at most MaxPerPass) that the rule of the
// package says are leaks, releases the leaked Elastic IPs, and returns how
// many of both it deleted and released.
func (c *Collector) Pass(ctx context.Context) (int, error) {
	enis, err := c.collectENIs(ctx)
	addrs, aerr := c.collectAddresses(ctx, c.opts.MaxPerPass)
	return enis + addrs, errors.Join(err, aerr)
}

func (c *Collector) collectENIs(ctx context.Context) (int, error) {
	candidates := c.inv.UnattachedENIs(cloud.TagCluster, c.opts.Cluster)
	c.leaked.Set(float64(len(candidates)))
	now := c.now()
	next := map[string]time.Time{}
	deleted := 0
	var errs []error
	for _, e := range candidates {
		if e.Tags[cloud.TagManagedBy] != cloud.ManagedBy || e.RequesterManaged {
			continue
		}
		first, seen := c.seen[e.ID]
		if !seen {
			first = now
		}
		s := sighting{created: e.Tags[cloud.TagCreatedAt], seenBefore: seen, firstSeen: first, inFlight: c.inv.InFlight(e.ID)}
		if !leak(s, now, c.opts.MinAge) || deleted >= c.opts.MaxPerPass {
			if !s.inFlight {
				next[e.ID] = first
			}
			continue
		}
		err := c.api.DeleteENI(ctx, e.ID)
		switch {
		case err == nil, errors.Is(err, cloud.ErrNotFound):
			c.inv.RecordDeleted(e.ID)
			if err == nil {
				deleted++
				c.collected.Inc()
				c.log.Info("deleted leaked ENI", "eni", e.ID, "instance", e.Tags[cloud.TagInstance], "subnet", e.SubnetID,
					"createdAt", s.created)
			}
		case errors.Is(err, cloud.ErrInUse), errors.Is(err, cloud.ErrInvalid):
			// Attached or detaching since the describe; not a leak now.
		default:
			next[e.ID] = first
			errs = append(errs, err)
		}
	}
	c.seen = next
	return deleted, errors.Join(errs...)
}

// sighting is what a pass knows of one unattached ENI of the cluster.
type sighting struct {
	// created is the ENI's creation tag, as found.
	created string
	// seenBefore: the previous pass saw it unattached too; firstSeen is
	// when the unbroken run of such passes began (now on a first sight).
	seenBefore bool
	firstSeen  time.Time
	// inFlight: the pool controller is attaching it or retrying its
	// attach.
	inFlight bool
}

// leak decides whether an unattached ENI of the cluster is a leak at now.
// An attach in flight or being retried keeps it, whatever its age. A
// readable creation tag decides alone: younger than minAge, never; older,
// at once. Without one, the ENI must have been seen on two consecutive
// passes, the first of them at least minAge ago. With minAge 0, a tagged
// ENI goes on first sight and an untagged one on its second.
func leak(s sighting, now time.Time, minAge time.Duration) bool {
	if s.inFlight {
		return false
	}
	if at, ok := createdAt(s.created, now, minAge); ok {
		return now.Sub(at) >= minAge
	}
	return s.seenBefore && now.Sub(s.firstSeen) >= minAge
}

// createdAt reads a creation tag; a time further in the future than minAge
// (a clock gone wrong, a hand-written tag) is not believed, or the ENI it
// marks would never be collected.
func createdAt(tag string, now time.Time, minAge time.Duration) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, tag)
	if err != nil || at.Sub(now) > minAge {
		return time.Time{}, false
	}
	return at, true
}
