package operator_test

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestNodeRoutingOfAnEarlierNodeIsTakenOver: a node deleted and
// registered again under its name before the garbage collector ran finds
// the NodeRouting of its earlier CiliumNode, owned by that one's UID. The
// operator makes the new CiliumNode its owner (keeping other owners), so
// the garbage collector does not delete it from under the new node, its
// capacity report with it (the extender then refuses the node until the
// NodeRouting is back, and kube-scheduler retries only on a cluster
// event).
func TestNodeRoutingOfAnEarlierNodeIsTakenOver(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.startOperator(r.options())
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "11111111-1111-1111-1111-111111111111"}
	stale := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "node-again", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: "node-again", UID: "00000000-0000-0000-0000-000000000000"}, other,
	}}}
	if err := r.c.Create(r.ctx, stale); err != nil {
		t.Fatal(err)
	}
	r.addNode("node-again", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	cn := r.node("node-again")
	var last []metav1.OwnerReference
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		nr := &enipamv1alpha1.NodeRouting{}
		if err := r.c.Get(ctx, client.ObjectKey{Name: "node-again"}, nr); err != nil {
			return false, nil
		}
		last = nr.OwnerReferences
		var mine, kept int
		for _, o := range nr.OwnerReferences {
			switch {
			case o.Kind == "CiliumNode" && o.UID == cn.UID:
				mine++
			case o.UID == other.UID:
				kept++
			case o.Kind == "CiliumNode":
				return false, nil
			}
		}
		return mine == 1 && kept == 1 && nr.Spec.InstanceID == "i-0a000000000000001", nil
	})
	if err != nil {
		t.Fatalf("NodeRouting owners %+v, want the new CiliumNode (%s) and the ConfigMap", last, cn.UID)
	}
}
