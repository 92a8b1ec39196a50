package ec2sim

import (
	"encoding/json"
	"errors"
	"github.com/enipam/enipam/test/ec2sim/state"
	"io"
	"net/http"
	"strings"
)

// The admin API, JSON over HTTP under /admin/ on the EC2 listener:
//
//	GET    /admin/healthz                  {"ok":true}
//	POST   /admin/instances                LaunchRequest -> InstanceInfo (a node joins)
//	DELETE /admin/instances/{id}           terminate (204)
//	POST   /admin/instances/{id}/stop      stop (204)
//	GET    /admin/instances/{id}/imds      {"endpoint":"http://127.0.0.1:port"}
//	GET    /admin/counters                 Counters
//	DELETE /admin/counters                 reset (204)
//	GET|PUT /admin/faults                  FaultConfig
//	GET|PUT /admin/latency                 LatencyConfig
//	GET|PUT /admin/throttling              ThrottleConfig
//	GET|PUT /admin/timing                  TimingConfig
//	GET    /admin/dump                     Dump
//
// Errors answer {"code":..., "message":...} with a 4xx status.

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// adminError is the admin API's error body.
type adminError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (s *Sim) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /admin/instances", func(w http.ResponseWriter, r *http.Request) {
		var req LaunchRequest
		if !readJSON(w, r, &req) {
			return
		}
		v, err := s.state.AddInstance(req)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		s.log.Info("instance added", "instance", v.InstanceID, "type", v.InstanceType, "subnet", v.SubnetID)
		writeJSON(w, http.StatusCreated, state.InfoOf(v))
	})
	mux.HandleFunc("DELETE /admin/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.state.TerminateInstance(r.PathValue("id")); err != nil {
			writeAdminError(w, err)
			return
		}
		s.log.Info("instance terminated", "instance", r.PathValue("id"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/instances/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		if err := s.state.StopInstance(r.PathValue("id")); err != nil {
			writeAdminError(w, err)
			return
		}
		s.log.Info("instance stopped", "instance", r.PathValue("id"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /admin/instances/{id}/imds", func(w http.ResponseWriter, r *http.Request) {
		u, err := s.IMDSEndpoint(r.PathValue("id"))
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"endpoint": u})
	})
	mux.HandleFunc("GET /admin/counters", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Counters())
	})
	mux.HandleFunc("DELETE /admin/counters", func(w http.ResponseWriter, r *http.Request) {
		s.ResetCounters()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /admin/dump", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.state.Dump())
	})
	configEndpoint(mux, "faults", s.faults.Config, s.SetFaults)
	configEndpoint(mux, "latency", s.latency.Config, s.SetLatency)
	configEndpoint(mux, "throttling", s.throttle.Config, s.SetThrottling)
	configEndpoint(mux, "timing", s.state.Timing, s.state.SetTiming)
}

// configEndpoint serves GET and PUT of one runtime configuration.
func configEndpoint[C any](mux *http.ServeMux, name string, get func() C, set func(C) error) {
	mux.HandleFunc("GET /admin/"+name, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, get())
	})
	mux.HandleFunc("PUT /admin/"+name, func(w http.ResponseWriter, r *http.Request) {
		var c C
		if !readJSON(w, r, &c) {
			return
		}
		if err := set(c); err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, get())
	})
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, adminError{Code: "MalformedJSON", Message: err.Error()})
		return false
	}
	return true
}

func writeAdminError(w http.ResponseWriter, err error) {
	var e *APIError
	if !errors.As(err, &e) {
		e = &APIError{Code: state.CodeInvalidParameterValue, Message: err.Error(), HTTPStatus: http.StatusBadRequest}
	}
	status := e.HTTPStatus
	if status == 0 || strings.HasSuffix(e.Code, ".NotFound") {
		status = http.StatusNotFound
	}
	writeJSON(w, status, adminError{Code: e.Code, Message: e.Message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
