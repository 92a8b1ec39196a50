package agentsim

import (
	"context"
	"fmt"

	"github.com/cilium/cilium/pkg/annotation"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestartAgent restarts the simulated cilium-agent of a node the way
// Cilium's agent starts: pkg/nodediscovery/nodediscovery.go
// (UpdateCiliumNodeResource, mutateNodeResource) gets the CiliumNode,
// replaces its metadata.labels with the Node's labels and its
// metadata.annotations with the Node's cilium.io annotations (the
// LocalNode's, pkg/k8s/node.go ParseNode), points ownerReferences at the
// Node, and writes the whole object with Update, retried on conflict.
// Anything another component kept in that metadata is gone. The
// simulated agent keeps its pods' IPs, as Cilium restores its endpoints'
// IPs on restart, and takes in the object it wrote.
func (s *Sim) RestartAgent(ctx context.Context, name string) error {
	a := s.Agent(name)
	if a == nil {
		return fmt.Errorf("no agent %s", name)
	}
	var written *ciliumv2.CiliumNode
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		cn := &ciliumv2.CiliumNode{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: name}, cn); err != nil {
			return err
		}
		cn.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		cn.Labels = node.Labels
		cn.Annotations = ciliumAnnotations(node.Annotations)
		if err := s.client.Update(ctx, cn); err != nil {
			return err
		}
		written = cn
		return nil
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("restarting agent %s: %w", name, err)
		}
		return fmt.Errorf("restarting agent %s, %w", name, err)
	}
	a.observe(written)
	return nil
}

// ciliumAnnotations keeps the annotations Cilium's LocalNode carries, with
// Cilium's own test of the key (pkg/k8s/node.go ParseNode,
// annotation.CiliumPrefixRegex).
func ciliumAnnotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if annotation.CiliumPrefixRegex.MatchString(k) {
			out[k] = v
		}
	}
	return out
}
