package routing_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
)

// TestDesiredTwoENIsGetTablesAndRulesAsSpecified: two secondary ENIs
// (device 1 on 10.0.2.0/24, device 2 on 10.0.3.0/24) with two and one pool
// IPs, default config. Each gets table 10+n with its gateway's link route
// and default route, each IP an egress rule into that table and an ingress
// rule into main, and each link MTU 9001 and loose rp_filter. The
// connmark rule (on by default) closes the list.
func TestDesiredTwoENIsGetTablesAndRulesAsSpecified(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-b", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.11", "10.0.2.10")),
	}}
	links := []routing.Link{link(1, "lo", "00:00:00:00:00:00"), link(2, "eth0", "02:00:00:00:00:00"), link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02")}

	d := routing.ComputeDesired(node, links, routing.DefaultConfig())

	wantRoutes := []routing.Route{
		linkRoute("10.0.2.1", 11, 3), defaultRoute("10.0.2.1", 11, 3),
		linkRoute("10.0.3.1", 12, 4), defaultRoute("10.0.3.1", 12, 4),
	}
	if diff := cmp.Diff(wantRoutes, d.Routes, netipEqual); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantRules := []routing.Rule{
		egress("10.0.2.10", 11), ingress("10.0.2.10"),
		egress("10.0.2.11", 11), ingress("10.0.2.11"),
		egress("10.0.3.10", 12), ingress("10.0.3.10"),
		fwmark(),
	}
	if diff := cmp.Diff(wantRules, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(d.Links) != 2 || d.Links[0].Link.Name != "eth1" || d.Links[1].Link.Name != "eth2" {
		t.Fatalf("links = %+v, want eth1 and eth2", d.Links)
	}
	for _, w := range d.Links {
		if w.MTU != 9001 || w.RPFilter != routing.RPFilterLoose {
			t.Errorf("link %s wants MTU %d rp_filter %d, want 9001 and 2", w.Link.Name, w.MTU, w.RPFilter)
		}
	}
	if len(d.Missing) != 0 || len(d.Problems) != 0 {
		t.Errorf("missing %v, problems %v; want none", d.Missing, d.Problems)
	}
}

// TestDesiredLinkNotYetVisibleIsMissingAndUnrouted: an ENI whose MAC no
// link carries (attached in EC2, not yet seen by the kernel, or gone for a
// moment) is reported missing and gets neither routes nor rules of its
// own, but its address is retained: whatever rule it already has stays.
// The ENI next to it is routed normally.
func TestDesiredLinkNotYetVisibleIsMissingAndUnrouted(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10")),
		eni("eni-late", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
	}}
	d := routing.ComputeDesired(node, []routing.Link{link(3, "eth1", "02:00:00:00:00:01")}, layoutConfig())

	if len(d.Missing) != 1 || d.Missing[0].ID != "eni-late" {
		t.Fatalf("missing = %v, want eni-late", d.Missing)
	}
	for _, r := range d.Rules {
		if r.Table == 12 || r.Src == pfx("10.0.3.10/32") || r.Dst == pfx("10.0.3.10/32") {
			t.Errorf("rule %v for the ENI without link", r)
		}
	}
	if len(d.Routes) != 2 || len(d.Rules) != 2 {
		t.Errorf("got %d routes and %d rules, want 2 and 2 for eni-a alone", len(d.Routes), len(d.Rules))
	}
	if diff := cmp.Diff([]netip.Prefix{pfx("10.0.3.10/32")}, d.Retain, netipEqual); diff != "" {
		t.Errorf("retained (-want +got):\n%s", diff)
	}
}

