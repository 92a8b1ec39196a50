package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestAgentDownNoAddressReachesThePool: m5.large, pre-allocate 4, the
// node's enipam-agent down from the start. EC2 assigns the addresses once,
// but none enters the pool: an AwaitingRouting event and the operator-
// status say why, and no second Assign is made for them. Once the agent
// reports them routed, the pool fills with exactly those addresses.
func TestAgentDownNoAddressReachesThePool(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.agents.setDown("node-down", true)
	r.startOperator(r.options())
	r.addNode("node-down", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})

	ev := r.waitEvent("node-down", "AwaitingRouting")
	if !strings.Contains(ev.Note, "enipam-agent") {
		t.Errorf("event note %q does not name the agent", ev.Note)
	}
	cn := r.waitNode("node-down", 20*time.Second, "operator-status naming the wait", func(cn *ciliumv2.CiliumNode) bool {
		return strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "wait to enter the pool")
	})
	if len(cn.Spec.IPAM.Pool) != 0 {
		t.Fatalf("pool has %d addresses although the agent routed none", len(cn.Spec.IPAM.Pool))
	}
	if got := r.calls("AssignPrivateIpAddresses"); got != 1 {
		t.Errorf("AssignPrivateIpAddresses calls = %d, want 1 (waiting addresses count as on their way)", got)
	}

	r.agents.setDown("node-down", false)
	cn = r.waitNode("node-down", 20*time.Second, "pool filled once routed", func(cn *ciliumv2.CiliumNode) bool {
		return freeIPs(cn) >= 4 && cn.Status.IPAM.OperatorStatus.Error == ""
	})
	nr := r.routing("node-down")
	for ip, e := range cn.Spec.IPAM.Pool {
		if !nr.Status.Routes(e.Resource, ip) {
			t.Errorf("pool IP %s on %s was never reported routed", ip, e.Resource)
		}
	}
	if got := r.calls("AssignPrivateIpAddresses"); got != 1 {
		t.Errorf("AssignPrivateIpAddresses calls = %d, want 1", got)
	}
}

