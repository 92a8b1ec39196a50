package ec2sim

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/enipam/enipam/test/ec2sim/state"
	"io"
	"net/http"
	"time"
)

// maxRequestBytes bounds a request body, as EC2 does.
const maxRequestBytes = 1 << 20

// serveEC2 is the ec2query endpoint: parse the form, count, authenticate
// (auth.go), throttle, delay, inject faults, call the engine (which
// authorizes after decoding), write XML. Nothing a client sends can make
// it answer 500 except an injected InternalError.
func (s *Sim) serveEC2(w http.ResponseWriter, r *http.Request) {
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
			s.fail(w, rid, action, &APIError{Code: "RequestEntityTooLarge", Message: "Request body exceeds 1 MiB", HTTPStatus: http.StatusRequestEntityTooLarge})
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
		var e *APIError
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
func (s *Sim) fail(w http.ResponseWriter, rid, action string, e *APIError) {
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
