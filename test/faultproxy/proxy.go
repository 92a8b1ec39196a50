// Package faultproxy puts a reverse proxy between a Kubernetes client (the
// operator, simulated agents) and kube-apiserver that misbehaves on
// purpose, by rule: it fails chosen requests without forwarding them
// (by verb, resource, subresource, name, body, the n-th match, a chance,
// with a chosen HTTP status), drops requests after the apiserver applied
// them (the client sees an error, the change is made), and cuts the client
// off entirely for a while (open connections closed, watches broken, new
// connections reset) — long enough for a leader to lose its Lease while
// its cloud stays reachable. Everything else, watches included, streams
// through unchanged.
//
// The proxy serves HTTPS (HTTP/2, like the apiserver) on 127.0.0.1 with a
// certificate of its own, which Config and KubeConfig carry, and asks
// nothing of its clients: it forwards every request with the credentials
// of the rest.Config it was given (a cluster admin in tests). Clients
// behind it therefore act with those rights, whoever they are.
//
//	p, _ := faultproxy.New(env.Config, faultproxy.Options{Seed: 1})
//	defer p.Close()
//	kubeconfig, _ := p.KubeConfig() // for the operator binary
//	h := p.Add(faultproxy.Rule{Verbs: []string{"patch"}, Resource: "ciliumnodes", Action: faultproxy.Fail})
//	...
//	p.Cut(30 * time.Second) // the apiserver is gone for the client
package faultproxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options tune a Proxy.
type Options struct {
	// Seed drives the draws of rules with a Rate.
	Seed uint64
	// MaxBody bounds the request bodies read for BodyContains; 0 means
	// 16 MiB.
	MaxBody int64
}

// Stats count what the proxy did to requests.
type Stats struct {
	// Forwarded reached the apiserver (dropped ones included).
	Forwarded int
	// Failed were answered an error by a Fail rule.
	Failed int
	// Dropped were applied by the apiserver and their answer withheld.
	Dropped int
	// Refused arrived while the client was cut off (connections reset
	// before any request are not counted).
	Refused int
	// Cuts is how many cut-offs began.
	Cuts int
}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	target  *url.URL
	upCfg   *rest.Config
	srv     *httptest.Server
	rp      *httputil.ReverseProxy
	maxBody int64

	mu       sync.Mutex
	rules    []*rule
	rng      *rand.Rand
	cutUntil time.Time
	closed   bool
	stats    Stats
}

// dropKey marks a request whose answer is to be withheld, with the status
// to answer instead (0: reset).
type dropKey struct{}

// errDropped ends the forwarding of a dropped request.
var errDropped = errors.New("answer dropped by faultproxy")

// New starts a proxy on 127.0.0.1 in front of the apiserver that upstream
// reaches, forwarding with upstream's credentials.
func New(upstream *rest.Config, opts Options) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver address %q, %w", upstream.Host, err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("transport to the apiserver, %w", err)
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 16 << 20
	}
	p := &Proxy{
		target:  target,
		upCfg:   rest.CopyConfig(upstream),
		maxBody: opts.MaxBody,
		rng:     rand.New(rand.NewPCG(opts.Seed, 0x6661756c7470)),
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
		},
		Transport: transport,
		// Watches answer chunk by chunk; each event goes out at once.
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.proxyError,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	srv := httptest.NewUnstartedServer(p)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Listener = &cutListener{Listener: srv.Listener, p: p}
	srv.StartTLS()
	p.srv = srv
	return p, nil
}

// URL is the proxy's address, https://127.0.0.1:port.
func (p *Proxy) URL() string { return p.srv.URL }

// Config returns a rest.Config that reaches the apiserver through the
// proxy, with the upstream config's client rate limits.
func (p *Proxy) Config() *rest.Config {
	return &rest.Config{
		Host:            p.srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM()},
		QPS:             p.upCfg.QPS,
		Burst:           p.upCfg.Burst,
		Timeout:         p.upCfg.Timeout,
	}
}

// KubeConfig returns a kubeconfig for processes (the operator binary)
// that reaches the apiserver through the proxy.
func (p *Proxy) KubeConfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["faultproxy"] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: p.caPEM()}
	cfg.AuthInfos["faultproxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["faultproxy"] = &clientcmdapi.Context{Cluster: "faultproxy", AuthInfo: "faultproxy"}
	cfg.CurrentContext = "faultproxy"
	return clientcmd.Write(*cfg)
}

