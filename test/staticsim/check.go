package staticsim

import (
	"net/netip"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
)

// snapshot is the world as the checks read it, once per step: shared
// with the store and the last EC2 dump, read only.
type snapshot struct {
	claims []enipamv1alpha1.StaticIPClaim
	nodes  []ciliumv2.CiliumNode
	dump   ec2sim.Dump
	addressIndex
}

// addressIndex is where EC2 has each address: eniOf, address → the
// ENIs EC2 has it on; instanceOf, address → the instance of its (last)
// ENI.
type addressIndex struct {
	eniOf      map[string][]string
	instanceOf map[string]string
}

func (w *world) snapshot() snapshot {
	var s snapshot
	var claims enipamv1alpha1.StaticIPClaimList
	w.store.view(&claims)
	s.claims = claims.Items
	var nodes ciliumv2.CiliumNodeList
	w.store.view(&nodes)
	s.nodes = nodes.Items
	s.dump = w.dump()
	if w.indexed != w.dumped {
		w.index, w.indexed = indexAddresses(s.dump), w.dumped
	}
	s.addressIndex = w.index
	return s
}

// indexAddresses indexes a dump's addresses.
func indexAddresses(d ec2sim.Dump) addressIndex {
	x := addressIndex{eniOf: map[string][]string{}, instanceOf: map[string]string{}}
	for _, e := range d.NetworkInterfaces {
		var ips []string
		for _, a := range e.PrivateIPAddresses {
			ips = append(ips, a.PrivateIPAddress)
		}
		for _, p := range e.IPv4Prefixes {
			pfx := netip.MustParsePrefix(p.IPv4Prefix)
			for ip := pfx.Masked().Addr(); pfx.Contains(ip); ip = ip.Next() {
				ips = append(ips, ip.String())
			}
		}
		for _, ip := range ips {
			x.eniOf[ip] = append(x.eniOf[ip], e.NetworkInterfaceID)
			if e.Attachment != nil {
				x.instanceOf[ip] = e.Attachment.InstanceID
			}
		}
	}
	return x
}

// claimAddress is the address a claim records (status, else spec).
func claimAddress(c *enipamv1alpha1.StaticIPClaim) string {
	if c.Status.Address != "" {
		return c.Status.Address
	}
	return c.Spec.Address
}

// claimedAddresses maps each address a claim not being deleted records
// in status to the claim's owner (a deleted claim gives its address
// back: once no pool stamps it, it is an ordinary address again).
func (w *world) claimedAddresses() map[string]string {
	var claims enipamv1alpha1.StaticIPClaimList
	w.store.list(&claims)
	out := map[string]string{}
	for i := range claims.Items {
		if a := claims.Items[i].Status.Address; a != "" && claims.Items[i].DeletionTimestamp == nil {
			out[a] = claims.Items[i].Owner()
		}
	}
	return out
}

// check verifies what must hold after every step.
func (w *world) check() {
	calls := 0
	for _, n := range w.cloud.Calls() {
		calls += n
	}
	if now := [3]int64{int64(w.changes), int64(calls), w.clock.Now().UnixNano()}; now != w.checked {
		w.checked = now
	} else {
		return
	}
	s := w.snapshot()
	w.own(s.claims)
	// No address on two ENIs in EC2.
	for _, ip := range slices.Sorted(mapsKeys(s.eniOf)) {
		if enis := s.eniOf[ip]; len(enis) > 1 {
			w.violate("%s on %d ENIs in EC2: %v", ip, len(enis), enis)
		}
	}
	// No address in two pools.
	pooled := map[string]string{}
	for _, cn := range s.nodes {
		for _, ip := range slices.Sorted(mapsKeys(cn.Spec.IPAM.Pool)) {
			if o := cn.Spec.IPAM.Pool[ip].Owner; o != "" && w.stampedOn[o] != cn.Name {
				if w.stampedOn[o] != "" {
					w.moves++
				}
				w.stampedOn[o] = cn.Name
			}
			if other, dup := pooled[ip]; dup {
				w.violate("%s in the pools of %s and %s", ip, other, cn.Name)
			}
			pooled[ip] = cn.Name
		}
	}
	// No address held by two pods; a running pod's address is on its
	// node's instance in EC2.
	holder := map[string]*pod{}
	for _, uid := range slices.Sorted(mapsKeys(w.pods)) {
		p := w.pods[uid]
		if other, dup := holder[p.ip]; dup {
			w.violate("%s held by pod %s on %s and pod %s on %s", p.ip, other.owner, other.node, p.owner, p.node)
		}
		holder[p.ip] = p
		if n := w.nodeNamed(p.node); n != nil && !n.gone && s.instanceOf[p.ip] != n.instance {
			w.violate("pod %s runs on %s with %s, which EC2 has on %v (instance %q)", p.owner, p.node, p.ip, s.eniOf[p.ip], s.instanceOf[p.ip])
		}
	}
	// A claimed address is held by no pod but its claim's (a claim being
	// deleted gives its address back, whatever its status still says).
	for i := range s.claims {
		c := &s.claims[i]
		if p := holder[c.Status.Address]; p != nil && p.owner != c.Owner() && c.Status.Phase == enipamv1alpha1.ClaimBound && c.DeletionTimestamp == nil {
			w.violate("claim %s is Bound to %s, which pod %s holds on %s", c.Owner(), c.Status.Address, p.owner, p.node)
		}
	}
	// Elastic IPs only on their claims' addresses.
	if f := agentsim.CheckPublicIPs(s.claims, s.nodes, s.dump, cluster, false); f.Total() != 0 {
		w.violate("Elastic IPs: %s: %v", f, f.Details)
	}
	w.checkNodeEIPs(s)
}

