package ciliumnode

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestToNodeRoutesTheUnionOfSpecAndStatusENIs: the ENIs the agent routes
// are the NodeRouting's spec.enis and those only the CiliumNode's
// status.eni.enis lists. eni-a is in both: the spec's entry wins whole
// (its MAC, subnet and addresses; the status's stale 10.0.2.99 is not
// routed). eni-b, in the spec alone (a joining node's ENI whose copy to
// the status waits), is routed with its listed addresses, VPC CIDRs and
// gateway, before any of them is pooled. eni-c, in the status alone (an
// earlier operator), is routed as before. A spec value that does not
// parse is left out and reported; eni-d, excluded by a tag the spec
// carries, is not managed.
func TestToNodeRoutesTheUnionOfSpecAndStatusENIs(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{
		"eni-a": {ID: "eni-a", MAC: "02:00:00:00:00:99", Number: 1, Subnet: awstypes.AwsSubnet{CIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.9.0/24"))},
			Addresses: []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.2.99"))}},
		"eni-c": {ID: "eni-c", MAC: "02:00:00:00:00:03", Number: 3, Subnet: awstypes.AwsSubnet{CIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.4.0/24"))},
			Addresses: []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.4.10"))}},
	}
	spec := &enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: 1, ExcludeInterfaceTags: map[string]string{"skip": "yes"}, ENIs: []enipamv1alpha1.NodeENI{
		{ID: "eni-a", MAC: "02:00:00:00:00:01", Number: 1, SubnetCIDR: "10.0.2.0/24", Addresses: []string{"10.0.2.10"}},
		{ID: "eni-b", MAC: "02:00:00:00:00:02", Number: 2, SubnetCIDR: "10.0.3.0/24", VPCCIDRs: []string{"10.0.0.0/16", "10.1.0.0/16"},
			PrimaryIP: "10.0.3.4", Addresses: []string{"10.0.3.10", "not-an-ip"}, Prefixes: []string{"10.0.3.32/28"}},
		{ID: "eni-d", MAC: "02:00:00:00:00:04", Number: 4, SubnetCIDR: "10.0.5.0/24", Addresses: []string{"10.0.5.10"}, Tags: map[string]string{"skip": "yes"}},
	}}
	node, _, problems := ToNode(cn, spec)
	byID := map[string]int{}
	for i, e := range node.ENIs {
		byID[e.ID] = i
	}
	if _, ok := byID["eni-d"]; ok {
		t.Errorf("eni-d, excluded by its tag, is routed")
	}
	a, ok := byID["eni-a"]
	if !ok {
		t.Fatalf("eni-a not routed: %+v", node.ENIs)
	}
	if e := node.ENIs[a]; e.MAC.String() != "02:00:00:00:00:01" || e.Gateway != netip.MustParseAddr("10.0.2.1") ||
		!slices.Equal(e.IPs, []netip.Addr{netip.MustParseAddr("10.0.2.10")}) {
		t.Errorf("eni-a = MAC %s, gateway %s, IPs %v; want the spec's: 02:00:00:00:00:01, 10.0.2.1, [10.0.2.10]", e.MAC, e.Gateway, e.IPs)
	}
	b, ok := byID["eni-b"]
	if !ok {
		t.Fatalf("eni-b, listed by spec.enis alone, not routed: %+v", node.ENIs)
	}
	if e := node.ENIs[b]; e.Number != 2 || e.Gateway != netip.MustParseAddr("10.0.3.1") ||
		!slices.Equal(e.IPs, []netip.Addr{netip.MustParseAddr("10.0.3.10")}) ||
		!slices.Equal(e.Prefixes, []netip.Prefix{netip.MustParsePrefix("10.0.3.32/28")}) ||
		!slices.Contains(e.VPCCIDRs, netip.MustParsePrefix("10.1.0.0/16")) {
		t.Errorf("eni-b = %+v; want device 2, gateway 10.0.3.1, 10.0.3.10, 10.0.3.32/28 and both VPC CIDRs", e)
	}
	c, ok := byID["eni-c"]
	if !ok || !slices.Equal(node.ENIs[c].IPs, []netip.Addr{netip.MustParseAddr("10.0.4.10")}) {
		t.Errorf("eni-c, listed by status.eni.enis alone, not routed with 10.0.4.10: %+v", node.ENIs)
	}
	if len(problems) != 1 || !errors.Is(problems[0], ErrBadSpecENI) {
		t.Errorf("problems %v, want the one unparsable address of eni-b", problems)
	}
}
