package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Healthy reports whether the agent's loop is alive: started and not
// stuck. A loop wakes at least every resync interval; one silent for three
// intervals is hung (a netlink call that never returns) and the process
// should be restarted.
func (a *Agent) Healthy() error {
	s := a.Status()
	if !s.Running {
		return errors.New("not running")
	}
	if stale := a.now().Sub(s.Heartbeat); stale > 3*a.cfg.ResyncInterval+10*time.Second {
		return fmt.Errorf("loop silent for %v", stale.Round(time.Second))
	}
	return nil
}

// Ready reports whether the node's routing is complete: the last converge
// succeeded and every managed ENI's link was there.
func (a *Agent) Ready() error {
	s := a.Status()
	if !s.Ready {
		return errors.New(s.NotReady)
	}
	return nil
}

// HealthHandler serves /healthz (liveness: Healthy) and /readyz
// (readiness: Ready), 200 or 503 with the reason.
func (a *Agent) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if err := check(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, err)
				return
			}
			fmt.Fprintln(w, "ok")
		}
	}
	mux.Handle("/healthz", probe(a.Healthy))
	mux.Handle("/readyz", probe(a.Ready))
	return mux
}

// Server serves one handler on one address until its context ends.
type Server struct {
	Addr    string
	Handler http.Handler
	Log     *slog.Logger
}

// Start listens and serves until ctx ends, then shuts down gracefully. It
// returns an error if the address cannot be listened on.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s, %w", s.Addr, err)
	}
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	s.Log.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
