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

// pods110 is kubelet's default maxPods; with cilium-agent's router and
// health addresses the pool holds 112.
const pods110 = 110 + 2

// BenchmarkRulesAt110Pods: the node agent converges a node whose pool
// holds 110 pods' addresses plus cilium-agent's two, from scratch, with
// the default configuration (egress and ingress rules, the connmark
// rule). "addresses": secondary IPs on an m5.4xlarge's ENIs (29 each after
// the primary address), a rule pair per address; "prefixes": the same
// addresses as seven /28s on one ENI, a rule pair per prefix. Reports the
// rules in the node's policy routing list, which the kernel walks for
// every routed packet.
func BenchmarkRulesAt110Pods(b *testing.B) {
	for _, c := range []struct {
		name     string
		prefixes bool
	}{{"addresses", false}, {"prefixes", true}} {
		b.Run(c.name, func(b *testing.B) {
			ns := kerneltest.New(b)
			node := pods110Node(b, ns, c.prefixes)
			conv := routing.NewConverger(ns.Kernel(), routing.DefaultConfig())
			var res routing.Result
			for b.Loop() {
				var err error
				if res, err = conv.Converge(context.Background(), node); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := conv.Converge(context.Background(), routing.Node{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			want := 2*pods110 + 1
			if c.prefixes {
				want = 2*((pods110+15)/16) + 1
			}
			if res.Rules != want {
				b.Fatalf("%d rules, want %d", res.Rules, want)
			}
			b.ReportMetric(float64(res.Rules), "rules")
			reportOps(b, res.Ops)
		})
	}
}

// pods110Node lays the 112 addresses out on ENIs 1 and up of links it
// creates in ns: 29 secondary addresses per ENI, or /28 prefixes on ENI 1.
func pods110Node(b *testing.B, ns *kerneltest.Namespace, prefixes bool) routing.Node {
	b.Helper()
	var node routing.Node
	eni := func(n int) *routing.ENI {
		mac := fmt.Sprintf("02:00:00:00:02:%02x", n)
		ns.AddENILink(b, fmt.Sprintf("ens%d", n), mac)
		hw, _ := net.ParseMAC(mac)
		node.ENIs = append(node.ENIs, routing.ENI{ID: fmt.Sprintf("eni-%02d", n), MAC: hw, Number: n, Gateway: netip.AddrFrom4([4]byte{10, 2, 0, 1})})
		return &node.ENIs[len(node.ENIs)-1]
	}
	if prefixes {
		e := eni(1)
		for i := range (pods110 + 15) / 16 {
			e.Prefixes = append(e.Prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 2, 1, byte(16 * i)}), 28))
		}
		return node
	}
	for placed, n := 0, 1; placed < pods110; n++ {
		e := eni(n)
		for i := 0; i < 29 && placed < pods110; i++ {
			e.IPs = append(e.IPs, netip.AddrFrom4([4]byte{10, 2, byte(n), byte(10 + i)}))
			placed++
		}
	}
	return node
}
