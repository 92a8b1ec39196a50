package kernel_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// The node of these tests: eth0 is the primary ENI (not managed: the
// policy's first interface index is 1, but the connmark table matches its
// link), eth1 is eni-a (device 1, subnet 10.0.2.0/24) and eth2 eni-b
// (device 2, subnet 10.0.3.0/24).
const (
	macEth0 = "02:00:00:00:00:10"
	macEth1 = "02:00:00:00:00:11"
	macEth2 = "02:00:00:00:00:12"
)

type testNode struct {
	ns   *kerneltest.Namespace
	node routing.Node
	// ifindex of eth0, eth1, eth2.
	eth0, eth1, eth2 int
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	ns := kerneltest.New(t)
	tn := &testNode{ns: ns}
	tn.eth0 = ns.AddENILink(t, "eth0", macEth0)
	tn.eth1 = ns.AddENILink(t, "eth1", macEth1)
	tn.eth2 = ns.AddENILink(t, "eth2", macEth2)
	tn.node = routing.Node{ENIs: []routing.ENI{
		{ID: "eni-a", MAC: mac(macEth1), Number: 1, Gateway: netip.MustParseAddr("10.0.2.1"), IPs: addrs("10.0.2.10", "10.0.2.11")},
		{ID: "eni-b", MAC: mac(macEth2), Number: 2, Gateway: netip.MustParseAddr("10.0.3.1"), IPs: addrs("10.0.3.10")},
	}, PrimaryMAC: mac(macEth0)}
	return tn
}

func (tn *testNode) converge(t *testing.T) routing.Result {
	t.Helper()
	res, err := routing.NewConverger(tn.ns.Kernel(), routing.DefaultConfig()).Converge(context.Background(), tn.node)
	if err != nil {
		t.Fatalf("converge: %v", err)
	}
	return res
}

// ownedRules reads, straight through netlink, the rules carrying enipam's
// protocol, as `ip rule` would print them.
func ownedRules(t *testing.T, ns *kerneltest.Namespace) []string {
	t.Helper()
	rules, err := ns.Handle.RuleList(netlink.FAMILY_V4)
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

func ruleString(r netlink.Rule) string {
	s := fmt.Sprintf("%d:", r.Priority)
	if r.Src != nil {
		s += " from " + r.Src.String()
	}
	if r.Dst != nil {
		s += " to " + r.Dst.String()
	}
	if r.Mask != nil {
		s += fmt.Sprintf(" fwmark %#x/%#x", r.Mark, *r.Mask)
	}
	return s + fmt.Sprintf(" lookup %d proto %d", r.Table, r.Protocol)
}

// tableRoutes reads, straight through netlink, every route of a table.
func tableRoutes(t *testing.T, ns *kerneltest.Namespace, table int) []string {
	t.Helper()
	routes, err := ns.Handle.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		out = append(out, routeString(r))
	}
	slices.Sort(out)
	return out
}

func routeString(r netlink.Route) string {
	dst := "default"
	if r.Dst != nil && r.Dst.String() != "0.0.0.0/0" {
		dst = r.Dst.String()
	}
	s := dst
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	return s + fmt.Sprintf(" dev %d scope %d proto %d", r.LinkIndex, r.Scope, r.Protocol)
}

