package kernel_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// These tests send real packets. The network of each:
//
//	pod-a 10.0.2.10 ─┐                       ┌ gw1 10.0.2.1/24 ┐
//	pod-b 10.0.2.11 ─┼ node ── eth1 (eni-a) ──┘                 │ vpc: the VPC's router,
//	pod-p 10.0.1.20 ─┘      ── eth0 (primary) ── gw0 10.0.1.1/24 ┘ 10.0.9.9 (a VPC peer) and
//	                         10.0.1.10/24                          8.8.8.8 (the internet) on lo
//
// The vpc namespace runs strict rp_filter on gw0 and gw1: a packet whose
// source lives behind the other interface is dropped, which is what EC2's
// source/destination check does to a packet leaving by an ENI that does
// not hold its source address. So a connection from a pod works only if
// the node sends it out of the ENI its address lives on. The node checks
// reverse paths strictly too (net.ipv4.conf.all.rp_filter=1, as some
// AMIs ship). Pods are wired as Cilium's legacy host routing wires them
// (lxc veths, /32 routes in main).

// vpcNet is the network above, before the agent touched the node.
type vpcNet struct {
	node, vpc        *kerneltest.Namespace
	podA, podB, podP *kerneltest.Namespace
	eth0, eth1       int
	gw0, gw1         *kerneltest.Capture
}

const (
	macPrimary = "02:00:00:00:0a:00"
	macENIA    = "02:00:00:00:0a:01"
)

func newVPCNet(t *testing.T) *vpcNet {
	t.Helper()
	n := &vpcNet{node: kerneltest.New(t), vpc: kerneltest.New(t), podA: kerneltest.New(t), podB: kerneltest.New(t), podP: kerneltest.New(t)}
	var gw0MAC, gw1MAC net.HardwareAddr
	n.eth0, gw0MAC = kerneltest.Wire(t, n.node, "eth0", macPrimary, n.vpc, "gw0")
	n.eth1, gw1MAC = kerneltest.Wire(t, n.node, "eth1", macENIA, n.vpc, "gw1")
	node, vpc := n.node, n.vpc

	// The VPC's router.
	vpc.LinkUp(t, "lo")
	vpc.AddAddr(t, "gw0", "10.0.1.1/24")
	vpc.AddAddr(t, "gw1", "10.0.2.1/24")
	vpc.AddAddr(t, "lo", "10.0.9.9/32")
	vpc.AddAddr(t, "lo", "8.8.8.8/32")
	for _, key := range []string{"net/ipv4/ip_forward", "net/ipv4/conf/gw0/rp_filter", "net/ipv4/conf/gw1/rp_filter"} {
		vpc.SetSysctl(t, key, "1")
	}
	vpc.Serve(t, "0.0.0.0:80", "vpc")
	// EC2's fabric, not ARP, knows where each address lives.
	vpc.AddNeighbor(t, "gw0", "10.0.1.10", mac(macPrimary))
	vpc.AddNeighbor(t, "gw0", "10.0.1.20", mac(macPrimary))
	vpc.AddNeighbor(t, "gw1", "10.0.2.10", mac(macENIA))
	vpc.AddNeighbor(t, "gw1", "10.0.2.11", mac(macENIA))

	// The node: eth0 is up with the node's address and default route, as
	// the OS leaves it; eth1 is a fresh ENI, down, without address.
	node.LinkUp(t, "lo")
	node.LinkUp(t, "eth0")
	node.AddAddr(t, "eth0", "10.0.1.10/24")
	node.AddRoute(t, "0.0.0.0/0", "10.0.1.1", "eth0")
	node.AddNeighbor(t, "eth0", "10.0.1.1", gw0MAC)
	node.AddNeighbor(t, "eth1", "10.0.2.1", gw1MAC)
	node.SetSysctl(t, "net/ipv4/ip_forward", "1")
	node.SetSysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	kerneltest.ConnectPod(t, node, "lxca", n.podA, "10.0.2.10")
	kerneltest.ConnectPod(t, node, "lxcb", n.podB, "10.0.2.11")
	kerneltest.ConnectPod(t, node, "lxcp", n.podP, "10.0.1.20")

	n.gw0, n.gw1 = vpc.Capture(t, "gw0"), vpc.Capture(t, "gw1")
	return n
}

