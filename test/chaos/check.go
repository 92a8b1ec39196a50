package chaos

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
)

// Findings count the breaches of enipam's invariants (ARCHITECTURE.md)
// found once a run has converged, from EC2's own state (ec2sim's dump,
// never a describe) and the CiliumNodes. A correct operator leaves every
// count at 0.
type Findings struct {
	// IPsInTwoPools: addresses in the pools of two nodes or more.
	IPsInTwoPools int
	// FreeOffENI and UsedOffENI: pool addresses (free, or held by a pod)
	// that EC2 does not have on the ENI the pool entry names, attached to
	// the node's instance.
	FreeOffENI, UsedOffENI int
	// MissingFromPool: secondary addresses EC2 has on a node's pod ENIs
	// that its pool lacks.
	MissingFromPool int
	// ReleasedInPool: addresses still in a pool although the release
	// handshake says released.
	ReleasedInPool int
	// ExtraENIs: ENIs attached to a node's instance for pod addresses
	// beyond what its peak demand needed (duplicates).
	ExtraENIs int
	// LeakedENIs: unattached ENIs with the cluster's tag, neither adopted
	// nor collected.
	LeakedENIs int
	// Ledger: what the simulated agents saw go wrong (an address handed
	// out twice, removed while used, removed without ready-for-release).
	Ledger agentsim.Violations
	// Claims: breaches of the static-IP claims' invariants
	// (agentsim.CheckClaims), summed over the looks taken during the run
	// and the one at rest; PublicIPs likewise for their Elastic IPs
	// (agentsim.CheckPublicIPs). StaticStalls: static steps (a placement,
	// a move, a claim's deletion) that never completed or lost an address.
	Claims       agentsim.ClaimFindings
	PublicIPs    agentsim.PublicIPFindings
	StaticStalls int
	// Details name the first breaches found.
	Details []string
}

// Total is the number of breaches of every kind.
func (f Findings) Total() int {
	return f.IPsInTwoPools + f.FreeOffENI + f.UsedOffENI + f.MissingFromPool + f.ReleasedInPool +
		f.ExtraENIs + f.LeakedENIs + f.Ledger.Total() + f.Claims.Total() + f.PublicIPs.Total() + f.StaticStalls
}

// maxDetails bounds Findings.Details.
const maxDetails = 40

func (f *Findings) detail(format string, args ...any) {
	if len(f.Details) < maxDetails {
		f.Details = append(f.Details, fmt.Sprintf(format, args...))
	}
}

// nodeNeed is what the checks know of a node beyond its CiliumNode.
type nodeNeed struct {
	instance string
	// firstIndex is the lowest device index carrying pod addresses.
	firstIndex int
	// enis is how many pod ENIs its peak demand needed.
	enis int
}

// enisNeeded is how many ENIs of perENI addresses (the primary address
// excluded) hold target pool addresses.
func enisNeeded(target, perENI int) int {
	if target <= 0 || perENI <= 1 {
		return 0
	}
	return (target + perENI - 2) / (perENI - 1)
}

// check compares the CiliumNodes of the nodes in needs with EC2's state.
func check(dump ec2sim.Dump, cns []ciliumv2.CiliumNode, needs map[string]nodeNeed, cluster string) Findings {
	var f Findings
	enis := map[string]*ec2sim.NetworkInterface{}
	byInstance := map[string][]*ec2sim.NetworkInterface{}
	for i := range dump.NetworkInterfaces {
		e := &dump.NetworkInterfaces[i]
		enis[e.NetworkInterfaceID] = e
		if e.Attachment != nil && e.Attachment.InstanceID != "" {
			byInstance[e.Attachment.InstanceID] = append(byInstance[e.Attachment.InstanceID], e)
		}
		if e.Status == "available" && tag(e.Tags, cloud.TagCluster) == cluster {
			f.LeakedENIs++
			f.detail("ENI %s (instance tag %s) left unattached", e.NetworkInterfaceID, tag(e.Tags, cloud.TagInstance))
		}
	}

	pools := map[string][]string{}
	for i := range cns {
		cn := &cns[i]
		need, ok := needs[cn.Name]
		if !ok {
			continue
		}
		for _, ip := range slices.Sorted(maps.Keys(cn.Spec.IPAM.Pool)) {
			pools[ip] = append(pools[ip], cn.Name)
			eniID := cn.Spec.IPAM.Pool[ip].Resource
			if !holds(enis[eniID], need.instance, ip) {
				if _, used := cn.Status.IPAM.Used[ip]; used {
					f.UsedOffENI++
					f.detail("%s: %s, used, is not on %q of %s in EC2", cn.Name, ip, eniID, need.instance)
				} else {
					f.FreeOffENI++
					f.detail("%s: %s, free, is not on %q of %s in EC2", cn.Name, ip, eniID, need.instance)
				}
			}
			if string(cn.Status.IPAM.ReleaseIPs[ip]) == ipamoption.IPAMReleased {
				f.ReleasedInPool++
				f.detail("%s: %s is released but still in the pool", cn.Name, ip)
			}
		}
		podENIs := 0
		for _, e := range byInstance[need.instance] {
			if e.Attachment.DeviceIndex < need.firstIndex {
				continue
			}
			podENIs++
			for _, ip := range secondaries(e) {
				if _, ok := cn.Spec.IPAM.Pool[ip]; !ok {
					f.MissingFromPool++
					f.detail("%s: %s on %s in EC2 is not in the pool", cn.Name, ip, e.NetworkInterfaceID)
				}
			}
		}
		if extra := podENIs - need.enis; extra > 0 {
			f.ExtraENIs += extra
			f.detail("%s: %d pod ENIs on %s, %d needed", cn.Name, podENIs, need.instance, need.enis)
		}
	}
	for _, ip := range slices.Sorted(maps.Keys(pools)) {
		if nodes := pools[ip]; len(nodes) > 1 {
			f.IPsInTwoPools++
			f.detail("%s is in the pools of %v", ip, nodes)
		}
	}
	return f
}

// holds reports whether EC2 has ip on e, attached to instance.
func holds(e *ec2sim.NetworkInterface, instance, ip string) bool {
	if e == nil || e.Attachment == nil || e.Attachment.InstanceID != instance {
		return false
	}
	return slices.Contains(secondaries(e), ip)
}

// secondaries are the addresses of e that may be pod addresses: all but
// its primary, and every address of its delegated prefixes.
func secondaries(e *ec2sim.NetworkInterface) []string {
	var out []string
	for _, a := range e.PrivateIPAddresses {
		if !a.Primary {
			out = append(out, a.PrivateIPAddress)
		}
	}
	for _, p := range e.IPv4Prefixes {
		pfx, err := netip.ParsePrefix(p.IPv4Prefix)
		if err != nil {
			continue
		}
		for a := pfx.Masked().Addr(); pfx.Contains(a); a = a.Next() {
			out = append(out, a.String())
		}
	}
	return out
}

func tag(tags []ec2sim.Tag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}