// stolen is checked at each CNI ADD: a pod got an address that a claim
// of another pod has had (Bound to it, and recording it since).
func (w *world) stolen(owner, ip, node string) {
	for _, claim := range keys(w.owned) {
		if w.owned[claim] == ip && claim != owner {
			w.violate("pod %s got %s on %s, the address of claim %s", owner, ip, node, claim)
		}
	}
}

// own records which claims have their address: Bound to it once, and
// recording it since; a claim deleted, or recording another address,
// has it no more.
func (w *world) own(claims []enipamv1alpha1.StaticIPClaim) {
	seen := map[string]bool{}
	for i := range claims {
		c := &claims[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		seen[c.Owner()] = true
		switch {
		case c.Status.Phase == enipamv1alpha1.ClaimBound && c.Status.Address != "":
			w.owned[c.Owner()] = c.Status.Address
		case c.Status.Address != w.owned[c.Owner()]:
			delete(w.owned, c.Owner())
		}
	}
	for owner := range w.owned {
		if !seen[owner] {
			delete(w.owned, owner)
		}
	}
}

// settledReasons are the Ready reasons a claim may rest with, other than
// Bound: each says why the address cannot be had.
var settledReasons = []string{
	enipamv1alpha1.ReasonAddressTaken, enipamv1alpha1.ReasonAddressOutside, enipamv1alpha1.ReasonWrongZone,
	enipamv1alpha1.ReasonUnschedulableZone, enipamv1alpha1.ReasonWaitingForNode, enipamv1alpha1.ReasonNodeUnknown,
}

// atRest checks, after quiescing, that every claim is Bound (its running
// pod holding its address) or says why not, and that no claim is stuck
// releasing. It returns the claims that are not.
func (w *world) atRest() []string {
	s := w.snapshot()
	var out []string
	for i := range s.claims {
		c := &s.claims[i]
		ready := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
		switch {
		case c.DeletionTimestamp != nil:
			out = append(out, c.Owner()+" still releasing")
		case ready == nil:
			out = append(out, c.Owner()+" has no Ready condition")
		case c.Status.Phase == enipamv1alpha1.ClaimBound:
			for _, p := range w.pods {
				if p.owner == c.Owner() && p.ip != c.Status.Address {
					out = append(out, c.Owner()+" Bound to "+c.Status.Address+" but its pod runs with "+p.ip)
				}
			}
		case c.Status.Phase == enipamv1alpha1.ClaimInvalid || slices.Contains(settledReasons, ready.Reason):
		default:
			out = append(out, c.Owner()+" rests "+string(c.Status.Phase)+"/"+ready.Reason+": "+ready.Message)
		}
	}
	return append(out, w.nodeEIPsAtRest(s)...)
}

// describe tells the claims, the stamps and handshakes of every pool, and
// where EC2 has each claimed address: the end of a failing seed's trace.
func (w *world) describe() {
	s := w.snapshot()
	for i := range s.claims {
		c := &s.claims[i]
		ready := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimReady)
		why := ""
		if ready != nil {
			why = ready.Reason + ": " + ready.Message
		}
		a := claimAddress(c)
		w.logf("claim %s: spec %q→%q status %q on %q phase %s (%s); EC2 has it on %v", c.Owner(), c.Spec.Address, c.Spec.NodeName,
			c.Status.Address, c.Status.NodeName, c.Status.Phase, why, s.eniOf[a])
	}
	for _, cn := range s.nodes {
		stamps := map[string]string{}
		for ip, e := range cn.Spec.IPAM.Pool {
			if e.Owner != "" {
				stamps[ip] = e.Owner
			}
		}
		w.logf("node %s: pool %d, stamps %v, release-ips %v, used %d, operator-status %q", cn.Name, len(cn.Spec.IPAM.Pool), stamps,
			cn.Status.IPAM.ReleaseIPs, len(cn.Status.IPAM.Used), cn.Status.IPAM.OperatorStatus.Error)
	}
	for _, uid := range keys(w.pods) {
		p := w.pods[uid]
		w.logf("pod %s (%s) runs on %s with %s", p.owner, uid, p.node, p.ip)
	}
	w.describeNodeEIPs(s)
}