func (p *Proxy) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
}

// Add puts a rule in force after the others: a request is handled by the
// first rule that fires on it.
func (p *Proxy) Add(r Rule) (*Handle, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("faultproxy rule, %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rr := &rule{Rule: r}
	p.rules = append(p.rules, rr)
	return &Handle{p: p, r: rr}, nil
}

// Cut cuts the client off for d from now (a cut already running ends at
// the later of the two ends): open connections are closed, so requests
// under way fail and watches break; new connections are reset before TLS;
// a request that still arrives is aborted. The apiserver sees nothing.
func (p *Proxy) Cut(d time.Duration) {
	p.mu.Lock()
	if until := time.Now().Add(d); until.After(p.cutUntil) {
		p.cutUntil = until
	}
	p.stats.Cuts++
	p.mu.Unlock()
	// Closing waits for nothing of ours: no lock is held.
	p.srv.CloseClientConnections()
}

// Restore ends a cut at once.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutUntil = time.Time{}
}

// CutOff reports whether the client is cut off now.
func (p *Proxy) CutOff() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutOffLocked()
}

func (p *Proxy) cutOffLocked() bool {
	return p.closed || time.Now().Before(p.cutUntil)
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy and breaks every connection, watches included.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// ServeHTTP applies the first rule that fires, else forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, p.maxBody))
		r.Body.Close()
		if err != nil {
			// The client went away mid-request.
			panic(http.ErrAbortHandler)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	req := parseRequest(r, body)

	p.mu.Lock()
	if p.cutOffLocked() {
		p.stats.Refused++
		p.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	fired := p.fireLocked(req, body)
	switch {
	case fired == nil:
		p.stats.Forwarded++
	case fired.Action == Fail:
		p.stats.Failed++
	case fired.Action == Drop:
		p.stats.Forwarded++
	case fired.Action == Cut:
		p.stats.Refused++
	}
	p.mu.Unlock()

	switch {
	case fired == nil:
		p.rp.ServeHTTP(w, r)
	case fired.Action == Fail:
		writeStatus(w, cmp.Or(fired.Status, http.StatusInternalServerError), fmt.Sprintf("faultproxy: %s %s/%s failed by rule", req.Verb, req.Resource, req.Name))
	case fired.Action == Drop:
		p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), dropKey{}, fired.Status)))
	case fired.Action == Cut:
		p.Cut(fired.Duration)
		panic(http.ErrAbortHandler)
	}
}

// fireLocked counts req against every rule up to the first that fires,
// and returns that one.
func (p *Proxy) fireLocked(req Request, body []byte) *rule {
	for _, r := range p.rules {
		if !r.matches(req, body) {
			continue
		}
		r.matched++
		switch {
		case r.matched <= r.After:
		case r.Times > 0 && r.fired >= r.Times:
		case r.Rate > 0 && p.rng.Float64() >= r.Rate:
		default:
			r.fired++
			return r
		}
	}
	return nil
}

// modifyResponse withholds the answer of a dropped request once the
// apiserver has given it in full.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	if _, drop := resp.Request.Context().Value(dropKey{}).(int); !drop {
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p.mu.Lock()
	p.stats.Dropped++
	p.mu.Unlock()
	return errDropped
}

// proxyError answers a dropped request, or a failure to reach the
// apiserver; nothing is answered to a client that went away.
func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if status, drop := r.Context().Value(dropKey{}).(int); drop && errors.Is(err, errDropped) {
		if status == 0 {
			panic(http.ErrAbortHandler)
		}
		writeStatus(w, status, "faultproxy: answer dropped after the apiserver applied the request")
		return
	}
	if r.Context().Err() != nil {
		return
	}
	writeStatus(w, http.StatusBadGateway, "faultproxy: "+err.Error())
}

// writeStatus answers a Kubernetes Status, so clients decode a typed
// error (apierrors.IsInternalError, IsConflict, ...).
func writeStatus(w http.ResponseWriter, code int, msg string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reasonFor(code), Message: msg,
	}
	data, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func reasonFor(code int) metav1.StatusReason {
	switch code {
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return metav1.StatusReasonTimeout
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	}
	return metav1.StatusReasonInternalError
}

// cutListener resets the connections that arrive while the client is cut
// off, before TLS, as a host that is gone would.
type cutListener struct {
	net.Listener
	p *Proxy
}

func (l *cutListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.p.CutOff() {
			return c, nil
		}
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		c.Close()
	}
}