// routingNode is what the agent routes there: the primary ENI (device 0,
// first interface index 0) with pod-p's address, eni-a (device 1) with
// pod-a's and pod-b's, both in VPC 10.0.0.0/16.
func (n *vpcNet) routingNode() routing.Node {
	vpc := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}
	return routing.Node{
		PrimaryMAC: mac(macPrimary),
		ENIs: []routing.ENI{
			{ID: "eni-primary", MAC: mac(macPrimary), Number: 0, Gateway: netip.MustParseAddr("10.0.1.1"), IPs: addrs("10.0.1.20"), VPCCIDRs: vpc},
			{ID: "eni-a", MAC: mac(macENIA), Number: 1, Gateway: netip.MustParseAddr("10.0.2.1"), IPs: addrs("10.0.2.10", "10.0.2.11"), VPCCIDRs: vpc},
		},
	}
}

func (n *vpcNet) converge(t *testing.T, cfg routing.Config, node routing.Node) routing.Result {
	t.Helper()
	res, err := routing.NewConverger(n.node.Kernel(), cfg).Converge(context.Background(), node)
	if err != nil {
		t.Fatalf("converge: %v", err)
	}
	if len(res.Missing) != 0 || len(res.Problems) != 0 {
		t.Fatalf("converge: missing %v, problems %v", res.Missing, res.Problems)
	}
	return res
}

// fetch connects from a pod (or the VPC) and returns the banner, failing
// the test if the connection does not work.
func fetch(t *testing.T, from *kerneltest.Namespace, src, dst string) string {
	t.Helper()
	got, err := from.Fetch(src, dst, 3*time.Second)
	if err != nil {
		t.Fatalf("connecting from %s to %s: %v", from.Name, dst, err)
	}
	return got
}

// waitSaw waits briefly for a capture to see a packet; packets are in
// flight for microseconds, the bound only limits a failing test.
func waitSaw(c *kerneltest.Capture, src, dst string) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c.Saw(src, dst) {
			return true
		}
	}
	return false
}

// TestPodAddressOnSecondaryENIConnectsThroughIt: before the agent's
// converge, a TCP connection from pod-a (10.0.2.10, eni-a's address) to a
// VPC peer leaves by eth0 and is dropped by the source/destination check.
// After it, the connection works, and its packets arrive on the VPC side of
// eth1, for a VPC peer and for the internet alike (egress mode all). pod-p
// on the primary ENI's address (first interface index 0) connects through
// eth0, whose MTU and state the agent left alone (only its strict
// rp_filter is loosened, for the connmark return path).
func TestPodAddressOnSecondaryENIConnectsThroughIt(t *testing.T) {
	n := newVPCNet(t)
	if _, err := n.podA.Fetch("", "10.0.9.9:80", 300*time.Millisecond); err == nil {
		t.Fatal("pod-a connected before any routing: the network does not check sources")
	}
	if !waitSaw(n.gw0, "10.0.2.10", "10.0.9.9") {
		t.Fatal("before routing, pod-a's packets did not even leave by eth0")
	}

	res := n.converge(t, routing.DefaultConfig(), n.routingNode())
	for _, dst := range []string{"10.0.9.9", "8.8.8.8"} {
		if got := fetch(t, n.podA, "", dst+":80"); got != "vpc" {
			t.Errorf("pod-a to %s: %q", dst, got)
		}
		if !waitSaw(n.gw1, "10.0.2.10", dst) {
			t.Errorf("pod-a's packets to %s did not arrive by eth1", dst)
		}
	}
	if got := fetch(t, n.podP, "", "10.0.9.9:80"); got != "vpc" {
		t.Errorf("pod-p: %q", got)
	}
	if !waitSaw(n.gw0, "10.0.1.20", "10.0.9.9") || n.gw1.Saw("10.0.1.20", "10.0.9.9") {
		t.Error("pod-p's packets did not arrive by eth0 alone")
	}
	eth0, err := n.node.Handle.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if eth0.Attrs().MTU != 1500 {
		t.Errorf("eth0 MTU changed to %d", eth0.Attrs().MTU)
	}
	for _, c := range res.Plan.Links {
		if c.ENI == "eni-primary" && (c.MTU != 0 || c.Up || c.RPFilter != 2) {
			t.Errorf("change of eth0 %+v, want its strict rp_filter loosened and nothing else", c)
		}
	}
}