// TestConvergeInNamespaceLaysOutTablesRulesAndLinks: from a fresh node, one
// converge gives exactly: tables 11 and 12 with the gateway's link route
// and the default route; per pool IP, `from ip/32 lookup 10+n` at 111 and
// `to ip/32 lookup main` at 20, and `fwmark 0x80/0x80 lookup main` at 109,
// all with enipam's protocol; the nf_tables table enipam on eth0; eth1 and
// eth2 at MTU 9001, up, rp_filter 2; eth0 itself untouched.
func TestConvergeInNamespaceLaysOutTablesRulesAndLinks(t *testing.T) {
	tn := newTestNode(t)
	tn.ns.SetSysctl(t, "net/ipv4/conf/eth0/rp_filter", "0")
	tn.ns.SetSysctl(t, "net/ipv4/conf/all/rp_filter", "0")
	tn.converge(t)

	want := []string{
		"109: fwmark 0x80/0x80 lookup 254 proto 213",
		"111: from 10.0.2.10/32 lookup 11 proto 213",
		"111: from 10.0.2.11/32 lookup 11 proto 213",
		"111: from 10.0.3.10/32 lookup 12 proto 213",
		"20: to 10.0.2.10/32 lookup 254 proto 213",
		"20: to 10.0.2.11/32 lookup 254 proto 213",
		"20: to 10.0.3.10/32 lookup 254 proto 213",
	}
	if diff := cmp.Diff(want, ownedRules(t, tn.ns)); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	for table, gw := range map[int]string{11: "10.0.2.1", 12: "10.0.3.1"} {
		dev := map[int]int{11: tn.eth1, 12: tn.eth2}[table]
		want := []string{
			fmt.Sprintf("%s/32 dev %d scope %d proto 213", gw, dev, unix.RT_SCOPE_LINK),
			fmt.Sprintf("default via %s dev %d scope 0 proto 213", gw, dev),
		}
		if diff := cmp.Diff(want, tableRoutes(t, tn.ns, table)); diff != "" {
			t.Errorf("table %d (-want +got):\n%s", table, diff)
		}
	}
	for _, name := range []string{"eth1", "eth2"} {
		l, err := tn.ns.Handle.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MTU != 9001 || l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("%s: MTU %d flags %v, want 9001 and up", name, l.Attrs().MTU, l.Attrs().Flags)
		}
		if got := tn.ns.Sysctl(t, "net/ipv4/conf/"+name+"/rp_filter"); got != "2" {
			t.Errorf("%s rp_filter = %s, want 2", name, got)
		}
	}
	eth0, _ := tn.ns.Handle.LinkByName("eth0")
	if eth0.Attrs().MTU != 1500 || eth0.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("eth0 was touched: MTU %d flags %v", eth0.Attrs().MTU, eth0.Attrs().Flags)
	}
	if got := tn.ns.Sysctl(t, "net/ipv4/conf/eth0/rp_filter"); got != "0" {
		t.Errorf("eth0 rp_filter changed from 0 (off) to %s", got)
	}
	if c, err := tn.ns.Kernel().Connmark(); err != nil || c == nil || *c != (routing.Connmark{Primary: "eth0", Mark: 0x80}) {
		t.Errorf("connmark table = %v, %v; want on eth0 with mark 0x80", c, err)
	}
}

// TestRuleDeletedByHandReturnsOnNextConverge: an operator runs `ip rule del`
// on one of enipam's rules; the next converge puts back that rule alone
// (one write).
func TestRuleDeletedByHandReturnsOnNextConverge(t *testing.T) {
	tn := newTestNode(t)
	tn.converge(t)
	before := ownedRules(t, tn.ns)

	r := netlink.NewRule()
	r.Priority, r.Table = 111, 11
	r.Src = &net.IPNet{IP: net.ParseIP("10.0.2.11").To4(), Mask: net.CIDRMask(32, 32)}
	if err := tn.ns.Handle.RuleDel(r); err != nil {
		t.Fatal(err)
	}
	if got := len(ownedRules(t, tn.ns)); got != len(before)-1 {
		t.Fatalf("after the hand delete %d rules, want %d", got, len(before)-1)
	}

	res := tn.converge(t)
	if diff := cmp.Diff(before, ownedRules(t, tn.ns)); diff != "" {
		t.Errorf("rules after repair (-want +got):\n%s", diff)
	}
	if res.Ops.Writes() != 1 || res.Ops[routing.OpAddRule] != 1 {
		t.Errorf("repair cost %v, want one add_rule", res.Ops)
	}
}

// TestRouteDeletedByHandReturnsOnNextConverge: the default route of table
// 12 is deleted by hand; the next converge restores it.
func TestRouteDeletedByHandReturnsOnNextConverge(t *testing.T) {
	tn := newTestNode(t)
	tn.converge(t)
	before := tableRoutes(t, tn.ns, 12)
	if err := tn.ns.Handle.RouteDel(&netlink.Route{Table: 12, Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Gw: net.ParseIP("10.0.3.1")}); err != nil {
		t.Fatal(err)
	}
	res := tn.converge(t)
	if diff := cmp.Diff(before, tableRoutes(t, tn.ns, 12)); diff != "" {
		t.Errorf("table 12 after repair (-want +got):\n%s", diff)
	}
	if res.Ops.Writes() != 1 {
		t.Errorf("repair cost %v, want one write", res.Ops)
	}
}