// TestPoolHealsFromEC2: m5.large, pre-allocate 4. Two things happen behind
// the operator's back: (1) a `released` address is left in the pool, as a
// spec write lost after the status write would leave it; (2) someone
// unassigns a free pool address in EC2. The first leaves the pool at once;
// the second is marked for release once the resync shows it gone and the
// grace passed, and leaves through the handshake. Nothing else moves.
func TestPoolHealsFromEC2(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.startOperator(r.options())
	r.addNode("node-heal", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	cn := r.waitNode("node-heal", 20*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	var ips []string
	for ip := range cn.Spec.IPAM.Pool {
		ips = append(ips, ip)
	}
	lost, stolen := ips[0], ips[1]
	eniID := cn.Spec.IPAM.Pool[stolen].Resource
	for _, ip := range []string{lost, stolen} {
		if _, err := r.sim.State().UnassignPrivateIpAddresses(ec2sim.UnassignPrivateIpAddressesRequest{
			NetworkInterfaceID: eniID, PrivateIPAddresses: []string{ip},
		}); err != nil {
			t.Fatal(err)
		}
	}
	r.agentUpdate("node-heal", func(cn *ciliumv2.CiliumNode) {
		if cn.Status.IPAM.ReleaseIPs == nil {
			cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
		}
		cn.Status.IPAM.ReleaseIPs[lost] = ipamoption.IPAMReleased
	})
	r.waitNode("node-heal", 20*time.Second, "the released address out of the pool", func(cn *ciliumv2.CiliumNode) bool {
		_, in := cn.Spec.IPAM.Pool[lost]
		return !in
	})
	r.waitNode("node-heal", 30*time.Second, "the stolen address marked", func(cn *ciliumv2.CiliumNode) bool {
		return cn.Status.IPAM.ReleaseIPs[stolen] == ipamoption.IPAMMarkForRelease
	})
	r.agentUpdate("node-heal", func(cn *ciliumv2.CiliumNode) { cn.Status.IPAM.ReleaseIPs[stolen] = ipamoption.IPAMReadyForRelease })
	cn = r.waitNode("node-heal", 20*time.Second, "the stolen address out of the pool", func(cn *ciliumv2.CiliumNode) bool {
		_, in := cn.Spec.IPAM.Pool[stolen]
		return !in && cn.Status.IPAM.ReleaseIPs[stolen] == ipamoption.IPAMReleased
	})
	onENI := map[string]bool{}
	attached, _ := r.enisOf("i-0a000000000000001")
	for _, e := range attached {
		for _, a := range e.PrivateIPAddresses {
			onENI[a.PrivateIPAddress] = true
		}
	}
	for ip := range cn.Spec.IPAM.Pool {
		if _, leaving := cn.Status.IPAM.ReleaseIPs[ip]; !leaving && !onENI[ip] {
			t.Errorf("free pool IP %s is not on the instance's ENIs in EC2", ip)
		}
	}
}

// TestReplacedInstanceResetsThePool: a node name reused by a new instance.
// The Node's providerID now names i-...3 while the CiliumNode still says
// i-...1: the pool and ENI status are reset with an InstanceReplaced
// event, and every pool address lies on the new instance's ENIs.
func TestReplacedInstanceResetsThePool(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.startOperator(r.options())
	r.addNode("node-reused", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-reused", 20*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })

	// A providerID cannot change: the old Node goes and a new one of the
	// same name registers before anything collected the CiliumNode.
	if err := r.c.Delete(r.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-reused"}}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-reused"},
			Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0a000000000000003"},
		}
		return r.c.Create(ctx, node) == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.waitEvent("node-reused", "InstanceReplaced")
	cn := r.waitNode("node-reused", 20*time.Second, "4 free on the new instance", func(cn *ciliumv2.CiliumNode) bool {
		return cn.Spec.InstanceID == "i-0a000000000000003" && freeIPs(cn) >= 4
	})
	attached, _ := r.enisOf("i-0a000000000000003")
	onNew := map[string]bool{}
	for _, e := range attached {
		for _, a := range e.PrivateIPAddresses {
			onNew[a.PrivateIPAddress] = true
		}
	}
	for ip := range cn.Spec.IPAM.Pool {
		if !onNew[ip] {
			t.Errorf("pool IP %s is not on the new instance", ip)
		}
	}
	if nr := r.routing("node-reused"); nr.Spec.InstanceID != "i-0a000000000000003" {
		t.Errorf("NodeRouting names instance %q", nr.Spec.InstanceID)
	}
}

// TestPolicyReachesNodeAfterMetadataWipe: Cilium's agent replaces a
// CiliumNode's labels and annotations on every start. After such a wipe,
// an ENIPolicy change of firstInterfaceIndex still reaches the node's
// NodeRouting, and nothing is written into spec.eni.
func TestPolicyReachesNodeAfterMetadataWipe(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.startOperator(r.options())
	p := secondaryPolicy()
	if err := r.c.Create(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	r.addNode("node-wipe", "i-0a000000000000002", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-wipe", 30*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	// m5.xlarge: 4 ENIs × 15 addresses; under first index 1, three ENIs
	// of 14 pod addresses each.
	if nr := r.routing("node-wipe"); nr.Spec.FirstInterfaceIndex != 1 || nr.Spec.Capacity == nil ||
		nr.Spec.Capacity.MaxIPs != 42 || !nr.Spec.Capacity.CanGrow || nr.Spec.Capacity.AvailabilityZone != "us-east-1a" {
		t.Fatalf("NodeRouting spec %+v, capacity %+v; want first index 1 and 42 addresses at most", nr.Spec, nr.Spec.Capacity)
	}
	// The agent's full Update: labels from the Node, annotations only
	// cilium.io ones (none here).
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cn := r.node("node-wipe")
		cn.Annotations = nil
		cn.Labels = map[string]string{"pool": "secondary"}
		return r.c.Update(ctx, cn) == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		pol := &enipamv1alpha1.ENIPolicy{}
		if err := r.c.Get(ctx, client.ObjectKey{Name: p.Name}, pol); err != nil {
			return false, err
		}
		pol.Spec.FirstInterfaceIndex = i32(2)
		return r.c.Update(ctx, pol) == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		nr := r.routing("node-wipe")
		return nr.Spec.FirstInterfaceIndex == 2 && nr.Spec.Capacity != nil && nr.Spec.Capacity.MaxIPs == 28, nil
	})
	if err != nil {
		nr := r.routing("node-wipe")
		t.Fatalf("NodeRouting first index %d, capacity %+v; want the changed policy's 2 and 28 addresses at most", nr.Spec.FirstInterfaceIndex, nr.Spec.Capacity)
	}
	if cn := r.node("node-wipe"); cn.Spec.ENI.FirstInterfaceIndex != nil || len(cn.Annotations) != 0 {
		t.Errorf("operator state in the CiliumNode: spec.eni first index %v, annotations %v", cn.Spec.ENI.FirstInterfaceIndex, cn.Annotations)
	}
}
