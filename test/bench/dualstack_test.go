package bench

import (
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/test/agentsim"
)

// TestOnlyFamilySplitsAPoolByFamily: the per-family pool check sees a
// node's pool, used and release entries of its family only, and leaves
// the node it was given whole.
func TestOnlyFamilySplitsAPoolByFamily(t *testing.T) {
	var cn ciliumv2.CiliumNode
	cn.Name = "n"
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.0.5": {Resource: "eni-1"}, "10.0.0.6": {Resource: "eni-1"}, "2600:1f18:abc:de01::5": {Resource: "eni-0"}}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.0.5": {Resource: "eni-1"}, "2600:1f18:abc:de01::5": {Resource: "eni-0"}}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.0.6": ipamoption.IPAMMarkForRelease}
	nodes := []ciliumv2.CiliumNode{cn}

	v4, v6 := onlyFamily(nodes, false)[0], onlyFamily(nodes, true)[0]
	if got := poolByFamily(&v4); got != (familyCounts{v4: 2}) {
		t.Errorf("IPv4 copy's pool: %+v, want 2 IPv4 and no IPv6", got)
	}
	if got := poolByFamily(&v6); got != (familyCounts{v6: 1}) {
		t.Errorf("IPv6 copy's pool: %+v, want 1 IPv6 and no IPv4", got)
	}
	if len(v4.Status.IPAM.Used) != 1 || len(v4.Status.IPAM.ReleaseIPs) != 1 || len(v6.Status.IPAM.Used) != 1 || len(v6.Status.IPAM.ReleaseIPs) != 0 {
		t.Errorf("used/release: IPv4 %v %v, IPv6 %v %v", v4.Status.IPAM.Used, v4.Status.IPAM.ReleaseIPs, v6.Status.IPAM.Used, v6.Status.IPAM.ReleaseIPs)
	}
	if len(nodes[0].Spec.IPAM.Pool) != 3 || len(nodes[0].Status.IPAM.Used) != 2 {
		t.Errorf("the original node changed: %v", nodes[0].Spec.IPAM.Pool)
	}

	f4, f6 := violationsByFamily([]agentsim.Violation{
		{Kind: agentsim.DoubleAllocation, IP: "10.0.0.5"},
		{Kind: agentsim.HandedBeforeRouted, IP: "2600:1f18:abc:de01::5"},
		{Kind: agentsim.HandedBeforeRouted, IP: "2600:1f18:abc:de01::6"},
	})
	if f4[agentsim.DoubleAllocation] != 1 || f6[agentsim.HandedBeforeRouted] != 2 || f4[agentsim.HandedBeforeRouted] != 0 || f6[agentsim.DoubleAllocation] != 0 {
		t.Errorf("violations by family: IPv4 %v, IPv6 %v", f4, f6)
	}
}
