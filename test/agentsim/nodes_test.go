package agentsim_test

import (
	"context"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
)

// TestCreateNodeRegistersANodeAsKubeletAndCiliumDo: an m5.xlarge instance
// in us-west-2b with pre-allocate 8. The Node carries providerID
// aws:///us-west-2b/<instance> and the zone, region and instance-type
// labels; the CiliumNode of the same name is owned by the Node, carries its
// labels, the instance ID and the knob, and no pool. Creating it again is
// no error; DeleteNode removes both.
func TestCreateNodeRegistersANodeAsKubeletAndCiliumDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := nodeName(t, "a")
	spec := agentsim.NodeSpec{
		Name:             name,
		InstanceID:       "i-0abc",
		AvailabilityZone: "us-west-2b",
		InstanceType:     "m5.xlarge",
		InternalIP:       "10.11.0.5",
		Labels:           map[string]string{"pool": "general"},
		IPAM:             ipamtypes.IPAMSpec{PreAllocate: 8},
	}
	if err := agentsim.CreateNode(ctx, env.Client, spec); err != nil {
		t.Fatal(err)
	}
	if err := agentsim.CreateNode(ctx, env.Client, spec); err != nil {
		t.Fatalf("creating the node again: %v", err)
	}

	node := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != "aws:///us-west-2b/i-0abc" {
		t.Errorf("providerID %q", node.Spec.ProviderID)
	}
	for k, v := range map[string]string{
		corev1.LabelTopologyZone:       "us-west-2b",
		corev1.LabelTopologyRegion:     "us-west-2",
		corev1.LabelInstanceTypeStable: "m5.xlarge",
		corev1.LabelHostname:           name,
		"pool":                         "general",
	} {
		if node.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, node.Labels[k], v)
		}
	}

	cn := getCN(t, name)
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].Kind != "Node" || cn.OwnerReferences[0].UID != node.UID {
		t.Errorf("owner references %+v, want the Node %s", cn.OwnerReferences, node.UID)
	}
	if cn.Spec.InstanceID != "i-0abc" || cn.Spec.IPAM.PreAllocate != 8 || len(cn.Spec.IPAM.Pool) != 0 {
		t.Errorf("spec: instance %q, pre-allocate %d, pool %v", cn.Spec.InstanceID, cn.Spec.IPAM.PreAllocate, cn.Spec.IPAM.Pool)
	}
	if cn.Labels[corev1.LabelTopologyZone] != "us-west-2b" {
		t.Errorf("CiliumNode labels %v lack the Node's", cn.Labels)
	}
	if len(cn.Spec.Addresses) != 1 || cn.Spec.Addresses[0].IP != "10.11.0.5" {
		t.Errorf("addresses %v, want the InternalIP", cn.Spec.Addresses)
	}

	if err := agentsim.DeleteNode(ctx, env.Client, name); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &ciliumv2.CiliumNode{}); !apierrors.IsNotFound(err) {
		t.Errorf("CiliumNode after DeleteNode: %v, want not found", err)
	}
}
