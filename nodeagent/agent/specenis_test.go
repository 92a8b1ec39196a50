package agent_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

// setSpecENIs writes the NodeRouting's spec.enis, as the operator does.
func setSpecENIs(t *testing.T, node string, enis ...enipamv1alpha1.NodeENI) {
	t.Helper()
	ctx := context.Background()
	for range 5 {
		nr := nodeRouting(t, node)
		nr.Spec.ENIs = enis
		if err := env.Client.Update(ctx, nr); err == nil {
			return
		}
	}
	t.Fatal("could not write spec.enis")
}

// TestAgentRoutesTheENIsOfItsNodeRoutingSpec: the whole agent against the
// real apiserver and a network namespace, with the operator telling the
// node's ENIs in the NodeRouting's spec.enis while the CiliumNode's
// status.eni.enis lags (a joining node). The agent routes eni-a from the
// spec alone, its listed addresses before any is pooled, and says
// routesSpecENIs in its report; eni-b, added to the spec later, is routed
// through the NodeRouting's watch (no resync), and unrouted when the
// spec drops it. An entry of the spec wins over a stale status entry of
// the same ENI (an address EC2 no longer shows there gets no rule), and
// an ENI only the status lists (an earlier operator's) is routed too.
func TestAgentRoutesTheENIsOfItsNodeRoutingSpec(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth1", "02:00:00:00:0a:01")
	ns.AddENILink(t, "eth2", "02:00:00:00:0a:02")
	ns.AddENILink(t, "eth3", "02:00:00:00:0a:03")
	// status.eni.enis: eni-a as an earlier write had it (10.0.2.99 since
	// unassigned), and eni-c, which only an earlier operator listed.
	staleA := awsENI("eni-a", 1, "02:00:00:00:0a:01", "10.0.2.0/24")
	staleA.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.2.99"))}
	onlyStatus := awsENI("eni-c", 3, "02:00:00:00:0a:03", "10.0.4.0/24")
	onlyStatus.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.4.10"))}
	cn := createCiliumNode(t, []awstypes.ENI{staleA, onlyStatus}, nil)
	eniA := enipamv1alpha1.NodeENI{ID: "eni-a", MAC: "02:00:00:00:0a:01", Number: 1, SubnetCIDR: "10.0.2.0/24",
		VPCCIDRs: []string{"10.0.0.0/16"}, Addresses: []string{"10.0.2.10", "10.0.2.11"}}
	eniB := enipamv1alpha1.NodeENI{ID: "eni-b", MAC: "02:00:00:00:0a:02", Number: 2, SubnetCIDR: "10.0.3.0/24",
		VPCCIDRs: []string{"10.0.0.0/16"}, Addresses: []string{"10.0.3.10"}}
	setSpecENIs(t, cn.Name, eniA)

	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = time.Hour // eni-b must come through the watch
	a, _ := startAgent(t, cfg, env.Config, ns.Kernel())

	eventually(t, "eni-a's listed addresses routed from spec.enis and reported", func() bool {
		return hasRule(t, ns, "10.0.2.10", 11) && hasRule(t, ns, "10.0.2.11", 11) &&
			reported(t, cn.Name, "eni-a", "10.0.2.10") && reported(t, cn.Name, "eni-a", "10.0.2.11") && a.Ready() == nil
	})
	nr := nodeRouting(t, cn.Name)
	if !nr.Status.RoutesSpecENIs {
		t.Errorf("status.routesSpecENIs is false; the operator would take the agent for an earlier one")
	}
	if hasRule(t, ns, "10.0.2.99", 11) || reported(t, cn.Name, "eni-a", "10.0.2.99") {
		t.Errorf("10.0.2.99, listed on eni-a by the stale status alone, is routed; spec.enis's entry must win")
	}
	eventually(t, "eni-c, listed by status.eni.enis alone, routed", func() bool {
		return hasRule(t, ns, "10.0.4.10", 13) && reported(t, cn.Name, "eni-c", "10.0.4.10")
	})

	setSpecENIs(t, cn.Name, eniA, eniB)
	eventually(t, "eni-b, added to spec.enis, routed and reported", func() bool {
		return hasRule(t, ns, "10.0.3.10", 12) && reported(t, cn.Name, "eni-b", "10.0.3.10")
	})

	setSpecENIs(t, cn.Name, eniA)
	eventually(t, "eni-b, dropped from spec.enis, unrouted", func() bool {
		return !hasRule(t, ns, "10.0.3.10", 12) && !reported(t, cn.Name, "eni-b", "10.0.3.10")
	})
	if !hasRule(t, ns, "10.0.2.10", 11) {
		t.Errorf("eni-a's rule went with eni-b's")
	}
}
