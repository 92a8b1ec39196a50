package extender

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/enipam/enipam/scheduler/tracker"
)

// Options are enipam-scheduler's command-line settings.
type Options struct {
	Config
	Tracker tracker.Config
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
	// QPS and Burst bound the extender's requests to the apiserver: its
	// lists and watches, and the bind verb's writes (a claim patch and a
	// Binding per pod), at kube-scheduler's own defaults.
	QPS   float32
	Burst int
	// Address serves the extender verbs. The default listens on loopback
	// only: kube-scheduler reaches it from the same pod.
	Address string
	// HealthAddress serves /healthz and /readyz; empty disables it.
	HealthAddress string
	// MetricsAddress serves /metrics; empty disables it.
	MetricsAddress string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// qps holds --kube-api-qps until Validate.
	qps float64
}

// Default listen addresses, beside kube-scheduler's own 10259 in its pod.
const (
	DefaultAddress        = "127.0.0.1:9885"
	DefaultHealthAddress  = ":9886"
	DefaultMetricsAddress = ":9887"
)

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Config:         DefaultConfig(),
		Tracker:        tracker.DefaultConfig(),
		Address:        DefaultAddress,
		HealthAddress:  DefaultHealthAddress,
		MetricsAddress: DefaultMetricsAddress,
		LogLevel:       "info",
		QPS:            50,
		Burst:          100,
	}
}

// AddFlags registers the options on fs, with the current values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; empty for in-cluster configuration")
	fs.Float64Var(&o.qps, "kube-api-qps", float64(o.QPS), "requests per second to the apiserver (bind writes a Binding per pod)")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "burst of requests to the apiserver")
	fs.StringVar(&o.Address, "address", o.Address, "listen address of the extender verbs (POST /filter, /prioritize) that kube-scheduler calls")
	fs.StringVar(&o.HealthAddress, "health-address", o.HealthAddress, "listen address of /healthz and /readyz; empty disables")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "listen address of /metrics; empty disables")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", o.SettleTimeout, "how long filter waits for the scheduler's latest placements to be seen before refusing a node on their account; 0 never waits")
	fs.DurationVar(&o.BindTimeout, "bind-timeout", o.BindTimeout, "how long bind waits for a static-IP pod's address to be placed on its node before failing (kube-scheduler retries the pod); keep it under the extender's httpTimeout")
	fs.DurationVar(&o.Tracker.HoldTTL, "hold-ttl", o.Tracker.HoldTTL, "how long a pod filter passed counts against the nodes it passed on when its placement is never seen")
	fs.DurationVar(&o.Tracker.StartedGrace, "started-pod-grace", o.Tracker.StartedGrace, "how long a pod that got its address counts until Cilium's agent lists it in status.ipam.used (keep above Cilium's ipam.ciliumNodeUpdateRate)")
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	errs := []error{o.Tracker.Validate()}
	if o.qps != 0 {
		o.QPS = float32(o.qps)
	}
	if o.QPS <= 0 || o.Burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", o.QPS, o.Burst))
	}
	if _, err := o.SlogLevel(); err != nil {
		errs = append(errs, err)
	}
	if o.Address == "" {
		errs = append(errs, errors.New("--address is required: kube-scheduler calls the extender there"))
	}
	if o.BindTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--bind-timeout must be positive, got %v", o.BindTimeout))
	}
	if o.SettleTimeout < 0 {
		errs = append(errs, fmt.Errorf("--settle-timeout must not be negative, got %v", o.SettleTimeout))
	}
	if o.Tracker.HoldTTL > 0 && o.SettleTimeout >= o.Tracker.HoldTTL {
		errs = append(errs, fmt.Errorf("--settle-timeout (%v) must be shorter than --hold-ttl (%v): filter waits only for holds that still count", o.SettleTimeout, o.Tracker.HoldTTL))
	}
	seen := map[string]string{}
	for _, a := range []struct{ flag, addr string }{{"--address", o.Address}, {"--health-address", o.HealthAddress}, {"--metrics-address", o.MetricsAddress}} {
		if a.addr == "" {
			continue
		}
		if other, ok := seen[a.addr]; ok {
			errs = append(errs, fmt.Errorf("%s and %s cannot share the address %s", other, a.flag, a.addr))
		}
		seen[a.addr] = a.flag
	}
	return errors.Join(errs...)
}

// SlogLevel parses LogLevel.
func (o *Options) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(o.LogLevel))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", o.LogLevel)
	}
	return l, nil
}
