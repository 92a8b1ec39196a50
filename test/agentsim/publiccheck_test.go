package agentsim

import (
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestCheckPublicIPsCountsEachBreach: EC2 has .10, .11, .12 and .13 on
// eni-a. Claim db-0 (Bound on .10) records eipalloc-1, associated with .10
// on eni-a: where it belongs. eipalloc-2 sits on .11, an unstamped pool
// address; eipalloc-3 on .12, stamped for db-1 but held by pod web-9.
// Claim db-2 (Bound on .13) records eipalloc-4, which is not associated,
// and eipalloc-5, tagged for db-2 too, is associated with .13 as well as
// eipalloc-6: db-2 has two. eipalloc-7, tagged for the cluster and a
// claim gone, is recorded by nobody. The breaches that hold at every
// moment are counted on every look, those at rest only at rest.
func TestCheckPublicIPsCountsEachBreach(t *testing.T) {
	tags := func(owner string) []ec2sim.Tag {
		return []ec2sim.Tag{{Key: "enipam.io/cluster", Value: "c1"}, {Key: "enipam.io/claim", Value: owner}}
	}
	assoc := func(id, ip string, tagged []ec2sim.Tag) ec2sim.Address {
		return ec2sim.Address{AllocationID: id, PublicIP: "198.51.100." + id[len(id)-1:], AssociationID: "eipassoc-" + id, NetworkInterfaceID: "eni-a", PrivateIPAddress: ip, Tags: tagged}
	}
	dump := ec2sim.Dump{
		NetworkInterfaces: []ec2sim.NetworkInterface{{NetworkInterfaceID: "eni-a", Attachment: &ec2sim.Attachment{InstanceID: "i-1"},
			PrivateIPAddresses: []ec2sim.PrivateIPAddress{{PrivateIPAddress: "10.0.0.5", Primary: true},
				{PrivateIPAddress: "10.0.0.10"}, {PrivateIPAddress: "10.0.0.11"}, {PrivateIPAddress: "10.0.0.12"}, {PrivateIPAddress: "10.0.0.13"}}}},
		Addresses: []ec2sim.Address{
			assoc("eipalloc-1", "10.0.0.10", tags("db/db-0")),
			assoc("eipalloc-2", "10.0.0.11", nil),
			assoc("eipalloc-3", "10.0.0.12", nil),
			{AllocationID: "eipalloc-4", PublicIP: "198.51.100.4", Tags: tags("db/db-2")},
			assoc("eipalloc-5", "10.0.0.13", tags("db/db-2")),
			assoc("eipalloc-6", "10.0.0.13", tags("db/db-2")),
			{AllocationID: "eipalloc-7", PublicIP: "198.51.100.7", Tags: tags("db/gone")},
		},
	}
	cn := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.0.10": {Owner: "db/db-0", Resource: "eni-a"}, "10.0.0.11": {Resource: "eni-a"},
		"10.0.0.12": {Owner: "db/db-1", Resource: "eni-a"}, "10.0.0.13": {Owner: "db/db-2", Resource: "eni-a"},
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.0.10": {Owner: "db/db-0"}, "10.0.0.12": {Owner: "db/web-9"}}
	claim := func(name, ip, alloc string) enipamv1alpha1.StaticIPClaim {
		return enipamv1alpha1.StaticIPClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name},
			Spec:       enipamv1alpha1.StaticIPClaimSpec{PublicIP: &enipamv1alpha1.PublicIPRequest{Allocate: true}},
			Status: enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimBound, Address: ip,
				PublicIP: &enipamv1alpha1.ClaimPublicIP{AllocationID: alloc, Allocated: true}},
		}
	}
	claims := []enipamv1alpha1.StaticIPClaim{claim("db-0", "10.0.0.10", "eipalloc-1"), claim("db-2", "10.0.0.13", "eipalloc-4")}
	nodes := []ciliumv2.CiliumNode{cn}

	f := CheckPublicIPs(claims, nodes, dump, "c1", false)
	if f.OnOrdinaryAddress != 1 || f.OnOtherPod != 1 || f.TwicePerClaim != 1 || f.Unassociated != 0 || f.Leaked != 0 {
		t.Errorf("any moment: %s; want 1 on an unstamped address, 1 on another pod's, 1 claim with two", f)
	}
	f = CheckPublicIPs(claims, nodes, dump, "c1", true)
	if f.OnOrdinaryAddress != 1 || f.OnOtherPod != 1 || f.TwicePerClaim != 1 || f.Unassociated != 1 || f.Leaked != 3 || f.Associated != 1 {
		t.Errorf("at rest: %s %v; want also db-2 without its own, eipalloc-5, -6 and -7 leaked, db-0's where it belongs", f, f.Details)
	}
	if f := CheckPublicIPs(claims[:1], nodes, ec2sim.Dump{NetworkInterfaces: dump.NetworkInterfaces, Addresses: dump.Addresses[:1]}, "c1", true); f.Total() != 0 || f.Associated != 1 {
		t.Errorf("db-0 alone: %s %v", f, f.Details)
	}
}
