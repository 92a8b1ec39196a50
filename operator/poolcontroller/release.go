package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// releaseStep is one ENI's part of completing the release handshake:
// whole delegated prefixes to unassign (members: their addresses,
// released once the Unassign went through), and acknowledged single
// addresses to release, of which held are those EC2 still shows on the
// ENI (unassigned; none: released without a call).
type releaseStep struct {
	eniID    string
	prefixes []netip.Prefix
	members  []netip.Addr
	ips      []netip.Addr
	held     []netip.Addr
}

// decideRelease decides how the handshake completes for the IPs the
// agent acknowledged, whatever the node needs now: unassign them in EC2
// (those EC2 still shows on their ENI; an address that moved elsewhere
// is never unassigned from there), then, once EC2 no longer shows them
// on their ENI, set released and drop them from the pool (status is
// written before spec, so the agent sees released while the IP is still
// listed, and deletes the entry once it is gone; a spec write lost after
// that is repaired by poolView.reconcile). IPs the agent refused are
// forgotten, in the desired status cn. An acknowledged IP is never put
// back in service: its Unassign may have been sent by a process that
// died before saying so. It makes no call: releaseUnheld releases what
// EC2 no longer holds, and the executor unassigns the rest after the
// write (act), for the next reconcile to release. The entries of kept
// are left acknowledged: kept for a first placement (poolView.heldFirst).
func decideRelease(cn *ciliumv2.CiliumNode, snap *snapshot.Node, static *staticInputs, kept map[string]bool, drainPrefix netip.Prefix) []releaseStep {
	st := &cn.Status.IPAM
	byENI := map[string][]netip.Addr{}
	for ip, state := range st.ReleaseIPs {
		switch state {
		case ipamoption.IPAMDoNotRelease:
			delete(st.ReleaseIPs, ip)
		case ipamoption.IPAMReadyForRelease:
			addr, err := netip.ParseAddr(ip)
			entry, inPool := cn.Spec.IPAM.Pool[ip]
			if err != nil || !inPool {
				delete(st.ReleaseIPs, ip)
				continue
			}
			if addr.Is6() {
				continue // the IPv6 window's: released without a call (decideWindow6)
			}
			if entry.Owner != "" || claimedIn(static, addr) {
				continue // a static address: never unassigned (reconcileStatic)
			}
			if kept[ip] {
				continue // kept for a first placement (keepFirstMarks)
			}
			byENI[entry.Resource] = append(byENI[entry.Resource], addr)
		}
	}
	var steps []releaseStep
	for _, eniID := range slices.Sorted(maps.Keys(byENI)) {
		step := releaseStep{eniID: eniID}
		step.ips, step.prefixes, step.members = wholePrefixes(cn, snap, eniID, byENI[eniID], drainPrefix)
		step.held = heldBy(snap, eniID, step.ips)
		if len(step.prefixes) > 0 || len(step.ips) > 0 {
			steps = append(steps, step)
		}
	}
	return steps
}

// wholePrefixes picks, of the addresses of the ENI the agent
// acknowledged, the delegated prefixes whose 16 addresses it all
// acknowledged, to release with one Unassign of the prefixes (never a
// partial prefix), and returns the acknowledged addresses that are not
// prefix members beside them. The acknowledged members of a prefix that
// can no longer be released whole (a member refused, or left the
// handshake) are taken back in the desired status: no Unassign was ever
// sent for them, since one is sent only for a whole prefix and the agent
// never turns an acknowledgement into a refusal. The prefix consolidation
// drains (drainPrefix) keeps them (the agent hands none out) until its
// busy members follow.
func wholePrefixes(cn *ciliumv2.CiliumNode, snap *snapshot.Node, eniID string, ips []netip.Addr, drainPrefix netip.Prefix) (singles []netip.Addr, whole []netip.Prefix, members []netip.Addr) {
	var eni *cloud.ENI
	for i := range snap.ENIs {
		if snap.ENIs[i].ID == eniID {
			eni = &snap.ENIs[i]
		}
	}
	if eni == nil || len(eni.Prefixes) == 0 {
		return ips, nil, nil
	}
	st := &cn.Status.IPAM
	byPrefix := map[netip.Prefix][]netip.Addr{}
	for _, ip := range ips {
		i := slices.IndexFunc(eni.Prefixes, func(p netip.Prefix) bool { return p.Contains(ip) })
		if i < 0 {
			singles = append(singles, ip)
			continue
		}
		byPrefix[eni.Prefixes[i]] = append(byPrefix[eni.Prefixes[i]], ip)
	}
	for _, p := range slices.SortedFunc(maps.Keys(byPrefix), netip.Prefix.Compare) {
		ready := byPrefix[p]
		if len(ready) == pool.IPsPerPrefix {
			whole = append(whole, p)
			members = append(members, ready...)
			continue
		}
		if p == drainPrefix {
			continue // draining: its members are held until all 16 are acknowledged
		}
		pending := false
		for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
			if st.ReleaseIPs[ip.String()] == ipamoption.IPAMMarkForRelease {
				pending = true
			}
		}
		if !pending {
			for _, ip := range ready {
				delete(st.ReleaseIPs, ip.String())
			}
		}
	}
	return singles, whole, members
}

