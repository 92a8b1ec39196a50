package poolcontroller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// finishRelease completes the handshake for the IPs the agent
// acknowledged, whatever the node needs now: unassign them in EC2 (those
// EC2 still shows on their ENI; an address that moved elsewhere is never
// unassigned from there), set released, and drop them from the pool
// (status is written before spec, so the agent sees released while the IP
// is still listed, and deletes the entry once it is gone; a spec write
// lost after that is repaired by poolView.reconcile). IPs the agent
// refused are forgotten. An acknowledged IP is never put back in service:
// its Unassign may have been sent by a process that died before saying so.
func (s *nodeSync) finishRelease(ctx context.Context) error {
	st := &s.cn.Status.IPAM
	byENI := map[string][]netip.Addr{}
	for ip, state := range st.ReleaseIPs {
		switch state {
		case ipamoption.IPAMDoNotRelease:
			delete(st.ReleaseIPs, ip)
		case ipamoption.IPAMReadyForRelease:
			addr, err := netip.ParseAddr(ip)
			entry, inPool := s.cn.Spec.IPAM.Pool[ip]
			if err != nil || !inPool {
				delete(st.ReleaseIPs, ip)
				continue
			}
			if entry.Owner != "" || s.claimed(addr) {
				continue // a static address: never unassigned (reconcileStatic)
			}
			byENI[entry.Resource] = append(byENI[entry.Resource], addr)
		}
	}
	var errs []error
	for _, eniID := range slices.Sorted(maps.Keys(byENI)) {
		ips, err := s.finishPrefixes(ctx, eniID, byENI[eniID])
		if err != nil {
			errs = append(errs, err)
		}
		if len(ips) == 0 {
			continue
		}
		// A stale read may show IPs this operator already unassigned; the
		// inventory knows, and no call is made for them.
		held := s.heldBy(eniID, ips)
		if len(held) == 0 {
			s.released(ips)
			continue
		}
		if err := s.r.api.UnassignIPs(ctx, eniID, held); err != nil && !errors.Is(err, cloud.ErrNotFound) {
			errs = append(errs, fmt.Errorf("releasing %d IPs of %s, %w", len(ips), eniID, err))
			continue
		}
		s.r.inv.RecordUnassigned(eniID, ips)
		s.r.metrics.ipsReleased.Add(float64(len(ips)))
		s.released(ips)
	}
	return errors.Join(errs...)
}

// finishPrefixes releases the delegated prefixes of the ENI whose 16
// addresses the agent all acknowledged, with one Unassign of the prefixes
// (never a partial prefix), and returns the acknowledged addresses that
// are not prefix members. The acknowledged members of a prefix that can
// no longer be released whole (a member refused, or left the handshake)
// are taken back: no Unassign was ever sent for them, since one is sent
// only for a whole prefix and the agent never turns an acknowledgement
// into a refusal. The prefix consolidation drains keeps them (the agent
// hands none out) until its busy members follow.
func (s *nodeSync) finishPrefixes(ctx context.Context, eniID string, ips []netip.Addr) ([]netip.Addr, error) {
	var eni *cloud.ENI
	for i := range s.snap.ENIs {
		if s.snap.ENIs[i].ID == eniID {
			eni = &s.snap.ENIs[i]
		}
	}
	if eni == nil || len(eni.Prefixes) == 0 {
		return ips, nil
	}
	st := &s.cn.Status.IPAM
	members := map[netip.Prefix][]netip.Addr{}
	var singles []netip.Addr
	for _, ip := range ips {
		i := slices.IndexFunc(eni.Prefixes, func(p netip.Prefix) bool { return p.Contains(ip) })
		if i < 0 {
			singles = append(singles, ip)
			continue
		}
		members[eni.Prefixes[i]] = append(members[eni.Prefixes[i]], ip)
	}
	var whole []netip.Prefix
	for _, p := range slices.SortedFunc(maps.Keys(members), netip.Prefix.Compare) {
		ready := members[p]
		if len(ready) == pool.IPsPerPrefix {
			whole = append(whole, p)
			continue
		}
		if p == s.mem.consolidation.drainPrefix {
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
	if len(whole) == 0 {
		return singles, nil
	}
	err := s.r.api.UnassignPrefixes(ctx, eniID, whole)
	if err != nil && !errors.Is(err, cloud.ErrNotFound) {
		return singles, fmt.Errorf("releasing %d prefixes of %s, %w", len(whole), eniID, err)
	}
	s.r.inv.RecordUnassignedPrefixes(eniID, whole)
	s.r.metrics.ipsReleased.Add(float64(pool.IPsPerPrefix * len(whole)))
	for _, p := range whole {
		s.released(members[p])
	}
	s.r.log.Info("released prefixes", "node", s.cn.Name, "eni", eniID, "prefixes", len(whole))
	return singles, nil
}

// claimed reports whether a claim that is not being released names ip
// (spec or status): such an address is never unassigned, even unstamped.
// A claim refused for now counts too: one that asks for an address
// another claim held is refused until that claim is gone, and then gets
// it; given back to EC2 in between, the address could be taken by
// anything in the subnet.
func (s *nodeSync) claimed(ip netip.Addr) bool {
	if s.static == nil {
		return true // the claims could not be read: nothing is known free
	}
	for _, c := range s.static.claims {
		if c.Addr == ip && !c.Release {
			return true
		}
	}
	return false
}

// released completes the handshake of unassigned IPs.
func (s *nodeSync) released(ips []netip.Addr) {
	for _, ip := range ips {
		s.cn.Status.IPAM.ReleaseIPs[ip.String()] = ipamoption.IPAMReleased
		delete(s.cn.Spec.IPAM.Pool, ip.String())
	}
}

// heldBy returns the IPs the inventory still sees on the ENI, which must
// be one of the node's; none when the node has no such ENI (an ENI of
// another instance is never touched).
func (s *nodeSync) heldBy(eniID string, ips []netip.Addr) []netip.Addr {
	for i := range s.snap.ENIs {
		if e := &s.snap.ENIs[i]; e.ID == eniID {
			return slices.DeleteFunc(slices.Clone(ips), func(ip netip.Addr) bool { return !e.HasIP(ip) })
		}
	}
	return nil
}

// markExcess starts the handshake for the IPs that stayed in excess for a
// whole release delay: excess is watched over windows of ReleaseDelay,
// and at the end of each the lowest excess seen in it — IPs no pod needed
// at any moment of the window — is marked, one batch at a time.
func (s *nodeSync) markExcess() {
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
		mem.excessWindow, mem.excessFloor = now, excess
	}
	mem.excessFloor = min(mem.excessFloor, excess)
	if wait := s.cfg.ReleaseDelay - now.Sub(mem.excessWindow); wait > 0 {
		s.pool.pendingRelease = wait
		return
	}
	release := min(mem.excessFloor, excess)
	mem.excessWindow, mem.excessFloor = time.Time{}, 0
	if excess > 0 {
		mem.excessWindow, mem.excessFloor = now, excess
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