// TestEgressVPCSendsOnlyVPCTrafficByTheENI: in egress mode vpc (VPC
// 10.0.0.0/16), pod-a's traffic to a VPC peer arrives by eth1, its traffic
// to the internet by eth0 (where Cilium would masquerade it), not by eth1.
func TestEgressVPCSendsOnlyVPCTrafficByTheENI(t *testing.T) {
	n := newVPCNet(t)
	cfg := routing.DefaultConfig()
	cfg.Egress = routing.EgressVPC
	n.converge(t, cfg, n.routingNode())

	if got := fetch(t, n.podA, "", "10.0.9.9:80"); got != "vpc" {
		t.Errorf("pod-a to the VPC peer: %q", got)
	}
	if !waitSaw(n.gw1, "10.0.2.10", "10.0.9.9") {
		t.Error("pod-a's packets to the VPC peer did not arrive by eth1")
	}
	n.podA.SendUDP(t, "", "8.8.8.8:53")
	if !waitSaw(n.gw0, "10.0.2.10", "8.8.8.8") {
		t.Error("pod-a's packet to the internet did not leave by eth0")
	}
	if n.gw1.Saw("10.0.2.10", "8.8.8.8") {
		t.Error("pod-a's packet to the internet left by eth1")
	}
}

// TestReleasedAddressLosesItsRules: pod-b's address 10.0.2.11 is released
// (it leaves eni-a's addresses); the converge after deletes exactly its two
// rules, and its packets no longer leave by eth1.
func TestReleasedAddressLosesItsRules(t *testing.T) {
	n := newVPCNet(t)
	node := n.routingNode()
	n.converge(t, routing.DefaultConfig(), node)
	n.podB.SendUDP(t, "", "10.0.9.9:53")
	if !waitSaw(n.gw1, "10.0.2.11", "10.0.9.9") {
		t.Fatal("pod-b's packet did not leave by eth1 while its address was routed")
	}

	node.ENIs[1].IPs = addrs("10.0.2.10")
	res := n.converge(t, routing.DefaultConfig(), node)
	if res.Ops[routing.OpDelRule] != 2 || res.Ops.Writes() != 2 {
		t.Errorf("release cost %v, want two rule deletes", res.Ops)
	}
	for _, r := range ownedRules(t, n.node) {
		if strings.Contains(r, "10.0.2.11") {
			t.Errorf("rule of the released address left: %s", r)
		}
	}
	after := n.vpc.Capture(t, "gw1")
	n.podB.SendUDP(t, "", "10.0.9.9:53")
	if !waitSaw(n.gw0, "10.0.2.11", "10.0.9.9") || after.Saw("10.0.2.11", "10.0.9.9") {
		t.Error("after the release pod-b's packet still left by eth1")
	}
	if got := fetch(t, n.podA, "", "10.0.9.9:80"); got != "vpc" {
		t.Errorf("pod-a after pod-b's release: %q", got)
	}
}

