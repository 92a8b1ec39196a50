package chaos

import (
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// eni builds an ENI of the dump attached to instance at index (no
// attachment when instance is empty) holding a primary and secondaries.
func eni(id, instance string, index int, ips ...string) ec2sim.NetworkInterface {
	e := ec2sim.NetworkInterface{NetworkInterfaceID: id, Status: "in-use", Tags: []ec2sim.Tag{{Key: cloud.TagCluster, Value: clusterName}}}
	if instance == "" {
		e.Status = "available"
	} else {
		e.Attachment = &ec2sim.Attachment{InstanceID: instance, DeviceIndex: index, Status: "attached"}
	}
	e.PrivateIPAddresses = append(e.PrivateIPAddresses, ec2sim.PrivateIPAddress{PrivateIPAddress: "10.9.9." + id[len(id)-1:], Primary: true})
	for _, ip := range ips {
		e.PrivateIPAddresses = append(e.PrivateIPAddresses, ec2sim.PrivateIPAddress{PrivateIPAddress: ip})
	}
	return e
}

// ciliumNode builds a CiliumNode whose pool maps each IP to its ENI.
func ciliumNode(name string, pool map[string]string, used []string, release map[string]ipamtypes.IPReleaseStatus) ciliumv2.CiliumNode {
	cn := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
	for ip, e := range pool {
		cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: e}
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
	for _, ip := range used {
		cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: "pod"}
	}
	cn.Status.IPAM.ReleaseIPs = release
	return cn
}

// TestCheckCountsEachBreachOnce: a clean pair of nodes counts nothing;
// each breach planted on top of it is counted once, under its name, and
// nothing else is counted but its unavoidable consequence (an address in
// two pools is off its ENI on one of the nodes).
func TestCheckCountsEachBreachOnce(t *testing.T) {
	needs := map[string]nodeNeed{
		"a": {instance: "i-a", firstIndex: 0, enis: 1},
		"b": {instance: "i-b", firstIndex: 1, enis: 1},
	}
	clean := func() (ec2sim.Dump, []ciliumv2.CiliumNode) {
		dump := ec2sim.Dump{NetworkInterfaces: []ec2sim.NetworkInterface{
			eni("eni-1", "i-a", 0, "10.0.0.1", "10.0.0.2"),
			eni("eni-2", "i-b", 0, "10.0.1.9"), // primary-only use: not a pod ENI of b
			eni("eni-3", "i-b", 1, "10.0.2.1", "10.0.2.2"),
		}}
		cns := []ciliumv2.CiliumNode{
			ciliumNode("a", map[string]string{"10.0.0.1": "eni-1", "10.0.0.2": "eni-1"}, []string{"10.0.0.1"}, nil),
			ciliumNode("b", map[string]string{"10.0.2.1": "eni-3", "10.0.2.2": "eni-3"}, nil,
				map[string]ipamtypes.IPReleaseStatus{"10.0.2.2": "marked-for-release"}),
		}
		return dump, cns
	}
	dump, cns := clean()
	if f := check(dump, cns, needs, clusterName); f.Total() != 0 {
		t.Fatalf("clean nodes: %+v", f)
	}

	for _, tc := range []struct {
		name  string
		plant func(*ec2sim.Dump, []ciliumv2.CiliumNode)
		count func(Findings) int
		total int
	}{
		{"an IP in two pools", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			cns[1].Spec.IPAM.Pool["10.0.0.2"] = ipamtypes.AllocationIP{Resource: "eni-3"}
		}, func(f Findings) int { return f.IPsInTwoPools }, 2},
		{"a free IP EC2 no longer has", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			d.NetworkInterfaces[0].PrivateIPAddresses = d.NetworkInterfaces[0].PrivateIPAddresses[:2]
		}, func(f Findings) int { return f.FreeOffENI }, 1},
		{"a used IP on another node's ENI", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			cns[0].Spec.IPAM.Pool["10.0.0.1"] = ipamtypes.AllocationIP{Resource: "eni-3"}
		}, func(f Findings) int { return f.UsedOffENI }, 1},
		{"an EC2 address the pool lacks", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			d.NetworkInterfaces[2].PrivateIPAddresses = append(d.NetworkInterfaces[2].PrivateIPAddresses, ec2sim.PrivateIPAddress{PrivateIPAddress: "10.0.2.3"})
		}, func(f Findings) int { return f.MissingFromPool }, 1},
		{"a released IP still in the pool", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			cns[1].Status.IPAM.ReleaseIPs["10.0.2.2"] = "released"
		}, func(f Findings) int { return f.ReleasedInPool }, 1},
		{"a duplicate ENI", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			d.NetworkInterfaces = append(d.NetworkInterfaces, eni("eni-4", "i-b", 2))
		}, func(f Findings) int { return f.ExtraENIs }, 1},
		{"a leaked ENI", func(d *ec2sim.Dump, cns []ciliumv2.CiliumNode) {
			d.NetworkInterfaces = append(d.NetworkInterfaces, eni("eni-5", "", 0))
		}, func(f Findings) int { return f.LeakedENIs }, 1},
	} {
		dump, cns := clean()
		tc.plant(&dump, cns)
		f := check(dump, cns, needs, clusterName)
		if tc.count(f) != 1 || f.Total() != tc.total {
			t.Errorf("%s: counted %d of %d breaches, want 1 of %d: %v", tc.name, tc.count(f), f.Total(), tc.total, f.Details)
		}
	}
}

// TestENIsNeeded: ENIs of 15 addresses hold 14 pool addresses each.
func TestENIsNeeded(t *testing.T) {
	for target, want := range map[int]int{0: 0, 1: 1, 14: 1, 15: 2, 24: 2, 28: 2, 29: 3} {
		if got := enisNeeded(target, 15); got != want {
			t.Errorf("%d addresses: %d ENIs, want %d", target, got, want)
		}
	}
}
