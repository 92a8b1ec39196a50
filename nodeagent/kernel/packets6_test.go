package kernel_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// These tests send real IPv6 packets through the network of packets_test.go,
// made dual-stack:
//
//	pod-a 2001:db8:2::10          ─┐                      ┌ gw1 2001:db8:2::1/64, fe80:ec2::1 ┐
//	pod-b 2001:db8:2:0:b::5       ─┼ node ── eth1 (eni-a) ─┘                                   │ vpc: 2001:db8:9::9 (a VPC
//	pod-p 2001:db8:1:0:a::20      ─┘      ── eth0 (primary) ─ gw0 2001:db8:1::1/64, fe80:ec2::1 ┘ peer), 2600::8 (the internet)
//	                               2001:db8:1::10/64, default via fe80:ec2::1 (as the RA leaves it)
//
// pod-a holds an address of eni-a, pod-b one of eni-a's delegated /80
// prefix, pod-p one of the primary ENI's /80 prefix (the VPC CNI's IPv6
// mode). IPv6 has no rp_filter; the vpc namespace drops what EC2's
// source/destination check drops with a blackhole rule per link for the
// other subnet's sources.

const (
	podA6     = "2001:db8:2::10"
	podB6     = "2001:db8:2:0:b::5"
	podP6     = "2001:db8:1:0:a::20"
	prefixB6  = "2001:db8:2:0:b::/80"
	prefixP6  = "2001:db8:1:0:a::/80"
	vpcPeer6  = "2001:db8:9::9"
	internet6 = "2600::8"
	vpcRouter = "fe80:ec2::1"
)

// newVPCNet6 is newVPCNet with IPv6 on every part.
func newVPCNet6(t *testing.T) *vpcNet {
	t.Helper()
	n := newVPCNet(t)
	node, vpc := n.node, n.vpc
	gw0MAC, gw1MAC := vpc.MAC(t, "gw0"), vpc.MAC(t, "gw1")

	vpc.AddAddr(t, "gw0", "2001:db8:1::1/64")
	vpc.AddAddr(t, "gw0", vpcRouter+"/64")
	vpc.AddAddr(t, "gw1", "2001:db8:2::1/64")
	vpc.AddAddr(t, "gw1", vpcRouter+"/64")
	vpc.AddAddr(t, "lo", vpcPeer6+"/128")
	vpc.AddAddr(t, "lo", internet6+"/128")
	vpc.SetSysctl(t, "net/ipv6/conf/all/forwarding", "1")
	vpc.DropFrom(t, "gw0", "2001:db8:2::/64")
	vpc.DropFrom(t, "gw1", "2001:db8:1::/64")
	vpc.Serve(t, "[::]:80", "vpc6")
	for _, ip := range []string{"2001:db8:1::10", podP6} {
		vpc.AddNeighbor(t, "gw0", ip, mac(macPrimary))
	}
	for _, ip := range []string{podA6, podB6} {
		vpc.AddNeighbor(t, "gw1", ip, mac(macENIA))
	}

	node.AddAddr(t, "eth0", "2001:db8:1::10/64")
	node.AddRoute(t, "::/0", vpcRouter, "eth0")
	node.AddNeighbor(t, "eth0", vpcRouter, gw0MAC)
	node.AddNeighbor(t, "eth1", vpcRouter, gw1MAC)
	node.SetSysctl(t, "net/ipv6/conf/all/forwarding", "1")
	kerneltest.ConnectPod6(t, node, "lxca", n.podA, podA6)
	kerneltest.ConnectPod6(t, node, "lxcb", n.podB, podB6)
	kerneltest.ConnectPod6(t, node, "lxcp", n.podP, podP6)
	return n
}

// routingNode6 is routingNode with the IPv6 addresses: pod-a's address
// and pod-b's prefix on eni-a, pod-p's prefix on the primary ENI.
func (n *vpcNet) routingNode6() routing.Node {
	node := n.routingNode()
	node.ENIs[0].Prefixes = []netip.Prefix{netip.MustParsePrefix(prefixP6)}
	node.ENIs[1].IPs = append(node.ENIs[1].IPs, netip.MustParseAddr(podA6))
	node.ENIs[1].Prefixes = []netip.Prefix{netip.MustParsePrefix(prefixB6)}
	return node
}

