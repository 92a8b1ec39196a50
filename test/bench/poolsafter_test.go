package bench

import (
	"fmt"
	"net/netip"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// prefixNode is a prefix-delegated CiliumNode with two /28s: 10.0.1.0/28
// being given back (its first busy members used, the rest in the
// handshake in state), 10.0.2.0/28 in service with used of its members
// used.
func prefixNode(name string, busy int, state string, used int) ciliumv2.CiliumNode {
	cn := ciliumv2.CiliumNode{}
	cn.Name = name
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
	for i, p := range []string{"10.0.1.0/28", "10.0.2.0/28"} {
		ip := netip.MustParsePrefix(p).Addr()
		for n := range 16 {
			key := ip.String()
			cn.Spec.IPAM.Pool[key] = ipamtypes.AllocationIP{Resource: "eni-1"}
			switch {
			case i == 0 && n < busy, i == 1 && n < used:
				cn.Status.IPAM.Used[key] = ipamtypes.AllocationIP{Owner: fmt.Sprintf("trace/pod-%d-%d", i, n), Resource: "eni-1"}
			case i == 0:
				cn.Status.IPAM.ReleaseIPs[key] = ipamtypes.IPReleaseStatus(state)
			}
			ip = ip.Next()
		}
	}
	return cn
}

// TestCountFree: a node giving a /28 back whose last two pods still run
// holds 25 free addresses (14 acknowledged members, 11 in service) and
// 11 at rest; a member the agent has not acknowledged yet (marked) still
// counts at rest, so the same node with its members only marked is above
// the bound both ways.
func TestCountFree(t *testing.T) {
	nodes := []ciliumv2.CiliumNode{
		prefixNode("acked", 2, ipamoption.IPAMReadyForRelease, 5),
		prefixNode("marked", 2, ipamoption.IPAMMarkForRelease, 5),
	}
	f := countFree(nodes, 24)
	if f.freeMax != 25 || f.freeOver != 2 {
		t.Errorf("free: max %d, %d nodes above 24; want 25 and 2", f.freeMax, f.freeOver)
	}
	if f.restMax != 25 || f.restOver != 1 {
		t.Errorf("at rest: max %d, %d nodes above 24; want 25 (the marked node) and 1", f.restMax, f.restOver)
	}
	if want := (11.0 + 25.0) / 2; f.restMean != want || f.freeMean != 25 {
		t.Errorf("means: free %.2f, at rest %.2f; want 25 and %.2f", f.freeMean, f.restMean, want)
	}
	if len(f.over) != 2 {
		t.Errorf("described %d nodes above the bound, want 2: %q", len(f.over), f.over)
	}
	if acked := countFree(nodes[:1], 24); acked.restMax != 11 || acked.restOver != 0 {
		t.Errorf("acknowledged node at rest: max %d, %d above; want 11 and 0", acked.restMax, acked.restOver)
	}
}
