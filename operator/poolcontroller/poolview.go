package poolcontroller

import (
	"net/netip"
	"slices"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// poolView edits the desired spec.ipam.pool and status.ipam.release-ips
// of one node in place (they belong to the reconcile's copy of the
// CiliumNode).
type poolView struct {
	cn *ciliumv2.CiliumNode
	// pendingRelease is how long until excess IPs may be marked.
	pendingRelease time.Duration
	// awaiting counts addresses EC2 holds on the node's usable ENIs that
	// are not pooled yet because the ENI is not attached or the node's
	// agent has not reported them routed. Planning counts them as
	// available, so they are not asked for twice.
	awaiting int
	// awaitingENIs are the ENIs of those addresses.
	awaitingENIs []string
	// unverified counts addresses the cache shows on a routed ENI that the
	// pool lacks, on the word of a describe that may predate an earlier
	// operator process's Unassign; they enter the pool once a later
	// describe confirms them. Planning counts them as available too.
	unverified int
	// unverifiedENIs are the ENIs of those addresses.
	unverifiedENIs []string
	// claimMarks are the entries marked for release so that a claim can
	// be stamped on them once the agent acknowledges (reconcileStatic):
	// abortRelease leaves them marked.
	claimMarks map[string]bool
	// heldFirst are the acknowledged entries kept for a first placement
	// whose claim is asked onto another node for now (keepFirstMarks):
	// never unassigned, and their slots not counted as coming back.
	heldFirst map[string]bool
}

// poolInputs are the facts a node's pool is derived from, besides the
// CiliumNode itself.
type poolInputs struct {
	snap *snapshot.Node
	cfg  *pool.Config
	// routed reports whether the node's agent has reported ip routed on
	// the ENI; nil when the agent reports nothing.
	routed func(eniID string, ip netip.Addr) bool
	// untrusted are the addresses, among those ready to enter the pool,
	// for which the cache's word that they are on their ENI may not be
	// believed yet (inventory.Trusted); nil: none.
	untrusted map[netip.Addr]bool
	// holders names the instance whose ENI holds each pool address
	// missing from its ENI ("" when the ENI is unattached).
	holders map[netip.Addr]string
	// missing remembers since when each pool address has been missing
	// from its ENI in EC2; edited in place.
	missing map[string]time.Time
	now     time.Time
	// grace is how long an address may be missing before it is taken out:
	// EC2's describes are eventually consistent.
	grace time.Duration
	// static tells, for an address the pool lacks, the owner its claim
	// stamps it with and whether it belongs in this pool
	// (staticInputs.claimOf); nil: no address is claimed.
	static *staticInputs
	// pooledElsewhere: whether another node's pool lists each address
	// ready to enter this one; an address enters only once none does (no
	// address in two pools). Nil: none is checked; an address missing
	// from a map that is not nil counts as listed.
	pooledElsewhere map[string]bool
	// cluster names the ENIs that are the operator's to repair; backoff
	// remembers the repairs tried (decideRepairs).
	cluster string
	backoff map[string]repair
}

// poolChanges counts what one reconcile of the pool changed, for logs.
type poolChanges struct {
	added, dropped, marked, resourceFixed int
	// usedOffENI counts addresses pods hold that EC2 no longer shows on
	// the node: they cannot be taken back from the pods, only reported.
	usedOffENI int
}

func (c poolChanges) any() bool {
	return c.added+c.dropped+c.marked+c.resourceFixed > 0
}

// reconcile derives the pool from EC2 and the release handshake, in both
// directions:
//
//   - an address in state released leaves the pool (its Unassign went
//     through; a write lost after it must not leave it locked there);
//   - an address of a usable, attached ENI enters the pool once the node's
//     agent reported it routed, unless it is in the handshake, and once
//     the cache's word for it can be trusted (a describe that started
//     before this process's grace may still show an address an earlier
//     process unassigned);
//   - a free address that EC2 does not show on its ENI any more is marked
//     for release once it has been missing for the grace, at once if EC2
//     shows it on another instance; the handshake then takes it out, so
//     the agent can never hand it out meanwhile;
//   - an address EC2 shows on another usable ENI of this node follows it
//     once that ENI routes it.
//
// Addresses in use are never taken out here; owner-stamped (static)
// entries are reconcileStatic's, and a claimed address enters only the
// pool of the node its claim places it on, stamped (claimOf).
func (v *poolView) reconcile(in *poolInputs) poolChanges {
	var ch poolChanges
	ipam, st := &v.cn.Spec.IPAM, &v.cn.Status.IPAM
	for ip, state := range st.ReleaseIPs {
		if state == ipamoption.IPAMReleased {
			if _, ok := ipam.Pool[ip]; ok {
				delete(ipam.Pool, ip)
				ch.dropped++
			}
		}
	}

	// Where EC2 has each address of the node's usable ENIs.
	onENI := map[netip.Addr]*cloud.ENI{}
	for i := range in.snap.ENIs {
		eni := &in.snap.ENIs[i]
		if !pool.Usable(eni, in.cfg) {
			continue
		}
		for _, ip := range eni.IPs {
			onENI[ip] = eni
		}
		for _, p := range eni.Prefixes {
			for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
				onENI[ip] = eni
			}
		}
	}
	ready := func(eni *cloud.ENI, ip netip.Addr) bool {
		return eni.AttachmentStatus == cloud.AttachmentAttached && in.routed != nil && in.routed(eni.ID, ip)
	}

	// Pool entries EC2 does not back.
	var gone []netip.Addr
	for key, entry := range ipam.Pool {
		if entry.Owner != "" || v.inHandshake(key) {
			continue
		}
		ip, err := netip.ParseAddr(key)
		if err != nil || ip.Is6() {
			continue // the IPv6 window is decideWindow6's
		}
		eni, ok := onENI[ip]
		if ok && eni.ID == entry.Resource {
			delete(in.missing, key)
			continue
		}
		if ok && ready(eni, ip) {
			entry.Resource = eni.ID
			ipam.Pool[key] = entry
			delete(in.missing, key)
			ch.resourceFixed++
			continue
		}
		if _, used := st.Used[key]; used {
			ch.usedOffENI++
			continue
		}
		if _, seen := in.missing[key]; !seen {
			in.missing[key] = in.now
		}
		gone = append(gone, ip)
	}
	if len(gone) > 0 {
		for _, ip := range gone {
			key := ip.String()
			holder, held := in.holders[ip]
			onOther := held && holder != in.snap.Instance.ID
			if !onOther && in.now.Sub(in.missing[key]) < in.grace {
				continue
			}
			v.mark(key)
			delete(in.missing, key)
			ch.marked++
		}
	}
	for key := range in.missing {
		if _, ok := ipam.Pool[key]; !ok {
			delete(in.missing, key)
		}
	}

	// Addresses EC2 has that the pool lacks.
	v.awaiting, v.awaitingENIs = 0, nil
	v.unverified, v.unverifiedENIs = 0, nil
	for ip, eni := range onENI {
		key := ip.String()
		if _, ok := ipam.Pool[key]; ok {
			continue
		}
		owner, here := "", true
		if in.static != nil {
			owner, here = in.static.claimOf(ip)
		}
		if state, leaving := st.ReleaseIPs[key]; leaving {
			if owner == "" || !here || state != ipamoption.IPAMReleased {
				continue // back in the pool once the agent dropped the entry
			}
			// A claimed address back on the node it left (a move, fast or
			// not, marks it released; Cilium's agent drops the entry at
			// its next write, up to 15 s later): the entry is stale, and
			// a released claimed address was never unassigned.
			delete(st.ReleaseIPs, key)
		}
		if !here {
			continue // claimed for another node: it waits to move there
		}
		if !ready(eni, ip) {
			v.awaiting++
			if !slices.Contains(v.awaitingENIs, eni.ID) {
				v.awaitingENIs = append(v.awaitingENIs, eni.ID)
			}
			continue
		}
		if in.untrusted[ip] {
			v.unverified++
			if !slices.Contains(v.unverifiedENIs, eni.ID) {
				v.unverifiedENIs = append(v.unverifiedENIs, eni.ID)
			}
			continue
		}
		if listed, read := in.pooledElsewhere[key]; in.pooledElsewhere != nil && (listed || !read) {
			// Still listed in the pool it leaves: a static address on
			// its move, or an ordinary one whose release a restart cut
			// short after the Unassign, which EC2 then handed to this
			// node; it enters once that pool dropped it.
			v.awaiting++
			continue
		}
		if ipam.Pool == nil {
			ipam.Pool = ipamtypes.AllocationMap{}
		}
		ipam.Pool[key] = ipamtypes.AllocationIP{Resource: eni.ID, Owner: owner}
		ch.added++
	}
	slices.Sort(v.awaitingENIs)
	slices.Sort(v.unverifiedENIs)
	return ch
}

