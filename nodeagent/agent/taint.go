package agent

import (
	"context"
	"encoding/json"
	"fmt"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// removeStartupTaint takes the start-up taint off the agent's Node, once.
// It needs only the patch verb on nodes: an empty merge patch answers with
// the Node as it is, and a JSON patch removes the taint at its index after
// testing that the index still holds it, so a concurrent change of the
// taints makes the patch fail instead of removing the wrong one.
func (a *Agent) removeStartupTaint(ctx context.Context, cn *ciliumv2.CiliumNode, rec record.EventRecorder) error {
	key := a.cfg.StartupTaintKey
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName}}
	if err := a.client.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte("{}"))); err != nil {
		return fmt.Errorf("reading Node %s (empty patch), %w", a.cfg.NodeName, err)
	}
	i := -1
	for j, t := range node.Spec.Taints {
		if t.Key == key {
			i = j
			break
		}
	}
	if i >= 0 {
		ops, err := json.Marshal([]map[string]any{
			{"op": "test", "path": fmt.Sprintf("/spec/taints/%d/key", i), "value": key},
			{"op": "remove", "path": fmt.Sprintf("/spec/taints/%d", i)},
		})
		if err != nil {
			return err
		}
		if err := a.client.Patch(ctx, node, client.RawPatch(types.JSONPatchType, ops)); err != nil {
			return fmt.Errorf("removing taint %s from Node %s, %w", key, a.cfg.NodeName, err)
		}
		a.log.Info("routing ready; start-up taint removed", "taint", key)
		rec.Eventf(reference(cn), corev1.EventTypeNormal, ReasonStartupTaintRemoved, "routing ready; taint %s removed from Node %s", key, a.cfg.NodeName)
	} else {
		a.log.Info("routing ready; the Node has no start-up taint to remove", "taint", key)
	}
	a.mu.Lock()
	a.taintPending = false
	a.status.TaintRemoved = true
	a.mu.Unlock()
	return nil
}
