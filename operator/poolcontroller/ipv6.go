package poolcontroller

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// The IPv6 window. A node whose policy asks for IPv6 gets one /80 prefix
// on its primary ENI (one AssignIpv6Addresses with Ipv6PrefixCount, as
// the AWS VPC CNI does), and its pool lists a window of that prefix's
// addresses, sized per family by the pool's knobs as Cilium's agent
// sizes its pools per family (pkg/ipam/crd.go). The window is refilled
// from the prefix with no EC2 call; an address leaves it by the release
// handshake alone (no Unassign: EC2 keeps the /80 whole), and the /80
// goes back only once the policy no longer asks for IPv6 and none of its
// addresses is pooled, used or in the handshake. The primary ENI's IPv6
// needs no policy routing (the main table routes it), but its /80 enters
// the pool only once the node's agent reports it, as for any address.

// Why a node gets no IPv6 window.
var (
	errNoIPv6Subnet   = errors.New("the primary ENI's subnet has no IPv6 CIDR")
	errNoIPv6Type     = errors.New("the instance type supports no IPv6")
	errNoIPv6Slot     = errors.New("the primary ENI has no IPv6 slot left for a /80 prefix")
	errNoPrimaryENI   = errors.New("the instance's primary ENI is not known yet")
	errIPv6PrefixLost = errors.New("EC2 refused the IPv6 /80 prefix")
)

// window6Inputs are the facts the IPv6 window is decided on, read
// beforehand.
type window6Inputs struct {
	// want: the policy asks for IPv6.
	want bool
	// primary is the instance's primary ENI (nil when not seen);
	// subnetIPv6 its subnet's IPv6 CIDR (invalid: none); perENI the type's
	// IPv6 slots per ENI (0: no IPv6).
	primary    *cloud.ENI
	subnetIPv6 netip.Prefix
	perENI     int
	knobs      pool.Knobs
	// waiting counts the pods bound to the node waiting for addresses.
	waiting int
	// routed and trusted answer, per address of the primary ENI, whether
	// the node's agent routes it and whether the cache's word that EC2
	// holds it may be believed.
	routed  func(eniID string, ip netip.Addr) bool
	trusted func(eniID string, ip netip.Addr) bool
	// cursor is the last address the window took: the next ones are
	// taken after it, so a released address is not handed out again
	// before the walk comes round the whole /80.
	cursor netip.Addr
	// windowed are the /80s this process used for the window: the only
	// ones it ever gives back (another tool's prefix on the primary ENI
	// is left alone).
	windowed []netip.Prefix
	// missing, now, grace: as poolInputs' (an IPv6 entry whose /80 EC2
	// no longer shows is marked once missing for the grace).
	missing map[string]time.Time
	now     time.Time
	grace   time.Duration
	// trustFrom is when the cache's describes start to be believed:
	// an untrusted /80 is described by ID from then on.
	trustFrom time.Time
}

// window6 is what decideWindow6 decided beyond its edits of the desired
// CiliumNode.
type window6 struct {
	// assign names the ENI to ask one /80 for ("" none); unassign the
	// /80s of the primary ENI to give back.
	assign   string
	unassign []netip.Prefix
	// problem says why the node gets no IPv6 now (nil: none).
	problem error
	// cursor is the window's cursor after the additions; windowed the
	// /80s known as the window's (in.windowed, and those of the primary
	// ENI that hold a listed address: a process that took over learns
	// them from the pool).
	cursor   netip.Addr
	windowed []netip.Prefix
	// awaiting: the /80 is on the ENI, not yet routed or trusted;
	// untrusted: routed, but the cache's word on it waits for a describe.
	awaiting, untrusted bool
	// added, released and marked count the window's changes; available
	// and used are its counts after them.
	added, released, marked int
	available, used         int
}

// isIPv6 reports whether a pool key is of the IPv6 family, as Cilium's
// DeriveFamily tells them apart: only IPv6 text has a colon. Counting the
// pool on every reconcile, it parses nothing.
func isIPv6(key string) bool { return strings.IndexByte(key, ':') >= 0 }

