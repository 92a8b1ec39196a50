package maxpods

import (
	"errors"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
)

// TestCompute: the pool, what the node may hold, and EKS's ceiling, for
// types whose figures are checked by hand; prefixes only where EC2
// delegates them; a policy leaving no ENI is an error.
func TestCompute(t *testing.T) {
	m5 := cloud.InstanceType{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10, Hypervisor: "nitro", VCPUs: 2}
	xen := cloud.InstanceType{Name: "m4.large", MaxENIs: 2, IPv4PerENI: 10, Hypervisor: "xen", VCPUs: 2}
	metal := cloud.InstanceType{Name: "m5.metal", MaxENIs: 15, IPv4PerENI: 50, BareMetal: true, VCPUs: 96}
	vcpus30 := cloud.InstanceType{Name: "x.30", MaxENIs: 8, IPv4PerENI: 30, Hypervisor: "nitro", VCPUs: 30}
	for _, c := range []struct {
		name string
		in   Input
		want Result
	}{
		{"m5.large", Input{Type: m5, AgentEndpointIPs: 2, HostNetworkPods: 2}, Result{PoolIPs: 27, PodENIs: 3, MaxAllowed: 27, Recommended: 27}},
		{"m5.large, prefixes", Input{Type: m5, PrefixDelegation: true, AgentEndpointIPs: 2, HostNetworkPods: 2},
			Result{PoolIPs: 432, PodENIs: 3, PrefixDelegation: true, MaxAllowed: 432, Recommended: 110}},
		{"xen takes no prefix", Input{Type: xen, PrefixDelegation: true}, Result{PoolIPs: 18, PodENIs: 2, MaxAllowed: 18, Recommended: 18}},
		{"bare metal takes prefixes", Input{Type: metal, PrefixDelegation: true, FirstInterfaceIndex: 1, ReservedENIs: 1},
			Result{PoolIPs: 13 * 49 * 16, PodENIs: 13, PrefixDelegation: true, MaxAllowed: 13 * 49 * 16, Recommended: 250}},
		{"max allocate", Input{Type: m5, MaxAllocate: 20, AgentEndpointIPs: 2, HostNetworkPods: 3}, Result{PoolIPs: 20, PodENIs: 3, MaxAllowed: 21, Recommended: 21}},
		{"30 vCPUs: 110", Input{Type: vcpus30}, Result{PoolIPs: 232, PodENIs: 8, MaxAllowed: 232, Recommended: 110}},
	} {
		got, err := Compute(c.in)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := Compute(Input{Type: m5, FirstInterfaceIndex: 2, ReservedENIs: 1}); !errors.Is(err, ErrNoPodENI) {
		t.Errorf("no ENI left: %v", err)
	}
}
