package ciliumnode_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/google/go-cmp/cmp"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
)

// drainNode is a node routed under first interface index 1: the primary
// ENI (device 0, the node's 10.0.1.10), eni-1 (device 1, tag team=a) and
// eni-2 (device 2). On eni-1, 10.0.2.10 is in use by a pod, 10.0.2.11 is
// pooled and free, 10.0.2.12 is stamped for a static-IP pod, and EC2 has
// just assigned 10.0.2.13, listed on the ENI but not pooled yet. On eni-2,
// 10.0.3.10 is pooled and in use.
func drainNode() *ciliumv2.CiliumNode {
	return ciliumNode(
		withENI("eni-0", 0, "02:00:00:00:00:00", "10.0.1.0/24", nil),
		withENI("eni-1", 1, "02:00:00:00:00:01", "10.0.2.0/24", map[string]string{"team": "a"}),
		withENI("eni-2", 2, "02:00:00:00:00:02", "10.0.3.0/24", nil),
		withAddresses("eni-1", "10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"),
		withAddresses("eni-2", "10.0.3.10"),
		withPool("eni-1", "10.0.2.10", "10.0.2.11"),
		withPool("eni-2", "10.0.3.10"),
		withOwned("eni-1", "10.0.2.12", "default/static-0"),
		withUsed("eni-1", "10.0.2.10", "default/pod-a"),
		withUsed("eni-2", "10.0.3.10", "default/pod-c"),
		func(cn *ciliumv2.CiliumNode) {
			e := cn.Status.ENI.ENIs["eni-0"]
			e.IP = iputil.AddrFrom(netip.MustParseAddr("10.0.1.10"))
			cn.Status.ENI.ENIs["eni-0"] = e
		},
	)
}

func withOwned(resource, ip, owner string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: resource, Owner: owner}
	}
}

func withUsed(resource, ip, owner string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		if cn.Status.IPAM.Used == nil {
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		}
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Resource: resource, Owner: owner}
	}
}

func withoutPool(ips ...string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		for _, ip := range ips {
			delete(cn.Spec.IPAM.Pool, ip)
		}
	}
}

// drainHost is an in-memory kernel with the links of drainNode's ENIs.
func drainHost() *routingtest.Host {
	h := &routingtest.Host{}
	for i, mac := range []string{"02:00:00:00:00:00", "02:00:00:00:00:01", "02:00:00:00:00:02"} {
		hw, _ := net.ParseMAC(mac)
		h.AddLink(routing.Link{Index: 2 + i, Name: fmt.Sprintf("eth%d", i), MAC: hw, MTU: 1500, Up: i == 0, RPFilter: 1})
	}
	return h
}

// routedState is what the kernel holds, as a user reads it: per table, the
// sources of its egress rules; the tables with routes; and the addresses
// with an ingress rule.
type routedState struct {
	Sources  map[int][]string
	Tables   []int
	Ingress  []string
	Reported map[string][]string
}

func readState(t *testing.T, h *routingtest.Host, res routing.Result) routedState {
	t.Helper()
	s := routedState{Sources: map[int][]string{}, Reported: map[string][]string{}}
	rules, _ := h.Rules()
	for _, r := range rules {
		switch {
		case r.Table == routing.MainTable && r.Dst.IsValid():
			s.Ingress = append(s.Ingress, r.Dst.String())
		case r.Table != routing.MainTable:
			s.Sources[r.Table] = append(s.Sources[r.Table], r.Src.String())
		}
	}
	routes, _ := h.Routes()
	for _, r := range routes {
		if !slices.Contains(s.Tables, r.Table) {
			s.Tables = append(s.Tables, r.Table)
		}
	}
	for _, e := range res.Routed {
		var ips []string
		for _, ip := range e.IPs {
			ips = append(ips, ip.String())
		}
		for _, p := range e.Prefixes {
			ips = append(ips, p.String())
		}
		s.Reported[e.ID] = ips
	}
	for _, v := range s.Sources {
		slices.Sort(v)
	}
	slices.Sort(s.Tables)
	slices.Sort(s.Ingress)
	return s
}

// p32 turns addresses into the /32 prefixes rules carry.
func p32(ips ...string) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip + "/32"
	}
	return out
}

