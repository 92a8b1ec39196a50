package bench

import (
	"context"
	"slices"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// copyWait bounds the wait for the nodes' status.eni.enis copies after
// the scale-up: the operator writes a node's copy at its next look a
// resync interval (1 min by default) after its join is complete, and a
// node's look may wait in the queue behind others.
const copyWait = 3 * time.Minute

// awaitENICopies waits, for bound at most, until every node of names has
// the copy of its NodeRouting's spec.enis in its CiliumNode's
// status.eni.enis (copiedENIs). It returns how many nodes' copies were
// not seen by then, and how long it waited.
func (w *world) awaitENICopies(ctx context.Context, names []string, bound time.Duration) (int, time.Duration, error) {
	start := time.Now()
	for {
		missing, err := w.uncopiedENIs(ctx, names)
		if err != nil || missing == 0 || time.Since(start) >= bound {
			return missing, time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return missing, time.Since(start), ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// uncopiedENIs is how many nodes of names lack the copy of their
// NodeRouting's spec.enis in their CiliumNode's status.eni.enis.
func (w *world) uncopiedENIs(ctx context.Context, names []string) (int, error) {
	var cns ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &cns); err != nil {
		return 0, err
	}
	var nrs enipamv1alpha1.NodeRoutingList
	if err := w.cluster.Client.List(ctx, &nrs); err != nil {
		return 0, err
	}
	status := map[string]map[string]awstypes.ENI{}
	for i := range cns.Items {
		status[cns.Items[i].Name] = cns.Items[i].Status.ENI.ENIs
	}
	spec := map[string][]enipamv1alpha1.NodeENI{}
	for i := range nrs.Items {
		spec[nrs.Items[i].Name] = nrs.Items[i].Spec.ENIs
	}
	missing := 0
	for _, name := range names {
		if !copiedENIs(status[name], spec[name]) {
			missing++
		}
	}
	return missing, nil
}

// copiedENIs reports whether status (a CiliumNode's status.eni.enis)
// lists exactly the ENIs of spec (its NodeRouting's spec.enis, not
// empty), each with the same addresses.
func copiedENIs(status map[string]awstypes.ENI, spec []enipamv1alpha1.NodeENI) bool {
	if len(spec) == 0 || len(status) != len(spec) {
		return false
	}
	for i := range spec {
		e, ok := status[spec[i].ID]
		if !ok || len(e.Addresses) != len(spec[i].Addresses) {
			return false
		}
		for _, a := range e.Addresses {
			if !a.IsValid() || !slices.Contains(spec[i].Addresses, a.Addr.String()) {
				return false
			}
		}
	}
	return true
}