// TestENIGoneFromNodeLeavesNothing: eni-b leaves the CiliumNode (its link
// still present, as between the operator's detach and the kernel's
// unplug); table 12 empties and no rule for its IP remains, while eni-a's
// state is intact.
func TestENIGoneFromNodeLeavesNothing(t *testing.T) {
	tn := newTestNode(t)
	tn.converge(t)
	tn.node.ENIs = tn.node.ENIs[:1]
	tn.converge(t)

	if got := tableRoutes(t, tn.ns, 12); len(got) != 0 {
		t.Errorf("table 12 still holds %v", got)
	}
	for _, r := range ownedRules(t, tn.ns) {
		if strings.Contains(r, "10.0.3.10") || strings.Contains(r, "lookup 12") {
			t.Errorf("rule of eni-b left: %s", r)
		}
	}
	if got := len(ownedRules(t, tn.ns)); got != 5 {
		t.Errorf("%d rules left, want eni-a's 4 and the fwmark rule", got)
	}
	if got := len(tableRoutes(t, tn.ns, 11)); got != 2 {
		t.Errorf("table 11 has %d routes, want 2", got)
	}
}

// TestPoolIPLeavingRemovesItsRules: one IP of eni-a is released; exactly
// its two rules are deleted.
func TestPoolIPLeavingRemovesItsRules(t *testing.T) {
	tn := newTestNode(t)
	tn.converge(t)
	tn.node.ENIs[0].IPs = addrs("10.0.2.10")
	res := tn.converge(t)
	if res.Ops.Writes() != 2 || res.Ops[routing.OpDelRule] != 2 {
		t.Errorf("release cost %v, want two del_rule", res.Ops)
	}
	for _, r := range ownedRules(t, tn.ns) {
		if strings.Contains(r, "10.0.2.11") {
			t.Errorf("rule of the released IP left: %s", r)
		}
	}
}

