package e2e

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/test/agentsim"
)

// TestNodeStaticIPMakesTheAgentReady: the fleet's six nodes run cilium-agent
// with ipam-static-ip-tags cilium/static=egress, and the account holds six
// such Elastic IPs. Cilium's agent in crd mode waits for
// status.ipam.assigned-static-ip before it serves pods; with the real
// operator every simulated agent becomes ready, each node's address is
// associated with its instance's primary private address in EC2 and no
// address with two, and the pools follow EC2 with no violation.
func TestNodeStaticIPMakesTheAgentReady(t *testing.T) {
	scenario := fleetScenario + `elasticIPs:
- {tags: {cilium/static: egress}}
- {tags: {cilium/static: egress}}
- {tags: {cilium/static: egress}}
- {tags: {cilium/static: egress}}
- {tags: {cilium/static: egress}}
- {tags: {cilium/static: egress}}
elasticIPLimit: 6
`
	w := newWorld(t, scenario)
	w.startOperator("--vpc-id=vpc-0f000000000000001")
	sim, names := w.fleetWith(agentsim.Options{}, func(s *agentsim.NodeSpec) {
		s.IPAM = ipamtypes.IPAMSpec{StaticIPTags: map[string]string{"cilium/static": "egress"}}
	})
	ctx, cancel := context.WithTimeout(w.ctx, 90*time.Second)
	defer cancel()
	if err := sim.WaitReady(ctx, len(names)); err != nil {
		t.Fatalf("agents ready: %v; figures %+v", err, sim.Figures())
	}
	dump, err := w.sim.Admin.Dump(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	primary := map[string]string{}
	for _, in := range dump.Instances {
		primary[in.InstanceID] = in.PrivateIPAddress
	}
	byPublic := map[string]string{}
	perInstance := map[string]int{}
	for _, a := range dump.Addresses {
		if a.AssociationID == "" {
			continue
		}
		if a.PrivateIPAddress != primary[a.InstanceID] {
			t.Errorf("%s is on %s of %s, not its primary address %s", a.PublicIP, a.PrivateIPAddress, a.InstanceID, primary[a.InstanceID])
		}
		byPublic[a.PublicIP] = a.InstanceID
		perInstance[a.InstanceID]++
	}
	for _, name := range names {
		cn := waitNode(t, ctx, name, "assigned-static-ip", func(cn *ciliumv2.CiliumNode) bool { return cn.Status.IPAM.AssignedStaticIP != "" })
		if got := byPublic[cn.Status.IPAM.AssignedStaticIP]; got != cn.Spec.InstanceID {
			t.Errorf("%s reports %s, which EC2 has on %q", name, cn.Status.IPAM.AssignedStaticIP, got)
		}
	}
	for instance, n := range perInstance {
		if n != 1 {
			t.Errorf("%s has %d Elastic IPs", instance, n)
		}
	}
	if len(perInstance) != len(names) {
		t.Errorf("%d instances have a static IP, want %d", len(perInstance), len(names))
	}
	if n := sim.Figures().Violations.Total(); n != 0 {
		t.Fatalf("%d violations: %v", n, sim.Ledger().ViolationDetails())
	}
	w.checkPools(sim)
}
