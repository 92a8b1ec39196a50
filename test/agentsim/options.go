package agentsim

import (
	"errors"
	"log/slog"
	"slices"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// Defaults of Options, Cilium's own where Cilium has one.
const (
	// DefaultUpdateInterval is Cilium's ipam.ciliumNodeUpdateRate.
	DefaultUpdateInterval = 15 * time.Second
	DefaultQPS            = 500
	DefaultBurst          = 1000
	DefaultWriters        = 16
	DefaultSampleInterval = 5 * time.Second
)

// Options tune a Sim. The zero value means the defaults above.
type Options struct {
	// UpdateInterval is the least time between two CiliumNode status writes
	// of one agent; changes in between are folded into the next write, as
	// Cilium's trigger does.
	UpdateInterval time.Duration
	// QPS and Burst bound all requests of the Sim together (informer,
	// status writes, reads after conflicts), like the client limits of a
	// fleet of agents squeezed into one process.
	QPS   float32
	Burst int
	// Writers is how many status writes may be under way at once.
	Writers int
	// AllocateTimeout ends a pod's wait for a free IP with ErrTimeout; zero
	// waits until the pod is deleted, its agent removed or the Sim stops.
	AllocateTimeout time.Duration
	// SampleInterval is how often idle IPs (pool minus used) are sampled
	// over all agents; negative disables sampling.
	SampleInterval time.Duration
	// Ledger accounts violations and waits; nil gives the Sim its own.
	Ledger *Ledger
	// Logger gets the Sim's logs, with key "node"; nil means slog.Default().
	Logger *slog.Logger
	// Routing tunes the simulated enipam-agents the Sim runs beside the
	// Cilium agents (a RoutingSim reporting every node's NodeRouting), so
	// the operator pools addresses; NoRouting leaves that to the caller
	// (a real enipam-agent, or none).
	Routing   RoutingOptions
	NoRouting bool
	// EndpointRoutes: Cilium runs with endpointRoutes.enabled, so each
	// pod's address has a route to its endpoint from its CNI ADD until its
	// CNI DEL, and the simulated enipam-agents answer the operator's
	// endpoint queries from the agents' allocations (present while a pod
	// holds the address, absent once released). Without it they answer
	// that endpoint routes are not in use, and the operator waits for the
	// handshake.
	EndpointRoutes bool
	// IPFamilies are the families every pod gets an address of, as the
	// ENIPolicy's ipFamilies (Cilium's enable-ipv4, enable-ipv6): IPv4
	// when empty; both, dual-stack, each pod waiting for one of each.
	IPFamilies []enipamv1alpha1.IPFamily
}

type families struct{ v4, v6 bool }

// families reads IPFamilies; Validate refuses a bad one.
func (o Options) families() families {
	if len(o.IPFamilies) == 0 {
		return families{v4: true}
	}
	return families{v4: slices.Contains(o.IPFamilies, enipamv1alpha1.IPv4Family), v6: enipamv1alpha1.WantsIPv6(o.IPFamilies)}
}

// Validate rejects negative limits.
func (o Options) Validate() error {
	var errs []error
	if o.UpdateInterval < 0 {
		errs = append(errs, errors.New("update interval must not be negative"))
	}
	if o.QPS < 0 || o.Burst < 0 {
		errs = append(errs, errors.New("QPS and burst must not be negative"))
	}
	if o.Writers < 0 {
		errs = append(errs, errors.New("writers must not be negative"))
	}
	if o.AllocateTimeout < 0 {
		errs = append(errs, errors.New("allocate timeout must not be negative"))
	}
	if err := enipamv1alpha1.ValidateIPFamilies(o.IPFamilies); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// withDefaults fills unset fields.
func (o Options) withDefaults() Options {
	if o.UpdateInterval == 0 {
		o.UpdateInterval = DefaultUpdateInterval
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Writers == 0 {
		o.Writers = DefaultWriters
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.Ledger == nil {
		o.Ledger = NewLedger()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