// decideWindow6 derives the IPv6 part of the node's desired pool and
// release handshake (cn, edited in place) from in: acknowledged window
// addresses are released at once (EC2 keeps the /80), addresses whose /80
// EC2 lost are marked once missing for the grace, and the window is
// filled to the knobs' size from the /80 past the cursor. It makes no
// call and reads no clock.
func decideWindow6(cn *ciliumv2.CiliumNode, in *window6Inputs) window6 {
	out := window6{cursor: in.cursor}
	ipam, st := &cn.Spec.IPAM, &cn.Status.IPAM
	for key, state := range st.ReleaseIPs {
		if !isIPv6(key) || state != ipamoption.IPAMReadyForRelease {
			continue
		}
		if _, pooled := ipam.Pool[key]; pooled && ipam.Pool[key].Owner == "" {
			st.ReleaseIPs[key] = ipamoption.IPAMReleased
			delete(ipam.Pool, key)
			out.released++
		}
	}

	var prefixes []netip.Prefix
	if in.primary != nil {
		prefixes = slices.Clone(in.primary.IPv6Prefixes)
		slices.SortFunc(prefixes, netip.Prefix.Compare)
	}
	inPrefix := func(ip netip.Addr) bool {
		return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) })
	}
	out.windowed = slices.Clone(in.windowed)
	for _, p := range prefixes {
		if !slices.Contains(out.windowed, p) && lastListed(cn, p).IsValid() {
			out.windowed = append(out.windowed, p)
		}
	}
	for key, entry := range ipam.Pool {
		ip, err := netip.ParseAddr(key)
		if err != nil || !ip.Is6() || entry.Owner != "" || st.ReleaseIPs[key] != "" {
			continue
		}
		if in.primary != nil && entry.Resource == in.primary.ID && inPrefix(ip) {
			delete(in.missing, key)
			continue
		}
		if _, used := st.Used[key]; used {
			continue
		}
		since, seen := in.missing[key]
		if !seen {
			in.missing[key], since = in.now, in.now
		}
		if in.now.Sub(since) >= in.grace {
			markRelease(cn, key)
			delete(in.missing, key)
			out.marked++
		}
	}

	if !in.want {
		out.unassign = idleWindowed(cn, prefixes, out.windowed)
		for key, entry := range ipam.Pool {
			if _, used := st.Used[key]; isIPv6(key) && entry.Owner == "" && !used && st.ReleaseIPs[key] == "" {
				markRelease(cn, key)
				out.marked++
			}
		}
		return out
	}
	switch {
	case in.primary == nil:
		out.problem = errNoPrimaryENI
		return out
	case in.perENI == 0:
		out.problem = errNoIPv6Type
		return out
	case !in.subnetIPv6.IsValid():
		out.problem = errNoIPv6Subnet
		return out
	}
	prefix, ok := windowPrefix(prefixes, out.windowed)
	if !ok {
		if in.primary.IPv6Slots() >= in.perENI {
			out.problem = fmt.Errorf("%w (%d of %d taken)", errNoIPv6Slot, in.primary.IPv6Slots(), in.perENI)
			return out
		}
		out.assign = in.primary.ID
		return out
	}
	if !in.routed(in.primary.ID, prefix.Addr()) {
		out.awaiting = true
		return out
	}
	if !in.trusted(in.primary.ID, prefix.Addr()) {
		out.awaiting, out.untrusted = true, true
		return out
	}

	if !prefix.Contains(out.cursor) {
		// No cursor in the /80 (a process that took over): the walk
		// goes on past the highest address listed.
		out.cursor = lastListed(cn, prefix)
	}
	out.available, out.used = window6Counts(cn)
	used := out.used + in.waiting
	n := pool.ToAllocate(out.available, used, pool.Needed(out.available, used, in.knobs), in.knobs)
	for _, ip := range walkWindow(prefix, out.cursor, n, func(ip netip.Addr) bool {
		key := ip.String()
		_, pooled := ipam.Pool[key]
		_, used := st.Used[key]
		_, leaving := st.ReleaseIPs[key]
		return pooled || used || leaving
	}) {
		if ipam.Pool == nil {
			ipam.Pool = ipamtypes.AllocationMap{}
		}
		ipam.Pool[ip.String()] = ipamtypes.AllocationIP{Resource: in.primary.ID}
		out.cursor = ip
		out.added++
		out.available++
	}
	return out
}

// lastListed returns the highest address of p the pool, the use or the
// handshake lists; invalid when none.
func lastListed(cn *ciliumv2.CiliumNode, p netip.Prefix) netip.Addr {
	var last netip.Addr
	eachListed(cn, func(key string) {
		if !isIPv6(key) {
			return
		}
		if ip, err := netip.ParseAddr(key); err == nil && p.Contains(ip) && (!last.IsValid() || ip.Compare(last) > 0) {
			last = ip
		}
	})
	return last
}

