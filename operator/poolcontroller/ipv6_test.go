package poolcontroller

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// window6Node is a node whose primary ENI eni-p (m5.large: 10 IPv6 slots)
// sits in a subnet with an IPv6 /64, with its pool, use and handshake as
// given.
func window6Node(pooled, used []string, release map[string]ipamtypes.IPReleaseStatus) *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for _, ip := range pooled {
		cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-p"}
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for _, ip := range used {
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "default/pod-" + ip, Resource: "eni-p"}
	}
	cn.Status.IPAM.ReleaseIPs = maps.Clone(release)
	return cn
}

var (
	slash80 = netip.MustParsePrefix("2001:db8:0:1:a::/80")
	slash64 = netip.MustParsePrefix("2001:db8:0:1::/64")
	t0      = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
)

func window6In(mod func(*window6Inputs)) *window6Inputs {
	in := &window6Inputs{
		want:       true,
		primary:    &cloud.ENI{ID: "eni-p", DeviceIndex: 0, IPv6Prefixes: []netip.Prefix{slash80}},
		subnetIPv6: slash64, perENI: 10,
		knobs:   pool.Knobs{PreAllocate: 3, AgentEndpoints: 2},
		routed:  func(eni string, ip netip.Addr) bool { return eni == "eni-p" && slash80.Contains(ip) },
		trusted: func(string, netip.Addr) bool { return true },
		missing: map[string]time.Time{}, now: t0, grace: time.Minute,
	}
	if mod != nil {
		mod(in)
	}
	return in
}

func v6(n int) string { return addrIn(n).String() }

// addrIn is the n-th address of slash80.
func addrIn(n int) netip.Addr {
	ip := slash80.Addr()
	for range n {
		ip = ip.Next()
	}
	return ip
}

