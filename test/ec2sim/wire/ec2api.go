package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/enipam/enipam/test/ec2sim/behaviour"
	"github.com/enipam/enipam/test/ec2sim/iam"
	"github.com/enipam/enipam/test/ec2sim/state"
)

// EC2 serves EC2's Query API over a State: it counts each call,
// authenticates it and authorizes it by the caller's IAM policy, throttles,
// delays and injects faults (package behaviour), decodes the form into the
// State's request, and writes the answer or EC2's error as XML.
type EC2 struct {
	state    *state.State
	counters *counters
	throttle *behaviour.Throttler
	latency  *behaviour.Latencies
	faults   *behaviour.Faults
	log      *slog.Logger
	// principals may call, by access key ID; wallClock dates signatures
	// (clients sign with the real time whatever clock the State runs on).
	principals map[string]*iam.Principal
	wallClock  func() time.Time

	ridMu  sync.Mutex
	ridRNG *rand.Rand
}

// Config is what an EC2 endpoint is made of.
type Config struct {
	State      *state.State
	Principals map[string]*iam.Principal
	Throttle   *behaviour.Throttler
	Latency    *behaviour.Latencies
	Faults     *behaviour.Faults
	// Seed makes request IDs reproducible.
	Seed uint64
	Log  *slog.Logger
}

// NewEC2 returns the endpoint; it serves nothing until mounted.
func NewEC2(c Config) *EC2 {
	return &EC2{
		state:      c.State,
		counters:   newCounters(),
		throttle:   c.Throttle,
		latency:    c.Latency,
		faults:     c.Faults,
		log:        c.Log,
		principals: c.Principals,
		wallClock:  time.Now,
		ridRNG:     rand.New(rand.NewPCG(c.Seed, 0x726571)),
	}
}

// Counters returns the call counters.
func (s *EC2) Counters() Counters { return s.counters.snapshot() }

// ResetCounters zeroes the call counters.
func (s *EC2) ResetCounters() { s.counters.reset() }

// requestID returns a UUID-shaped request ID, reproducible for a seed.
func (s *EC2) requestID() string {
	s.ridMu.Lock()
	a, b := s.ridRNG.Uint64(), s.ridRNG.Uint64()
	s.ridMu.Unlock()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, 0x8000|b>>48&0x3fff, b&0xffffffffffff)
}

// maxRequestBytes bounds a request body, as EC2 does.
const maxRequestBytes = 1 << 20

// ServeHTTP is the ec2query endpoint: parse the form, count, authenticate
// (auth.go), throttle, delay, inject faults, call the engine (which
// authorizes after decoding), write XML. Nothing a client sends can make
// it answer 500 except an injected InternalError.
func (s *EC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := s.requestID()
	action := "Unknown"
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic serving EC2 call", "action", action, "panic", v)
			s.counters.failed(action, "InternalError")
			writeError(w, rid, state.Errorf("InternalError", "An internal error has occurred"))
		}
	}()
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		s.counters.call(action)
		s.fail(w, rid, action, state.Errorf(state.CodeInvalidAction, "The HTTP method %s is not supported.", r.Method))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	body, err := io.ReadAll(r.Body)
	if err == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		err = r.ParseForm()
	}
	if err != nil {
		s.counters.call(action)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(w, rid, action, &state.APIError{Code: "RequestEntityTooLarge", Message: "Request body exceeds 1 MiB", HTTPStatus: http.StatusRequestEntityTooLarge})
			return
		}
		s.fail(w, rid, action, state.Errorf("MalformedQueryString", "The query string is malformed: %v", err))
		return
	}
	name := r.Form.Get("Action")
	dec, known := actions[name]
	if known {
		action = name
	}
	s.counters.call(action)
	who, authErr := s.authenticate(r, body)
	if authErr == nil {
		authErr = checkVersion(r.Form)
	}
	if authErr != nil {
		s.fail(w, rid, action, authErr)
		return
	}
	switch {
	case name == "":
		s.fail(w, rid, action, state.Errorf(state.CodeMissingAction, "The request must contain the parameter Action"))
		return
	case !known:
		s.fail(w, rid, action, state.Errorf(state.CodeInvalidAction, "The action %s is not valid for this web service.", truncate(name, 64)))
		return
	}
	if !s.throttle.Allow(action, unfiltered(r.Form)) {
		s.counters.throttled(action)
		writeError(w, rid, state.Errorf(state.CodeRequestLimitExceeded, "Request limit exceeded."))
		s.log.Debug("ec2 call throttled", "action", action)
		return
	}
	s.latency.Wait(r.Context(), action)
	if rule, fired := s.faults.Fire(action); fired {
		s.fail(w, rid, action, faultError(rule))
		return
	}
	p := newParams(r.Form)
	p.authorize = func() error { return authorize(s.state, who, action, r.Form) }
	resp, err := dec(s.state, p)
	if err != nil {
		var e *state.APIError
		if !errors.As(err, &e) {
			s.log.Error("engine returned an untyped error", "action", action, "err", err)
			e = state.Errorf("InternalError", "An internal error has occurred")
		}
		s.fail(w, rid, action, e)
		return
	}
	if err := writeResult(w, action, rid, resp); err != nil {
		s.log.Warn("writing EC2 answer", "action", action, "err", err)
	}
	s.log.Debug("ec2 call", "action", action, "took", time.Since(start))
}

// fail counts and writes an error answer.
func (s *EC2) fail(w http.ResponseWriter, rid, action string, e *state.APIError) {
	s.counters.failed(action, e.Code)
	s.log.Debug("ec2 call failed", "action", action, "code", e.Code, "message", e.Message)
	writeError(w, rid, e)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%s...", s[:n])
	}
	return s
}

// faultError is the answer of a fault rule that fired: its code, its
// message ("Injected fault." when empty) and its HTTP status (EC2's for
// the code when unset).
func faultError(r behaviour.FaultRule) *state.APIError {
	e := state.Errorf(r.Code, "%s", r.Message)
	if r.Message == "" {
		e.Message = "Injected fault."
	}
	if r.HTTPStatus != 0 {
		e.HTTPStatus = r.HTTPStatus
	}
	return e
}
