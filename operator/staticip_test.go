package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// allocateEIPs takes n Elastic IPs from ec2sim carrying tags, as a user
// prepares a pool for Cilium's ipam-static-ip-tags.
func (r *rig) allocateEIPs(n int, tags map[string]string) []string {
	r.t.Helper()
	var spec []ec2sim.Tag
	for k, v := range tags {
		spec = append(spec, ec2sim.Tag{Key: k, Value: v})
	}
	var ips []string
	for range n {
		out, err := r.sim.State().AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{{ResourceType: "elastic-ip", Tags: spec}}})
		if err != nil {
			r.t.Fatal(err)
		}
		ips = append(ips, out.PublicIP)
	}
	return ips
}

// associations maps each associated public address to the private
// address and instance EC2 has it on.
func (r *rig) associations() map[string]ec2sim.Address {
	out := map[string]ec2sim.Address{}
	for _, a := range r.dump().Addresses {
		if a.AssociationID != "" {
			out[a.PublicIP] = a
		}
	}
	return out
}

// primaryIP is an instance's primary private address in EC2.
func (r *rig) primaryIP(instanceID string) string {
	for _, in := range r.dump().Instances {
		if in.InstanceID == instanceID {
			return in.PrivateIPAddress
		}
	}
	r.t.Fatalf("no instance %s", instanceID)
	return ""
}

func (r *rig) waitFor(what string, timeout time.Duration, cond func() bool) {
	r.t.Helper()
	if err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		r.t.Fatalf("%s never happened: %v", what, err)
	}
}

var egress = map[string]string{"cilium/static": "egress"}

// TestNodeStaticIPFollowsCiliumsContract: an m5.large and an m5.xlarge
// whose agents run with ipam-static-ip-tags cilium/static=egress (Cilium's
// nodediscovery copies them into spec.ipam.static-ip-tags), three such
// Elastic IPs in the account. Each node gets one on its primary address,
// reported in status.ipam.assigned-static-ip (Cilium's agent waits for
// it in crd mode), with one AssociateAddress each. Deleting a CiliumNode
// releases its association and the NodeRouting's finalizer; a node that
// stops asking for one releases it too; the addresses stay the user's.
func TestNodeStaticIPFollowsCiliumsContract(t *testing.T) {
	r := newRig(t, vpcScenario)
	pool := r.allocateEIPs(3, egress)
	r.startOperator(r.options())
	spec := ipamtypes.IPAMSpec{PreAllocate: 2, StaticIPTags: egress}
	r.addNode("node-eip-1", "i-0a000000000000001", "us-east-1a", nil, spec)
	r.addNode("node-eip-2", "i-0a000000000000002", "us-east-1a", nil, spec)

	got := map[string]string{}
	for _, name := range []string{"node-eip-1", "node-eip-2"} {
		cn := r.waitNode(name, 20*time.Second, "an assigned static IP and a served pool", func(cn *ciliumv2.CiliumNode) bool {
			return cn.Status.IPAM.AssignedStaticIP != "" && freeIPs(cn) >= 2
		})
		got[name] = cn.Status.IPAM.AssignedStaticIP
	}
	if got["node-eip-1"] == got["node-eip-2"] {
		t.Fatalf("both nodes report %s", got["node-eip-1"])
	}
	assoc := r.associations()
	for name, instance := range map[string]string{"node-eip-1": "i-0a000000000000001", "node-eip-2": "i-0a000000000000002"} {
		a, ok := assoc[got[name]]
		if !ok || a.InstanceID != instance || a.PrivateIPAddress != r.primaryIP(instance) {
			t.Errorf("%s: EC2 has %s at %+v, want on %s's primary address %s", name, got[name], a, instance, r.primaryIP(instance))
		}
		nr := r.routing(name)
		if nr.Spec.StaticIP == nil || nr.Spec.StaticIP.PublicIP != got[name] || nr.Spec.StaticIP.AssociationID != a.AssociationID ||
			!controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) {
			t.Errorf("%s: NodeRouting records %+v with finalizers %v", name, nr.Spec.StaticIP, nr.Finalizers)
		}
	}
	if n := r.calls("AssociateAddress"); n != 2 {
		t.Errorf("%d AssociateAddress calls, want 2", n)
	}
	r.waitEvent("node-eip-1", "StaticIPAssigned")

	// The node goes: its association goes, the address stays allocated.
	if err := r.c.Delete(r.ctx, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "node-eip-1"}}); err != nil {
		t.Fatal(err)
	}
	r.waitFor("node-eip-1's association released", 20*time.Second, func() bool {
		_, held := r.associations()[got["node-eip-1"]]
		return !held
	})
	r.waitFor("node-eip-1's NodeRouting without the finalizer", 10*time.Second, func() bool {
		nr := &enipamv1alpha1.NodeRouting{}
		err := r.c.Get(r.ctx, client.ObjectKey{Name: "node-eip-1"}, nr)
		return err == nil && !controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) && nr.Spec.StaticIP == nil
	})
	if n := len(r.dump().Addresses); n != len(pool) {
		t.Errorf("%d Elastic IPs allocated, want the user's %d", n, len(pool))
	}

	// The agent restarts without the option: the address is released and
	// assigned-static-ip cleared.
	cn := r.node("node-eip-2")
	orig := cn.DeepCopy()
	cn.Spec.IPAM.StaticIPTags = nil
	if err := r.c.Patch(r.ctx, cn, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	r.waitNode("node-eip-2", 20*time.Second, "assigned-static-ip cleared", func(cn *ciliumv2.CiliumNode) bool {
		return cn.Status.IPAM.AssignedStaticIP == ""
	})
	// The status is written before the release's calls, the record
	// cleared after them.
	r.waitFor("node-eip-2's record cleared", 10*time.Second, func() bool {
		nr := r.routing("node-eip-2")
		return nr.Spec.StaticIP == nil && len(nr.Finalizers) == 0
	})
	if _, held := r.associations()[got["node-eip-2"]]; held {
		t.Errorf("%s still associated after the node stopped asking", got["node-eip-2"])
	}
	if n := r.calls("DisassociateAddress"); n != 2 {
		t.Errorf("%d DisassociateAddress calls, want 2", n)
	}
}

