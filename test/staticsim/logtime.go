package staticsim

import (
	"context"
	"log/slog"
)

// simTimeHandler adds the simulation's clock (seconds since the start,
// as the trace prints it) to each line of the operator's debug log, so
// that -oplog lines can be matched with the trace.
type simTimeHandler struct {
	slog.Handler
	w *world
}

func (h simTimeHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.Float64("simt", h.w.clock.Now().Sub(epoch).Seconds()))
	return h.Handler.Handle(ctx, r)
}

func (h simTimeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return simTimeHandler{h.Handler.WithAttrs(as), h.w}
}

func (h simTimeHandler) WithGroup(name string) slog.Handler {
	return simTimeHandler{h.Handler.WithGroup(name), h.w}
}
