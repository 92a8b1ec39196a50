package agentsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium/cilium/pkg/node/addressing"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of NodeSpec.
const (
	DefaultAvailabilityZone = "us-east-1a"
	DefaultInstanceType     = "m5.large"
)

// NodeSpec describes a node joining the cluster: what the kubelet puts in
// its Node and the cilium-agent in its CiliumNode at startup.
type NodeSpec struct {
	// Name of the Node and the CiliumNode, e.g. ip-10-0-1-23.ec2.internal.
	Name string
	// InstanceID, when known, goes to the Node's providerID
	// (aws:///<az>/<instance-id>) and to the CiliumNode's spec.instance-id.
	InstanceID string
	// AvailabilityZone and InstanceType become the Node's well-known labels.
	AvailabilityZone string
	InstanceType     string
	// InternalIP, if set, is the CiliumNode's InternalIP address.
	InternalIP string
	// Labels are added to the Node's (and so the CiliumNode's) labels.
	Labels map[string]string
	// IPAM sets the CiliumNode's spec.ipam knobs (pre-allocate,
	// min-allocate, max-allocate, max-above-watermark); usually empty so
	// the operator's defaults apply, and without a pool.
	IPAM ipamtypes.IPAMSpec
}

// node returns the Node the kubelet would register.
func (n NodeSpec) node() *corev1.Node {
	az := n.AvailabilityZone
	if az == "" {
		az = DefaultAvailabilityZone
	}
	it := n.InstanceType
	if it == "" {
		it = DefaultInstanceType
	}
	labels := map[string]string{
		corev1.LabelHostname:           n.Name,
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelInstanceTypeStable: it,
		corev1.LabelTopologyZone:       az,
		corev1.LabelTopologyRegion:     strings.TrimRight(az, "abcdefghijklmnopqrstuvwxyz"),
	}
	maps.Copy(labels, n.Labels)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels}}
	if n.InstanceID != "" {
		node.Spec.ProviderID = "aws:///" + az + "/" + n.InstanceID
	}
	return node
}

// ciliumNode returns the CiliumNode the agent creates for node.
func (n NodeSpec) ciliumNode(node *corev1.Node) *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{
		ObjectMeta: metav1.ObjectMeta{
			Name:   node.Name,
			Labels: maps.Clone(node.Labels),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       node.Name,
				UID:        node.UID,
			}},
		},
		Spec: ciliumv2.NodeSpec{InstanceID: n.InstanceID, IPAM: n.IPAM},
	}
	if n.InternalIP != "" {
		cn.Spec.Addresses = []ciliumv2.NodeAddress{{Type: addressing.NodeInternalIP, IP: n.InternalIP}}
	}
	return cn
}

// CreateNode registers a node the way it joins a cluster running Cilium:
// the Node (providerID, zone and instance-type labels), then the CiliumNode
// named after it, owned by it, with spec.instance-id when known and the
// given spec.ipam knobs. Either object already existing is no error.
func CreateNode(ctx context.Context, c client.Client, spec NodeSpec) error {
	if spec.Name == "" {
		return errors.New("node spec without a name")
	}
	node := spec.node()
	if err := c.Create(ctx, node); apierrors.IsAlreadyExists(err) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return fmt.Errorf("reading node %s, %w", spec.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("creating node %s, %w", spec.Name, err)
	}
	if err := c.Create(ctx, spec.ciliumNode(node)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CiliumNode %s, %w", spec.Name, err)
	}
	return nil
}

// CreateNodes creates the nodes with at most parallel creations at once
// and returns every error, joined.
func CreateNodes(ctx context.Context, c client.Client, specs []NodeSpec, parallel int) error {
	parallel = max(1, parallel)
	sem := make(chan struct{}, parallel)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, spec := range specs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := CreateNode(ctx, c, spec); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DeleteNode deletes the CiliumNode and the Node, as when the instance is
// terminated. Without a garbage collector (a bare apiserver) the owner
// reference does not remove the CiliumNode, so both are deleted. Objects
// already gone are no error.
func DeleteNode(ctx context.Context, c client.Client, name string) error {
	meta := metav1.ObjectMeta{Name: name}
	if err := c.Delete(ctx, &ciliumv2.CiliumNode{ObjectMeta: meta}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting CiliumNode %s, %w", name, err)
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: meta}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s, %w", name, err)
	}
	return nil
}