// eachListed calls f with every address the pool, the use and the
// handshake list (an address may come more than once).
func eachListed(cn *ciliumv2.CiliumNode, f func(key string)) {
	for key := range cn.Spec.IPAM.Pool {
		f(key)
	}
	for key := range cn.Status.IPAM.Used {
		f(key)
	}
	for key := range cn.Status.IPAM.ReleaseIPs {
		f(key)
	}
}

// windowPrefix picks the /80 the window takes addresses from: one it
// used before, else the primary ENI's first; false when it has none.
func windowPrefix(prefixes, windowed []netip.Prefix) (netip.Prefix, bool) {
	for _, p := range prefixes {
		if slices.Contains(windowed, p) {
			return p, true
		}
	}
	if len(prefixes) > 0 {
		return prefixes[0], true
	}
	return netip.Prefix{}, false
}

// walkWindow returns up to n addresses of the /80 p, the first after
// cursor (from the prefix's start when cursor is outside it), walking
// forward and round, skipping the prefix's own address and those taken.
func walkWindow(p netip.Prefix, cursor netip.Addr, n int, taken func(netip.Addr) bool) []netip.Addr {
	if n <= 0 || !p.IsValid() {
		return nil
	}
	p = p.Masked()
	ip := cursor
	if !p.Contains(ip) {
		ip = p.Addr()
	}
	var out []netip.Addr
	// The walk gives up after a bounded number of taken addresses: the
	// window is small against the /80's 2^48.
	for tries := 0; len(out) < n && tries < n+windowScanLimit; tries++ {
		ip = ip.Next()
		if !p.Contains(ip) {
			ip = p.Addr().Next()
		}
		if !taken(ip) {
			out = append(out, ip)
		}
	}
	return out
}

// windowScanLimit bounds how many taken addresses one walk skips.
const windowScanLimit = 1 << 16

// window6Counts counts the window's addresses the agent may hand out
// and the IPv6 addresses it reports used, as poolView.counts does for
// IPv4: an owner-stamped entry is neither.
func window6Counts(cn *ciliumv2.CiliumNode) (available, used int) {
	for key, e := range cn.Spec.IPAM.Pool {
		if isIPv6(key) && e.Owner == "" && !leavingState(cn.Status.IPAM.ReleaseIPs[key]) {
			available++
		}
	}
	for key := range cn.Status.IPAM.Used {
		if isIPv6(key) && cn.Spec.IPAM.Pool[key].Owner == "" {
			used++
		}
	}
	return available, used
}

// excessWindow6 counts the window's addresses beyond the knobs' size.
func excessWindow6(cn *ciliumv2.CiliumNode, waiting int, knobs pool.Knobs) int {
	available, used := window6Counts(cn)
	return pool.Excess(available, used+waiting, knobs)
}

// markWindow6 starts the handshake for up to n free window addresses,
// the ones the walk took longest ago first (the lowest, from the /80's
// start: the walk goes forward), and returns how many it marked.
func markWindow6(cn *ciliumv2.CiliumNode, n int) int {
	var free []netip.Addr
	for key, e := range cn.Spec.IPAM.Pool {
		_, used := cn.Status.IPAM.Used[key]
		if ip, err := netip.ParseAddr(key); err == nil && ip.Is6() && e.Owner == "" && !used && cn.Status.IPAM.ReleaseIPs[key] == "" {
			free = append(free, ip)
		}
	}
	slices.SortFunc(free, netip.Addr.Compare)
	n = min(n, len(free))
	for _, ip := range free[:n] {
		markRelease(cn, ip.String())
	}
	return n
}

// idleWindowed returns the /80s of the primary ENI this process used for
// the window of which no address is pooled, used or in the handshake.
func idleWindowed(cn *ciliumv2.CiliumNode, prefixes, windowed []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range prefixes {
		if !slices.Contains(windowed, p) {
			continue
		}
		if !lastListed(cn, p).IsValid() {
			out = append(out, p)
		}
	}
	return out
}

// markRelease sets ip marked for release in the desired status.
func markRelease(cn *ciliumv2.CiliumNode, ip string) {
	st := &cn.Status.IPAM
	if st.ReleaseIPs == nil {
		st.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{}
	}
	st.ReleaseIPs[ip] = ipamoption.IPAMMarkForRelease
}

// leavingState reports whether a release-ips state keeps the agent from
// handing the address out.
func leavingState(s ipamtypes.IPReleaseStatus) bool {
	switch s {
	case ipamoption.IPAMMarkForRelease, ipamoption.IPAMReadyForRelease, ipamoption.IPAMReleased:
		return true
	}
	return false
}