// TestDesiredIngressPriorityZeroInstallsNoIngressRules: ingress rules are
// optional; priority 0 turns them off.
func TestDesiredIngressPriorityZeroInstallsNoIngressRules(t *testing.T) {
	cfg := layoutConfig()
	cfg.IngressPriority = 0
	node := routing.Node{ENIs: []routing.ENI{eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10", "10.0.2.11"))}}
	d := routing.ComputeDesired(node, []routing.Link{link(3, "eth1", "02:00:00:00:00:01")}, cfg)
	if diff := cmp.Diff([]routing.Rule{egress("10.0.2.10", 11), egress("10.0.2.11", 11)}, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

// TestDesiredUnroutableENIsAreProblemsNotGuesses: an ENI that reuses
// another's device number (multi-card instances), one out of the table
// range, and one without an IPv4 gateway are each reported with a typed
// reason and left alone, their addresses retained; the first ENI of the
// shared number keeps it.
func TestDesiredUnroutableENIsAreProblemsNotGuesses(t *testing.T) {
	noGW := eni("eni-nogw", 4, "02:00:00:00:00:04", "fd00::1")
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1"),
		eni("eni-b", 1, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
		eni("eni-big", routing.MaxENINumber+1, "02:00:00:00:00:03", "10.0.4.1"),
		noGW,
	}}
	links := []routing.Link{link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02"), link(5, "eth3", "02:00:00:00:00:03"), link(6, "eth4", "02:00:00:00:00:04")}
	d := routing.ComputeDesired(node, links, routing.DefaultConfig())

	want := map[string]error{"eni-b": routing.ErrENINumberConflict, "eni-big": routing.ErrENINumber, "eni-nogw": routing.ErrNoGateway}
	if len(d.Problems) != len(want) {
		t.Fatalf("problems = %v, want %d", d.Problems, len(want))
	}
	for _, p := range d.Problems {
		var e *routing.ENIError
		if !errors.As(p, &e) || !errors.Is(p, want[e.ENI]) {
			t.Errorf("problem %v: want %v for its ENI", p, want[e.ENI])
		}
	}
	if len(d.Links) != 1 || d.Links[0].ENI != "eni-a" {
		t.Errorf("routed links = %+v, want eni-a alone", d.Links)
	}
	if !slices.Contains(d.Retain, pfx("10.0.3.10/32")) {
		t.Errorf("retained %v, want eni-b's 10.0.3.10", d.Retain)
	}
}

// TestDesiredSharedMACPicksLowestIndex: when two links carry the ENI's MAC
// (a bond over its slave, a VLAN on it), the choice is stable: the lowest
// ifindex.
func TestDesiredSharedMACPicksLowestIndex(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1")}}
	links := []routing.Link{link(9, "eth1.100", "02:00:00:00:00:01"), link(3, "eth1", "02:00:00:00:00:01")}
	d := routing.ComputeDesired(node, links, routing.DefaultConfig())
	if len(d.Links) != 1 || d.Links[0].Link.Index != 3 {
		t.Fatalf("links = %+v, want ifindex 3", d.Links)
	}
	if !slices.ContainsFunc(d.Routes, func(r routing.Route) bool { return r.LinkIndex == 3 }) {
		t.Errorf("routes %v do not use ifindex 3", d.Routes)
	}
}

// TestConfigValidateRejectsShadowingPriorities: priorities that would
// shadow the local table, or an ingress rule evaluated after egress, are
// refused.
func TestConfigValidateRejectsShadowingPriorities(t *testing.T) {
	for name, mut := range map[string]func(*routing.Config){
		"egress 0":               func(c *routing.Config) { c.EgressPriority = 0 },
		"egress main":            func(c *routing.Config) { c.EgressPriority = 32766 },
		"ingress after egress":   func(c *routing.Config) { c.IngressPriority = 200 },
		"mtu tiny":               func(c *routing.Config) { c.MTU = 10 },
		"protocol out of range":  func(c *routing.Config) { c.Protocol = 256 },
		"unknown egress mode":    func(c *routing.Config) { c.Egress = "some" },
		"mark of two bits":       func(c *routing.Config) { c.ConnmarkMark = 0x180 },
		"connmark under ingress": func(c *routing.Config) { c.EgressPriority, c.IngressPriority = 21, 20 },
	} {
		cfg := routing.DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
	if err := routing.DefaultConfig().Validate(); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}

// TestDesiredPrimaryENIRoutedWithoutTouchingItsLink: under a policy with
// first interface index 0 the primary ENI (device 0, eth0) carries pod
// addresses. Like Cilium's ENI mode (RoutingInfo.Configure with interface
// number 0) it gets table 10 via its subnet's gateway and the rules of its
// pod addresses, but its link is not among those whose MTU, state or
// rp_filter are set: eth0 is the node's, not enipam's.
func TestDesiredPrimaryENIRoutedWithoutTouchingItsLink(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-primary", 0, "02:00:00:00:00:00", "10.0.1.1", withIPs("10.0.1.20")),
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10")),
	}}
	links := []routing.Link{link(2, "eth0", "02:00:00:00:00:00"), link(3, "eth1", "02:00:00:00:00:01")}
	d := routing.ComputeDesired(node, links, layoutConfig())

	wantRoutes := []routing.Route{
		linkRoute("10.0.1.1", 10, 2), defaultRoute("10.0.1.1", 10, 2),
		linkRoute("10.0.2.1", 11, 3), defaultRoute("10.0.2.1", 11, 3),
	}
	if diff := cmp.Diff(wantRoutes, d.Routes, netipEqual); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	wantRules := []routing.Rule{egress("10.0.1.20", 10), ingress("10.0.1.20"), egress("10.0.2.10", 11), ingress("10.0.2.10")}
	if diff := cmp.Diff(wantRules, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(d.Links) != 1 || d.Links[0].Link.Name != "eth1" {
		t.Errorf("links to set up %+v, want eth1 alone", d.Links)
	}
	if len(d.ENIs) != 2 || d.ENIs[0].Table != 10 {
		t.Errorf("routable ENIs %+v, want the primary (table 10) and eni-a", d.ENIs)
	}
}

// TestDesiredPrefixStandsForItsAddresses: an ENI with a delegated /28
// (10.0.2.16/28) whose addresses are also in the pool, and one secondary
// address outside it. The prefix gets one egress and one ingress rule;
// the addresses inside it get none of their own; the one outside gets its
// own.
func TestDesiredPrefixStandsForItsAddresses(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.17", "10.0.2.40", "10.0.2.18"), withPrefixes("10.0.2.16/28")),
	}}
	d := routing.ComputeDesired(node, []routing.Link{link(3, "eth1", "02:00:00:00:00:01")}, layoutConfig())
	want := []routing.Rule{
		{Priority: 111, Src: pfx("10.0.2.16/28"), Table: 11, Protocol: routing.DefaultProtocol},
		{Priority: 20, Dst: pfx("10.0.2.16/28"), Table: routing.MainTable, Protocol: routing.DefaultProtocol},
		egress("10.0.2.40", 11), ingress("10.0.2.40"),
	}
	if diff := cmp.Diff(want, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if w := d.ENIs[0]; len(w.IPs) != 1 || len(w.Prefixes) != 1 {
		t.Errorf("routed addresses %v and prefixes %v, want 10.0.2.40 and 10.0.2.16/28", w.IPs, w.Prefixes)
	}
}

// TestDesiredEgressVPCRulesPerVPCCIDR: in egress mode vpc each address
// gets one egress rule per VPC CIDR (10.0.0.0/16 and 100.64.0.0/16; the
// 10.0.2.0/24 inside the first is coalesced away, as Cilium's CNI does),
// and the ingress rule as before. An ENI whose VPC CIDRs are unknown is a
// problem, not an ENI routed into the internet, and its address is
// retained.
func TestDesiredEgressVPCRulesPerVPCCIDR(t *testing.T) {
	cfg := layoutConfig()
	cfg.Egress = routing.EgressVPC
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10"), withVPC("10.0.2.0/24", "100.64.0.0/16", "10.0.0.0/16")),
		eni("eni-b", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
	}}
	links := []routing.Link{link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02")}
	d := routing.ComputeDesired(node, links, cfg)
	want := []routing.Rule{
		egressTo("10.0.2.10/32", "10.0.0.0/16", 11), egressTo("10.0.2.10/32", "100.64.0.0/16", 11), ingress("10.0.2.10"),
	}
	if diff := cmp.Diff(want, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(d.Problems) != 1 || !errors.Is(d.Problems[0], routing.ErrNoVPCCIDR) {
		t.Errorf("problems %v, want eni-b without VPC CIDRs", d.Problems)
	}
	if !slices.Contains(d.Retain, pfx("10.0.3.10/32")) {
		t.Errorf("retained %v, want 10.0.3.10", d.Retain)
	}
}

// TestDesiredConnmarkFollowsThePrimaryLink: with connmark on (the
// default) the table is wanted on the link carrying the primary ENI's MAC,
// whatever its name (ens5), with the fwmark rule at 109, Cilium's
// RulePriorityNodeport, and the link's rp_filter loosened if strict (and
// nothing else of it). An unknown primary MAC leaves the table as it is
// and says so; connmark off wants neither table nor rule.
func TestDesiredConnmarkFollowsThePrimaryLink(t *testing.T) {
	links := []routing.Link{link(2, "ens5", "02:00:00:00:00:00")}
	node := routing.Node{PrimaryMAC: mustMAC("02:00:00:00:00:00")}

	d := routing.ComputeDesired(node, links, routing.DefaultConfig())
	if want := (routing.Connmark{Primary: "ens5", Mark: 0x80}); d.Connmark == nil || *d.Connmark != want || d.KeepConnmark {
		t.Errorf("connmark %v keep %v, want %v", d.Connmark, d.KeepConnmark, want)
	}
	if diff := cmp.Diff([]routing.Rule{fwmark()}, d.Rules, netipEqual); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(d.Links) != 1 || !d.Links[0].LoosenOnly || d.Links[0].Link.Name != "ens5" || d.Links[0].RPFilter != 2 {
		t.Errorf("links %+v, want ens5's rp_filter to loosen, nothing else", d.Links)
	}

	node.PrimaryMAC = mustMAC("02:00:00:00:00:99")
	d = routing.ComputeDesired(node, links, routing.DefaultConfig())
	if !d.KeepConnmark || len(d.Problems) != 1 || !errors.Is(d.Problems[0], routing.ErrNoPrimaryLink) {
		t.Errorf("unknown primary link: keep %v problems %v", d.KeepConnmark, d.Problems)
	}

	d = routing.ComputeDesired(routing.Node{PrimaryMAC: mustMAC("02:00:00:00:00:00")}, links, layoutConfig())
	if d.Connmark != nil || d.KeepConnmark || len(d.Rules) != 0 || len(d.Links) != 0 {
		t.Errorf("connmark off: table %v keep %v rules %v, want none", d.Connmark, d.KeepConnmark, d.Rules)
	}
}