// TestPolicyChangeKeepsTheRoutingOfHeldAddresses: drainNode is routed
// under first interface index 1 (eni-1 and eni-2 in tables 11 and 12),
// then its NodeRouting spec or CiliumNode changes, and the node converges
// again on an in-memory kernel. A policy change that drops eni-1 (first
// interface index 2, or exclude tag team=a) keeps the rules of every
// address the node holds on it, its table's routes and the report of
// those addresses: the used 10.0.2.10, the owner-stamped 10.0.2.12, and
// the free 10.0.2.11, which Cilium may hand to a pod at any moment while
// it is pooled (status.ipam.used tells it late). The address that is only
// listed on the ENI, 10.0.2.13, pooled by nobody, loses its rules and is
// no longer reported: the operator can pool nothing new there. An address
// in the handshake keeps its rules until release-ips says released or it
// leaves the pool; once the last one is gone, so is table 11. No change
// leaves a missing link or a problem behind.
func TestPolicyChangeKeepsTheRoutingOfHeldAddresses(t *testing.T) {
	const team = "team"
	eni2 := p32("10.0.3.10")
	for _, tc := range []struct {
		name    string
		spec    *enipamv1alpha1.NodeRoutingSpec
		change  []func(*ciliumv2.CiliumNode)
		want    routedState
		drained []string // eni-1's addresses Input.Draining names
	}{
		{
			name: "no change",
			spec: spec(1),
			want: routedState{
				Sources: map[int][]string{11: p32("10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"), 12: eni2},
				Tables:  []int{11, 12},
				Ingress: p32("10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13", "10.0.3.10"),
				Reported: map[string][]string{
					"eni-1": {"10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"},
					"eni-2": {"10.0.3.10"},
				},
			},
		},
		{
			name:    "first interface index 1 to 2: used, stamped and pooled addresses on device 1 stay, the unpooled one goes",
			spec:    spec(2),
			want:    drained("10.0.2.10", "10.0.2.11", "10.0.2.12"),
			drained: []string{"10.0.2.10", "10.0.2.11", "10.0.2.12"},
		},
		{
			name:    "exclude tags newly matching eni-1: the same",
			spec:    spec(1, team, "a"),
			want:    drained("10.0.2.10", "10.0.2.11", "10.0.2.12"),
			drained: []string{"10.0.2.10", "10.0.2.11", "10.0.2.12"},
		},
		{
			name: "exclude tags matching another value: eni-1 stays managed",
			spec: spec(1, team, "b"),
			want: routedState{
				Sources: map[int][]string{11: p32("10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"), 12: eni2},
				Tables:  []int{11, 12},
				Ingress: p32("10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13", "10.0.3.10"),
				Reported: map[string][]string{
					"eni-1": {"10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"},
					"eni-2": {"10.0.3.10"},
				},
			},
		},
		{
			name: "in the handshake: marked and acknowledged addresses stay",
			spec: spec(2),
			change: []func(*ciliumv2.CiliumNode){
				withRelease("10.0.2.11", "ready-for-release"),
				withRelease("10.0.2.10", "do-not-release"),
			},
			want:    drained("10.0.2.10", "10.0.2.11", "10.0.2.12"),
			drained: []string{"10.0.2.10", "10.0.2.11", "10.0.2.12"},
		},
		{
			name:    "released: the free address goes while still in the pool",
			spec:    spec(2),
			change:  []func(*ciliumv2.CiliumNode){withRelease("10.0.2.11", "released")},
			want:    drained("10.0.2.10", "10.0.2.12"),
			drained: []string{"10.0.2.10", "10.0.2.12"},
		},
		{
			name:    "released and gone from the pool",
			spec:    spec(2),
			change:  []func(*ciliumv2.CiliumNode){withoutPool("10.0.2.11")},
			want:    drained("10.0.2.10", "10.0.2.12"),
			drained: []string{"10.0.2.10", "10.0.2.12"},
		},
		{
			name: "in use though the pool lost it: it stays",
			spec: spec(2),
			change: []func(*ciliumv2.CiliumNode){
				withoutPool("10.0.2.10", "10.0.2.11"),
				withRelease("10.0.2.12", "released"),
			},
			want:    drained("10.0.2.10"),
			drained: []string{"10.0.2.10"},
		},
		{
			name: "the last held address released: table 11 goes too",
			spec: spec(2),
			change: []func(*ciliumv2.CiliumNode){
				withoutPool("10.0.2.10", "10.0.2.11", "10.0.2.12"),
				func(cn *ciliumv2.CiliumNode) { delete(cn.Status.IPAM.Used, "10.0.2.10") },
			},
			want: routedState{
				Sources: map[int][]string{12: eni2}, Tables: []int{12}, Ingress: eni2,
				Reported: map[string][]string{"eni-2": {"10.0.3.10"}},
			},
		},
		{
			name: "back to first interface index 1: eni-1 is managed again, the unpooled address routed again",
			spec: spec(1),
			want: routedState{
				Sources: map[int][]string{11: p32("10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"), 12: eni2},
				Tables:  []int{11, 12},
				Ingress: p32("10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13", "10.0.3.10"),
				Reported: map[string][]string{
					"eni-1": {"10.0.2.10", "10.0.2.11", "10.0.2.12", "10.0.2.13"},
					"eni-2": {"10.0.3.10"},
				},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := drainHost()
			conv := routing.NewConverger(h, routing.DefaultConfig())
			converge := func(cn *ciliumv2.CiliumNode, s *enipamv1alpha1.NodeRoutingSpec) (routing.Result, ciliumnode.Input) {
				t.Helper()
				node, in, problems := ciliumnode.ToNode(cn, s)
				if len(problems) != 0 {
					t.Fatalf("problems %v", problems)
				}
				res, err := conv.Converge(context.Background(), node)
				if err != nil || len(res.Missing) != 0 || len(res.Problems) != 0 {
					t.Fatalf("converge: %v, missing %v, problems %v", err, res.Missing, res.Problems)
				}
				return res, in
			}
			converge(drainNode(), spec(1))

			cn := drainNode()
			for _, c := range tc.change {
				c(cn)
			}
			res, in := converge(cn, tc.spec)
			if diff := cmp.Diff(tc.want, readState(t, h, res)); diff != "" {
				t.Errorf("after the change (-want +got):\n%s", diff)
			}
			var drained []string
			for _, ip := range in.Draining["eni-1"] {
				drained = append(drained, ip.String())
			}
			if !slices.Equal(drained, tc.drained) || len(in.Draining) > 1 {
				t.Errorf("draining %v, want eni-1 with %v", in.Draining, tc.drained)
			}
			if l, _ := h.Link(3); l.MTU != 9001 || !l.Up || l.RPFilter != 2 {
				t.Errorf("eth1 %+v, want MTU 9001, up, loose rp_filter kept", l)
			}
			if again, _ := converge(cn, tc.spec); again.Ops.Writes() != 0 {
				t.Errorf("a second converge wrote %v", again.Ops)
			}
		})
	}
}

