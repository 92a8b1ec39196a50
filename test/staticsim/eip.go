package staticsim

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// The node's Elastic IP (Cilium's ipam-static-ip-tags): the tags a
// node's Cilium agent may run with, and those of the account's Elastic
// IPs. A claim's Elastic IP may come from the same pool (tagPool).
const (
	tagKey  = "static-pool"
	tagPool = "tags:" + tagKey + "=a"
)

// tagSets are the static-ip-tags a node's agent may run with: none, a or b.
var tagSets = []map[string]string{nil, {tagKey: "a"}, {tagKey: "b"}}

// seedElasticIPs draws the account's Elastic IPs into the scenario:
// 0–3 tagged a, 0–2 tagged b, 0–2 untagged (at times fewer tagged than
// nodes wanting one).
func seedElasticIPs(sc *ec2sim.Scenario, rng *rand.Rand) {
	sc.ElasticIPLimit = 40
	for range rng.IntN(4) {
		sc.ElasticIPs = append(sc.ElasticIPs, ec2sim.ElasticIPSpec{Tags: map[string]string{tagKey: "a"}})
	}
	for range rng.IntN(3) {
		sc.ElasticIPs = append(sc.ElasticIPs, ec2sim.ElasticIPSpec{Tags: map[string]string{tagKey: "b"}})
	}
	for range rng.IntN(3) {
		sc.ElasticIPs = append(sc.ElasticIPs, ec2sim.ElasticIPSpec{})
	}
}

// elsewhere is what the world starts with besides the cluster: outsideENI
// another workload's ENI, with a tagged Elastic IP; userEIP a tagged
// Elastic IP the user associated by hand with userInstance's primary
// address (the node's once its NodeRouting records it).
type elsewhere struct{ outsideENI, userEIP, userInstance string }

// associateElsewhere draws the associations the world starts with, made
// before EC2's timing is set: they are old, and no describe lags them.
func associateElsewhere(st *ec2sim.State, rng *rand.Rand, instances []string) (elsewhere, error) {
	var out elsewhere
	var tagged []ec2sim.Address
	for _, a := range st.DumpNetwork().Addresses {
		if len(a.Tags) > 0 {
			tagged = append(tagged, a)
		}
	}
	if len(tagged) > 0 && rng.IntN(3) == 0 {
		a := tagged[rng.IntN(len(tagged))]
		eni, err := st.CreateNetworkInterface(ec2sim.CreateNetworkInterfaceRequest{SubnetID: "subnet-0a000000000000001", Description: "another workload"})
		if err != nil {
			return out, err
		}
		out.outsideENI = eni.NetworkInterface.NetworkInterfaceID
		if _, err := st.AssociateAddress(ec2sim.AssociateAddressRequest{AllocationID: a.AllocationID, NetworkInterfaceID: out.outsideENI}); err != nil {
			return out, err
		}
		tagged = slices.DeleteFunc(tagged, func(b ec2sim.Address) bool { return b.AllocationID == a.AllocationID })
	}
	if len(tagged) > 0 && rng.IntN(4) == 0 {
		a := tagged[rng.IntN(len(tagged))]
		out.userInstance = instances[rng.IntN(len(instances))]
		if _, err := st.AssociateAddress(ec2sim.AssociateAddressRequest{AllocationID: a.AllocationID, InstanceID: out.userInstance}); err != nil {
			return out, err
		}
		out.userEIP = a.AllocationID
	}
	return out, nil
}

// retag is Cilium's agent of a node drawn by the seed restarted with
// other static-ip-tags (or none): nodediscovery's
// updateCiliumNodeResource gets the CiliumNode and updates it whole with
// spec.ipam.static-ip-tags set (mutateNodeResource).
func (w *world) retag() string {
	n := w.pickNode(true)
	cn := &ciliumv2.CiliumNode{}
	if !w.store.get(client.ObjectKey{Name: n}, cn) {
		return n
	}
	var choices []map[string]string
	for _, t := range tagSets {
		if !maps.Equal(t, cn.Spec.IPAM.StaticIPTags) {
			choices = append(choices, t)
		}
	}
	cn.Spec.IPAM.StaticIPTags = choices[w.rng.IntN(len(choices))]
	if err := w.c.Update(context.Background(), cn); err == nil {
		w.logf("agent %s: static-ip-tags %v", n, cn.Spec.IPAM.StaticIPTags)
		w.retags++
	}
	return n
}

