package bench

import (
	"context"
	"fmt"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// lateWriteWait is how long the scale-up waits, once every pool is full
// and the agents ready, before it counts the operator's CiliumNode
// writes: the operator's resync interval (1 min, its default, which the
// scale-up keeps) plus 30 s. A status write a node's look makes at the
// next resync after its join, such as an earlier operator's copy of the
// node's ENIs into status.eni.enis, is then counted.
const lateWriteWait = time.Minute + 30*time.Second

// awaitLateWrites waits d, or until ctx ends.
func awaitLateWrites(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// heldCopies is how many nodes of names hold a copy of their ENIs in
// their CiliumNode's status.eni.enis, as the apiserver has them now.
func (w *world) heldCopies(ctx context.Context, names []string) (int, error) {
	var cns ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &cns); err != nil {
		return 0, err
	}
	return copiesHeld(cns.Items, names), nil
}

// copiesHeld counts the nodes of names whose CiliumNode, among cns, lists
// any ENI in status.eni.enis. A node without a CiliumNode holds none;
// CiliumNodes of other nodes are not counted.
func copiesHeld(cns []ciliumv2.CiliumNode, names []string) int {
	named := make(map[string]bool, len(names))
	for _, n := range names {
		named[n] = true
	}
	held := 0
	for i := range cns {
		if named[cns[i].Name] && len(cns[i].Status.ENI.ENIs) > 0 {
			held++
		}
	}
	return held
}

// joinWrites judges the scale-up's CiliumNode writes: writes (every
// status and spec write the operator made) over nodes joining nodes, of
// which held hold a status.eni.enis copy at the end. The scale-up's
// nodes need no copy (their agents route spec.enis, no static address
// concerns them), so the target is met only with at most 2 writes per
// node and no copy held: a copy is a write of its own, made late or not
// at all within the wait. It returns the figure as the report shows it.
func joinWrites(writes float64, nodes, held int) (string, bool) {
	perNode := writes / float64(nodes)
	return fmt.Sprintf("%.2f (%.0f writes), %d of %d nodes holding a copy", perNode, writes, held, nodes), nodes > 0 && perNode <= 2 && held == 0
}