func ipv6Keys(m ipamtypes.AllocationMap) []string {
	var out []string
	for k := range m {
		if isIPv6(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestDecideWindow6: the IPv6 window of one node under pre-allocate 3
// (agent endpoints 2), case by case: what EC2 is asked for, what the pool
// and the handshake become, and why a node gets no IPv6.
func TestDecideWindow6(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cn        *ciliumv2.CiliumNode
		in        *window6Inputs
		assign    string
		unassign  []netip.Prefix
		problem   error
		awaiting  bool
		untrusted bool
		pool      []string
		release   map[string]ipamtypes.IPReleaseStatus
		cursor    netip.Addr
		windowed  []netip.Prefix
	}{
		{name: "no /80 yet: one is asked for on the primary ENI, nothing pooled",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.primary.IPv6Prefixes = nil }),
			assign: "eni-p"},
		{name: "subnet without IPv6: no call, the node is told why",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.subnetIPv6 = netip.Prefix{}; in.primary.IPv6Prefixes = nil }),
			problem: errNoIPv6Subnet},
		{name: "type without IPv6: no call, the node is told why",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.perENI = 0; in.primary.IPv6Prefixes = nil }),
			problem: errNoIPv6Type},
		{name: "primary ENI's IPv6 slots all taken by addresses: no call",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) {
				in.perENI = 2
				in.primary.IPv6Prefixes = nil
				in.primary.IPv6s = []netip.Addr{netip.MustParseAddr("2001:db8:0:1::10"), netip.MustParseAddr("2001:db8:0:1::11")}
			}),
			problem: errNoIPv6Slot},
		{name: "/80 not routed by the agent yet: it waits, nothing pooled",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.routed = func(string, netip.Addr) bool { return false } }),
			awaiting: true},
		{name: "/80 shown by a describe not trusted yet: it waits",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.trusted = func(string, netip.Addr) bool { return false } }),
			awaiting: true, untrusted: true},
		{name: "fresh node: pre-allocate plus the agent's two, from the /80's first address on",
			cn: window6Node(nil, nil, nil), in: window6In(nil),
			pool: []string{v6(1), v6(2), v6(3), v6(4), v6(5)}, cursor: addrIn(5)},
		{name: "three of five used: one more, after the cursor",
			cn:   window6Node([]string{v6(1), v6(2), v6(3), v6(4), v6(5)}, []string{v6(1), v6(2), v6(3)}, nil),
			in:   window6In(func(in *window6Inputs) { in.cursor = addrIn(5) }),
			pool: []string{v6(1), v6(2), v6(3), v6(4), v6(5), v6(6)}, cursor: addrIn(6)},
		{name: "a released address is not handed out again: the walk goes on past the cursor",
			cn:   window6Node([]string{v6(2), v6(3)}, nil, map[string]ipamtypes.IPReleaseStatus{v6(1): ipamoption.IPAMReleased}),
			in:   window6In(func(in *window6Inputs) { in.cursor = addrIn(3) }),
			pool: []string{v6(2), v6(3), v6(4)}, cursor: addrIn(4),
			release: map[string]ipamtypes.IPReleaseStatus{v6(1): ipamoption.IPAMReleased}},
		{name: "acknowledged window address: released with no call, out of the pool; an IPv4 one is left to decideRelease",
			cn: window6Node([]string{v6(1), v6(2), v6(3), v6(4), "10.0.1.5"}, nil, map[string]ipamtypes.IPReleaseStatus{
				v6(4): ipamoption.IPAMReadyForRelease, "10.0.1.5": ipamoption.IPAMReadyForRelease}),
			in:   window6In(func(in *window6Inputs) { in.cursor = addrIn(4) }),
			pool: []string{v6(1), v6(2), v6(3)},
			release: map[string]ipamtypes.IPReleaseStatus{
				v6(4): ipamoption.IPAMReleased, "10.0.1.5": ipamoption.IPAMReadyForRelease}},
		{name: "policy no longer asks for IPv6: free addresses marked, the /80 kept while any is listed",
			cn:   window6Node([]string{v6(1), v6(2)}, []string{v6(2)}, nil),
			in:   window6In(func(in *window6Inputs) { in.want = false; in.windowed = []netip.Prefix{slash80} }),
			pool: []string{v6(1), v6(2)}, release: map[string]ipamtypes.IPReleaseStatus{v6(1): ipamoption.IPAMMarkForRelease}},
		{name: "policy no longer asks for IPv6 and nothing of the /80 is listed: it goes back",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.want = false; in.windowed = []netip.Prefix{slash80} }),
			unassign: []netip.Prefix{slash80}},
		{name: "a process that took over: the walk goes on past the highest address listed",
			cn:   window6Node([]string{v6(7), v6(9)}, []string{v6(7), v6(9)}, map[string]ipamtypes.IPReleaseStatus{v6(12): ipamoption.IPAMReleased}),
			in:   window6In(nil),
			pool: []string{v6(7), v6(9), v6(13), v6(14), v6(15)}, cursor: addrIn(15),
			release: map[string]ipamtypes.IPReleaseStatus{v6(12): ipamoption.IPAMReleased}},
		{name: "a process that took over, the policy no longer asking for IPv6: the /80 holding pool addresses is known as the window's",
			cn:   window6Node([]string{v6(1)}, nil, nil),
			in:   window6In(func(in *window6Inputs) { in.want = false }),
			pool: []string{v6(1)}, release: map[string]ipamtypes.IPReleaseStatus{v6(1): ipamoption.IPAMMarkForRelease},
			windowed: []netip.Prefix{slash80}},
		{name: "an idle /80 this process never used is left alone",
			cn: window6Node(nil, nil, nil), in: window6In(func(in *window6Inputs) { in.want = false })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideWindow6(tc.cn, tc.in)
			if d.assign != tc.assign || !slices.Equal(d.unassign, tc.unassign) || !errors.Is(d.problem, tc.problem) || (tc.problem == nil) != (d.problem == nil) ||
				d.awaiting != tc.awaiting || d.untrusted != tc.untrusted {
				t.Errorf("assign %q unassign %v problem %v awaiting %v; want %q %v %v %v", d.assign, d.unassign, d.problem, d.awaiting,
					tc.assign, tc.unassign, tc.problem, tc.awaiting)
			}
			if got := ipv6Keys(tc.cn.Spec.IPAM.Pool); !slices.Equal(got, sorted(tc.pool, true)) {
				t.Errorf("IPv6 pool %v, want %v", got, sorted(tc.pool, true))
			}
			for key, e := range tc.cn.Spec.IPAM.Pool {
				if isIPv6(key) && e.Resource != "eni-p" {
					t.Errorf("pool entry %s on %q, want the primary ENI", key, e.Resource)
				}
			}
			if !maps.Equal(tc.cn.Status.IPAM.ReleaseIPs, tc.release) && (len(tc.cn.Status.IPAM.ReleaseIPs) > 0 || len(tc.release) > 0) {
				t.Errorf("release-ips %v, want %v", tc.cn.Status.IPAM.ReleaseIPs, tc.release)
			}
			if tc.cursor.IsValid() && d.cursor != tc.cursor {
				t.Errorf("cursor %v, want %v", d.cursor, tc.cursor)
			}
			if tc.windowed != nil && !slices.Equal(d.windowed, tc.windowed) {
				t.Errorf("windowed %v, want %v", d.windowed, tc.windowed)
			}
		})
	}
}

