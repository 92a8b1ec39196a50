package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/nodeagent/routing"
)

// converge runs one converge of cn under nr's spec and tells of it in
// logs, events and metrics. ready is false when the node is not fully
// routed yet (a failure or a missing link), so the loop retries sooner
// than the resync interval; err is the converge's.
func (a *Agent) converge(ctx context.Context, cn *ciliumv2.CiliumNode, nr *enipamv1alpha1.NodeRouting, trigger string, rec record.EventRecorder) (routing.Result, bool, error) {
	node, in, problems := ciliumnode.ToNode(cn, &nr.Spec)
	a.logRetained(in)
	a.logDraining(in)
	macs := make(map[string]bool, len(node.ENIs))
	for _, e := range node.ENIs {
		macs[string(e.MAC)] = true
	}
	if len(node.PrimaryMAC) > 0 {
		macs[string(node.PrimaryMAC)] = true // its name is in the connmark table
	}
	a.mu.Lock()
	a.macs = macs
	a.mu.Unlock()
	start := a.now()
	res, err := a.conv.Converge(ctx, node)
	elapsed := a.now().Sub(start)
	a.metrics.observe(trigger, elapsed.Seconds(), res, err)
	ref := reference(cn)
	log := a.log.With("trigger", trigger)

	problems = append(problems, res.Problems...)
	if msg := joinMessages(problems); msg != a.lastProblems {
		a.lastProblems = msg
		if msg != "" {
			a.metrics.errors.WithLabelValues(errKindCiliumNode).Add(float64(len(problems)))
			log.Warn("parts of the CiliumNode cannot be routed", "problems", msg)
			rec.Event(ref, corev1.EventTypeWarning, ReasonInvalidENI, msg)
		}
	}

	if err != nil {
		var opErr *routing.OpError
		if errors.As(err, &opErr) {
			a.metrics.errors.WithLabelValues(errKindKernelWrite).Add(float64(countOpErrors(err)))
		} else {
			a.metrics.errors.WithLabelValues(errKindKernelRead).Inc()
		}
		log.Error("converge failed", "err", err, "ops", res.Ops)
		if msg := truncate(err.Error(), 1024); msg != a.lastFailure {
			a.lastFailure = msg
			rec.Event(ref, corev1.EventTypeWarning, ReasonRoutingFailed, msg)
		}
	} else {
		a.lastFailure = ""
	}

	for _, id := range a.trackMissing(res.Missing) {
		eni := findENI(res.Missing, id)
		log.Error("ENI link never appeared", "eni", id, "mac", eni.MAC.String(), "waited", a.cfg.LinkWaitTimeout)
		rec.Eventf(ref, corev1.EventTypeWarning, ReasonLinkNotFound, "no link with MAC %s for ENI %s (device %d) after %v", eni.MAC, id, eni.Number, a.cfg.LinkWaitTimeout)
	}

	ready := err == nil && len(res.Missing) == 0
	notReady := ""
	switch {
	case err != nil:
		notReady = "converge failed: " + truncate(err.Error(), 256)
	case len(res.Missing) > 0:
		notReady = fmt.Sprintf("%d ENI link(s) missing", len(res.Missing))
	}
	var wasReady bool
	a.setStatus(func(s *Status) {
		wasReady = s.Ready
		s.Ready, s.NotReady, s.Last = ready, notReady, res
		s.Converges++
	})
	a.metrics.ready.Set(boolFloat(ready))
	if ready && !wasReady {
		rec.Eventf(ref, corev1.EventTypeNormal, ReasonRoutingReady, "%d ENIs, %d rules, %d routes", res.ENIs, res.Rules, res.Routes)
	}
	if res.Plan.Len() > 0 || err != nil {
		log.Info("converged", "enis", res.ENIs, "rules", res.Rules, "routes", res.Routes, "retained", res.Retained, "writes", res.Ops.Writes(), "missing", len(res.Missing), "took", elapsed)
	} else {
		log.Debug("node in shape", "enis", res.ENIs, "rules", res.Rules, "retained", res.Retained, "took", elapsed)
	}
	return res, ready, err
}

// logRetained tells, once per change, of the addresses whose routing is
// kept as it is because their ENI is listed neither in spec.enis nor in
// status.eni.enis.
func (a *Agent) logRetained(in ciliumnode.Input) {
	byENI := map[string][]string{}
	for p, eni := range in.Retained {
		byENI[eni] = append(byENI[eni], p.Addr().String())
	}
	for _, ips := range byENI {
		slices.Sort(ips)
	}
	msg := fmt.Sprint(byENI)
	if msg == a.lastRetained {
		return
	}
	a.lastRetained = msg
	if len(byENI) > 0 {
		a.log.Warn("addresses in use whose ENI is not listed; keeping their routing as it is", "addresses", byENI)
	} else {
		a.log.Info("no address retained any more")
	}
}

// logDraining tells, once per change, of the ENIs the policy no longer
// selects whose addresses keep their routing until they leave the pool.
func (a *Agent) logDraining(in ciliumnode.Input) {
	msg := ""
	if len(in.Draining) > 0 {
		msg = fmt.Sprint(in.Draining)
	}
	if msg == a.lastDraining {
		return
	}
	a.lastDraining = msg
	if msg != "" {
		a.log.Info("ENIs the policy no longer selects still hold addresses; they keep their routing until released", "addresses", in.Draining)
	} else {
		a.log.Info("no ENI draining any more")
	}
}

// trackMissing records since when each ENI's link is missing and returns
// the ENIs that have just passed the link wait timeout (each reported once
// until its link shows up).
func (a *Agent) trackMissing(missing []routing.ENI) []string {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	current := map[string]bool{}
	var overdue []string
	for _, e := range missing {
		current[e.ID] = true
		since, ok := a.missingSince[e.ID]
		if !ok {
			a.missingSince[e.ID] = now
			since = now
		}
		if !a.reported[e.ID] && now.Sub(since) >= a.cfg.LinkWaitTimeout {
			a.reported[e.ID] = true
			overdue = append(overdue, e.ID)
		}
	}
	for id := range a.missingSince {
		if !current[id] {
			if a.reported[id] {
				a.log.Info("ENI link appeared or ENI left", "eni", id)
			}
			delete(a.missingSince, id)
			delete(a.reported, id)
		}
	}
	slices.Sort(overdue)
	return overdue
}

func (a *Agent) setStatus(f func(*Status)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.status)
}

func findENI(enis []routing.ENI, id string) routing.ENI {
	for _, e := range enis {
		if e.ID == id {
			return e
		}
	}
	return routing.ENI{ID: id}
}

func countOpErrors(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		n := 0
		for _, e := range j.Unwrap() {
			var op *routing.OpError
			if errors.As(e, &op) {
				n++
			}
		}
		return n
	}
	return 1
}

func joinMessages(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return truncate(strings.Join(s, "; "), 1024)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
