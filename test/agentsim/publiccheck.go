package agentsim

import (
	"fmt"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// PublicIPFindings count breaches of the claims' Elastic IP invariants
// seen in one look at the claims, the CiliumNodes and EC2's own state.
type PublicIPFindings struct {
	// OnOrdinaryAddress: Elastic IPs associated with an address that a
	// pool lists without an owner stamp, which Cilium's agent may hand to
	// any pod.
	OnOrdinaryAddress int
	// OnOtherPod: Elastic IPs associated with an address a pod other than
	// the stamp's owner holds (status.ipam.used).
	OnOtherPod int
	// TwicePerClaim: claims with more than one Elastic IP associated
	// (tagged for the claim, or recorded by it).
	TwicePerClaim int
	// Unassociated (at rest only): Bound claims asking for a public IP
	// whose recorded Elastic IP EC2 does not show associated with the
	// claim's address on the ENI EC2 has the address on.
	Unassociated int
	// Leaked (at rest only): Elastic IPs carrying the cluster's and a
	// claim's tags that no claim records.
	Leaked int
	// Associated counts the claims whose Elastic IP is where it belongs
	// (at rest only), for the report.
	Associated int
	// Details name the first breaches.
	Details []string
}

// Total is the number of breaches of every kind.
func (f PublicIPFindings) Total() int {
	return f.OnOrdinaryAddress + f.OnOtherPod + f.TwicePerClaim + f.Unassociated + f.Leaked
}

// String prints the counts.
func (f PublicIPFindings) String() string {
	return fmt.Sprintf("%d Elastic IPs on an unstamped pool address, %d on another pod's address, %d claims with two, %d Bound claims without theirs, %d leaked; %d associated where they belong",
		f.OnOrdinaryAddress, f.OnOtherPod, f.TwicePerClaim, f.Unassociated, f.Leaked, f.Associated)
}

// CheckPublicIPs holds the claims' Elastic IPs (spec.publicIP) to their
// invariants. At every moment: an Elastic IP is associated only with an
// address stamped for its claim's pod (or in no pool while it moves) and
// held by no other pod, and a claim has at most one. At rest (atRest,
// after the operator converged and one collector pass): every Bound
// claim's recorded Elastic IP is associated with its address on the ENI
// EC2 has it on, and no Elastic IP tagged with cluster and a claim is
// left that no claim records.
func CheckPublicIPs(claims []enipamv1alpha1.StaticIPClaim, nodes []ciliumv2.CiliumNode, dump ec2sim.Dump, cluster string, atRest bool) PublicIPFindings {
	var f PublicIPFindings
	detail := func(format string, args ...any) {
		if len(f.Details) < 40 {
			f.Details = append(f.Details, fmt.Sprintf(format, args...))
		}
	}
	type entry struct{ node, owner, usedBy string }
	pooled := map[string][]entry{}
	for i := range nodes {
		cn := &nodes[i]
		for ip, e := range cn.Spec.IPAM.Pool {
			pooled[ip] = append(pooled[ip], entry{node: cn.Name, owner: e.Owner, usedBy: cn.Status.IPAM.Used[ip].Owner})
		}
	}
	eniOf := map[string]string{} // private address → ENI EC2 has it on
	for _, e := range dump.NetworkInterfaces {
		for _, a := range e.PrivateIPAddresses {
			eniOf[a.PrivateIPAddress] = e.NetworkInterfaceID
		}
	}
	tags := func(a ec2sim.Address) map[string]string {
		m := map[string]string{}
		for _, t := range a.Tags {
			m[t.Key] = t.Value
		}
		return m
	}
	byAlloc := map[string]ec2sim.Address{}
	perClaim := map[string]map[string]bool{} // claim → associated allocation IDs
	for _, a := range dump.Addresses {
		byAlloc[a.AllocationID] = a
		if a.AssociationID == "" {
			continue
		}
		for _, e := range pooled[a.PrivateIPAddress] {
			if e.owner == "" {
				f.OnOrdinaryAddress++
				detail("Elastic IP %s on %s, an unstamped pool address of %s", a.PublicIP, a.PrivateIPAddress, e.node)
			}
			if e.usedBy != "" && e.owner != "" && e.usedBy != e.owner {
				f.OnOtherPod++
				detail("Elastic IP %s on %s, stamped for %s but held by %s on %s", a.PublicIP, a.PrivateIPAddress, e.owner, e.usedBy, e.node)
			}
		}
		if owner := tags(a)[cloud.TagClaim]; owner != "" && tags(a)[cloud.TagCluster] == cluster {
			if perClaim[owner] == nil {
				perClaim[owner] = map[string]bool{}
			}
			perClaim[owner][a.AllocationID] = true
		}
	}
	recorded := map[string]bool{}
	for i := range claims {
		c := &claims[i]
		rec := c.Status.PublicIP
		if rec == nil {
			continue
		}
		if rec.AllocationID != "" {
			recorded[rec.AllocationID] = true
			if a, ok := byAlloc[rec.AllocationID]; ok && a.AssociationID != "" {
				if perClaim[c.Owner()] == nil {
					perClaim[c.Owner()] = map[string]bool{}
				}
				perClaim[c.Owner()][a.AllocationID] = true
			}
		}
		if !atRest || c.Spec.PublicIP == nil || c.DeletionTimestamp != nil || c.Status.Phase != enipamv1alpha1.ClaimBound {
			continue
		}
		a, ok := byAlloc[rec.AllocationID]
		if !ok || a.AssociationID == "" || a.PrivateIPAddress != c.Status.Address || a.NetworkInterfaceID != eniOf[c.Status.Address] {
			f.Unassociated++
			detail("claim %s: Elastic IP %q (%s) is on %q of %q; its address %s is on %s", c.Owner(), a.PublicIP, rec.AllocationID, a.PrivateIPAddress, a.NetworkInterfaceID, c.Status.Address, eniOf[c.Status.Address])
			continue
		}
		f.Associated++
	}
	for owner, ids := range perClaim {
		if len(ids) > 1 {
			f.TwicePerClaim++
			detail("claim %s has %d Elastic IPs associated", owner, len(ids))
		}
	}
	if atRest {
		for _, a := range dump.Addresses {
			t := tags(a)
			if t[cloud.TagClaim] != "" && t[cloud.TagCluster] == cluster && !recorded[a.AllocationID] {
				f.Leaked++
				detail("Elastic IP %s (%s) allocated for %s is recorded by no claim", a.PublicIP, a.AllocationID, t[cloud.TagClaim])
			}
		}
	}
	return f
}