// drained is drainNode after eni-1 left the policy with ips still held
// on it: those keep their rules in table 11, its routes and the report.
func drained(ips ...string) routedState {
	return routedState{
		Sources:  map[int][]string{11: p32(ips...), 12: p32("10.0.3.10")},
		Tables:   []int{11, 12},
		Ingress:  append(p32(ips...), "10.0.3.10/32"),
		Reported: map[string][]string{"eni-1": ips, "eni-2": {"10.0.3.10"}},
	}
}

// TestDrainingENIKeepsWholePrefixes: with prefix delegation, an ENI the
// policy no longer selects keeps the one set of rules of a prefix whose
// every address is still pooled; a prefix holding a released address is
// routed address by address, the addresses not pooled left out.
func TestDrainingENIKeepsWholePrefixes(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-1", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withPrefix("eni-1", "10.0.2.16/28"),
		withPrefix("eni-1", "10.0.2.32/28"),
		withRelease("10.0.2.33", "released"),
		func(cn *ciliumv2.CiliumNode) {
			for _, p := range []string{"10.0.2.16/28", "10.0.2.32/28"} {
				pfx := netip.MustParsePrefix(p)
				for ip := pfx.Addr(); pfx.Contains(ip); ip = ip.Next() {
					cn.Spec.IPAM.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: "eni-1"}
				}
			}
			delete(cn.Spec.IPAM.Pool, "10.0.2.34")
		},
	)
	node, _, _ := ciliumnode.ToNode(cn, spec(2))
	e := findENI(node, "eni-1")
	if e == nil || !e.Draining {
		t.Fatalf("eni-1 = %+v, want draining", e)
	}
	if !slices.Equal(e.Prefixes, []netip.Prefix{netip.MustParsePrefix("10.0.2.16/28")}) {
		t.Errorf("prefixes %v, want 10.0.2.16/28 whole", e.Prefixes)
	}
	var second []netip.Addr
	for _, ip := range e.IPs {
		if netip.MustParsePrefix("10.0.2.32/28").Contains(ip) {
			second = append(second, ip)
		}
	}
	if len(second) != 14 || slices.Contains(second, netip.MustParseAddr("10.0.2.33")) || slices.Contains(second, netip.MustParseAddr("10.0.2.34")) {
		t.Errorf("10.0.2.32/28 routed as %v, want its 14 pooled addresses, without .33 (released) and .34 (not pooled)", second)
	}
}

// TestDrainingENIWithoutItsLinkKeepsTheNodeReady: an ENI the policy no
// longer selects whose link is gone keeps the rules of the addresses the
// node holds on it as the kernel has them (the unpooled 10.0.2.13 loses
// its own), and is not a missing link: the node routes everything it
// must.
func TestDrainingENIWithoutItsLinkKeepsTheNodeReady(t *testing.T) {
	h := drainHost()
	conv := routing.NewConverger(h, routing.DefaultConfig())
	node, _, _ := ciliumnode.ToNode(drainNode(), spec(1))
	if _, err := conv.Converge(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	h.RemoveLink(3)
	node, _, _ = ciliumnode.ToNode(drainNode(), spec(2))
	res, err := conv.Converge(context.Background(), node)
	if err != nil || len(res.Missing) != 0 {
		t.Fatalf("converge: %v, missing %v", err, res.Missing)
	}
	got := readState(t, h, res)
	if want := p32("10.0.2.10", "10.0.2.11", "10.0.2.12"); !slices.Equal(got.Sources[11], want) {
		t.Errorf("table 11 sources %v, want the held addresses' rules left as they were %v", got.Sources[11], want)
	}
	if _, ok := got.Reported["eni-1"]; ok {
		t.Errorf("eni-1 reported without its link: %v", got.Reported)
	}
}