// TestRestartAddsNoDuplicates: a new agent (new netlink handle, new
// Converger, nothing remembered) converges a node already in shape: it
// writes nothing and the kernel holds each rule and route once.
func TestRestartAddsNoDuplicates(t *testing.T) {
	tn := newTestNode(t)
	tn.converge(t)
	rules, routes11 := ownedRules(t, tn.ns), tableRoutes(t, tn.ns, 11)

	h, err := netlink.NewHandleAt(tn.ns.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := routing.NewConverger(kernelOn(h, tn.ns), routing.DefaultConfig()).Converge(context.Background(), tn.node)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops.Writes() != 0 {
		t.Errorf("restart wrote %v, want nothing", res.Ops)
	}
	if diff := cmp.Diff(rules, ownedRules(t, tn.ns)); diff != "" {
		t.Errorf("rules after restart (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(routes11, tableRoutes(t, tn.ns, 11)); diff != "" {
		t.Errorf("table 11 after restart (-want +got):\n%s", diff)
	}
}

// TestForeignRulesAndRoutesUntouched: rules and routes that are not
// enipam's are planted before the first converge: a default route in main
// via eth0, a static route in table 11, a rule at enipam's priority into
// table 11 from another IP, a rule into table 200, and a route carrying
// enipam's protocol in table 200. Converging, then removing every ENI from
// the node, leaves all of them exactly as planted.
func TestForeignRulesAndRoutesUntouched(t *testing.T) {
	tn := newTestNode(t)
	h := tn.ns.Handle
	eth0, _ := h.LinkByIndex(tn.eth0)
	if err := h.LinkSetUp(eth0); err != nil {
		t.Fatal(err)
	}
	eth1, _ := h.LinkByIndex(tn.eth1)
	if err := h.LinkSetUp(eth1); err != nil {
		t.Fatal(err)
	}
	ipnet := func(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }
	plantRoutes := []*netlink.Route{
		{LinkIndex: tn.eth0, Dst: ipnet("10.0.0.1/32"), Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_BOOT},
		{LinkIndex: tn.eth0, Gw: net.ParseIP("10.0.0.1"), Protocol: unix.RTPROT_BOOT},
		{LinkIndex: tn.eth1, Dst: ipnet("192.168.0.0/16"), Table: 11, Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_STATIC},
		{LinkIndex: tn.eth0, Dst: ipnet("172.16.0.0/12"), Table: 200, Scope: netlink.SCOPE_LINK, Protocol: routing.DefaultProtocol},
	}
	for _, r := range plantRoutes {
		if err := h.RouteAdd(r); err != nil {
			t.Fatalf("planting route %v: %v", r, err)
		}
	}
	for _, r := range []struct {
		prio, table int
		src         string
		proto       uint8
	}{
		{111, 11, "10.0.2.99/32", unix.RTPROT_STATIC},
		{100, 200, "", unix.RTPROT_BOOT},
		{111, 200, "10.0.2.98/32", routing.DefaultProtocol},
	} {
		nr := netlink.NewRule()
		nr.Priority, nr.Table, nr.Protocol = r.prio, r.table, r.proto
		if r.src != "" {
			nr.Src = ipnet(r.src)
		}
		if err := h.RuleAdd(nr); err != nil {
			t.Fatalf("planting rule %+v: %v", r, err)
		}
	}
	snapshot := func() (rules []string, routes []string) {
		all, err := h.RuleList(netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if r.Protocol != routing.DefaultProtocol || r.Table == 200 {
				rules = append(rules, ruleString(r))
			}
		}
		for _, table := range []int{unix.RT_TABLE_MAIN, 200} {
			routes = append(routes, tableRoutes(t, tn.ns, table)...)
		}
		for _, r := range tableRoutes(t, tn.ns, 11) {
			if !strings.HasSuffix(r, "proto 213") {
				routes = append(routes, r)
			}
		}
		slices.Sort(rules)
		slices.Sort(routes)
		return rules, routes
	}
	rulesBefore, routesBefore := snapshot()

	tn.converge(t)
	rules, routes := snapshot()
	if diff := cmp.Diff(rulesBefore, rules); diff != "" {
		t.Errorf("foreign rules after converge (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(routesBefore, routes); diff != "" {
		t.Errorf("foreign routes after converge (-before +after):\n%s", diff)
	}

	tn.node.ENIs = nil
	tn.converge(t)
	rules, routes = snapshot()
	if diff := cmp.Diff(rulesBefore, rules); diff != "" {
		t.Errorf("foreign rules after removing every ENI (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(routesBefore, routes); diff != "" {
		t.Errorf("foreign routes after removing every ENI (-before +after):\n%s", diff)
	}
	if got := ownedRules(t, tn.ns); len(got) != 2 { // the planted rule into table 200, fwmark
		t.Errorf("enipam-protocol rules left: %v, want only the planted one into table 200 and the fwmark rule", got)
	}
}

// TestLinkRecreatedGetsConfiguredAgain: the kernel drops the link of eni-b
// (and its routes) and a new link with the same MAC appears, as after a
// detach and re-attach; the converge after it sets MTU, up, rp_filter and
// the routes again on the new ifindex.
func TestLinkRecreatedGetsConfiguredAgain(t *testing.T) {
	tn := newTestNode(t)
	tn.converge(t)
	tn.ns.DelLink(t, "eth2")
	res := tn.converge(t)
	if len(res.Missing) != 1 || res.Missing[0].ID != "eni-b" {
		t.Fatalf("missing = %v, want eni-b", res.Missing)
	}
	idx := tn.ns.AddENILink(t, "eth2", macEth2)
	tn.converge(t)
	want := []string{
		fmt.Sprintf("10.0.3.1/32 dev %d scope %d proto 213", idx, unix.RT_SCOPE_LINK),
		fmt.Sprintf("default via 10.0.3.1 dev %d scope 0 proto 213", idx),
	}
	if diff := cmp.Diff(want, tableRoutes(t, tn.ns, 12)); diff != "" {
		t.Errorf("table 12 (-want +got):\n%s", diff)
	}
	if got := tn.ns.Sysctl(t, "net/ipv4/conf/eth2/rp_filter"); got != "2" {
		t.Errorf("rp_filter = %s, want 2", got)
	}
}

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
