package extender

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Verbs, the paths kube-scheduler posts to under the extender's urlPrefix
// (filterVerb and prioritizeVerb of its configuration).
const (
	VerbFilter     = "filter"
	VerbPrioritize = "prioritize"
	VerbBind       = "bind"
)

// maxRequestBytes bounds a request body. With nodeCacheCapable the
// scheduler sends node names only; a whole NodeList of a large cluster
// takes tens of megabytes.
const maxRequestBytes = 256 << 20

// Handler serves the verbs: POST /filter, /prioritize and /bind, JSON in
// and out, as kube-scheduler's HTTP extender client speaks them. A body
// that does not decode is answered 400.
func (e *Extender) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /"+VerbFilter, func(w http.ResponseWriter, r *http.Request) {
		e.serve(w, r, VerbFilter, func(ctx context.Context, args *extenderv1.ExtenderArgs) (any, bool) {
			res := e.Filter(ctx, args)
			return res, res.Error == ""
		})
	})
	mux.HandleFunc("POST /"+VerbPrioritize, func(w http.ResponseWriter, r *http.Request) {
		e.serve(w, r, VerbPrioritize, func(ctx context.Context, args *extenderv1.ExtenderArgs) (any, bool) {
			res, err := e.Prioritize(ctx, args)
			if err != nil {
				e.log.Warn("prioritize", "error", err)
				// The scheduler ignores a prioritizer's failure; an error
				// status makes it log one.
				return nil, false
			}
			return res, true
		})
	})
	mux.HandleFunc("POST /"+VerbBind, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		result := "ok"
		defer func() {
			e.metrics.requests.WithLabelValues(VerbBind, result).Inc()
			e.metrics.duration.WithLabelValues(VerbBind).Observe(time.Since(start).Seconds())
		}()
		var args extenderv1.ExtenderBindingArgs
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&args); err != nil {
			result = "bad_request"
			http.Error(w, "decoding binding arguments: "+err.Error(), http.StatusBadRequest)
			return
		}
		res := e.Bind(r.Context(), &args)
		if res.Error != "" {
			result = "error"
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(res); err != nil {
			e.log.Log(r.Context(), slog.LevelWarn, "writing answer", "verb", VerbBind, "error", err)
		}
	})
	return mux
}

// serve decodes the arguments, runs verb, encodes its answer and records
// the request's metrics.
func (e *Extender) serve(w http.ResponseWriter, r *http.Request, verb string, run func(context.Context, *extenderv1.ExtenderArgs) (any, bool)) {
	start := time.Now()
	result := "ok"
	defer func() {
		e.metrics.requests.WithLabelValues(verb, result).Inc()
		e.metrics.duration.WithLabelValues(verb).Observe(time.Since(start).Seconds())
	}()
	var args extenderv1.ExtenderArgs
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&args); err != nil {
		result = "bad_request"
		http.Error(w, "decoding extender arguments: "+err.Error(), http.StatusBadRequest)
		return
	}
	out, ok := run(r.Context(), &args)
	if !ok {
		result = "error"
	}
	if out == nil {
		http.Error(w, verb+" failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		e.log.Log(r.Context(), slog.LevelWarn, "writing answer", "verb", verb, "error", err)
	}
}