func hostPort(ip string) string { return "[" + ip + "]:80" }

// ownedRules6 reads, straight through netlink, the IPv6 rules carrying
// enipam's protocol.
func ownedRules6(t *testing.T, ns *kerneltest.Namespace) []string {
	t.Helper()
	rules, err := ns.Handle.RuleList(netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rules {
		if r.Protocol == routing.DefaultProtocol {
			out = append(out, ruleString(r))
		}
	}
	slices.Sort(out)
	return out
}

// ownedRoutes6 reads, straight through netlink, the IPv6 routes carrying
// enipam's protocol, in every table.
func ownedRoutes6(t *testing.T, ns *kerneltest.Namespace) []string {
	t.Helper()
	routes, err := ns.Handle.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		if int(r.Protocol) == routing.DefaultProtocol {
			out = append(out, r.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestIPv6PodAddressOnSecondaryENIConnectsThroughIt: before the agent's
// converge, pod-a's IPv6 connection to a VPC peer leaves by eth0 (the
// main table's default route) and the VPC drops it. After it, pod-a's
// address and pod-b's prefix on eni-a reach the VPC peer and the
// internet through eth1, by table 11 and its default route via the VPC
// router fe80:ec2::1; pod-p, on the primary ENI's prefix, still uses the
// main table and eth0, and that prefix got no rule and no table. The
// report lists all three as routed, and a second converge writes nothing.
func TestIPv6PodAddressOnSecondaryENIConnectsThroughIt(t *testing.T) {
	n := newVPCNet6(t)
	if _, err := n.podA.Fetch("", hostPort(vpcPeer6), 300*time.Millisecond); err == nil {
		t.Fatal("pod-a connected before any routing: the network does not check sources")
	}
	if !waitSaw(n.gw0, podA6, vpcPeer6) {
		t.Fatal("before routing, pod-a's packets did not even leave by eth0")
	}

	res := n.converge(t, routing.DefaultConfig(), n.routingNode6())
	for _, pod := range []struct {
		ns  *kerneltest.Namespace
		src string
	}{{n.podA, podA6}, {n.podB, podB6}} {
		for _, dst := range []string{vpcPeer6, internet6} {
			if got := fetch(t, pod.ns, "", hostPort(dst)); got != "vpc6" {
				t.Errorf("%s to %s: %q", pod.src, dst, got)
			}
			if !waitSaw(n.gw1, pod.src, dst) {
				t.Errorf("%s's packets to %s did not arrive by eth1", pod.src, dst)
			}
		}
	}
	if got := fetch(t, n.podP, "", hostPort(vpcPeer6)); got != "vpc6" {
		t.Errorf("pod-p: %q", got)
	}
	if !waitSaw(n.gw0, podP6, vpcPeer6) || n.gw1.Saw(podP6, vpcPeer6) {
		t.Error("pod-p's packets did not arrive by eth0 alone")
	}

	wantRules := []string{
		"111: from 2001:db8:2:0:b::/80 lookup 11 proto 213",
		"111: from 2001:db8:2::10/128 lookup 11 proto 213",
		"20: to 2001:db8:2:0:b::/80 lookup 254 proto 213",
		"20: to 2001:db8:2::10/128 lookup 254 proto 213",
	}
	if got := ownedRules6(t, n.node); !slices.Equal(got, wantRules) {
		t.Errorf("IPv6 rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantRules, "\n"))
	}
	for _, r := range ownedRoutes6(t, n.node) {
		if !strings.Contains(r, "Table: 11") {
			t.Errorf("IPv6 route outside eni-a's table: %s", r)
		}
	}
	if got := len(ownedRoutes6(t, n.node)); got != 2 {
		t.Errorf("%d IPv6 routes, want eni-a's two (the router's host route and the default route)", got)
	}
	routed := map[string][]string{}
	for _, e := range res.Routed {
		for _, ip := range e.IPs {
			routed[e.ID] = append(routed[e.ID], ip.String())
		}
		for _, p := range e.Prefixes {
			routed[e.ID] = append(routed[e.ID], p.String())
		}
	}
	if !slices.Contains(routed["eni-primary"], prefixP6) || !slices.Contains(routed["eni-a"], podA6) || !slices.Contains(routed["eni-a"], prefixB6) {
		t.Errorf("routed %v, want the primary prefix, pod-a's address and pod-b's prefix", routed)
	}
	if again := n.converge(t, routing.DefaultConfig(), n.routingNode6()); again.Ops.Writes() != 0 {
		t.Errorf("dual-stack converge in shape wrote %v (plan %+v)", again.Ops, again.Plan)
	}
}

// TestIPv6EgressIgnoresVPCMode: in egress mode vpc (VPC 10.0.0.0/16),
// IPv4 traffic to the internet leaves by eth0 to be masqueraded, but an
// IPv6 address is never masqueraded on AWS: pod-a's IPv6 traffic to the
// internet still leaves by eth1, and gets its answer.
func TestIPv6EgressIgnoresVPCMode(t *testing.T) {
	n := newVPCNet6(t)
	cfg := routing.DefaultConfig()
	cfg.Egress = routing.EgressVPC
	n.converge(t, cfg, n.routingNode6())

	if got := fetch(t, n.podA, "", hostPort(internet6)); got != "vpc6" {
		t.Errorf("pod-a to the internet over IPv6: %q", got)
	}
	if !waitSaw(n.gw1, podA6, internet6) {
		t.Error("pod-a's IPv6 packets to the internet did not arrive by eth1")
	}
	n.podA.SendUDP(t, "", "8.8.8.8:53")
	if !waitSaw(n.gw0, "10.0.2.10", "8.8.8.8") {
		t.Error("pod-a's IPv4 packet to the internet did not leave by eth0")
	}
}

// TestIPv6ReleaseAndCleanupRemoveOnlyIPv6State: pod-a's IPv6 address is
// released: exactly its two rules go and its packets leave by eth0 again.
// Then eni-a loses its prefix too: its two rules and the table's two IPv6
// routes go, the IPv4 table and rules stay. Cleanup then leaves no IPv6
// rule or route of enipam's, and the IPv6 rules the node had before.
func TestIPv6ReleaseAndCleanupRemoveOnlyIPv6State(t *testing.T) {
	n := newVPCNet6(t)
	before, err := n.node.Handle.RuleList(netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	cfg := routing.DefaultConfig()
	node := n.routingNode6()
	n.converge(t, cfg, node)

	node.ENIs[1].IPs = addrs("10.0.2.10", "10.0.2.11")
	res := n.converge(t, cfg, node)
	if res.Ops[routing.OpDelRule] != 2 || res.Ops.Writes() != 2 {
		t.Errorf("release cost %v, want two rule deletes", res.Ops)
	}
	for _, r := range ownedRules6(t, n.node) {
		if strings.Contains(r, podA6+"/") {
			t.Errorf("rule of the released address left: %s", r)
		}
	}
	after := n.vpc.Capture(t, "gw1")
	n.podA.SendUDP(t, "", hostPort(vpcPeer6))
	if !waitSaw(n.gw0, podA6, vpcPeer6) || after.Saw(podA6, vpcPeer6) {
		t.Error("after the release pod-a's packet still left by eth1")
	}

	node.ENIs[1].Prefixes = nil
	res = n.converge(t, cfg, node)
	if res.Ops[routing.OpDelRule] != 2 || res.Ops[routing.OpDelRoute] != 2 || res.Ops.Writes() != 4 {
		t.Errorf("dropping eni-a's IPv6 cost %v, want two rule and two route deletes", res.Ops)
	}
	if r, rt := ownedRules6(t, n.node), ownedRoutes6(t, n.node); len(r) != 0 || len(rt) != 0 {
		t.Errorf("IPv6 state left on an ENI without IPv6 addresses: rules %v, routes %v", r, rt)
	}
	if got := fetch(t, n.podA, "", "10.0.9.9:80"); got != "vpc" {
		t.Errorf("pod-a over IPv4 after its IPv6 left: %q", got)
	}

	n.converge(t, cfg, n.routingNode6())
	if _, err := routing.NewConverger(n.node.Kernel(), cfg).Cleanup(context.Background()); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if r, rt := ownedRules6(t, n.node), ownedRoutes6(t, n.node); len(r) != 0 || len(rt) != 0 {
		t.Errorf("after cleanup: rules %v, routes %v", r, rt)
	}
	left, err := n.node.Handle.RuleList(netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != len(before) {
		t.Errorf("IPv6 rules after cleanup %v, before %v", left, before)
	}
}
