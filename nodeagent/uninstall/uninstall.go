// Package uninstall asks every node's enipam-agent to remove enipam's
// routing for good and waits for their reports: what the chart's
// pre-delete hook Job runs (`enipam-agent --uninstall`) before
// `helm uninstall` removes the agents. Resume withdraws that request
// (`enipam-agent --resume`, the chart's pre-install, pre-upgrade and
// pre-rollback hook), so a release installed again routes every node.
//
// The request is the cleanup annotation on each NodeRouting
// (enipamv1alpha1.AnnotationCleanup), which each agent already watches;
// the answer is the agent's Ready=False condition with reason CleanedUp.
// Nothing else asks for it, so a rolling update or a restart of the
// DaemonSet never removes routing pods depend on.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// Options of one request.
type Options struct {
	// Requester is the annotation's value: who asked, for the record.
	Requester string
	// Timeout bounds the wait for the agents' reports.
	Timeout time.Duration
	// Poll is how often the NodeRoutings are read again.
	Poll time.Duration
}

// Requester is the annotation's value Run sets by default, and the one
// Resume withdraws.
const Requester = "enipam-agent --uninstall"

// DefaultOptions wait two minutes, reading every two seconds.
func DefaultOptions() Options {
	return Options{Requester: Requester, Timeout: 2 * time.Minute, Poll: 2 * time.Second}
}

// Outcome is where each node stands, node names sorted.
type Outcome struct {
	// Cleaned are the nodes whose agent reported its routing removed.
	Cleaned []string
	// NoAgent are the nodes with no agent to act: their NodeRouting says
	// the agent stopped or never reported, or their Node is gone or its
	// kubelet silent. Nothing was removed there; an agent starting there
	// later still sees the request.
	NoAgent []string
	// Pending are the nodes whose agent runs but has not reported the
	// removal, each with its last condition.
	Pending []string
}

// ErrTimeout: some agents did not report their routing removed in time.
var ErrTimeout = errors.New("agents did not report their routing removed in time")

// Run annotates every NodeRouting (and any created meanwhile) and waits
// until no node is pending, or Timeout passes (ErrTimeout, with the
// pending nodes in the error). The annotations stay either way: nodes
// already cleaned stay so while the uninstall is retried; removing them
// (`kubectl annotate nrt --all enipam.io/cleanup-`) lets the agents route
// again, and Resume (the chart's hook on the next install, upgrade or
// rollback) removes them. It needs list and patch on NodeRoutings and list
// on Nodes.
func Run(ctx context.Context, c client.Client, opts Options, log *slog.Logger) (Outcome, error) {
	if opts.Requester == "" {
		opts.Requester = DefaultOptions().Requester
	}
	deadline := time.Now().Add(opts.Timeout)
	var last Outcome
	for first := true; ; first = false {
		out, err := pass(ctx, c, opts.Requester, log)
		if err != nil {
			return last, err
		}
		if first || !slices.Equal(out.Pending, last.Pending) {
			log.Info("waiting for the agents", "cleaned", len(out.Cleaned), "noAgent", len(out.NoAgent), "pending", out.Pending)
		}
		last = out
		if len(out.Pending) == 0 {
			return out, nil
		}
		if !time.Now().Before(deadline) {
			return out, fmt.Errorf("%w (%v): %s", ErrTimeout, opts.Timeout, strings.Join(out.Pending, "; "))
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(min(opts.Poll, time.Until(deadline)+time.Millisecond)):
		}
	}
}

// pass annotates the NodeRoutings that lack the request and classifies
// every node.
func pass(ctx context.Context, c client.Client, requester string, log *slog.Logger) (Outcome, error) {
	var nrs enipamv1alpha1.NodeRoutingList
	if err := c.List(ctx, &nrs); err != nil {
		return Outcome{}, fmt.Errorf("listing NodeRoutings, %w", err)
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return Outcome{}, fmt.Errorf("listing Nodes, %w", err)
	}
	reachable := map[string]bool{}
	for i := range nodes.Items {
		reachable[nodes.Items[i].Name] = kubeletPosting(&nodes.Items[i])
	}
	var out Outcome
	for i := range nrs.Items {
		nr := &nrs.Items[i]
		if nr.Annotations[enipamv1alpha1.AnnotationCleanup] == "" {
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, enipamv1alpha1.AnnotationCleanup, requester)
			if err := c.Patch(ctx, nr, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
				return Outcome{}, fmt.Errorf("annotating NodeRouting %s, %w", nr.Name, err)
			}
			log.Info("requested the removal of enipam's routing", "node", nr.Name)
		}
		cond := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady)
		switch {
		case cond != nil && cond.Reason == enipamv1alpha1.ReasonCleanedUp:
			out.Cleaned = append(out.Cleaned, nr.Name)
		case cond == nil || cond.Reason == enipamv1alpha1.ReasonAgentStopped || !reachable[nr.Name]:
			out.NoAgent = append(out.NoAgent, nr.Name)
		default:
			out.Pending = append(out.Pending, fmt.Sprintf("%s (%s: %s)", nr.Name, cond.Reason, cond.Message))
		}
	}
	slices.Sort(out.Cleaned)
	slices.Sort(out.NoAgent)
	slices.Sort(out.Pending)
	return out, nil
}

// kubeletPosting reports whether the node's kubelet still posts its
// status: a Ready condition that is not Unknown. A kubelet reporting
// NotReady (pod networking down, say) still runs the node's agent.
func kubeletPosting(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionUnknown
		}
	}
	return false
}

// Summary is the outcome in one line for logs.
func (o Outcome) Summary() string {
	return fmt.Sprintf("%d nodes cleaned, %d without an agent (%s), %d pending", len(o.Cleaned), len(o.NoAgent), strings.Join(o.NoAgent, ","), len(o.Pending))
}