// staticIPWrite reports whether an operator's write of obj is a step of
// a node's Elastic IP: a NodeRouting spec write touching its record or
// finalizer (the association's record, clearStaticIP, a found address
// recorded with writeRouting's apply).
func staticIPWrite(obj client.Object, patch client.Patch) bool {
	nr, ok := obj.(*enipamv1alpha1.NodeRouting)
	if !ok {
		return false
	}
	if patch == nil {
		return nr.Spec.StaticIP != nil || controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return false
	}
	return bytes.Contains(data, []byte(`"staticIP"`)) || bytes.Contains(data, []byte(enipamv1alpha1.NodeStaticIPFinalizer))
}

// nodeEIPView is what the node Elastic IP checks read.
type nodeEIPView struct {
	// primary: instance → its primary ENI (device 0) and address.
	primaryENI, primaryIP map[string]string
	// byENI: the node (by its instance's primary ENI).
	byENI map[string]*node
	cns   map[string]*ciliumv2.CiliumNode
	nrs   map[string]*enipamv1alpha1.NodeRouting
	// claimAlloc: the allocation IDs claims record.
	claimAlloc map[string]bool
}

func (w *world) nodeEIPView(s snapshot) nodeEIPView {
	v := nodeEIPView{primaryENI: map[string]string{}, primaryIP: map[string]string{}, byENI: map[string]*node{},
		cns: map[string]*ciliumv2.CiliumNode{}, nrs: map[string]*enipamv1alpha1.NodeRouting{}, claimAlloc: map[string]bool{}}
	for _, e := range s.dump.NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.DeviceIndex == 0 && e.Attachment.NetworkCardIndex == 0 {
			v.primaryENI[e.Attachment.InstanceID], v.primaryIP[e.Attachment.InstanceID] = e.NetworkInterfaceID, e.PrivateIPAddress
		}
	}
	for _, n := range w.nodes {
		if id, ok := v.primaryENI[n.instance]; ok {
			v.byENI[id] = n
		}
	}
	for i := range s.nodes {
		v.cns[s.nodes[i].Name] = &s.nodes[i]
	}
	var nrs enipamv1alpha1.NodeRoutingList
	w.store.view(&nrs)
	for i := range nrs.Items {
		v.nrs[nrs.Items[i].Name] = &nrs.Items[i]
	}
	for i := range s.claims {
		if p := s.claims[i].Status.PublicIP; p != nil && p.AllocationID != "" {
			v.claimAlloc[p.AllocationID] = true
		}
	}
	return v
}

func addressTags(a ec2sim.Address) map[string]string {
	m := map[string]string{}
	for _, t := range a.Tags {
		m[t.Key] = t.Value
	}
	return m
}

// recordOf is the NodeRouting's record of node n, nil without one.
func (v nodeEIPView) recordOf(n string) *enipamv1alpha1.NodeStaticIP {
	if nr := v.nrs[n]; nr != nil {
		return nr.Spec.StaticIP
	}
	return nil
}