// TestNodePortReplyLeavesByThePrimaryInterface: kube-proxy's DNAT (stood
// in for by an nf_tables nat rule) sends 10.0.1.10:30080, the node's
// address on eth0, to pod-a at 10.0.2.10:8080, as a NodePort service with
// externalTrafficPolicy Local does. With connmark off the agent leaves
// eth0's strict rp_filter alone, and the request dies there: after the
// DNAT its reverse path is pod-a's table, out of eth1. Loosened by hand,
// the request reaches pod-a, but its reply follows its egress rule out of
// eth1 and the VPC drops it. With connmark on the agent loosens eth0 and
// installs the table and the fwmark rule, and the client gets pod-a's
// answer. Turning connmark off removes the table and the rule (eth0's
// rp_filter stays loose: enipam never tightens it).
func TestNodePortReplyLeavesByThePrimaryInterface(t *testing.T) {
	n := newVPCNet(t)
	n.podA.Serve(t, "0.0.0.0:8080", "pod-a")
	if err := kernel.AddDNAT(n.node.Kernel(), netip.MustParseAddrPort("10.0.1.10:30080"), netip.MustParseAddrPort("10.0.2.10:8080")); err != nil {
		t.Fatalf("installing the DNAT: %v", err)
	}
	off := routing.DefaultConfig()
	off.Connmark = false
	on := routing.DefaultConfig()

	n.converge(t, off, n.routingNode())
	if got := n.node.Sysctl(t, "net/ipv4/conf/eth0/rp_filter"); got != "0" {
		t.Errorf("connmark off: eth0 rp_filter %s, want it left at 0", got)
	}
	if _, err := n.vpc.Fetch("10.0.9.9", "10.0.1.10:30080", 500*time.Millisecond); err == nil {
		t.Fatal("NodePort connection worked with strict reverse path checking: the test does not discriminate")
	}
	n.node.SetSysctl(t, "net/ipv4/conf/eth0/rp_filter", "2")
	if _, err := n.vpc.Fetch("10.0.9.9", "10.0.1.10:30080", 500*time.Millisecond); err == nil {
		t.Fatal("NodePort connection worked without the connmark table: the test does not discriminate")
	}
	if !waitSaw(n.gw1, "10.0.1.10", "10.0.9.9") {
		t.Error("without the connmark table the reply did not leave by eth1")
	}
	n.node.SetSysctl(t, "net/ipv4/conf/eth0/rp_filter", "0")

	res := n.converge(t, on, n.routingNode())
	if res.Plan.Connmark == nil || len(res.Plan.AddRules) != 1 || len(res.Plan.Links) != 1 || res.Plan.Links[0].RPFilter != 2 {
		t.Errorf("turning connmark on planned %+v, want the table, the fwmark rule and eth0 loosened", res.Plan)
	}
	if got := n.node.Sysctl(t, "net/ipv4/conf/eth0/rp_filter"); got != "2" {
		t.Errorf("connmark on: eth0 rp_filter %s, want 2", got)
	}
	if got := fetch(t, n.vpc, "10.0.9.9", "10.0.1.10:30080"); got != "pod-a" {
		t.Errorf("NodePort answer %q, want pod-a's", got)
	}
	if !waitSaw(n.gw0, "10.0.1.10", "10.0.9.9") {
		t.Error("the NodePort reply did not arrive by eth0")
	}
	if again := n.converge(t, on, n.routingNode()); again.Ops.Writes() != 0 {
		t.Errorf("converge in shape wrote %v", again.Ops)
	}

	n.converge(t, off, n.routingNode())
	if c, err := n.node.Kernel().Connmark(); c != nil || err != nil {
		t.Errorf("connmark table after turning it off: %v, %v", c, err)
	}
	rules, err := n.node.Handle.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(rules, func(r netlink.Rule) bool { return r.Mark == 0x80 && r.Protocol == routing.DefaultProtocol }) {
		t.Error("fwmark rule left after turning connmark off")
	}
}
