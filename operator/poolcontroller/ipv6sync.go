package poolcontroller

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// window6Memory is what the IPv6 window keeps between reconciles of a
// node.
type window6Memory struct {
	// cursor is the last address the window took.
	cursor netip.Addr
	// windowed are the /80s this process asked for the window.
	windowed []netip.Prefix
	// problem is the last IPv6Unavailable told in an event ("" none).
	problem string
	// excessSince is when the window's excess was first seen (zero:
	// none); excessFloor the lowest excess since.
	excessSince time.Time
	excessFloor int
}

// readWindow6 gathers the IPv6 window's facts: the primary ENI and its
// subnet's IPv6 CIDR, the type's IPv6 slots, the agent's report and the
// inventory's trust.
func (s *nodeSync) readWindow6() *window6Inputs {
	in := &window6Inputs{
		want: s.cfg.IPv6, perENI: s.snap.Type.IPv6PerENI, knobs: s.cfg.Knobs, waiting: s.waiting,
		routed:  func(string, netip.Addr) bool { return false },
		trusted: func(string, netip.Addr) bool { return false },
		cursor:  s.mem.window6.cursor, windowed: s.mem.window6.windowed,
		missing: s.mem.missing, now: s.r.now(), grace: s.r.opts.ConsistencyGrace,
		trustFrom: s.r.inv.TrustFrom(),
	}
	if s.routed != nil {
		in.routed = s.routed
	}
	for i := range s.snap.ENIs {
		if e := &s.snap.ENIs[i]; e.DeviceIndex == 0 && e.Ordinary() {
			in.primary = e
		}
	}
	if in.primary != nil {
		for _, sub := range s.snap.Subnets {
			if sub.ID == in.primary.SubnetID {
				in.subnetIPv6 = sub.IPv6CIDR
			}
		}
		// The cache's word on the primary ENI's /80s, read now: the
		// window asks only about them.
		trusted := map[netip.Addr]bool{}
		for _, p := range in.primary.IPv6Prefixes {
			trusted[p.Addr()] = s.r.inv.Trusted(in.primary.ID, p.Addr())
		}
		primary := in.primary.ID
		in.trusted = func(eniID string, ip netip.Addr) bool { return eniID == primary && trusted[ip] }
	}
	return in
}

// syncWindow6 decides the node's IPv6 window: the window's addresses in
// the desired pool, the /80 to ask for or to give back and the describe
// that confirms one (s.acts, carried out after the write), the node told
// why it gets no IPv6, and the window's excess marked once it lasted a
// release delay. Nothing of it touches the node's IPv4, and no failure
// of it fails the node.
func (s *deciding) syncWindow6() {
	if !s.cfg.IPv6 && len(s.mem.window6.windowed) == 0 && !s.hasIPv6Entries() {
		return
	}
	in := s.window6
	in.now = s.r.now()
	d := decideWindow6(s.cn, in)
	s.mem.window6.cursor, s.mem.window6.windowed = d.cursor, d.windowed
	if d.added+d.released+d.marked > 0 {
		s.r.log.Info("IPv6 window follows the pool", "node", s.cn.Name, "added", d.added, "released", d.released, "marked", d.marked,
			"available", d.available, "used", d.used)
	}
	if d.assign != "" {
		// Why the node gets no IPv6 is told once EC2 answered (act).
		s.acts.window6Assign = d.assign
	} else {
		s.tellIPv6Problem(d.problem)
	}
	if len(d.unassign) > 0 {
		s.acts.window6Unassign = window6Return{eniID: in.primary.ID, prefixes: d.unassign}
	}
	if d.untrusted && !s.r.now().Before(in.trustFrom) {
		// A /80 shown by a describe older than this process's grace: one
		// by ID confirms it (decideReads asks so for IPv4).
		s.acts.window6Describe = in.primary.ID
	}
	if d.awaiting || d.assign != "" {
		// The /80 waits for the agent's report (its NodeRouting's
		// update wakes the node; this is the fallback).
		s.requeueWithin(time.Second)
	}
	s.markWindow6Excess(in)
}

// hasIPv6Entries reports whether the node's pool, use or handshake
// lists an IPv6 address.
func (s *deciding) hasIPv6Entries() bool {
	found := false
	eachListed(s.cn, func(key string) { found = found || isIPv6(key) })
	return found
}

// assignWindowPrefix has the executor ask EC2 for one /80 on the ENI;
// the window's memory takes it. It returns why the node gets no IPv6
// when EC2 refuses.
func (s *nodeSync) assignWindowPrefix(ctx context.Context, eniID string) error {
	got, retry, problem := s.exec().assignWindowPrefix(ctx, eniID)
	if retry {
		s.requeueWithin(s.r.retryAfter(s.mem.failures))
	}
	if len(got) == 0 {
		return problem
	}
	// The next reconcile (at once: act) lists the /80 in the status.
	s.mem.window6.windowed = append(s.mem.window6.windowed, got...)
	return nil
}

// unassignWindowPrefixes has the executor give back the window's idle
// /80s; the window's memory forgets them.
func (s *nodeSync) unassignWindowPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) {
	if !s.exec().unassignWindowPrefixes(ctx, eniID, prefixes) {
		s.requeueWithin(s.r.retryAfter(s.mem.failures))
		return
	}
	s.mem.window6.windowed = slices.DeleteFunc(s.mem.window6.windowed, func(p netip.Prefix) bool { return slices.Contains(prefixes, p) })
}

// tellIPv6Problem records why the node gets no IPv6 (nil: it does), with
// an event on the node when that changes.
func (s *deciding) tellIPv6Problem(problem error) {
	msg := ""
	if problem != nil {
		msg = fmt.Sprintf("ENIPolicy %s asks for IPv6 and node %s gets none: %v; its IPv4 is served as before", s.cfg.Policy, s.cn.Name, problem)
	}
	s.r.families.Set(s.cn.Name, s.cfg.Policy, msg)
	if msg == s.mem.window6.problem {
		return
	}
	s.mem.window6.problem = msg
	if msg != "" {
		s.r.events.Eventf(s.cn, nil, "Warning", ReasonIPv6Unavailable, "Allocate", "%s", msg)
		s.r.log.Info("no IPv6 for the node", "node", s.cn.Name, "instance", s.instanceID, "reason", problem)
	}
}

// markWindow6Excess marks the window's excess once it lasted a whole
// release delay, as markExcess does for IPv4: the lowest excess seen
// over the delay.
func (s *deciding) markWindow6Excess(in *window6Inputs) {
	mem := &s.mem.window6
	if !s.cfg.ReleaseExcessIPs {
		mem.excessSince = time.Time{}
		return
	}
	excess := excessWindow6(s.cn, in.waiting, in.knobs)
	if excess == 0 {
		mem.excessSince = time.Time{}
		return
	}
	now := s.r.now()
	if mem.excessSince.IsZero() {
		mem.excessSince, mem.excessFloor = now, excess
	}
	mem.excessFloor = min(mem.excessFloor, excess)
	if wait := s.cfg.ReleaseDelay - now.Sub(mem.excessSince); wait > 0 {
		s.requeueWithin(wait)
		return
	}
	n := markWindow6(s.cn, mem.excessFloor)
	mem.excessSince = time.Time{}
	if n > 0 {
		s.r.log.Info("marked excess IPv6 window addresses for release", "node", s.cn.Name, "ips", n)
	}
}
