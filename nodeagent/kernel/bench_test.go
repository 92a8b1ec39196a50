package kernel_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// Scale of the benchmarks: the largest ENI layout of common instance
// types (15 ENIs of 50 addresses, 49 secondary IPs each), about 735 pool
// IPs and so 1470 rules with the ingress rules on.
const (
	benchENIs      = 15
	benchIPsPerENI = 49
)

// benchNode creates benchENIs links in ns and the node that routes them.
func benchNode(b *testing.B, ns *kerneltest.Namespace) routing.Node {
	b.Helper()
	var node routing.Node
	for n := 1; n <= benchENIs; n++ {
		mac := fmt.Sprintf("02:00:00:00:01:%02x", n)
		ns.AddENILink(b, fmt.Sprintf("ens%d", n), mac)
		hw, _ := net.ParseMAC(mac)
		e := routing.ENI{ID: fmt.Sprintf("eni-%02d", n), MAC: hw, Number: n, Gateway: netip.AddrFrom4([4]byte{10, 1, byte(n), 1})}
		for i := range benchIPsPerENI {
			e.IPs = append(e.IPs, netip.AddrFrom4([4]byte{10, 1, byte(n), byte(10 + i)}))
		}
		node.ENIs = append(node.ENIs, e)
	}
	return node
}

// BenchmarkConvergeFromScratch: 15 ENIs × 49 IPs converged on a fresh
// namespace (links down at MTU 1500 with strict rp_filter, no tables, no
// rules), torn down again and the links reset outside the timer. Reports
// the kernel operations of the build.
func BenchmarkConvergeFromScratch(b *testing.B) {
	ns := kerneltest.New(b)
	node := benchNode(b, ns)
	cfg := routing.DefaultConfig()
	c := routing.NewConverger(ns.Kernel(), cfg)
	var res routing.Result
	for b.Loop() {
		var err error
		res, err = c.Converge(context.Background(), node)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := c.Converge(context.Background(), routing.Node{}); err != nil {
			b.Fatal(err)
		}
		resetLinks(b, ns)
		b.StartTimer()
	}
	if want := 2*benchENIs*benchIPsPerENI + 1; res.Rules != want { // and the fwmark rule
		b.Fatalf("converged %d rules, want %d", res.Rules, want)
	}
	reportOps(b, res.Ops)
	b.ReportMetric(float64(res.Rules), "rules")
}

// BenchmarkConvergeOneNewIP: on the converged 15×49 node, the operator
// adds one pool IP to one ENI and the agent converges. Reports the kernel
// operations it costs: the reads of the converge plus the new IP's two
// rules, whatever the size of the node.
func BenchmarkConvergeOneNewIP(b *testing.B) {
	ns := kerneltest.New(b)
	node := benchNode(b, ns)
	c := routing.NewConverger(ns.Kernel(), routing.DefaultConfig())
	if _, err := c.Converge(context.Background(), node); err != nil {
		b.Fatal(err)
	}
	base := node.ENIs[7].IPs
	grown := routing.Node{ENIs: append([]routing.ENI(nil), node.ENIs...)}
	grown.ENIs[7].IPs = append(append([]netip.Addr(nil), base...), netip.MustParseAddr("10.1.8.200"))
	var res routing.Result
	for b.Loop() {
		var err error
		res, err = c.Converge(context.Background(), grown)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := c.Converge(context.Background(), node); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if res.Ops[routing.OpAddRule] != 2 || res.Ops.Writes() != 2 {
		b.Fatalf("one new IP cost %v, want two rule adds", res.Ops)
	}
	reportOps(b, res.Ops)
}

// resetLinks puts the benchmark's links back as a fresh attach leaves them.
func resetLinks(b *testing.B, ns *kerneltest.Namespace) {
	b.Helper()
	for n := 1; n <= benchENIs; n++ {
		name := fmt.Sprintf("ens%d", n)
		l, err := ns.Handle.LinkByName(name)
		if err != nil {
			b.Fatal(err)
		}
		if err := ns.Handle.LinkSetDown(l); err != nil {
			b.Fatal(err)
		}
		if err := ns.Handle.LinkSetMTU(l, 1500); err != nil {
			b.Fatal(err)
		}
		ns.SetSysctl(b, "net/ipv4/conf/"+name+"/rp_filter", "1")
	}
}

// reportOps reports the kernel operations of the last converge: netlink
// requests, sysctl accesses (rp_filter), and the writes among both.
func reportOps(b *testing.B, ops routing.Ops) {
	b.ReportMetric(float64(ops.Netlink()), "netlink-ops/op")
	b.ReportMetric(float64(ops.Total()-ops.Netlink()), "sysctl-ops/op")
	b.ReportMetric(float64(ops.Writes()), "writes/op")
}
