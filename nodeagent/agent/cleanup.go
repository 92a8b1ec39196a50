package agent

import (
	"context"
	"fmt"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// cleanupRequest returns the value of the NodeRouting's cleanup
// annotation, empty when routing should go on.
func cleanupRequest(nr *enipamv1alpha1.NodeRouting) string {
	return nr.Annotations[enipamv1alpha1.AnnotationCleanup]
}

// cleanup is the pass of a node whose NodeRouting asks for enipam's
// routing to go (the chart's pre-delete hook sets the annotation before
// the DaemonSet is removed): it removes every rule, route and table the
// agent owns and the rp_filter values it loosened, routes nothing, and
// reports an empty status with Ready=False (CleanedUp). It runs on every
// pass while the annotation stays, so whatever reappears goes too; a pass
// that finds nothing costs three kernel reads and no write. cn may be nil.
// It returns false when something failed and is worth retrying soon.
func (a *Agent) cleanup(ctx context.Context, cn *ciliumv2.CiliumNode, nr *enipamv1alpha1.NodeRouting, trigger string, rec record.EventRecorder) bool {
	request := cleanupRequest(nr)
	start := a.now()
	res, err := a.conv.Cleanup(ctx)
	elapsed := a.now().Sub(start)
	if ctx.Err() != nil {
		return true
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	a.metrics.convergeDuration.WithLabelValues(trigger).Observe(elapsed.Seconds())
	a.metrics.converges.WithLabelValues(trigger, result).Inc()
	for op, n := range res.Ops {
		a.metrics.kernelOps.WithLabelValues(op).Add(float64(n))
	}
	for _, g := range []interface{ Set(float64) }{a.metrics.ready, a.metrics.rulesManaged, a.metrics.routesManaged, a.metrics.enisManaged, a.metrics.linksMissing, a.metrics.retainedRules} {
		g.Set(0)
	}

	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: a.cfg.NodeName}
	if cn != nil {
		ref = reference(cn)
	}
	log := a.log.With("trigger", trigger, "request", request)
	if !res.Empty() {
		log.Info("removed enipam's routing from the node", "removed", res.String(), "rpFilter", res.RPFilter, "took", elapsed)
		rec.Eventf(ref, corev1.EventTypeNormal, ReasonRoutingRemoved, "%s=%q: removed %s", enipamv1alpha1.AnnotationCleanup, request, res)
	}
	cond := metav1.Condition{
		Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: nr.Generation,
		Reason:  enipamv1alpha1.ReasonCleanedUp,
		Message: fmt.Sprintf("enipam's routing removed from the node on request (%s=%q); remove the annotation to route again", enipamv1alpha1.AnnotationCleanup, request),
	}
	if err != nil {
		a.metrics.errors.WithLabelValues(errKindKernelWrite).Inc()
		log.Error("removing enipam's routing failed", "err", err, "ops", res.Ops)
		msg := truncate("removing enipam's routing: "+err.Error(), 1024)
		if msg != a.lastFailure {
			a.lastFailure = msg
			rec.Event(ref, corev1.EventTypeWarning, ReasonRoutingFailed, msg)
		}
		cond.Reason, cond.Message = enipamv1alpha1.ReasonRouteFailed, msg
	} else {
		a.lastFailure = ""
	}
	a.setStatus(func(s *Status) {
		s.Ready, s.NotReady, s.CleanedUp = false, cond.Message, err == nil
		s.Converges++
	})

	nr, status := a.lastReport(ctx, nr)
	status.ObservedGeneration = nr.Generation
	status.ENIs, status.RoutedENIs, status.RoutedIPs = nil, 0, 0
	status.RoutedIPv6, status.RoutedIPv6Prefixes = 0, 0
	meta.SetStatusCondition(&status.Conditions, cond)
	if werr := a.writeStatus(ctx, nr, status); werr != nil {
		a.log.Error("writing the NodeRouting status", "err", werr)
		return false
	}
	return err == nil
}
