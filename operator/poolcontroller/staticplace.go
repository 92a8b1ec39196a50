package poolcontroller

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// Where a claimed address comes from when the pool does not hold it
// already: EC2 (reassigned from another ENI of the cluster, or free in its
// subnet), a free secondary entry of the pool, or a secondary address
// assigned for it.

// holder returns the node's usable ENI that holds ip in EC2 (the
// snapshot, from the inventory); nil if none does.
func holder(snap *snapshot.Node, cfg *pool.Config, ip netip.Addr) *cloud.ENI {
	for i := range snap.ENIs {
		if e := &snap.ENIs[i]; pool.Usable(e, cfg) && e.HasIP(ip) {
			return e
		}
	}
	return nil
}

// backStamp places again the address of a stamp in this pool that EC2
// does not have on the node's ENIs (an Unassign or a reassignment made
// behind the operator's back, or sent by an earlier process): from EC2
// as for a claim coming here, unless another pool lists it.
//
// The entry's own ENI is asked about first while describes may still lag
// what an earlier process did (an operator restarted right after a stamp
// made on its agent's word that the remap landed sees describes that do
// not show the remap yet): the node's agent confirms from the instance
// metadata that the address is there (then nothing moves), or says it
// is not (then it is placed again), and once describes are trusted
// nothing is asked.
func (v *poolView) backStamp(in *staticInputs, c *claims.Claim, snap *snapshot.Node, cfg *pool.Config, out *staticOutcome) {
	key := c.Addr.String()
	if in.elsewhere(key) {
		out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s is stamped on node %s but another node's pool lists it", key, in.node)
		return
	}
	resource := v.cn.Spec.IPAM.Pool[key].Resource
	if in.remapUnsure(c.Addr, resource) {
		for i := range snap.ENIs {
			if e := &snap.ENIs[i]; e.ID == resource && e.MAC != "" {
				out.verify = append(out.verify, placement{ip: c.Addr, owner: c.Owner, eniID: resource})
				out.waiting = true
				out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s is stamped on %s of node %s; asking enipam-agent whether the instance metadata lists it there", key, resource, in.node)
				return
			}
		}
	}
	v.fromEC2(in, c, snap, cfg, out)
}

// fromEC2 assigns a claim's address, which no pool lists, onto an ENI of
// this node: reassigned from another ENI of the cluster, or taken free in
// its subnet; or tells the claim why it cannot be.
func (v *poolView) fromEC2(in *staticInputs, c *claims.Claim, snap *snapshot.Node, cfg *pool.Config, out *staticOutcome) {
	key := c.Addr.String()
	loc := in.locate(c.Addr)
	switch {
	case loc.Primary:
		out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s is the primary address of %s", key, loc.ENI.ID)
		return
	case loc.InPrefix:
		out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s lies in a prefix delegated to %s", key, loc.ENI.ID)
		return
	case loc.Found && !in.ours(&loc.ENI):
		out.note(c.Owner, enipamv1alpha1.ReasonAddressTaken, "%s is held by %s, an ENI enipam does not manage", key, loc.ENI.ID)
		return
	}
	subnet, ok := in.subnetOf(c.Addr)
	if !ok {
		out.note(c.Owner, enipamv1alpha1.ReasonAddressOutside, "%s is in no known subnet", key)
		return
	}
	if subnet.AZ != snap.Instance.AZ {
		out.note(c.Owner, enipamv1alpha1.ReasonWrongZone, "%s lives in %s, %s; node %s is in %s", key, subnet.ID, subnet.AZ, in.node, snap.Instance.AZ)
		return
	}
	var best *cloud.ENI
	for i := range snap.ENIs {
		e := &snap.ENIs[i]
		if !pool.Usable(e, cfg) || e.SubnetID != subnet.ID || e.AttachmentStatus != cloud.AttachmentAttached || snap.Type.IPv4PerENI-e.Slots() <= 0 {
			continue
		}
		if best == nil || cmp.Compare(e.Slots(), best.Slots()) < 0 {
			best = e
		}
	}
	if best == nil {
		if out.create == nil {
			index, ok := pool.FreeDeviceIndex(snap, cfg)
			groups, err := pool.SecurityGroups(snap, cfg)
			if ok && err == nil {
				out.create = &pool.Create{SubnetID: subnet.ID, SecurityGroups: groups, DeviceIndex: index}
				out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "creating an ENI in %s on node %s for %s", subnet.ID, in.node, key)
				return
			}
		}
		out.note(c.Owner, enipamv1alpha1.ReasonNoSlot, "node %s has no free address slot on an ENI in %s and no free ENI slot", in.node, subnet.ID)
		return
	}
	if loc.Found && in.liveTargets != nil {
		// A reassignment takes the address off another node's ENI, and
		// only the claim's current target may take it: kube-scheduler's
		// bind retries can ask the claim onto another node at any moment,
		// and that node's reconcile may be placing it at the same time.
		// The claim is read again, uncached, right before the decision
		// (readStaticFacts).
		if t, ok := in.liveTargets[c.Owner]; !ok || t != c.Target {
			out.waiting = true
			out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "%s: the claim asks for another node than node %s now; placing it there", key, in.node)
			return
		}
	}
	out.place = append(out.place, placement{ip: c.Addr, owner: c.Owner, eniID: best.ID, reassign: loc.Found})
	// One slot per placement in this pass, on addresses of the copy's
	// own: the snapshot's stay what EC2 holds.
	best.IPs = append(slices.Clip(best.IPs), c.Addr)
	out.note(c.Owner, enipamv1alpha1.ReasonPlacing, "placing %s on %s of node %s", key, best.ID, in.node)
}

