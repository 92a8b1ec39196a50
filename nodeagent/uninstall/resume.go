package uninstall

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// ResumeOutcome is what Resume did, node names sorted.
type ResumeOutcome struct {
	// Resumed are the nodes whose uninstall request was withdrawn: their
	// agent routes them again (the one running now, or the next to start).
	Resumed []string
	// Kept are the nodes whose cleanup annotation someone other than the
	// uninstall set, each with its value: their request stays.
	Kept []string
}

// resumePasses bounds the passes of Resume while annotations change under
// it; each pass re-reads them, so a second one is already rare.
const resumePasses = 5

// Resume withdraws what Run requested: it removes the cleanup annotation
// from every NodeRouting where it still holds requester (Run's, by
// default Requester), so each node's agent routes the node again and puts
// back what its cleanup undid (rules, routes, the connmark table, the
// loose rp_filter, recorded again for the next cleanup). An annotation
// with any other value was set by someone else for that node alone and
// stays (Kept). It is the chart's pre-install, pre-upgrade and
// pre-rollback hook (`enipam-agent --resume`): a release being installed,
// upgraded or rolled back (the way back from an uninstall that stopped
// half-way, which Helm leaves uninstalling) is meant to route its nodes,
// and running before the new agents exist no agent reports CleanedUp in
// the meantime. An uninstall in progress wins over it: Run annotates
// again, on each pass, every NodeRouting that lacks the request. Each
// removal is conditional on the value read (a JSON patch test), so a
// request changed meanwhile is read again, never removed blindly. Without
// the NodeRouting CRD there is nothing to resume. It needs list and patch
// on NodeRoutings.
func Resume(ctx context.Context, c client.Client, requester string, log *slog.Logger) (ResumeOutcome, error) {
	if requester == "" {
		requester = Requester
	}
	var out ResumeOutcome
	resumed := map[string]bool{}
	for range resumePasses {
		var nrs enipamv1alpha1.NodeRoutingList
		if err := c.List(ctx, &nrs); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				log.Info("no NodeRouting CRD: nothing to resume")
				return out, nil
			}
			return out, fmt.Errorf("listing NodeRoutings, %w", err)
		}
		out.Kept = nil
		changed := 0
		for i := range nrs.Items {
			nr := &nrs.Items[i]
			v, ok := nr.Annotations[enipamv1alpha1.AnnotationCleanup]
			switch {
			case !ok:
				continue
			case v != requester:
				out.Kept = append(out.Kept, fmt.Sprintf("%s (%s=%q)", nr.Name, enipamv1alpha1.AnnotationCleanup, v))
				continue
			}
			err := c.Patch(ctx, nr, client.RawPatch(types.JSONPatchType, withdrawPatch(requester)))
			switch {
			case err == nil:
				resumed[nr.Name] = true
				log.Info("withdrew the uninstall's request; the node's agent routes it again", "node", nr.Name)
			case apierrors.IsNotFound(err):
			case apierrors.IsInvalid(err):
				changed++ // the annotation changed since the list: read it again
			default:
				return out, fmt.Errorf("removing %s from NodeRouting %s, %w", enipamv1alpha1.AnnotationCleanup, nr.Name, err)
			}
		}
		if changed == 0 {
			out.Resumed = sortedKeys(resumed)
			slices.Sort(out.Kept)
			return out, nil
		}
	}
	out.Resumed = sortedKeys(resumed)
	return out, fmt.Errorf("the %s annotations kept changing over %d passes", enipamv1alpha1.AnnotationCleanup, resumePasses)
}

// withdrawPatch removes the cleanup annotation only if it still holds
// requester: a failed test is a 422 (Invalid), nothing written.
func withdrawPatch(requester string) []byte {
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(enipamv1alpha1.AnnotationCleanup)
	return fmt.Appendf(nil, `[{"op":"test","path":%q,"value":%q},{"op":"remove","path":%q}]`, path, requester, path)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Summary is the outcome in one line for logs.
func (o ResumeOutcome) Summary() string {
	return fmt.Sprintf("%d nodes routed again, %d keep a cleanup request of their own (%s)", len(o.Resumed), len(o.Kept), strings.Join(o.Kept, "; "))
}
