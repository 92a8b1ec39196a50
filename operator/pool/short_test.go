package pool

import (
	"net/netip"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestShortIsTheNeedTheInstanceHasRoomFor: m5.large (3 ENIs of 10
// addresses), pods on devices 1 and 2, pre-allocate 8. A node packed to
// capacity (both pod ENIs full, used = available = 18) still "needs" 8
// by the knobs but is short of none; with one slot left on an ENI it is
// short of one; with a free device index of the nine addresses a new ENI
// brings; under prefix delegation a free slot counts 16. A node blocked
// by its subnets (none has a free address) still counts as short: its
// instance has room. Nothing needed, nothing short.
var m5xen = cloud.InstanceType{Name: "m5-like.xen", MaxENIs: 3, IPv4PerENI: 10, Hypervisor: "xen"}

func TestShortIsTheNeedTheInstanceHasRoomFor(t *testing.T) {
	cfg := &Config{Knobs: Knobs{PreAllocate: 8}, FirstInterfaceIndex: 1}
	pd := &Config{Knobs: Knobs{PreAllocate: 8}, FirstInterfaceIndex: 1, PrefixDelegation: true}
	full := func(idx, ips int) nodeOpt {
		return func(n *snapshot.Node) {
			withENI(idx, nil)(n)
			withIPs(idx, ips)(n)
		}
	}
	noFreeAddresses := func(n *snapshot.Node) {
		for i := range n.Subnets {
			n.Subnets[i].Available = 0
		}
	}
	withPrefix := func(idx int) nodeOpt {
		return func(n *snapshot.Node) {
			for i := range n.ENIs {
				if n.ENIs[i].DeviceIndex == idx {
					n.ENIs[i].Prefixes = append(n.ENIs[i].Prefixes, netip.MustParsePrefix("10.1.0.0/28"))
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		n      *snapshot.Node
		cfg    *Config
		needed int
		want   int
	}{
		{"packed to capacity", node(m5large, full(1, 9), full(2, 9)), cfg, 8, 0},
		{"one slot left", node(m5large, full(1, 9), full(2, 8)), cfg, 8, 1},
		{"a free device index", node(m5large, full(1, 9)), cfg, 8, 8},
		{"a free device index, a small need", node(m5large, full(1, 9)), cfg, 3, 3},
		{"blocked by its subnets", node(m5large, full(1, 9), noFreeAddresses), cfg, 8, 8},
		{"nothing needed", node(m5large), cfg, 0, 0},
		{"prefix delegation, one slot left", node(m5large, full(1, 0), full(2, 0), func(n *snapshot.Node) {
			for range 8 {
				withPrefix(1)(n)
				withPrefix(2)(n)
			}
			withPrefix(1)(n)
		}), pd, 40, 16},
		{"a xen type gets no prefixes", node(m5xen, full(1, 9), full(2, 8)), pd, 8, 1},
	} {
		if got := Short(tc.n, tc.cfg, tc.needed); got != tc.want {
			t.Errorf("%s: short %d, want %d", tc.name, got, tc.want)
		}
	}
}