// liveFirstMarks returns the first placements' marks (in.firstMarks)
// that still stand: the entry pooled, unstamped, marked or acknowledged.
// Any other is forgotten: refused (do-not-release), taken back, or
// stamped.
func (v *poolView) liveFirstMarks(in *staticInputs) map[string]string {
	live := map[string]string{}
	for key, owner := range in.firstMarks {
		entry, pooled := v.cn.Spec.IPAM.Pool[key]
		switch state := v.cn.Status.IPAM.ReleaseIPs[key]; {
		case !pooled || entry.Owner != "":
		case state == ipamoption.IPAMMarkForRelease, state == ipamoption.IPAMReadyForRelease:
			live[key] = owner
		}
	}
	return live
}

// placeFirst serves a first placement (owner's claim has no address yet
// and is to be on this node) from the entries marked for one (first:
// address → the owner it was marked for; its own first, then those of
// owners no longer waiting): one the agent acknowledged is stamped, its
// answer kept (a later pass withdraws it: see the top of static.go); an
// unanswered one is waited on. It reports whether it served the claim;
// if not, a free entry is to be marked.
//
// Only marks this process made are stamped: it marked each when the
// entry was in no handshake, so no Unassign can have been sent for it by
// an earlier process, and the one in this pass's release (decideRelease)
// comes after this pass, which keeps it from a stamped entry.
func (v *poolView) placeFirst(in *staticInputs, c *claims.Claim, first map[string]string, waitingFirst map[string]bool, snap *snapshot.Node, cfg *pool.Config, out *staticOutcome) bool {
	st := &v.cn.Status.IPAM
	owner := c.Owner
	keys := slices.Sorted(maps.Keys(first))
	slices.SortStableFunc(keys, func(a, b string) int {
		return cmp.Compare(btoi(first[a] != owner), btoi(first[b] != owner))
	})
	pending := ""
	for _, key := range keys {
		if o := first[key]; o != owner && waitingFirst[o] {
			continue
		}
		entry := v.cn.Spec.IPAM.Pool[key]
		ip, err := netip.ParseAddr(key)
		if err != nil {
			continue
		}
		if in.namedByAnother(key, owner) {
			continue // another claim records it since it was marked
		}
		e := holder(snap, cfg, ip)
		if e == nil || e.ID != entry.Resource || e.AttachmentStatus != cloud.AttachmentAttached || (c.Subnet != "" && e.SubnetID != c.Subnet) {
			continue // not on its ENI any more (released as any other), or not of the claim's subnet
		}
		switch st.ReleaseIPs[key] {
		case ipamoption.IPAMMarkForRelease:
			if pending == "" {
				pending = key
			}
		case ipamoption.IPAMReadyForRelease:
			if _, used := st.Used[key]; used {
				continue
			}
			entry.Owner = owner
			v.cn.Spec.IPAM.Pool[key] = entry
			delete(first, key)
			waitingFirst[owner] = false
			out.handshakes++
			out.note(owner, enipamv1alpha1.ReasonPlacing, "%s stamped on node %s (Cilium's agent confirmed no pod holds it)", key, in.node)
			return true
		}
	}
	if pending == "" {
		return false
	}
	first[pending] = owner
	out.handshakes++
	out.note(owner, enipamv1alpha1.ReasonPlacing, "%s marked on node %s; waiting for Cilium's agent to confirm no pod holds it before stamping it", pending, in.node)
	return true
}

