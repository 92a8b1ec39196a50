package agentsim

import (
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestPoolCheckerCountsPastTheGrace: EC2 has .10 and .11 on eni-a of i-1.
// Node a pools .10 (fine), .12 (free, off its ENI) and .13 (released);
// node b pools .10 too (two pools) and .11, which EC2 has on i-1's ENI,
// not b's instance. The first look counts only the two pools; a look past
// the grace counts the rest: 3 free addresses off their ENI (.12; .10 and
// .11 on b, whose instance does not hold them), 1 released. Node c's
// stamped .20 is on no ENI (counted), its stamped .21 leaves through the
// handshake (not counted).
func TestPoolCheckerCountsPastTheGrace(t *testing.T) {
	dump := ec2sim.Dump{NetworkInterfaces: []ec2sim.NetworkInterface{{
		NetworkInterfaceID: "eni-a", Attachment: &ec2sim.Attachment{InstanceID: "i-1"},
		PrivateIPAddresses: []ec2sim.PrivateIPAddress{{PrivateIPAddress: "10.0.0.5", Primary: true}, {PrivateIPAddress: "10.0.0.10"}, {PrivateIPAddress: "10.0.0.11"}},
	}}}
	node := func(name, instance string, pool map[string]string, release map[string]ipamtypes.IPReleaseStatus) ciliumv2.CiliumNode {
		cn := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cn.Spec.InstanceID = instance
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		for ip, eni := range pool {
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: eni}
		}
		cn.Status.IPAM.ReleaseIPs = release
		return cn
	}
	nodes := []ciliumv2.CiliumNode{
		node("a", "i-1", map[string]string{"10.0.0.10": "eni-a", "10.0.0.12": "eni-a", "10.0.0.13": "eni-a"},
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.13": ipamoption.IPAMReleased}),
		node("b", "i-2", map[string]string{"10.0.0.10": "eni-a", "10.0.0.11": "eni-a"}, nil),
		node("c", "i-3", map[string]string{"10.0.0.20": "eni-c", "10.0.0.21": "eni-c"},
			map[string]ipamtypes.IPReleaseStatus{"10.0.0.21": ipamoption.IPAMReadyForRelease}),
	}
	// Node c's addresses are stamped for pods: .20 is on no ENI (a
	// static address its node does not hold), .21 leaves (handshake).
	for _, ip := range []string{"10.0.0.20", "10.0.0.21"} {
		e := nodes[2].Spec.IPAM.Pool[ip]
		e.Owner = "db/db-0"
		nodes[2].Spec.IPAM.Pool[ip] = e
	}
	c := NewPoolChecker(time.Second)
	now := time.Unix(1000, 0)
	if f := c.Check(nodes, dump, now); f.InTwoPools != 1 || f.FreeOffENI != 0 || f.ReleasedInPool != 0 {
		t.Fatalf("first look %+v, want only the address in two pools", f)
	}
	f := c.Check(nodes, dump, now.Add(2*time.Second))
	if f.InTwoPools != 1 || f.FreeOffENI != 3 || f.ReleasedInPool != 1 || f.StampedOffENI != 1 || f.OnTwoENIs != 0 {
		t.Fatalf("past the grace %+v, want 1 in two pools, 3 free off their ENI, 1 released, 1 stamped off its ENI", f)
	}
}

// TestPoolCheckerIPv6: EC2 has the /80 2001:db8:0:1:a::/80 on eni-p of
// i-1 and the address 2001:db8:0:1::20 on eni-q of i-1; eni-r of i-2
// holds a /80 overlapping eni-p's (a broken emulator). Node a pools two
// window addresses of eni-p's /80 (fine), 2001:db8:0:1::20 on eni-q
// (fine), an address outside every /80 (free, off its ENI), one of the
// /80 named for eni-q (off its ENI) and one released. Node b pools one
// of node a's window addresses (two pools). Past the grace: 1 in two
// pools, 3 free off their ENI (two of a's, b's on another instance's
// /80), 1 released, 1 overlap.
func TestPoolCheckerIPv6(t *testing.T) {
	dump := ec2sim.Dump{NetworkInterfaces: []ec2sim.NetworkInterface{
		{NetworkInterfaceID: "eni-p", Attachment: &ec2sim.Attachment{InstanceID: "i-1"},
			IPv6Prefixes: []ec2sim.IPv6Prefix{{IPv6Prefix: "2001:db8:0:1:a::/80"}}},
		{NetworkInterfaceID: "eni-q", Attachment: &ec2sim.Attachment{InstanceID: "i-1"},
			IPv6Addresses: []ec2sim.IPv6Address{{IPv6Address: "2001:db8:0:1::20"}}},
		{NetworkInterfaceID: "eni-r", Attachment: &ec2sim.Attachment{InstanceID: "i-2"},
			IPv6Prefixes: []ec2sim.IPv6Prefix{{IPv6Prefix: "2001:db8:0:1:a::/96"}}},
	}}
	node := func(name, instance string, pool map[string]string, release map[string]ipamtypes.IPReleaseStatus) ciliumv2.CiliumNode {
		cn := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cn.Spec.InstanceID = instance
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		for ip, eni := range pool {
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: eni}
		}
		cn.Status.IPAM.ReleaseIPs = release
		return cn
	}
	nodes := []ciliumv2.CiliumNode{
		node("a", "i-1", map[string]string{
			"2001:db8:0:1:a::1": "eni-p", "2001:db8:0:1:a::2": "eni-p", "2001:db8:0:1::20": "eni-q",
			"2001:db8:0:1:b::1": "eni-p", "2001:db8:0:1:a::3": "eni-q", "2001:db8:0:1:a::4": "eni-p",
		}, map[string]ipamtypes.IPReleaseStatus{"2001:db8:0:1:a::4": ipamoption.IPAMReleased}),
		node("b", "i-2", map[string]string{"2001:db8:0:1:a::1": "eni-p"}, nil),
	}
	c := NewPoolChecker(time.Second)
	now := time.Unix(1000, 0)
	c.Check(nodes, dump, now)
	f := c.Check(nodes, dump, now.Add(2*time.Second))
	if f.InTwoPools != 1 || f.FreeOffENI != 3 || f.ReleasedInPool != 1 || f.OnTwoENIs != 1 {
		t.Fatalf("past the grace %+v, want 1 in two pools, 3 free off their ENI, 1 released, 1 overlap", f)
	}
}
