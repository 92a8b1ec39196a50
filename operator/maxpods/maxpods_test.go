package maxpods

import (
	"errors"
	"testing"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
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
		{"m5.large", Input{Type: m5, AgentEndpointIPs: 2, HostNetworkPods: 2}, Result{PoolIPs: 27, PodENIs: 3, MaxAllowed: 27, Recommended: 27, LimitedBy: LimitIPv4}},
		{"m5.large, prefixes", Input{Type: m5, PrefixDelegation: true, AgentEndpointIPs: 2, HostNetworkPods: 2},
			Result{PoolIPs: 432, PodENIs: 3, PrefixDelegation: true, MaxAllowed: 432, Recommended: 110, LimitedBy: LimitCeiling}},
		{"xen takes no prefix", Input{Type: xen, PrefixDelegation: true}, Result{PoolIPs: 18, PodENIs: 2, MaxAllowed: 18, Recommended: 18, LimitedBy: LimitIPv4}},
		{"bare metal takes prefixes", Input{Type: metal, PrefixDelegation: true, FirstInterfaceIndex: 1, ReservedENIs: 1},
			Result{PoolIPs: 13 * 49 * 16, PodENIs: 13, PrefixDelegation: true, MaxAllowed: 13 * 49 * 16, Recommended: 250, LimitedBy: LimitCeiling}},
		{"max allocate", Input{Type: m5, MaxAllocate: 20, AgentEndpointIPs: 2, HostNetworkPods: 3}, Result{PoolIPs: 20, PodENIs: 3, MaxAllowed: 21, Recommended: 21, LimitedBy: LimitIPv4}},
		{"30 vCPUs: 110", Input{Type: vcpus30}, Result{PoolIPs: 232, PodENIs: 8, MaxAllowed: 232, Recommended: 110, LimitedBy: LimitCeiling}},
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

// TestComputeIPv6AndDualStack: what limits a node when pods get IPv6.
// m5.large (3 ENIs × 10 IPv4 and 10 IPv6 addresses, nitro) takes a /80,
// so dual-stack is limited by its IPv4 pool as before and IPv6 alone by
// EKS's ceiling; m4.large (xen, 2 ENIs × 10 IPv6) gets single IPv6
// addresses: 2 × 10 less the node's own on the primary ENI, 19, which
// limits it dual-stack when its IPv4 pool is larger (its 18 is not), and
// alone; maxAllocate caps the IPv6 pool as well; a type without IPv6
// (m1.small) refuses IPv6 with ErrNoIPv6, and a bad family is an error.
func TestComputeIPv6AndDualStack(t *testing.T) {
	m5 := cloud.InstanceType{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10, IPv6PerENI: 10, Hypervisor: "nitro", VCPUs: 2}
	xen := cloud.InstanceType{Name: "m4.large", MaxENIs: 2, IPv4PerENI: 10, IPv6PerENI: 10, Hypervisor: "xen", VCPUs: 2}
	xenWide := cloud.InstanceType{Name: "x.wide", MaxENIs: 2, IPv4PerENI: 30, IPv6PerENI: 10, Hypervisor: "xen", VCPUs: 2}
	dual := []enipamv1alpha1.IPFamily{"IPv4", "IPv6"}
	only6 := []enipamv1alpha1.IPFamily{"IPv6"}
	for _, c := range []struct {
		name string
		in   Input
		want Result
	}{
		{"m5.large dual-stack", Input{Type: m5, IPFamilies: dual, AgentEndpointIPs: 2, HostNetworkPods: 2},
			Result{PoolIPs: 27, IPv6PoolIPs: IPv6PrefixAddresses, IPv6Prefix: true, PodENIs: 3, MaxAllowed: 27, Recommended: 27, LimitedBy: LimitIPv4}},
		{"m5.large IPv6 alone", Input{Type: m5, IPFamilies: only6, AgentEndpointIPs: 2, HostNetworkPods: 2},
			Result{IPv6PoolIPs: IPv6PrefixAddresses, IPv6Prefix: true, PodENIs: 3, MaxAllowed: IPv6PrefixAddresses, Recommended: 110, LimitedBy: LimitCeiling}},
		{"m4.large dual-stack", Input{Type: xen, IPFamilies: dual, AgentEndpointIPs: 2, HostNetworkPods: 2},
			Result{PoolIPs: 18, IPv6PoolIPs: 19, PodENIs: 2, MaxAllowed: 18, Recommended: 18, LimitedBy: LimitIPv4}},
		{"wider IPv4 on xen dual-stack", Input{Type: xenWide, IPFamilies: dual, AgentEndpointIPs: 2, HostNetworkPods: 2},
			Result{PoolIPs: 58, IPv6PoolIPs: 19, PodENIs: 2, MaxAllowed: 19, Recommended: 19, LimitedBy: LimitIPv6}},
		{"m4.large IPv6 alone, primary kept", Input{Type: xen, IPFamilies: only6, FirstInterfaceIndex: 1, AgentEndpointIPs: 2},
			Result{IPv6PoolIPs: 10, PodENIs: 1, MaxAllowed: 8, Recommended: 8, LimitedBy: LimitIPv6}},
		{"max allocate caps IPv6", Input{Type: m5, IPFamilies: only6, MaxAllocate: 20, AgentEndpointIPs: 2},
			Result{IPv6PoolIPs: 20, IPv6Prefix: true, PodENIs: 3, MaxAllowed: 18, Recommended: 18, LimitedBy: LimitIPv6}},
	} {
		got, err := Compute(c.in)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	noIPv6 := cloud.InstanceType{Name: "m1.small", MaxENIs: 2, IPv4PerENI: 4, Hypervisor: "xen", VCPUs: 1}
	if _, err := Compute(Input{Type: noIPv6, IPFamilies: dual}); !errors.Is(err, ErrNoIPv6) {
		t.Errorf("IPv6 on m1.small: %v, want ErrNoIPv6", err)
	}
	if _, err := Compute(Input{Type: m5, IPFamilies: []enipamv1alpha1.IPFamily{"IPv5"}}); err == nil {
		t.Error("ipFamilies IPv5 accepted")
	}
}

// TestOptionsIPFamilies: --ip-families takes IPv4, IPv6 or both,
// comma-separated in either order, and refuses anything else.
func TestOptionsIPFamilies(t *testing.T) {
	for v, ok := range map[string]bool{"IPv4": true, "IPv6": true, "IPv4,IPv6": true, "IPv6, IPv4": true, "": false, "ipv4": false, "IPv4,IPv4": false, "IPv4,IPv6,IPv4": false} {
		o := DefaultOptions()
		o.InstanceType, o.IPFamilies = "m5.large", v
		if err := o.Validate(); (err == nil) != ok {
			t.Errorf("--ip-families %q: %v", v, err)
		}
	}
}