// keepFirstMarks hands the first placements' unanswered marks to the next
// pass, and keeps those a claim still waits on from abortRelease. An
// acknowledged one is kept too, out of the release, while its owner's
// claim waits for its first placement on another node (in.firstAway):
// kube-scheduler's bind retries may ask the claim back here, and the
// entry is then stamped at once (placeFirst), instead of being
// unassigned and another entry marked and waited on again. The agent
// answers no oftener than every 15 s, so a claim asked between two nodes
// more often than that would otherwise never be placed (seed 229581 of
// the static-IP simulation). Any other acknowledged one is released as
// any other.
func (v *poolView) keepFirstMarks(in *staticInputs, first map[string]string, waitingFirst map[string]bool, out *staticOutcome) {
	for key, owner := range first {
		switch v.cn.Status.IPAM.ReleaseIPs[key] {
		case ipamoption.IPAMMarkForRelease:
		case ipamoption.IPAMReadyForRelease:
			if !in.firstAway[owner] {
				continue
			}
			if out.firstMarks == nil {
				out.firstMarks = map[string]string{}
			}
			out.firstMarks[key] = owner
			v.holdFirst(key)
			continue
		default:
			continue
		}
		if out.firstMarks == nil {
			out.firstMarks = map[string]string{}
		}
		out.firstMarks[key] = owner
		if waitingFirst[owner] {
			v.keepMark(key)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pickFree picks a free ordinary entry of the pool (in subnet, if set)
// for owner's first placement: not used, not in the handshake, on a
// usable attached ENI, and a secondary address of it, never a member of
// a delegated /28 (a member can only be released with its whole prefix,
// so it could never move), and named by no other claim (namedByAnother).
func (v *poolView) pickFree(in *staticInputs, owner string, snap *snapshot.Node, cfg *pool.Config, subnet string) (string, bool) {
	usable := map[string]*cloud.ENI{}
	for i := range snap.ENIs {
		e := &snap.ENIs[i]
		if pool.Usable(e, cfg) && e.AttachmentStatus == cloud.AttachmentAttached && (subnet == "" || e.SubnetID == subnet) {
			usable[e.ID] = e
		}
	}
	for _, key := range slices.Sorted(maps.Keys(v.cn.Spec.IPAM.Pool)) {
		entry := v.cn.Spec.IPAM.Pool[key]
		_, used := v.cn.Status.IPAM.Used[key]
		e := usable[entry.Resource]
		if entry.Owner != "" || used || v.inHandshake(key) || e == nil || in.namedByAnother(key, owner) {
			continue
		}
		if ip, err := netip.ParseAddr(key); err == nil && slices.Contains(e.IPs, ip) {
			return key, true
		}
	}
	return "", false
}

// prefixed reports whether the node's pool holds or grows by delegated
// /28 prefixes.
func prefixed(snap *snapshot.Node, cfg *pool.Config) bool {
	if cfg.PrefixDelegation && snap.Type.PrefixDelegation() {
		return true
	}
	return slices.ContainsFunc(snap.ENIs, func(e cloud.ENI) bool { return pool.Usable(&e, cfg) && len(e.Prefixes) > 0 })
}

// secondarySlot names a usable attached ENI (in subnet, if set) with a
// free address slot, the emptiest first; "" if none.
func secondarySlot(snap *snapshot.Node, cfg *pool.Config, subnet string) string {
	var best *cloud.ENI
	for i := range snap.ENIs {
		e := &snap.ENIs[i]
		if !pool.Usable(e, cfg) || e.AttachmentStatus != cloud.AttachmentAttached || (subnet != "" && e.SubnetID != subnet) || snap.Type.IPv4PerENI-e.Slots() <= 0 {
			continue
		}
		if best == nil || e.Slots() < best.Slots() {
			best = e
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// namedByAnother reports whether a claim other than owner's names the
// address key (spec.address, else the address it recorded), whether or
// not it is being released, Lost or not checked yet. Such an address is
// never a first placement's: the claim naming it keeps it before a
// claim that takes it later (claims.Precedes), so the later claim's
// stamp would be removed once both are read, after its claim was told it
// is Bound, and the address, released with the first claim, handed to
// an ordinary pod (seed 214392: an address assigned for a claim deleted
// before it was stamped entered the pool, as an ordinary entry, in the
// pass that served another claim's first placement). An address EC2
// holds outside the pool as read, the entries such a pass brings in, has
// every claim naming it among in.claims (gatherStatic).
func (in *staticInputs) namedByAnother(key, owner string) bool {
	for _, c := range in.claims {
		if c.Owner != owner && c.Addr.IsValid() && c.Addr.String() == key {
			return true
		}
	}
	return false
}