// checkNodeEIPs checks the nodes' Elastic IPs after a step:
//   - no private address with two Elastic IPs;
//   - an associated Elastic IP is a claim's (CheckPublicIPs' concern),
//     another workload's (the world's), or on a node's primary address;
//   - there, it is recorded in the node's NodeRouting, or it is the one
//     the user associated by hand and no record has named yet; an
//     unrecorded one carries the node's current tags;
//   - a node has at most one;
//   - status.ipam.assigned-static-ip names an Elastic IP EC2 has
//     associated with the node's primary address now: the operator writes
//     it only once the association landed, and clears it in the write
//     ahead of the release.
func (w *world) checkNodeEIPs(s snapshot) {
	v := w.nodeEIPView(s)
	if w.userEIP != "" && !w.userEIPTaken {
		for _, n := range w.nodes {
			if rec := v.recordOf(n.name); n.instance == w.userInstance && rec != nil && rec.AllocationID == w.userEIP {
				w.userEIPTaken = true // the node's from now on
			}
		}
	}
	onPrivate := map[string]string{}
	perNode := map[string]int{}
	for _, a := range s.dump.Addresses {
		if a.AssociationID == "" {
			continue
		}
		if other, dup := onPrivate[a.PrivateIPAddress]; dup {
			w.violate("Elastic IPs %s and %s both on %s", other, a.PublicIP, a.PrivateIPAddress)
		}
		onPrivate[a.PrivateIPAddress] = a.PublicIP
		tags := addressTags(a)
		if a.NetworkInterfaceID == w.outsideENI || v.claimAlloc[a.AllocationID] || tags[cloud.TagClaim] != "" {
			continue
		}
		n := v.byENI[a.NetworkInterfaceID]
		if n == nil {
			w.violate("Elastic IP %s (%s, tags %v) on %s of %s: neither a claim's nor a node's primary address", a.PublicIP, a.AllocationID, tags, a.PrivateIPAddress, a.NetworkInterfaceID)
			continue
		}
		if a.PrivateIPAddress != v.primaryIP[n.instance] {
			w.violate("Elastic IP %s on %s of %s's primary ENI, not its primary address %s", a.PublicIP, a.PrivateIPAddress, n.name, v.primaryIP[n.instance])
		}
		if perNode[n.name]++; perNode[n.name] > 1 {
			w.violate("node %s has %d Elastic IPs on its primary ENI", n.name, perNode[n.name])
		}
		rec := v.recordOf(n.name)
		recorded := rec != nil && rec.AllocationID == a.AllocationID
		users := a.AllocationID == w.userEIP && !w.userEIPTaken
		if !recorded && !users {
			var want map[string]string
			if cn := v.cns[n.name]; cn != nil {
				want = cn.Spec.IPAM.StaticIPTags
			}
			if !cloud.MatchTags(tags, want) {
				w.violate("Elastic IP %s (%s, tags %v) on node %s's primary address, unrecorded, and the node asks for %v", a.PublicIP, a.AllocationID, tags, n.name, want)
			} else {
				w.violate("Elastic IP %s (%s) on node %s's primary address, and its NodeRouting records %v", a.PublicIP, a.AllocationID, n.name, rec)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(v.cns)) {
		cn := v.cns[name]
		ip := cn.Status.IPAM.AssignedStaticIP
		if ip == "" {
			continue
		}
		n := w.nodeNamed(name)
		ok := false
		for _, a := range s.dump.Addresses {
			if a.PublicIP == ip {
				ok = a.AssociationID != "" && a.NetworkInterfaceID == v.primaryENI[n.instance] && a.PrivateIPAddress == v.primaryIP[n.instance]
			}
		}
		if !ok {
			w.violate("node %s reports assigned-static-ip %s, which EC2 does not have on its primary address %s", name, ip, v.primaryIP[n.instance])
		}
	}
}

// nodeEIPsAtRest checks the nodes' Elastic IPs after quiescing, and
// returns what is not at rest:
//   - a live node with tags has an Elastic IP carrying them on its primary
//     address, and reports it, unless none is free in EC2 (or the user's
//     own, not carrying them, is there: StaticIPConflict);
//   - a live node without tags has none, but the user's own, unrecorded;
//   - a NodeRouting's record names an association EC2 has, on the
//     recorded ENI; a finalizer comes only with a record; a terminated
//     node's NodeRouting is gone;
//   - no Elastic IP is on an ENI of a terminated instance.
func (w *world) nodeEIPsAtRest(s snapshot) []string {
	v := w.nodeEIPView(s)
	var out []string
	onENI := map[string]ec2sim.Address{}
	byAlloc := map[string]ec2sim.Address{}
	for _, a := range s.dump.Addresses {
		byAlloc[a.AllocationID] = a
		if a.AssociationID != "" {
			onENI[a.NetworkInterfaceID] = a
		}
	}
	for _, n := range w.nodes {
		nr := v.nrs[n.name]
		if n.gone {
			if nr != nil {
				out = append(out, fmt.Sprintf("node %s terminated, its NodeRouting kept (record %v, finalizers %v)", n.name, nr.Spec.StaticIP, nr.Finalizers))
			}
			for _, a := range s.dump.Addresses {
				if a.AssociationID != "" && a.InstanceID == n.instance {
					out = append(out, fmt.Sprintf("Elastic IP %s still on %s of terminated %s", a.PublicIP, a.NetworkInterfaceID, n.name))
				}
			}
			continue
		}
		cn := v.cns[n.name]
		if cn == nil {
			continue
		}
		want := cn.Spec.IPAM.StaticIPTags
		a, has := onENI[v.primaryENI[n.instance]]
		users := has && a.AllocationID == w.userEIP && !w.userEIPTaken
		switch {
		case len(want) == 0:
			if has && !users {
				out = append(out, fmt.Sprintf("node %s asks for no static IP and has Elastic IP %s", n.name, a.PublicIP))
			}
			if cn.Status.IPAM.AssignedStaticIP != "" {
				out = append(out, fmt.Sprintf("node %s asks for no static IP and reports %s", n.name, cn.Status.IPAM.AssignedStaticIP))
			}
		case has && cloud.MatchTags(addressTags(a), want):
			if cn.Status.IPAM.AssignedStaticIP != a.PublicIP {
				out = append(out, fmt.Sprintf("node %s has Elastic IP %s and reports %q", n.name, a.PublicIP, cn.Status.IPAM.AssignedStaticIP))
			}
		case has && users:
			// StaticIPConflict: the user's own, left alone.
		case has:
			out = append(out, fmt.Sprintf("node %s asks for %v and has Elastic IP %s tagged %v", n.name, want, a.PublicIP, addressTags(a)))
		default:
			for _, b := range s.dump.Addresses {
				if b.AssociationID == "" && cloud.MatchTags(addressTags(b), want) {
					out = append(out, fmt.Sprintf("node %s asks for %v and has no Elastic IP while %s is free", n.name, want, b.PublicIP))
					break
				}
			}
		}
		if nr == nil {
			continue
		}
		if rec := nr.Spec.StaticIP; rec != nil {
			if a := byAlloc[rec.AllocationID]; a.AssociationID == "" || a.NetworkInterfaceID != rec.ENIID {
				out = append(out, fmt.Sprintf("NodeRouting %s records %s on %s, which EC2 has on %q", n.name, rec.PublicIP, rec.ENIID, a.NetworkInterfaceID))
			}
		} else if controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) {
			out = append(out, fmt.Sprintf("NodeRouting %s keeps its static-IP finalizer with no record", n.name))
		}
	}
	return out
}

func (g unassignGuard) AssociateAddress(ctx context.Context, allocationID, eniID string, privateIP netip.Addr, reassociate bool) (string, error) {
	id, err := g.API.AssociateAddress(ctx, allocationID, eniID, privateIP, reassociate)
	g.w.logf("ec2: associate %s with %s on %s: %s %v", allocationID, privateIP, eniID, id, err)
	if err == nil {
		g.w.eipAssociations++
	}
	return id, err
}

func (g unassignGuard) DisassociateAddress(ctx context.Context, associationID string) error {
	err := g.API.DisassociateAddress(ctx, associationID)
	g.w.logf("ec2: disassociate %s: %v", associationID, err)
	if err == nil {
		g.w.eipDisassociations++
	}
	return err
}

// describeNodeEIPs tells each node's tags, report and record, and where
// EC2 has each Elastic IP: the end of a failing seed's trace.
func (w *world) describeNodeEIPs(s snapshot) {
	v := w.nodeEIPView(s)
	for _, n := range w.nodes {
		var tags map[string]string
		assigned := ""
		if cn := v.cns[n.name]; cn != nil {
			tags, assigned = cn.Spec.IPAM.StaticIPTags, cn.Status.IPAM.AssignedStaticIP
		}
		var fin []string
		if nr := v.nrs[n.name]; nr != nil {
			fin = nr.Finalizers
		}
		w.logf("node %s (gone %v, primary %s %s): tags %v, assigned-static-ip %q, record %+v, finalizers %v", n.name, n.gone,
			v.primaryENI[n.instance], v.primaryIP[n.instance], tags, assigned, v.recordOf(n.name), fin)
	}
	for _, a := range s.dump.Addresses {
		w.logf("Elastic IP %s (%s, tags %v): on %q %q %q", a.PublicIP, a.AllocationID, addressTags(a), a.NetworkInterfaceID, a.PrivateIPAddress, a.InstanceID)
	}
}
