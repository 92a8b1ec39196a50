package agentsim

import (
	"net/netip"
	"slices"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestRoutedListsTheHeldAddressesOfAnENIThePolicyDrops: eni-1 (device 1)
// holds 10.0.2.10 (in use), 10.0.2.11 (pooled, free), 10.0.2.12 (pooled,
// released) and lists 10.0.2.13 (not pooled); eni-2 (device 2) lists
// 10.0.3.10. Under first interface index 1 both ENIs report what they
// list and hold, released aside. Under 2, as enipam-agent does, eni-1
// reports its held addresses alone; once none is held it is left out.
func TestRoutedListsTheHeldAddressesOfAnENIThePolicyDrops(t *testing.T) {
	addr := func(s string) iputil.Addr { return iputil.AddrFrom(netip.MustParseAddr(s)) }
	cn := &ciliumv2.CiliumNode{}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{
		"eni-1": {ID: "eni-1", Number: 1, MAC: "02:00:00:00:00:01", Addresses: []iputil.Addr{addr("10.0.2.10"), addr("10.0.2.13")}},
		"eni-2": {ID: "eni-2", Number: 2, MAC: "02:00:00:00:00:02", Addresses: []iputil.Addr{addr("10.0.3.10")}},
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.2.10": {Resource: "eni-1"}, "10.0.2.11": {Resource: "eni-1"}, "10.0.2.12": {Resource: "eni-1"}}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.2.10": {Resource: "eni-1", Owner: "default/pod-a"}}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.2.12": "released"}

	listed := func(first int32) map[string][]string {
		out := map[string][]string{}
		for _, e := range Routed(cn, &enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: first}, nil) {
			out[e.ID] = e.IPs
		}
		return out
	}
	if got := listed(1); !slices.Equal(got["eni-1"], []string{"10.0.2.10", "10.0.2.11", "10.0.2.13"}) || !slices.Equal(got["eni-2"], []string{"10.0.3.10"}) {
		t.Errorf("first interface index 1: %v", got)
	}
	if got := listed(2); len(got) != 2 || !slices.Equal(got["eni-1"], []string{"10.0.2.10", "10.0.2.11"}) {
		t.Errorf("first interface index 2: %v, want eni-1 with its two held addresses and eni-2", got)
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	cn.Status.IPAM.Used = nil
	if got := listed(2); len(got) != 1 || got["eni-2"] == nil {
		t.Errorf("nothing held on eni-1: %v, want eni-2 alone", got)
	}
}

// TestRoutedReportsIPv6AsTheAgentDoes: eni-1 (device 1) lists
// 2001:db8:2::10 and the /80 2001:db8:2:0:b::/80, and the pool holds
// 10.0.2.10, 2001:db8:2::11 and two window addresses of the /80, one of
// them released. Under first interface index 1 the ENI reports its IPv4
// address in ips, the two IPv6 addresses outside the prefix in ipv6 and
// the /80 whole in ipv6Prefixes, as enipam-agent does. Under 2 (the
// policy drops the ENI) only the held addresses stay: 10.0.2.10, and
// 2001:db8:2::11 and the free window address one by one, sorted by
// address as the agent sorts them.
func TestRoutedReportsIPv6AsTheAgentDoes(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{
		"eni-1": {ID: "eni-1", Number: 1, MAC: "02:00:00:00:00:01",
			Addresses:    []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("2001:db8:2::10"))},
			IPv6Prefixes: []iputil.Prefix{iputil.PrefixFrom(netip.MustParsePrefix("2001:db8:2:0:b::/80"))}},
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.2.10": {Resource: "eni-1"}, "2001:db8:2::11": {Resource: "eni-1"},
		"2001:db8:2:0:b::1": {Resource: "eni-1"}, "2001:db8:2:0:b::2": {Resource: "eni-1"}}
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"2001:db8:2:0:b::2": "released"}

	got := Routed(cn, &enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: 1}, nil)
	if len(got) != 1 || !slices.Equal(got[0].IPs, []string{"10.0.2.10"}) || !slices.Equal(got[0].IPv6, []string{"2001:db8:2::10", "2001:db8:2::11"}) ||
		!slices.Equal(got[0].IPv6Prefixes, []string{"2001:db8:2:0:b::/80"}) {
		t.Errorf("managed: %+v", got)
	}
	status := enipamv1alpha1.NodeRoutingStatus{ENIs: got}
	if !status.Routes("eni-1", "2001:db8:2:0:b::1") || status.Routes("eni-1", "2001:db8:3::1") {
		t.Error("a window address inside the /80 is not reported routed, or one outside it is")
	}
	got = Routed(cn, &enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: 2}, nil)
	if len(got) != 1 || !slices.Equal(got[0].IPv6, []string{"2001:db8:2::11", "2001:db8:2:0:b::1"}) || len(got[0].IPv6Prefixes) != 0 {
		t.Errorf("dropped by the policy: %+v", got)
	}
}