func sorted(keys []string, only6 bool) []string {
	var out []string
	for _, k := range keys {
		if !only6 || isIPv6(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestWindow6MissingPrefixMarkedAfterGrace: the pool lists a window
// address of a /80 EC2 no longer shows on the primary ENI. Free, it is
// marked once missing for the grace, not before; in use, never.
func TestWindow6MissingPrefixMarkedAfterGrace(t *testing.T) {
	lost := "2001:db8:0:1:b::7"
	used := "2001:db8:0:1:b::8"
	cn := window6Node([]string{lost, used}, []string{used}, nil)
	in := window6In(func(in *window6Inputs) { in.knobs = pool.Knobs{} })
	decideWindow6(cn, in)
	if len(cn.Status.IPAM.ReleaseIPs) != 0 {
		t.Fatalf("marked at once: %v", cn.Status.IPAM.ReleaseIPs)
	}
	in.now = t0.Add(time.Minute)
	d := decideWindow6(cn, in)
	if cn.Status.IPAM.ReleaseIPs[lost] != ipamoption.IPAMMarkForRelease || len(cn.Status.IPAM.ReleaseIPs) != 1 || d.marked != 1 {
		t.Errorf("after the grace: release-ips %v (marked %d), want %s alone marked", cn.Status.IPAM.ReleaseIPs, d.marked, lost)
	}
}

// TestWalkWindowWrapsRound: at the /80's last address the walk goes on
// from its first (never its own address), skipping taken ones.
func TestWalkWindowWrapsRound(t *testing.T) {
	last := netip.MustParseAddr("2001:db8:0:1:a:ffff:ffff:ffff")
	got := walkWindow(slash80, last.Prev(), 3, func(ip netip.Addr) bool { return ip == addrIn(1) })
	want := []netip.Addr{last, addrIn(2), addrIn(3)}
	if !slices.Equal(got, want) {
		t.Errorf("walk %v, want %v", got, want)
	}
}

// TestExcessWindow6Marked: ten free window addresses under pre-allocate
// 3: seven are excess, and the lowest seven are marked.
func TestExcessWindow6Marked(t *testing.T) {
	var pooled []string
	for i := 1; i <= 10; i++ {
		pooled = append(pooled, v6(i))
	}
	cn := window6Node(pooled, nil, nil)
	if n := excessWindow6(cn, 0, pool.Knobs{PreAllocate: 3}); n != 7 {
		t.Fatalf("excess %d, want 7", n)
	}
	if n := markWindow6(cn, 7); n != 7 {
		t.Fatalf("marked %d, want 7", n)
	}
	for i := 1; i <= 10; i++ {
		want := ipamtypes.IPReleaseStatus("")
		if i <= 7 {
			want = ipamoption.IPAMMarkForRelease
		}
		if got := cn.Status.IPAM.ReleaseIPs[v6(i)]; got != want {
			t.Errorf("%s: %q, want %q", v6(i), got, want)
		}
	}
}
