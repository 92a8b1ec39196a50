package ec2sim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/enipam/enipam/test/ec2sim/admin"
	"github.com/enipam/enipam/test/ec2sim/behaviour"
	"github.com/enipam/enipam/test/ec2sim/wire"
)

// Sim is a running emulator: the State behind an ec2query HTTP handler with
// throttling, latency, fault injection and counters, plus IMDS and the
// admin API. Build it with New; serve Handler yourself (httptest) or call
// Start.
type Sim struct {
	state    *State
	ec2      *wire.EC2
	throttle *behaviour.Throttler
	latency  *behaviour.Latencies
	faults   *behaviour.Faults
	imds     *wire.IMDS
	log      *slog.Logger

	mu      sync.Mutex
	host    string
	servers []*http.Server
	imdsURL map[string]string
}

// Option configures New.
type Option func(*options)

type options struct {
	now    func() time.Time
	logger *slog.Logger
}

// WithClock sets the clock behind attach/detach delays, eventual
// consistency, token buckets and IMDS token expiry; tests pass a manual
// clock to step through state machines without sleeping.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger sets the logger; calls are logged at debug level. The default
// discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New builds a Sim from a scenario (nil means DemoScenario). It starts
// nothing.
func New(sc *Scenario, opts ...Option) (*Sim, error) {
	o := options{now: time.Now, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, opt := range opts {
		opt(&o)
	}
	if sc == nil {
		sc = DemoScenario()
	}
	st, err := NewState(sc, o.now)
	if err != nil {
		return nil, err
	}
	principals, err := sc.IAMPrincipals()
	if err != nil {
		return nil, err
	}
	throttling := sc.Throttling
	latency := LatencyConfig{}
	if sc.Profile == ProfileRealistic {
		throttling.Enabled = true
		latency = RealisticLatency()
	}
	if sc.Latency != nil {
		latency = *sc.Latency
	}
	s := &Sim{
		state:    st,
		throttle: behaviour.NewThrottler(o.now, throttling),
		latency:  behaviour.NewLatencies(sc.Seed, latency),
		faults:   behaviour.NewFaults(sc.Seed, sc.Faults),
		imds:     wire.NewIMDS(st, o.now, sc.Seed),
		log:      o.logger,
		host:     "127.0.0.1",
		imdsURL:  map[string]string{},
	}
	s.ec2 = wire.NewEC2(wire.Config{State: st, Principals: principals, Throttle: s.throttle, Latency: s.latency,
		Faults: s.faults, Seed: sc.Seed, Log: o.logger})
	return s, nil
}

// State is the engine behind the Sim, for in-process inspection.
func (s *Sim) State() *State { return s.state }

// Counters returns the call counters.
func (s *Sim) Counters() Counters { return s.ec2.Counters() }

// ResetCounters zeroes the call counters.
func (s *Sim) ResetCounters() { s.ec2.ResetCounters() }

// Throttling is the throttling configuration in force.
func (s *Sim) Throttling() ThrottleConfig { return s.throttle.Config() }

// Latency is the latency configuration in force.
func (s *Sim) Latency() LatencyConfig { return s.latency.Config() }

// Faults is the fault rules in force.
func (s *Sim) Faults() FaultConfig { return s.faults.Config() }

// SetThrottling replaces the throttling configuration; every bucket starts
// full again.
func (s *Sim) SetThrottling(c ThrottleConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.throttle.Set(c)
	return nil
}

// SetLatency replaces the latency configuration.
func (s *Sim) SetLatency(c LatencyConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.latency.Set(c)
	return nil
}

// SetFaults replaces the fault rules.
func (s *Sim) SetFaults(c FaultConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.faults.Set(c)
	return nil
}

// Handler serves EC2's Query API at /, the admin API under /admin/ and each
// instance's IMDS under /imds/<instance-id>/ (for clients that keep a path
// prefix; the SDK does not, see IMDSEndpoint).
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	admin.Register(mux, s, s.log)
	mux.Handle("/imds/{instance}/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("instance")
		http.StripPrefix("/imds/"+id, s.imds.Handler(id)).ServeHTTP(w, r)
	}))
	mux.Handle("/", s.ec2)
	return mux
}

// Endpoints are the URLs a started Sim serves on.
type Endpoints struct {
	// EC2 is the base endpoint for EC2 clients (BaseEndpoint, --endpoint-url).
	EC2 string `json:"ec2"`
	// Admin is the base URL of the admin API (its paths start /admin/).
	Admin string `json:"admin"`
	// EC2TLS and CertFile are set by StartTLS.
	EC2TLS   string `json:"ec2Tls,omitempty"`
	CertFile string `json:"certFile,omitempty"`
}

// Start listens on addr (port 0 picks a free one) and serves Handler until
// ctx ends or Close is called. IMDS listeners opened later bind to the same
// host.
func (s *Sim) Start(ctx context.Context, addr string) (Endpoints, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return Endpoints{}, fmt.Errorf("listening on %s, %w", addr, err)
	}
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	s.mu.Lock()
	if host != "" && host != "::" && host != "0.0.0.0" {
		s.host = host
	}
	s.mu.Unlock()
	s.serve(ctx, ln, s.Handler(), nil)
	base := "http://" + ln.Addr().String()
	return Endpoints{EC2: base, Admin: base}, nil
}

// StartTLS is Start over HTTPS with a freshly generated self-signed
// certificate for localhost and 127.0.0.1, written as PEM to certFile for
// clients to trust (e.g. AWS_CA_BUNDLE).
func (s *Sim) StartTLS(ctx context.Context, addr, certFile string) (Endpoints, error) {
	cfg, err := selfSignedTLS(certFile)
	if err != nil {
		return Endpoints{}, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return Endpoints{}, fmt.Errorf("listening on %s, %w", addr, err)
	}
	s.serve(ctx, ln, s.Handler(), cfg)
	base := "https://" + ln.Addr().String()
	return Endpoints{EC2TLS: base, Admin: base, CertFile: certFile}, nil
}

// serve runs h on ln in the background, over TLS when cfg is set, until
// ctx ends or Close.
func (s *Sim) serve(ctx context.Context, ln net.Listener, h http.Handler, cfg *tls.Config) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: cfg,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	ready := make(chan struct{})
	go func() {
		close(ready)
		var err error
		if cfg != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serving", "addr", ln.Addr().String(), "err", err)
		}
	}()
	<-ready
	if ctx != nil {
		context.AfterFunc(ctx, func() { _ = srv.Close() })
	}
}

// IMDSEndpoint returns the base URL of an IMDS serving instanceID alone,
// opening a listener on the first call for that instance. Point the SDK's
// IMDS client at it (imds.Options.Endpoint or
// AWS_EC2_METADATA_SERVICE_ENDPOINT).
func (s *Sim) IMDSEndpoint(instanceID string) (string, error) {
	if _, err := s.state.InstanceMetadata(instanceID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.imdsURL[instanceID]; ok {
		return u, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.host, "0"))
	if err != nil {
		return "", fmt.Errorf("listening for IMDS of %s, %w", instanceID, err)
	}
	srv := &http.Server{Handler: s.imds.Handler(instanceID), ReadHeaderTimeout: 10 * time.Second}
	s.servers = append(s.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	u := "http://" + ln.Addr().String()
	s.imdsURL[instanceID] = u
	return u, nil
}

// Close stops every listener the Sim opened.
func (s *Sim) Close() error {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.imdsURL = map[string]string{}
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Close())
	}
	return errors.Join(errs...)
}
