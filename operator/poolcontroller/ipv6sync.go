package poolcontroller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/enipam/enipam/operator/cloud"
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
		routed: func(string, netip.Addr) bool { return false }, trusted: s.r.inv.Trusted,
		cursor: s.mem.window6.cursor, windowed: s.mem.window6.windowed,
		missing: s.mem.missing, now: s.r.now(), grace: s.r.opts.ConsistencyGrace,
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
	}
	return in
}

// syncWindow6 decides the node's IPv6 window and carries it out: the /80
// asked for or given back, the node told why it gets no IPv6, and the
// window's excess marked once it lasted a release delay. Nothing of it
// touches the node's IPv4, and no failure of it fails the node. False
// when the write it makes ahead of its EC2 call failed (s.writeErr; the
// reconcile stops there).
func (s *nodeSync) syncWindow6(ctx context.Context) bool {
	if !s.cfg.IPv6 && len(s.mem.window6.windowed) == 0 && !s.hasIPv6Entries() {
		return true
	}
	in := s.readWindow6()
	d := decideWindow6(s.cn, in)
	s.mem.window6.cursor, s.mem.window6.windowed = d.cursor, d.windowed
	if d.added+d.released+d.marked > 0 {
		s.r.log.Info("IPv6 window follows the pool", "node", s.cn.Name, "added", d.added, "released", d.released, "marked", d.marked,
			"available", d.available, "used", d.used)
	}
	problem := d.problem
	if d.assign != "" {
		// Addresses ready for the pool never wait behind an EC2 call
		// (writePoolFirst): the /80's may wait in EC2's bucket.
		if !s.writePoolFirst(ctx) {
			return false
		}
		problem = s.assignWindowPrefix(ctx, d.assign)
	}
	if len(d.unassign) > 0 {
		s.unassignWindowPrefixes(ctx, in.primary.ID, d.unassign)
	}
	s.tellIPv6Problem(problem)
	if d.untrusted && !s.r.now().Before(s.r.inv.TrustFrom()) {
		// A /80 shown by a describe older than this process's grace: one
		// by ID now confirms it (verifyUnpooled does so for IPv4).
		if err := s.r.inv.RefreshENIs(ctx, []string{in.primary.ID}); err != nil {
			s.r.log.Info("describing the primary ENI to confirm its /80 failed; retrying", "node", s.cn.Name, "eni", in.primary.ID, "error", err)
		}
	}
	if d.awaiting || d.assign != "" {
		// The /80 waits for the agent's report (its NodeRouting's
		// update wakes the node; this is the fallback).
		s.requeueWithin(time.Second)
	}
	s.markWindow6Excess(in)
	return true
}

// hasIPv6Entries reports whether the node's pool, use or handshake
// lists an IPv6 address.
func (s *nodeSync) hasIPv6Entries() bool {
	found := false
	eachListed(s.cn, func(key string) { found = found || isIPv6(key) })
	return found
}

// assignWindowPrefix asks EC2 for one /80 on the ENI and records it;
// it returns why the node gets no IPv6 when EC2 refuses.
func (s *nodeSync) assignWindowPrefix(ctx context.Context, eniID string) error {
	got, err := s.r.api.AssignIPv6Prefixes(ctx, eniID, 1)
	if err != nil {
		if errors.Is(err, cloud.ErrInvalid) || errors.Is(err, cloud.ErrIPLimit) {
			return fmt.Errorf("%w: %w", errIPv6PrefixLost, err)
		}
		s.r.log.Info("asking for an IPv6 /80 failed; retrying", "node", s.cn.Name, "eni", eniID, "error", err)
		s.requeueWithin(s.r.retryAfter(s.mem.failures))
		return nil
	}
	s.r.inv.RecordAssignedIPv6Prefixes(eniID, got)
	s.mem.window6.windowed = append(s.mem.window6.windowed, got...)
	s.r.log.Info("assigned an IPv6 /80 for the window", "node", s.cn.Name, "eni", eniID, "prefixes", got)
	s.snapshot(ctx)
	return nil
}

// unassignWindowPrefixes gives back the window's idle /80s.
func (s *nodeSync) unassignWindowPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) {
	if err := s.r.api.UnassignIPv6Prefixes(ctx, eniID, prefixes); err != nil && !errors.Is(err, cloud.ErrNotFound) {
		s.r.log.Info("giving back IPv6 /80s failed; retrying", "node", s.cn.Name, "eni", eniID, "error", err)
		s.requeueWithin(s.r.retryAfter(s.mem.failures))
		return
	}
	s.r.inv.RecordUnassignedIPv6Prefixes(eniID, prefixes)
	s.mem.window6.windowed = slices.DeleteFunc(s.mem.window6.windowed, func(p netip.Prefix) bool { return slices.Contains(prefixes, p) })
	s.r.log.Info("gave back the IPv6 window's /80s", "node", s.cn.Name, "eni", eniID, "prefixes", prefixes)
}

// tellIPv6Problem records why the node gets no IPv6 (nil: it does), with
// an event on the node when that changes.
func (s *nodeSync) tellIPv6Problem(problem error) {
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
func (s *nodeSync) markWindow6Excess(in *window6Inputs) {
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