// TestNodeStaticIPPoolEmpty: two nodes ask for a static IP and the tagged
// pool holds one. One node gets it; the other gets a StaticIPUnavailable
// event and says so in its operator-status, without a retry loop (no
// AssociateAddress, describes bounded by the resync interval), and gets
// an address once the user adds one to the pool. An Elastic IP without
// the tags already on a node's primary address is never replaced
// (StaticIPConflict).
func TestNodeStaticIPPoolEmpty(t *testing.T) {
	r := newRig(t, vpcScenario)
	one := r.allocateEIPs(1, egress)
	other := r.allocateEIPs(1, map[string]string{"team": "web"})
	r.startOperator(r.options())

	// The t3.medium's primary address already has an untagged address.
	st := r.sim.State()
	if _, err := st.AssociateAddress(ec2sim.AssociateAddressRequest{PublicIP: other[0], InstanceID: "i-0a000000000000003"}); err != nil {
		t.Fatal(err)
	}
	spec := ipamtypes.IPAMSpec{PreAllocate: 2, StaticIPTags: egress}
	r.addNode("node-first", "i-0a000000000000001", "us-east-1a", nil, spec)
	r.waitNode("node-first", 20*time.Second, "the one static IP", func(cn *ciliumv2.CiliumNode) bool {
		return cn.Status.IPAM.AssignedStaticIP == one[0]
	})
	r.addNode("node-second", "i-0a000000000000002", "us-east-1a", nil, spec)
	r.addNode("node-taken", "i-0a000000000000003", "us-east-1a", nil, spec)
	ev := r.waitEvent("node-second", "StaticIPUnavailable")
	if !strings.Contains(ev.Note, "cilium/static=egress") {
		t.Errorf("event says %q; want the tags named", ev.Note)
	}
	r.waitNode("node-second", 10*time.Second, "operator-status naming the empty pool", func(cn *ciliumv2.CiliumNode) bool {
		return strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "no free Elastic IP")
	})
	r.waitEvent("node-taken", "StaticIPConflict")
	before := r.calls("DescribeAddresses")
	time.Sleep(6 * time.Second) // more than one resync interval (5 s)
	if n := r.calls("DescribeAddresses") - before; n > 3 {
		t.Errorf("%d DescribeAddresses in 6 s while the pool is empty; want one per resync at most", n)
	}
	if n := r.calls("AssociateAddress"); n != 1 {
		t.Errorf("%d AssociateAddress calls, want 1", n)
	}
	if a := r.associations()[other[0]]; a.InstanceID != "i-0a000000000000003" {
		t.Errorf("the user's address moved: %+v", a)
	}

	added := r.allocateEIPs(1, egress)
	r.waitNode("node-second", 20*time.Second, "the added static IP", func(cn *ciliumv2.CiliumNode) bool {
		return cn.Status.IPAM.AssignedStaticIP == added[0] && cn.Status.IPAM.OperatorStatus.Error == ""
	})
	if cn := r.node("node-taken"); cn.Status.IPAM.AssignedStaticIP != "" {
		t.Errorf("node-taken reports %s", cn.Status.IPAM.AssignedStaticIP)
	}
	seen := map[string]int{}
	for _, a := range r.associations() {
		seen[a.InstanceID]++
	}
	for instance, n := range seen {
		if n > 1 {
			t.Errorf("%s holds %d Elastic IPs", instance, n)
		}
	}
}
