// Package metricsreg is a Prometheus registry that lets a collector of
// many series of one shape build its metric families itself. Gathered
// through a prometheus.Registry, each series is a Metric that the
// registry writes into a new dto.Metric, checks against its descriptor
// and hashes; at 45 000 series (5000 nodes' pool states) a scrape
// allocated some 30 MB that way.
package metricsreg

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Direct is a collector that builds its families itself. The registry
// gathers it through GatherDirect instead of Collect, which stays for
// registries that do not know it.
type Direct interface {
	prometheus.Collector
	// GatherDirect returns the collector's families as
	// prometheus.Registry.Gather would: sorted by name, none without
	// metrics, each family's metrics sorted by their label values, no
	// two with the same labels, each metric's labels those of its
	// descriptor, sorted by name. The families are the caller's to
	// read; nothing in them may be changed.
	GatherDirect() []*dto.MetricFamily
}

// RegistererGatherer is a registry to register into and gather from.
type RegistererGatherer interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Registry registers every collector in inner, a Direct collector
// through its descriptors only (inner refuses a clash of names or
// labels as it would for the collector itself), and gathers inner's
// families and the Direct collectors' together.
type Registry struct {
	inner  RegistererGatherer
	mu     sync.RWMutex
	direct []Direct
}

var _ RegistererGatherer = (*Registry)(nil)

// New returns a Registry over inner.
func New(inner RegistererGatherer) *Registry { return &Registry{inner: inner} }

// describer stands for a Direct collector in the inner registry: its
// descriptors, no metrics.
type describer struct{ d Direct }

func (c describer) Describe(ch chan<- *prometheus.Desc) { c.d.Describe(ch) }
func (describer) Collect(chan<- prometheus.Metric)      {}

// Register implements prometheus.Registerer.
func (r *Registry) Register(c prometheus.Collector) error {
	d, ok := c.(Direct)
	if !ok {
		return r.inner.Register(c)
	}
	if err := r.inner.Register(describer{d}); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if e, ok := are.ExistingCollector.(describer); ok {
				are.ExistingCollector = e.d
			}
			return are
		}
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.direct = append(r.direct, d)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister implements prometheus.Registerer.
func (r *Registry) Unregister(c prometheus.Collector) bool {
	d, ok := c.(Direct)
	if !ok {
		return r.inner.Unregister(c)
	}
	r.mu.Lock()
	r.direct = slices.DeleteFunc(r.direct, func(have Direct) bool { return have == d })
	r.mu.Unlock()
	return r.inner.Unregister(describer{d})
}

// Gather implements prometheus.Gatherer: inner's families (with its
// error, if any) and the Direct collectors', sorted by name. A Direct
// family whose name another family has already is left out, with an
// error.
func (r *Registry) Gather() ([]*dto.MetricFamily, error) {
	fams, err := r.inner.Gather()
	var errs prometheus.MultiError
	if err != nil {
		errs.Append(err)
	}
	r.mu.RLock()
	direct := slices.Clone(r.direct)
	r.mu.RUnlock()
	for _, d := range direct {
		for _, f := range d.GatherDirect() {
			i, found := slices.BinarySearchFunc(fams, f.GetName(), func(have *dto.MetricFamily, name string) int {
				switch {
				case have.GetName() < name:
					return -1
				case have.GetName() > name:
					return 1
				}
				return 0
			})
			if found {
				errs.Append(fmt.Errorf("metric family %s gathered twice", f.GetName()))
				continue
			}
			fams = slices.Insert(fams, i, f)
		}
	}
	return fams, errs.MaybeUnwrap()
}
