package admin

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/enipam/enipam/test/ec2sim/behaviour"
	"github.com/enipam/enipam/test/ec2sim/state"
	"github.com/enipam/enipam/test/ec2sim/wire"
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
//	GET    /admin/remaps                   []Remap (the reassignments' remaps, oldest first)
//
// Errors answer {"code":..., "message":...} with a 4xx status.

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// adminError is the admin API's error body.
type adminError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Target is what the admin API acts on: a running emulator.
type Target interface {
	State() *state.State
	// IMDSEndpoint opens (once) and returns the IMDS of one instance.
	IMDSEndpoint(instanceID string) (string, error)
	Counters() wire.Counters
	ResetCounters()
	Faults() behaviour.FaultConfig
	SetFaults(behaviour.FaultConfig) error
	Latency() behaviour.LatencyConfig
	SetLatency(behaviour.LatencyConfig) error
	Throttling() behaviour.ThrottleConfig
	SetThrottling(behaviour.ThrottleConfig) error
}

// Register mounts the admin API for t on mux; log records instances
// added, terminated and stopped.
func Register(mux *http.ServeMux, s Target, log *slog.Logger) {
	st := s.State()
	mux.HandleFunc("GET /admin/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /admin/instances", func(w http.ResponseWriter, r *http.Request) {
		var req state.LaunchRequest
		if !readJSON(w, r, &req) {
			return
		}
		v, err := st.AddInstance(req)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		log.Info("instance added", "instance", v.InstanceID, "type", v.InstanceType, "subnet", v.SubnetID)
		writeJSON(w, http.StatusCreated, state.InfoOf(v))
	})
	mux.HandleFunc("DELETE /admin/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := st.TerminateInstance(r.PathValue("id")); err != nil {
			writeAdminError(w, err)
			return
		}
		log.Info("instance terminated", "instance", r.PathValue("id"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/instances/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		if err := st.StopInstance(r.PathValue("id")); err != nil {
			writeAdminError(w, err)
			return
		}
		log.Info("instance stopped", "instance", r.PathValue("id"))
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
		writeJSON(w, http.StatusOK, st.Dump())
	})
	mux.HandleFunc("GET /admin/remaps", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, st.Remaps())
	})
	configEndpoint(mux, "faults", s.Faults, s.SetFaults)
	configEndpoint(mux, "latency", s.Latency, s.SetLatency)
	configEndpoint(mux, "throttling", s.Throttling, s.SetThrottling)
	configEndpoint(mux, "timing", st.Timing, st.SetTiming)
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
	var e *state.APIError
	if !errors.As(err, &e) {
		e = &state.APIError{Code: state.CodeInvalidParameterValue, Message: err.Error(), HTTPStatus: http.StatusBadRequest}
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