// mark starts the release handshake for ip.
func (v *poolView) mark(ip string) {
	st := &v.cn.Status.IPAM
	if st.ReleaseIPs == nil {
		st.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
	}
	st.ReleaseIPs[ip] = ipamoption.IPAMMarkForRelease
}

// keepMark keeps ip's mark for release from abortRelease: a claim waits
// for the agent's answer to it.
func (v *poolView) keepMark(ip string) {
	if v.claimMarks == nil {
		v.claimMarks = map[string]bool{}
	}
	v.claimMarks[ip] = true
}

// holdFirst keeps the acknowledged entry ip for a first placement
// (heldFirst).
func (v *poolView) holdFirst(ip string) {
	if v.heldFirst == nil {
		v.heldFirst = map[string]bool{}
	}
	v.heldFirst[ip] = true
}

// inHandshake reports whether ip has any release-ips entry.
func (v *poolView) inHandshake(ip string) bool {
	return inHandshake(v.cn, ip)
}

// inHandshake reports whether ip is in cn's release handshake.
func inHandshake(cn *ciliumv2.CiliumNode, ip string) bool {
	_, ok := cn.Status.IPAM.ReleaseIPs[ip]
	return ok
}

// releasing counts the addresses acknowledged for release (or released)
// that the snapshot still shows on one of the node's usable ENIs: their
// Unassign is yet to be made (or failed, or is not seen yet), and their
// slots come back when it is. A static address is never unassigned and
// is not counted.
func (v *poolView) releasing(snap *snapshot.Node, cfg *pool.Config) int {
	n := 0
	for ip, state := range v.cn.Status.IPAM.ReleaseIPs {
		if state != ipamoption.IPAMReadyForRelease && state != ipamoption.IPAMReleased {
			continue
		}
		if v.cn.Spec.IPAM.Pool[ip].Owner != "" || v.heldFirst[ip] {
			continue
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil || addr.Is6() {
			continue // an IPv6 window address takes no slot of its own
		}
		for i := range snap.ENIs {
			if e := &snap.ENIs[i]; pool.Usable(e, cfg) && e.HasIP(addr) {
				n++
				break
			}
		}
	}
	return n
}

// leaving reports whether the agent must not hand the IP out.
func (v *poolView) leaving(ip string) bool {
	switch v.cn.Status.IPAM.ReleaseIPs[ip] {
	case ipamoption.IPAMMarkForRelease, ipamoption.IPAMReadyForRelease, ipamoption.IPAMReleased:
		return true
	}
	return false
}

// counts returns the IPv4 pool IPs the agent may hand out to any pod and
// the IPv4 IPs it reports used (Cilium sizes each family's pool apart;
// the IPv6 window is counted by window6Counts). A stamped entry is
// neither: it is its claim's pod's alone, used or not.
func (v *poolView) counts() (available, used int) {
	pool := v.cn.Spec.IPAM.Pool
	for ip, e := range pool {
		if !v.leaving(ip) && e.Owner == "" && !isIPv6(ip) {
			available++
		}
	}
	for ip := range v.cn.Status.IPAM.Used {
		if pool[ip].Owner == "" && !isIPv6(ip) {
			used++
		}
	}
	return available, used
}

// abortRelease takes back the IPs marked for release whose address EC2
// still shows on their ENI, and returns how many. Only marked ones: an IP
// the agent acknowledged may already have been unassigned (the write
// after the Unassign can be lost), so it is always released to the end.
//
// The addresses of the ENI being drained (snap.Draining) stay marked, and
// so do those a claim waits on (claimMarks).
func (v *poolView) abortRelease(snap *snapshot.Node) int {
	n := 0
	for ip, st := range v.cn.Status.IPAM.ReleaseIPs {
		if st != ipamoption.IPAMMarkForRelease || v.claimMarks[ip] {
			continue
		}
		addr, err := netip.ParseAddr(ip)
		entry, inPool := v.cn.Spec.IPAM.Pool[ip]
		if err != nil || addr.Is6() || !inPool || entry.Owner != "" || !onENI(snap, entry.Resource, addr) || (snap.Draining != "" && entry.Resource == snap.Draining) {
			continue
		}
		delete(v.cn.Status.IPAM.ReleaseIPs, ip)
		n++
	}
	return n
}

// onENI reports whether the snapshot shows ip on the ENI eniID.
func onENI(snap *snapshot.Node, eniID string, ip netip.Addr) bool {
	for i := range snap.ENIs {
		if e := &snap.ENIs[i]; e.ID == eniID {
			return e.HasIP(ip)
		}
	}
	return false
}

// releaseCandidates picks up to n free addresses to release: unowned,
// unused, not in the handshake, on usable ENIs — from the ENIs in order
// (their IDs, first emptied first; consolidation's drainOrder), the others
// after them from the highest device index down, so later ENIs empty
// first. A delegated prefix goes only whole: all 16 of its addresses
// free, and n leaving room for them.
func (v *poolView) releaseCandidates(snap *snapshot.Node, cfg *pool.Config, n int, order []string) map[string][]netip.Addr {
	enis := slices.Clone(snap.ENIs)
	rank := func(e cloud.ENI) int {
		if i := slices.Index(order, e.ID); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(enis, func(a, b cloud.ENI) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return b.DeviceIndex - a.DeviceIndex
	})
	out := map[string][]netip.Addr{}
	free := func(eni *cloud.ENI, ip netip.Addr) bool {
		key := ip.String()
		entry, inPool := v.cn.Spec.IPAM.Pool[key]
		_, used := v.cn.Status.IPAM.Used[key]
		return inPool && entry.Owner == "" && entry.Resource == eni.ID && !used && !v.inHandshake(key)
	}
	for i := range enis {
		eni := &enis[i]
		if !pool.Usable(eni, cfg) {
			continue
		}
		for _, p := range eni.Prefixes {
			if n < pool.IPsPerPrefix {
				break
			}
			var members []netip.Addr
			for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
				if !free(eni, ip) {
					members = nil
					break
				}
				members = append(members, ip)
			}
			if len(members) == pool.IPsPerPrefix {
				out[eni.ID] = append(out[eni.ID], members...)
				n -= pool.IPsPerPrefix
			}
		}
		ips := slices.Clone(eni.IPs)
		slices.SortFunc(ips, func(a, b netip.Addr) int { return b.Compare(a) })
		for _, ip := range ips {
			if n == 0 {
				return out
			}
			if !free(eni, ip) {
				continue
			}
			out[eni.ID] = append(out[eni.ID], ip)
			n--
		}
	}
	return out
}