// claimed reports whether a claim that is not being released names ip
// (spec or status): such an address is never unassigned, even unstamped.
// A claim refused for now counts too: one that asks for an address
// another claim held is refused until that claim is gone, and then gets
// it; given back to EC2 in between, the address could be taken by
// anything in the subnet.
func (s *deciding) claimed(ip netip.Addr) bool {
	return claimedIn(s.static, ip)
}

// claimedIn is claimed for the claims as read; with none read (nil),
// nothing is known free.
func claimedIn(static *staticInputs, ip netip.Addr) bool {
	if static == nil {
		return true
	}
	for _, c := range static.claims {
		if c.Addr == ip && !c.Release {
			return true
		}
	}
	return false
}

// released completes the handshake of unassigned IPs.
func (s *deciding) released(ips []netip.Addr) {
	for _, ip := range ips {
		s.cn.Status.IPAM.ReleaseIPs[ip.String()] = ipamoption.IPAMReleased
		delete(s.cn.Spec.IPAM.Pool, ip.String())
	}
}

// heldBy returns the IPs the snapshot still shows on the ENI, which must
// be one of the node's; none when the node has no such ENI (an ENI of
// another instance is never touched).
func heldBy(snap *snapshot.Node, eniID string, ips []netip.Addr) []netip.Addr {
	for i := range snap.ENIs {
		if e := &snap.ENIs[i]; e.ID == eniID {
			return slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return !e.HasIP(ip) })
		}
	}
	return nil
}

// markExcess starts the handshake for the IPs that stayed in excess for a
// whole release delay: excess is watched over windows of ReleaseDelay,
// and at the end of each the lowest excess seen in it — IPs no pod needed
// at any moment of the window — is marked, one batch at a time.
func (s *deciding) markExcess() {
	if !s.cfg.ReleaseExcessIPs || s.pool == nil {
		return
	}
	s.markDrainingENI()
	available, used := s.pool.counts()
	used += s.waiting
	excess := pool.Excess(available, used, s.cfg.Knobs)
	if s.mem.consolidation.drainPrefix.IsValid() && excess > 0 {
		// Members of the prefix being drained that freed since leave at
		// once, within the excess.
		excess -= s.drainPrefixes(excess)
	}
	now := s.r.now()
	mem := s.mem
	if mem.excessWindow.IsZero() {
		if excess == 0 {
			return
		}
		mem.excessWindow, mem.excessFloor = now, int32(excess)
	}
	mem.excessFloor = min(mem.excessFloor, int32(excess))
	if wait := s.cfg.ReleaseDelay - now.Sub(mem.excessWindow); wait > 0 {
		s.pool.pendingRelease = wait
		return
	}
	release := min(int(mem.excessFloor), excess)
	mem.excessWindow, mem.excessFloor = time.Time{}, 0
	if excess > 0 {
		mem.excessWindow, mem.excessFloor = now, int32(excess)
		s.pool.pendingRelease = max(s.cfg.ReleaseDelay, time.Second)
	}
	if release == 0 || s.outstandingRelease() > 0 {
		return
	}
	picked := s.pool.releaseCandidates(&s.snap, &s.cfg.Config, release, s.drainOrder())
	n := 0
	for _, ips := range picked {
		for _, ip := range ips {
			s.pool.mark(ip.String())
			n++
		}
	}
	if !s.mem.consolidation.drainPrefix.IsValid() {
		n += s.drainPrefixes(release - n)
	}
	if n == 0 {
		return
	}
	s.r.log.Info("marked excess IPs for release", "node", s.cn.Name, "ips", n, "available", available, "used", used)
}
