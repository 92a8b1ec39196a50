package ciliumnode_test

import (
	"errors"
	"net/netip"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/enipam/enipam/nodeagent/ciliumnode"
)

// ciliumNode builds a CiliumNode as the operator writes it; options add
// ENIs, pool IPs and spec.eni settings.
func ciliumNode(opts ...func(*ciliumv2.CiliumNode)) *ciliumv2.CiliumNode {
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-10.ec2.internal"}}
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for _, o := range opts {
		o(cn)
	}
	return cn
}

func withENI(id string, number int, mac, cidr string, tags map[string]string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		e := awstypes.ENI{ID: id, Number: number, MAC: mac, Tags: tags}
		if p, err := netip.ParsePrefix(cidr); err == nil {
			e.Subnet = awstypes.AwsSubnet{ID: "subnet-" + id, CIDR: iputil.PrefixFrom(p)}
		}
		cn.Status.ENI.ENIs[id] = e
	}
}

func withPool(resource string, ips ...string) func(*ciliumv2.CiliumNode) {
	return func(cn *ciliumv2.CiliumNode) {
		for _, ip := range ips {
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: resource}
		}
	}
}

// TestToNodeManagesSecondaryENIsOnly: a node with its primary ENI
// (device 0) holding pool IPs (first-interface-index 0), a secondary ENI
// (device 1), and one excluded by tag (device 2). Only the secondary is
// managed, with gateway 10.0.2.1 and its two pool IPs; the IPs on the
// primary and on the excluded ENI are skipped without complaint.
func TestToNodeManagesSecondaryENIsOnly(t *testing.T) {
	first := 0
	cn := ciliumNode(
		withENI("eni-primary", 0, "02:00:00:00:00:00", "10.0.1.0/24", nil),
		withENI("eni-a", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-x", 2, "02:00:00:00:00:02", "10.0.3.0/24", map[string]string{"no-pods": "true"}),
		withPool("eni-primary", "10.0.1.20"),
		withPool("eni-a", "10.0.2.11", "10.0.2.10"),
		withPool("eni-x", "10.0.3.10"),
		func(cn *ciliumv2.CiliumNode) {
			cn.Spec.ENI.FirstInterfaceIndex = &first
			cn.Spec.ENI.ExcludeInterfaceTags = map[string]string{"no-pods": "true"}
		},
	)
	node, problems := ciliumnode.ToNode(cn)
	if len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
	if len(node.ENIs) != 1 {
		t.Fatalf("managed ENIs %+v, want eni-a alone", node.ENIs)
	}
	e := node.ENIs[0]
	if e.ID != "eni-a" || e.Number != 1 || e.MAC.String() != "02:00:00:00:00:01" || e.Gateway != netip.MustParseAddr("10.0.2.1") {
		t.Errorf("eni-a = %+v", e)
	}
	if len(e.IPs) != 2 || e.IPs[0] != netip.MustParseAddr("10.0.2.10") || e.IPs[1] != netip.MustParseAddr("10.0.2.11") {
		t.Errorf("eni-a IPs = %v, want 10.0.2.10 and 10.0.2.11", e.IPs)
	}
}

// TestToNodeFirstInterfaceIndexExcludesLowerDevices: with
// first-interface-index 2, device 1 is not enipam's even though it is a
// secondary ENI.
func TestToNodeFirstInterfaceIndexExcludesLowerDevices(t *testing.T) {
	first := 2
	cn := ciliumNode(
		withENI("eni-1", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-2", 2, "02:00:00:00:00:02", "10.0.3.0/24", nil),
		withPool("eni-2", "10.0.3.10"),
		func(cn *ciliumv2.CiliumNode) { cn.Spec.ENI.FirstInterfaceIndex = &first },
	)
	node, _ := ciliumnode.ToNode(cn)
	if len(node.ENIs) != 1 || node.ENIs[0].ID != "eni-2" {
		t.Errorf("managed ENIs %+v, want eni-2 alone", node.ENIs)
	}
}

// TestToNodeMalformedPartsAreReportedAndSkipped: a bad MAC, a missing
// subnet CIDR, a pool key that is not an IP and a pool IP on an ENI the
// status does not know are each reported with a typed reason; the healthy
// ENI is still returned with its IP.
func TestToNodeMalformedPartsAreReportedAndSkipped(t *testing.T) {
	cn := ciliumNode(
		withENI("eni-ok", 1, "02:00:00:00:00:01", "10.0.2.0/24", nil),
		withENI("eni-badmac", 2, "zz", "10.0.3.0/24", nil),
		withENI("eni-nocidr", 3, "02:00:00:00:00:03", "", nil),
		withPool("eni-ok", "10.0.2.10", "not-an-ip"),
		withPool("eni-gone", "10.0.9.9"),
	)
	node, problems := ciliumnode.ToNode(cn)
	want := map[string]error{
		"eni-badmac": ciliumnode.ErrBadMAC,
		"eni-nocidr": ciliumnode.ErrBadSubnet,
		"not-an-ip":  ciliumnode.ErrBadPoolIP,
		"10.0.9.9":   ciliumnode.ErrUnknownENI,
	}
	if len(problems) != len(want) {
		t.Errorf("problems %v, want %d", problems, len(want))
	}
	for _, err := range problems {
		var p *ciliumnode.Problem
		if !errors.As(err, &p) || !errors.Is(err, want[p.Item]) {
			t.Errorf("problem %v: want %v", err, want[p.Item])
		}
	}
	if len(node.ENIs) != 1 || len(node.ENIs[0].IPs) != 1 {
		t.Errorf("node %+v, want eni-ok with 10.0.2.10", node)
	}
}

// TestGatewayIsFirstHostOfSubnet: the VPC router sits at the subnet's
// network address + 1, whatever host bits the CIDR was written with.
func TestGatewayIsFirstHostOfSubnet(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.0.2.0/24":    "10.0.2.1",
		"10.0.2.77/24":   "10.0.2.1",
		"172.31.32.0/20": "172.31.32.1",
		"100.64.0.16/28": "100.64.0.17",
	} {
		got, err := ciliumnode.Gateway(netip.MustParsePrefix(cidr))
		if err != nil || got != netip.MustParseAddr(want) {
			t.Errorf("Gateway(%s) = %v, %v; want %s", cidr, got, err, want)
		}
	}
	for _, bad := range []string{"fd00::/64", "10.0.0.4/31"} {
		if _, err := ciliumnode.Gateway(netip.MustParsePrefix(bad)); !errors.Is(err, ciliumnode.ErrBadSubnet) {
			t.Errorf("Gateway(%s) err = %v, want ErrBadSubnet", bad, err)
		}
	}
	if _, err := ciliumnode.Gateway(netip.Prefix{}); !errors.Is(err, ciliumnode.ErrBadSubnet) {
		t.Errorf("Gateway(zero) err = %v, want ErrBadSubnet", err)
	}
}
