package routing_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/enipam/enipam/nodeagent/routing"
)

// twoENINode is the node of most diff tests: eni-a (device 1, eth1) with
// two IPs and eni-b (device 2, eth2) with one.
func twoENINode() (routing.Node, []routing.Link) {
	node := routing.Node{ENIs: []routing.ENI{
		eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10", "10.0.2.11")),
		eni("eni-b", 2, "02:00:00:00:00:02", "10.0.3.1", withIPs("10.0.3.10")),
	}}
	links := []routing.Link{link(2, "eth0", "02:00:00:00:00:00"), link(3, "eth1", "02:00:00:00:00:01"), link(4, "eth2", "02:00:00:00:00:02")}
	for i := range links {
		links[i].MTU, links[i].Up, links[i].RPFilter = 9001, true, 2
	}
	return node, links
}

// TestDiffNodeInShapePlansNothing: when the kernel already holds exactly
// the desired rules and routes, the plan is empty.
func TestDiffNodeInShapePlansNothing(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(node, links, cfg)
	p := routing.Diff(d, d.Rules, d.Routes, nil, cfg)
	if p.Len() != 0 {
		t.Errorf("plan for a node in shape: %+v", p)
	}
}

// TestDiffOneNewPoolIPCostsItsTwoRules: the operator adds one IP to eni-b;
// the plan is its egress and ingress rule and nothing else, however many
// rules the node already has.
func TestDiffOneNewPoolIPCostsItsTwoRules(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	before := routing.ComputeDesired(node, links, cfg)
	node.ENIs[1].IPs = append(node.ENIs[1].IPs, netip.MustParseAddr("10.0.3.11"))
	after := routing.ComputeDesired(node, links, cfg)

	p := routing.Diff(after, before.Rules, before.Routes, nil, cfg)
	want := routing.Plan{AddRules: []routing.Rule{egress("10.0.3.11", 12), ingress("10.0.3.11")}}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDiffENILeavesEverythingOfItGoes: eni-b is gone from the CiliumNode
// (detached); its rules and both routes of table 12 are deleted, the
// default route before the link route its gateway needs.
func TestDiffENILeavesEverythingOfItGoes(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	before := routing.ComputeDesired(node, links, cfg)
	node.ENIs = node.ENIs[:1]
	after := routing.ComputeDesired(node, links, cfg)

	p := routing.Diff(after, before.Rules, before.Routes, nil, cfg)
	want := routing.Plan{
		DelRules:  []routing.Rule{egress("10.0.3.10", 12), ingress("10.0.3.10")},
		DelRoutes: []routing.Route{defaultRoute("10.0.3.1", 12, 4), linkRoute("10.0.3.1", 12, 4)},
	}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDiffForeignRulesAndRoutesAreInvisible: rules and routes that look
// like enipam's but carry another protocol (an admin's, Cilium's), and
// enipam-protocol routes outside its tables, are neither deleted nor
// counted as satisfying the desired state.
func TestDiffForeignRulesAndRoutesAreInvisible(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(node, links, cfg)

	foreignRule := egress("10.0.2.10", 11)
	foreignRule.Protocol = 4 // static: same shape as one of ours
	otherTable := routing.Rule{Priority: 111, Src: pfx("10.9.9.9/32"), Table: 300, Protocol: routing.DefaultProtocol}
	mainDefault := routing.Route{Table: routing.MainTable, Dst: pfx("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.0.1"), LinkIndex: 2, Protocol: 3}
	foreignInOurTable := routing.Route{Table: 11, Dst: pfx("192.168.0.0/16"), LinkIndex: 3, Protocol: 4}
	ourProtoInMain := defaultRoute("10.0.2.1", routing.MainTable, 3)

	rules := append([]routing.Rule{foreignRule, otherTable}, d.Rules...)
	routes := append([]routing.Route{mainDefault, foreignInOurTable, ourProtoInMain}, d.Routes...)
	if p := routing.Diff(d, rules, routes, nil, cfg); p.Len() != 0 {
		t.Errorf("plan touches foreign state: %+v", p)
	}

	// Without our own copy, the foreign look-alike does not count: ours is added.
	p := routing.Diff(d, []routing.Rule{foreignRule}, d.Routes, nil, cfg)
	if len(p.AddRules) != len(d.Rules) || len(p.DelRules) != 0 {
		t.Errorf("with only a foreign look-alike: add %d del %d, want add %d del 0", len(p.AddRules), len(p.DelRules), len(d.Rules))
	}
}

// TestDiffDuplicateOwnedRuleIsRemoved: a rule of ours present twice (an
// older agent, a hand-run `ip rule add`) is brought back to one.
func TestDiffDuplicateOwnedRuleIsRemoved(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(node, links, cfg)
	rules := append([]routing.Rule{egress("10.0.2.10", 11)}, d.Rules...)
	p := routing.Diff(d, rules, d.Routes, nil, cfg)
	want := routing.Plan{DelRules: []routing.Rule{egress("10.0.2.10", 11)}}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDiffDriftedRouteIsReplacedInPlace: the default route of table 11
// points at the wrong gateway and the link route went through the wrong
// link; both are rewritten by a replace, not deleted afterwards. A second
// route of ours at another metric is removed.
func TestDiffDriftedRouteIsReplacedInPlace(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(node, links, cfg)

	wrongGW := defaultRoute("10.0.2.254", 11, 3)
	wrongLink := linkRoute("10.0.2.1", 11, 4)
	extra := defaultRoute("10.0.2.1", 11, 3)
	extra.Metric = 100
	routes := []routing.Route{wrongGW, wrongLink, extra, d.Routes[2], d.Routes[3]}

	p := routing.Diff(d, d.Rules, routes, nil, cfg)
	want := routing.Plan{
		ReplaceRoutes: []routing.Route{linkRoute("10.0.2.1", 11, 3), defaultRoute("10.0.2.1", 11, 3)},
		DelRoutes:     []routing.Route{extra},
	}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDiffPriorityChangeMovesRules: after the egress priority is changed
// from 111 to 150 the old rules are recognised as ours and replaced.
func TestDiffPriorityChangeMovesRules(t *testing.T) {
	node, links := twoENINode()
	old := layoutConfig()
	before := routing.ComputeDesired(node, links, old)
	cfg := old
	cfg.EgressPriority = 150
	after := routing.ComputeDesired(node, links, cfg)

	p := routing.Diff(after, before.Rules, before.Routes, nil, cfg)
	if len(p.AddRules) != 3 || len(p.DelRules) != 3 {
		t.Fatalf("add %v del %v, want the 3 egress rules moved", p.AddRules, p.DelRules)
	}
	for _, r := range p.DelRules {
		if r.Priority != 111 {
			t.Errorf("deleting %v, want only priority-111 rules", r)
		}
	}
}

// TestDiffLinkSettingsOnlyWhatDiffers: a link at MTU 1500, down, strict
// rp_filter gets all three writes; a link already right gets none.
func TestDiffLinkSettingsOnlyWhatDiffers(t *testing.T) {
	node, links := twoENINode()
	links[1].MTU, links[1].Up, links[1].RPFilter = 1500, false, 1
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(node, links, cfg)
	p := routing.Diff(d, d.Rules, d.Routes, nil, cfg)
	want := []routing.LinkChange{{ENI: "eni-a", Link: links[1], MTU: 9001, Up: true, RPFilter: 2}}
	if diff := cmp.Diff(want, p.Links, netipEqual); diff != "" {
		t.Errorf("link changes (-want +got):\n%s", diff)
	}
	if p.Len() != 3 {
		t.Errorf("plan costs %d writes, want 3", p.Len())
	}
}

// TestDiffRetainedAddressKeepsItsRulesAndTable: eni-b vanishes from the
// node's ENI list for a moment while its address 10.0.3.10 is still in
// use (retained). Nothing of it is deleted: not its two rules, not the
// routes of table 12 they point at. Once the address is no longer retained
// (it left the pool, or was released), both go.
func TestDiffRetainedAddressKeepsItsRulesAndTable(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	before := routing.ComputeDesired(node, links, cfg)

	node.ENIs = node.ENIs[:1]
	node.Retain = []netip.Prefix{pfx("10.0.3.10/32")}
	p := routing.Diff(routing.ComputeDesired(node, links, cfg), before.Rules, before.Routes, nil, cfg)
	if p.Len() != 0 {
		t.Errorf("plan while 10.0.3.10 is retained: %+v, want nothing", p)
	}

	node.Retain = nil
	p = routing.Diff(routing.ComputeDesired(node, links, cfg), before.Rules, before.Routes, nil, cfg)
	want := routing.Plan{
		DelRules:  []routing.Rule{egress("10.0.3.10", 12), ingress("10.0.3.10")},
		DelRoutes: []routing.Route{defaultRoute("10.0.3.1", 12, 4), linkRoute("10.0.3.1", 12, 4)},
	}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan once released (-want +got):\n%s", diff)
	}
}

// TestDiffReleasedAddressRuleGoesOthersStay: one of eni-a's addresses is
// released (it is no longer among the ENI's addresses); exactly its two
// rules are deleted, nothing else.
func TestDiffReleasedAddressRuleGoesOthersStay(t *testing.T) {
	node, links := twoENINode()
	cfg := routing.DefaultConfig()
	before := routing.ComputeDesired(node, links, cfg)
	node.ENIs[0].IPs = node.ENIs[0].IPs[:1]
	p := routing.Diff(routing.ComputeDesired(node, links, cfg), before.Rules, before.Routes, nil, cfg)
	want := routing.Plan{DelRules: []routing.Rule{egress("10.0.2.11", 11), ingress("10.0.2.11")}}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDiffEgressModeChangeRewritesEgressRules: switching from egress mode
// all to vpc replaces each address's catch-all egress rule with its
// per-CIDR rule; ingress rules stay.
func TestDiffEgressModeChangeRewritesEgressRules(t *testing.T) {
	node := routing.Node{ENIs: []routing.ENI{eni("eni-a", 1, "02:00:00:00:00:01", "10.0.2.1", withIPs("10.0.2.10"), withVPC("10.0.0.0/16"))}}
	links := []routing.Link{link(3, "eth1", "02:00:00:00:00:01")}
	all := layoutConfig()
	before := routing.ComputeDesired(node, links, all)
	vpc := all
	vpc.Egress = routing.EgressVPC
	p := routing.Diff(routing.ComputeDesired(node, links, vpc), before.Rules, before.Routes, nil, vpc)
	want := routing.Plan{
		Links:    p.Links,
		AddRules: []routing.Rule{egressTo("10.0.2.10/32", "10.0.0.0/16", 11)},
		DelRules: []routing.Rule{egress("10.0.2.10", 11)},
	}
	if diff := cmp.Diff(want, p, netipEqual); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDiffConnmarkWrittenOnlyWhenItDiffers: the table is written when it
// is absent, differs (the primary link was renamed) or was damaged by hand
// (read back empty), never when it is as wanted; with connmark turned off
// it is deleted along with the fwmark rule.
func TestDiffConnmarkWrittenOnlyWhenItDiffers(t *testing.T) {
	links := []routing.Link{link(2, "ens5", "02:00:00:00:00:00")}
	links[0].RPFilter = 2
	node := routing.Node{PrimaryMAC: mustMAC("02:00:00:00:00:00")}
	cfg := routing.DefaultConfig()
	d := routing.ComputeDesired(node, links, cfg)
	want := &routing.Connmark{Primary: "ens5", Mark: 0x80}
	for name, actual := range map[string]*routing.Connmark{"absent": nil, "renamed": {Primary: "eth0", Mark: 0x80}, "damaged": {}} {
		p := routing.Diff(d, d.Rules, nil, actual, cfg)
		if p.Connmark == nil || *p.Connmark.Want != *want || p.Len() != 1 {
			t.Errorf("%s: plan %+v, want one write of %v", name, p, want)
		}
	}
	if p := routing.Diff(d, d.Rules, nil, want, cfg); p.Len() != 0 {
		t.Errorf("in shape: plan %+v", p)
	}

	off := layoutConfig()
	p := routing.Diff(routing.ComputeDesired(node, links, off), d.Rules, nil, want, off)
	if p.Connmark == nil || p.Connmark.Want != nil || len(p.DelRules) != 1 || p.DelRules[0] != fwmark() {
		t.Errorf("connmark off: plan %+v, want the table and the fwmark rule deleted", p)
	}
}
