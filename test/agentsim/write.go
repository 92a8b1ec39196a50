package agentsim

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// conflictAttempts bounds the writes of one sync that may meet a conflict
// before the write is left to the next interval.
const conflictAttempts = 3

// writeCounters are the status writes of all agents of a Sim, removed
// agents included.
type writeCounters struct {
	writes, conflicts, failed atomic.Int64
	// lags: from the oldest change a write carried to the write's success.
	lags durationSample
}

// statusWriter writes agents' status.ipam through the status subresource:
// a few workers take agent names from one delaying queue, so each agent
// has at most one write queued or under way, whatever the node count.
type statusWriter struct {
	c        client.Client
	queue    workqueue.TypedDelayingInterface[string]
	agent    func(name string) *Agent
	counters *writeCounters
	log      *slog.Logger
}

// run writes until the queue shuts down.
func (w *statusWriter) run(ctx context.Context) {
	for {
		name, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.write(ctx, name)
		w.queue.Done(name)
	}
}

// write replaces the agent's status with what the agent knows, like
// Cilium's UpdateStatus of its own CiliumNode, optimistic on the
// resourceVersion it last saw. On a conflict it reads the object afresh,
// lets the agent take it in (new handshake markings get answered) and
// writes again.
func (w *statusWriter) write(ctx context.Context, name string) {
	a := w.agent(name)
	if a == nil {
		return
	}
	var since time.Time
	for attempt := 1; ; attempt++ {
		cn, dirty := a.statusToWrite(time.Now())
		if cn == nil {
			return
		}
		if since.IsZero() || (!dirty.IsZero() && dirty.Before(since)) {
			since = dirty
		}
		err := w.c.Status().Update(ctx, cn)
		switch {
		case err == nil:
			w.counters.writes.Add(1)
			if !since.IsZero() {
				w.counters.lags.add(time.Since(since))
			}
			a.wrote()
			cn.ManagedFields = nil
			a.observe(cn)
			return
		case ctx.Err() != nil, apierrors.IsNotFound(err):
			// Stopping, or the CiliumNode is gone: nothing to write to.
			return
		case apierrors.IsConflict(err) && attempt < conflictAttempts:
			w.counters.conflicts.Add(1)
			a.conflicted()
			fresh := &ciliumv2.CiliumNode{}
			if err := w.c.Get(ctx, client.ObjectKey{Name: name}, fresh); err != nil {
				w.fail(ctx, a, since, err)
				return
			}
			a.observe(fresh)
		default:
			if apierrors.IsConflict(err) {
				w.counters.conflicts.Add(1)
				a.conflicted()
			}
			w.fail(ctx, a, since, err)
			return
		}
	}
}

func (w *statusWriter) fail(ctx context.Context, a *Agent, dirtySince time.Time, err error) {
	if ctx.Err() != nil {
		return
	}
	w.counters.failed.Add(1)
	w.log.Warn("writing CiliumNode status failed, retrying after the update interval", "node", a.name, "error", err)
	a.writeFailed(time.Now(), dirtySince)
}
