package kernel_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// nodeDump is what a node shows of its routing: `ip -4 rule show`,
// `ip -4 route show table all`, every nf_tables table, chain and rule, and
// the rp_filter of "all" and of each link.
type nodeDump struct {
	Rules, Routes, NFT []string
	RPFilter           map[string]string
}

// dumpNode reads the namespace's routing with iproute2's own `ip`
// (kerneltest.IPDump), the kernel's nf_tables dump and the sysctls.
func dumpNode(t *testing.T, ns *kerneltest.Namespace, links ...string) nodeDump {
	t.Helper()
	nft, err := kernel.NFTRuleset(ns.Kernel())
	if err != nil {
		t.Fatalf("dumping nf_tables: %v", err)
	}
	rules, routes := ns.IPDump(t)
	d := nodeDump{Rules: rules, Routes: routes, NFT: nft, RPFilter: map[string]string{}}
	for _, l := range append([]string{"all"}, links...) {
		d.RPFilter[l] = ns.Sysctl(t, "net/ipv4/conf/"+l+"/rp_filter")
	}
	return d
}

// plantForeignState gives the node what it had before enipam: eth0 up
// with the node's address and its default route, other software's rules
// (one into enipam's table 11, one carrying enipam's protocol number into
// a table outside its range) and routes (one in table 11, one with
// enipam's protocol in table 200), an nf_tables table of kube-proxy's
// kind, and strict rp_filter on eth0 and eth1 but not on eth2.
func plantForeignState(t *testing.T, tn *testNode) {
	t.Helper()
	ns, h := tn.ns, tn.ns.Handle
	ns.LinkUp(t, "eth0")
	ns.AddAddr(t, "eth0", "10.0.1.10/24")
	ns.AddRoute(t, "0.0.0.0/0", "10.0.1.1", "eth0")
	ipnet := func(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }
	for _, r := range []*netlink.Route{
		{LinkIndex: tn.eth0, Dst: ipnet("192.168.0.0/16"), Table: 11, Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_STATIC},
		{LinkIndex: tn.eth0, Dst: ipnet("172.16.0.0/12"), Table: 200, Scope: netlink.SCOPE_LINK, Protocol: routing.DefaultProtocol},
	} {
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
	if err := kernel.AddDNAT(ns.Kernel(), netip.MustParseAddrPort("10.0.1.10:30080"), netip.MustParseAddrPort("10.0.2.10:8080")); err != nil {
		t.Fatalf("planting a DNAT table: %v", err)
	}
	for link, v := range map[string]string{"all": "0", "eth0": "1", "eth1": "1", "eth2": "0"} {
		ns.SetSysctl(t, "net/ipv4/conf/"+link+"/rp_filter", v)
	}
}

// TestCleanupRestoresTheNodeDumps: the uninstall guarantee on a real
// kernel. A node with other software's rules, routes, nf_tables table and
// rp_filter settings is converged by enipam (two ENIs, connmark on, a
// state directory as the chart mounts), then converged again by a new
// process (a restart, which must not take the loosened values for the
// originals), then cleaned up. After the cleanup, `ip -4 rule show`,
// `ip -4 route show table all`, the whole nf_tables ruleset and every
// rp_filter equal what they were before enipam ran; a second cleanup
// finds nothing.
func TestCleanupRestoresTheNodeDumps(t *testing.T) {
	tn := newTestNode(t)
	plantForeignState(t, tn)
	links := []string{"eth0", "eth1", "eth2"}
	before := dumpNode(t, tn.ns, links...)
	state := t.TempDir()
	newConverger := func() *routing.Converger {
		return routing.NewConverger(kernel.New(tn.ns.Handle, tn.ns.NS, kernel.WithStateDir(state)), routing.DefaultConfig())
	}

	if _, err := newConverger().Converge(context.Background(), tn.node); err != nil {
		t.Fatal(err)
	}
	if _, err := newConverger().Converge(context.Background(), tn.node); err != nil {
		t.Fatal(err)
	}
	routed := dumpNode(t, tn.ns, links...)
	if cmp.Equal(before.Rules, routed.Rules) || cmp.Equal(before.Routes, routed.Routes) || cmp.Equal(before.NFT, routed.NFT) {
		t.Fatal("converging changed no rule, route or nf_tables table: the test does not discriminate")
	}
	for _, l := range links {
		if routed.RPFilter[l] != "2" {
			t.Fatalf("%s rp_filter %s after converge, want 2", l, routed.RPFilter[l])
		}
	}

	res, err := newConverger().Cleanup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	after := dumpNode(t, tn.ns, links...)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("node after cleanup differs from before enipam (-before +after):\n%s", diff)
	}
	if len(res.Plan.DelRules) != 7 || len(res.Plan.DelRoutes) != 4 || res.Plan.Connmark == nil || len(res.RPFilter) != 3 {
		t.Errorf("cleanup removed %s, want 7 rules, 4 routes, the connmark table and 3 rp_filter values", res)
	}
	again, err := newConverger().Cleanup(context.Background())
	if err != nil || !again.Empty() {
		t.Errorf("second cleanup: %s, %v; want nothing found", again, err)
	}
}

// TestCleanupWithoutStateDirLeavesRPFilterLoose: a Kernel given no state
// directory records nothing, so cleanup removes rules, routes and the
// connmark table but cannot know, and does not guess, the rp_filter values
// from before: they stay loose.
func TestCleanupWithoutStateDirLeavesRPFilterLoose(t *testing.T) {
	tn := newTestNode(t)
	plantForeignState(t, tn)
	before := dumpNode(t, tn.ns)
	c := routing.NewConverger(tn.ns.Kernel(), routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), tn.node); err != nil {
		t.Fatal(err)
	}
	res, err := c.Cleanup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RPFilter) != 0 {
		t.Errorf("restored %v without records", res.RPFilter)
	}
	after := dumpNode(t, tn.ns)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("rules, routes or nf_tables after cleanup differ (-before +after):\n%s", diff)
	}
	if got := tn.ns.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "2" {
		t.Errorf("eth1 rp_filter %s, want left loose at 2", got)
	}
}
