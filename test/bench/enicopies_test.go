package bench

import (
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCopiesHeld: of the scale-up's nodes, those whose CiliumNode lists
// an ENI in status.eni.enis hold a copy; a node with an empty
// status.eni.enis, or no CiliumNode, holds none; another node's
// CiliumNode is not counted.
func TestCopiesHeld(t *testing.T) {
	cn := func(name string, enis ...string) ciliumv2.CiliumNode {
		c := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, id := range enis {
			if c.Status.ENI.ENIs == nil {
				c.Status.ENI.ENIs = map[string]awstypes.ENI{}
			}
			c.Status.ENI.ENIs[id] = awstypes.ENI{ID: id, Addresses: []ciliumip.Addr{ciliumip.AddrFrom(netip.MustParseAddr("10.0.1.5"))}}
		}
		return c
	}
	cns := []ciliumv2.CiliumNode{cn("a", "eni-1", "eni-2"), cn("b"), cn("c", "eni-3"), cn("other", "eni-4")}
	cns[1].Status.ENI.ENIs = map[string]awstypes.ENI{} // written empty
	if got := copiesHeld(cns, []string{"a", "b", "c", "d"}); got != 2 {
		t.Errorf("%d nodes holding a copy, want 2 (a and c)", got)
	}
	if got := copiesHeld(cns, []string{"b", "d"}); got != 0 {
		t.Errorf("%d nodes holding a copy, want 0", got)
	}
}

// TestJoinWritesTarget: the target of ≤ 2 CiliumNode writes per joining
// node is met with 2 writes per node and no copy held; not with a write
// more on one node, nor with a copy held on one node within the writes
// (a copy nobody needs), nor as today's operator makes them (3 writes
// per node, every node holding its copy).
func TestJoinWritesTarget(t *testing.T) {
	for _, tc := range []struct {
		name        string
		writes      float64
		nodes, held int
		met         bool
		figure      string
	}{
		{"two writes per node, no copy", 400, 200, 0, true, "2.00 (400 writes), 0 of 200 nodes holding a copy"},
		{"fewer writes", 380, 200, 0, true, "1.90 (380 writes), 0 of 200 nodes holding a copy"},
		{"a write more on one node", 401, 200, 0, false, "2.00 (401 writes), 0 of 200 nodes holding a copy"},
		{"one copy held", 400, 200, 1, false, "2.00 (400 writes), 1 of 200 nodes holding a copy"},
		{"the join and a copy each", 600, 200, 200, false, "3.00 (600 writes), 200 of 200 nodes holding a copy"},
		{"no node", 0, 0, 0, false, "NaN (0 writes), 0 of 0 nodes holding a copy"},
	} {
		figure, met := joinWrites(tc.writes, tc.nodes, tc.held)
		if met != tc.met || figure != tc.figure {
			t.Errorf("%s: %q met %v, want %q met %v", tc.name, figure, met, tc.figure, tc.met)
		}
	}
}
