package poolcontroller

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// Consolidation gives back what a node no longer needs, whole: a
// secondary ENI keeps its own primary address out of the subnet however
// few pods it carries, and a delegated /28 goes back only when all 16 of
// its addresses are free. So, when excess addresses are released, those
// of the least-used secondary ENI go first (drainOrder), and new pods
// land elsewhere; on a prefix-delegated node the free members of the
// least-used /28 leave the pool together and its busy ones follow as
// their pods go (the prefix's acknowledged members are held, never handed
// out, until all 16 are). A secondary ENI that then holds no address for
// the policy's delay, the node grown by no ENI meanwhile and its pods and
// headroom fitting on its other ENIs (so it is not needed back soon), is
// detached, and deleted once EC2 shows it available. Never the
// primary ENI, never an ENI of another owner, never an ENI with an address
// (so none in use or stamped), never below the pool's floor: only excess
// ever leaves (pool.Excess).

// Event reasons of consolidation.
const (
	ReasonENIConsolidated    = "ENIConsolidated"
	ReasonPrefixConsolidated = "PrefixConsolidated"
)

// detachRetry is how soon a node whose consolidated ENI is detaching is
// looked at again; detachResend how long a detach EC2 does not show may
// take before it is sent again.
const (
	detachRetry  = 2 * time.Second
	detachResend = time.Minute
)

// consolidationMemory is what consolidation remembers of a node between
// reconciles.
type consolidationMemory struct {
	// emptySince: since when each secondary ENI has held no address, the
	// node short of none.
	emptySince map[string]time.Time
	// grewAt is when the node last got a new ENI (created or adopted).
	grewAt time.Time
	// detaching is the ENI detached for consolidation, to be deleted once
	// EC2 shows it available; detachedAt when the detach was sent.
	detaching  string
	detachedAt time.Time
	// drainPrefix is the /28 whose members leave the pool as they free.
	drainPrefix netip.Prefix
	// drainENI is the secondary ENI whose free addresses leave the pool
	// as they free, while the node's other ENIs can carry it.
	drainENI string
}

// consolidating reports whether consolidation acts on the node.
func (s *deciding) consolidating() bool {
	return s.cfg.ReleaseExcessIPs && s.cfg.Consolidation.Enabled && s.pool != nil
}

// consolidatable reports whether an ENI may ever be consolidated: a
// secondary (never the primary) usable ENI that this cluster's operator
// created, attached.
func consolidatable(eni *cloud.ENI, cfg *pool.Config, cluster string) bool {
	return eni.DeviceIndex > 0 && pool.Usable(eni, cfg) && eni.Tags[cloud.TagCluster] == cluster &&
		eni.AttachmentStatus == cloud.AttachmentAttached
}

// eniUse is what drainOrder knows of one ENI.
type eniUse struct {
	ID          string
	DeviceIndex int
	// Busy counts its addresses no pod may lose: in use, or promised.
	Busy int
	// Pinned: it holds a static address (stamped or claimed) or one of
	// the agent's own (agentOwners), so it is never consolidated.
	Pinned bool
	// Candidate: consolidatable.
	Candidate bool
}

// drainOrder returns the IDs of the ENIs whose free addresses are
// released first: the candidates holding no static address, least busy
// first, ties to the highest device index (the last grown). The others
// are left out, to releaseCandidates' default order after them.
func drainOrder(uses []eniUse) []string {
	var order []eniUse
	for _, u := range uses {
		if u.Candidate && !u.Pinned {
			order = append(order, u)
		}
	}
	slices.SortFunc(order, func(a, b eniUse) int {
		return cmp.Or(cmp.Compare(a.Busy, b.Busy), cmp.Compare(b.DeviceIndex, a.DeviceIndex))
	})
	ids := make([]string, len(order))
	for i, u := range order {
		ids[i] = u.ID
	}
	return ids
}

// emptyENIs returns the consolidatable ENIs that hold no address and that
// no pool entry names, highest device index first.
func emptyENIs(snap *snapshot.Node, cfg *pool.Config, cluster string, named func(eniID string) bool) []string {
	var out []string
	for i := len(snap.ENIs) - 1; i >= 0; i-- {
		e := &snap.ENIs[i]
		if consolidatable(e, cfg, cluster) && len(e.IPs) == 0 && len(e.Prefixes) == 0 && !named(e.ID) {
			out = append(out, e.ID)
		}
	}
	return out
}

// member is the state of one address of a prefix, as drainPrefix sees it.
type member int

const (
	memberFree    member = iota // pooled, unused, not in the handshake
	memberBusy                  // used, or not pooled
	memberLeaving               // in the handshake
	memberPinned                // a static address: the prefix never drains
)

// leastUsedPrefix returns the prefix of a usable ENI that has free
// members and the fewest busy ones (ties: the highest), with its free
// members; a prefix with a pinned member, or none busy (a wholly free one
// goes through releaseCandidates), is passed over. ok is false when none
// qualifies.
func leastUsedPrefix(snap *snapshot.Node, cfg *pool.Config, state func(netip.Addr) member) (p netip.Prefix, free []netip.Addr, ok bool) {
	bestBusy := pool.IPsPerPrefix + 1
	for i := range snap.ENIs {
		e := &snap.ENIs[i]
		if !pool.Usable(e, cfg) {
			continue
		}
	prefixes:
		for _, q := range e.Prefixes {
			busy := 0
			var members []netip.Addr
			for ip := q.Masked().Addr(); q.Contains(ip); ip = ip.Next() {
				switch state(ip) {
				case memberPinned:
					continue prefixes
				case memberBusy:
					busy++
				case memberFree:
					members = append(members, ip)
				}
			}
			if busy == 0 || len(members) == 0 {
				continue
			}
			if busy < bestBusy || (busy == bestBusy && q.Addr().Compare(p.Addr()) > 0) {
				p, free, bestBusy, ok = q, members, busy, true
			}
		}
	}
	return p, free, ok
}

// agentOwners are the owners Cilium's agent records in status.ipam.used
// for the addresses it takes for itself (daemon/infraendpoints: the
// router, the health endpoint, the ingress): held as long as the agent
// runs, they never free, so an ENI or a /28 holding one never empties.
var agentOwners = map[string]bool{"router": true, "health": true, "ingress": true}

// memberState tells a prefix member's state from the node's objects: a
// static address or one of the agent's own pins its prefix (it would
// never drain whole).
func (s *deciding) memberState(ip netip.Addr) member {
	key := ip.String()
	entry, inPool := s.cn.Spec.IPAM.Pool[key]
	if entry.Owner != "" || s.claimed(ip) {
		return memberPinned
	}
	usedBy, used := s.cn.Status.IPAM.Used[key]
	if used && agentOwners[usedBy.Owner] {
		return memberPinned
	}
	if s.pool.inHandshake(key) {
		return memberLeaving
	}
	if used || !inPool {
		return memberBusy
	}
	return memberFree
}

// drainOrder is the node's preferred release order (nil: consolidation
// is off).
func (s *deciding) drainOrder() []string {
	if !s.consolidating() {
		return nil
	}
	uses := map[string]*eniUse{}
	var all []*eniUse
	for i := range s.snap.ENIs {
		e := &s.snap.ENIs[i]
		u := &eniUse{ID: e.ID, DeviceIndex: e.DeviceIndex, Candidate: consolidatable(e, &s.cfg.Config, s.r.opts.Cluster)}
		uses[e.ID] = u
		all = append(all, u)
	}
	for key, entry := range s.cn.Spec.IPAM.Pool {
		u := uses[entry.Resource]
		if u == nil {
			continue
		}
		if ip, err := netip.ParseAddr(key); entry.Owner != "" || err != nil || s.claimed(ip) {
			u.Pinned = true
			continue
		}
		if usedBy, used := s.cn.Status.IPAM.Used[key]; used {
			u.Busy++
			u.Pinned = u.Pinned || agentOwners[usedBy.Owner]
		}
	}
	list := make([]eniUse, len(all))
	for i, u := range all {
		list[i] = *u
	}
	return drainOrder(list)
}

// drainPrefixes keeps the /28 being drained draining: its members freed
// since are marked, within the excess (so the node never needs them
// back); and, with budget (excess no whole free address covered) to
// spare, picks the least-used /28 whose free members fit in it. It
// returns the addresses it marked.
func (s *deciding) drainPrefixes(budget int) int {
	if !s.consolidating() || !s.cfg.PrefixDelegation && !s.hasPrefixes() {
		return 0
	}
	c := &s.mem.consolidation
	marked := 0
	if c.drainPrefix.IsValid() {
		for ip := c.drainPrefix.Masked().Addr(); c.drainPrefix.Contains(ip) && budget > 0; ip = ip.Next() {
			if s.memberState(ip) == memberFree {
				s.pool.mark(ip.String())
				marked++
				budget--
			}
		}
		return marked
	}
	p, free, ok := leastUsedPrefix(&s.snap, &s.cfg.Config, s.memberState)
	if !ok || len(free) > budget {
		return 0
	}
	for _, ip := range free {
		s.pool.mark(ip.String())
	}
	c.drainPrefix = p
	s.r.log.Info("draining the least-used prefix", "node", s.cn.Name, "prefix", p, "free", len(free))
	return len(free)
}

// hasPrefixes reports whether the node's ENIs hold delegated prefixes.
func (s *deciding) hasPrefixes() bool {
	return slices.ContainsFunc(s.snap.ENIs, func(e cloud.ENI) bool { return len(e.Prefixes) > 0 })
}

// keepDraining is called as each reconcile begins its release work: the
// prefix being drained stops when the node needs addresses again (its
// members in the handshake are taken back at once, and counted before
// the plan, so the node is not given a new /28 beside them) and is done
// when it left its ENI.
func (s *deciding) keepDraining(needed int) {
	c := &s.mem.consolidation
	if !c.drainPrefix.IsValid() {
		return
	}
	if needed > 0 || !s.consolidating() {
		p := c.drainPrefix
		c.drainPrefix = netip.Prefix{}
		back := takeBackPrefix(s.cn, &s.snap, p)
		s.r.log.Info("prefix no longer drained: the node needs addresses", "node", s.cn.Name, "prefix", p, "takenBack", back)
		if back > 0 {
			s.countPool()
		}
		return
	}
	for i := range s.snap.ENIs {
		if slices.Contains(s.snap.ENIs[i].Prefixes, c.drainPrefix) {
			return
		}
	}
	s.r.metrics.consolidations.WithLabelValues("prefix").Inc()
	s.r.events.Eventf(s.cn, nil, "Normal", ReasonPrefixConsolidated, "Consolidate", "Prefix %s drained and released", c.drainPrefix)
	c.drainPrefix = netip.Prefix{}
}

// takeBackPrefix puts back in service, in the desired status cn, the
// members of prefix p in the release handshake (marked or acknowledged),
// and returns how many. Only while the snapshot shows p on one of the
// node's ENIs and not all 16 members are acknowledged: an Unassign is
// sent only for a whole prefix, and the agent never turns an
// acknowledgement into a refusal, so none was sent for these (the same
// reasoning as wholePrefixes'). A prefix wholly acknowledged is left to
// go back to EC2.
func takeBackPrefix(cn *ciliumv2.CiliumNode, snap *snapshot.Node, p netip.Prefix) int {
	onENI := slices.ContainsFunc(snap.ENIs, func(e cloud.ENI) bool { return slices.Contains(e.Prefixes, p) })
	if !onENI {
		return 0
	}
	st := cn.Status.IPAM.ReleaseIPs
	var members []string
	ready := 0
	for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
		switch st[ip.String()] {
		case ipamoption.IPAMReadyForRelease:
			ready++
			members = append(members, ip.String())
		case ipamoption.IPAMMarkForRelease:
			members = append(members, ip.String())
		}
	}
	if ready == pool.IPsPerPrefix {
		return 0
	}
	for _, ip := range members {
		delete(st, ip)
	}
	return len(members)
}

// draining reports whether ip is a member of the prefix being drained.
func (s *deciding) draining(ip netip.Addr) bool {
	p := s.mem.consolidation.drainPrefix
	return p.IsValid() && p.Contains(ip)
}

// drainingENI returns the secondary ENI to drain, "" for none: the one
// drained so far, or the first of drainOrder, while the node's pods and
// headroom fit on its other ENIs (their address slots, primary
// addresses apart) and it grew no ENI within the delay. Prefix-delegated
// nodes drain /28s instead (drainPrefixes).
func (s *deciding) drainingENI() string {
	c := &s.mem.consolidation
	if !s.consolidating() || s.cfg.PrefixDelegation || s.hasPrefixes() || s.r.now().Sub(c.grewAt) < s.cfg.Consolidation.Delay {
		c.drainENI = ""
		return ""
	}
	id := c.drainENI
	if id == "" || !slices.ContainsFunc(s.snap.ENIs, func(e cloud.ENI) bool { return e.ID == id && consolidatable(&e, &s.cfg.Config, s.r.opts.Cluster) }) {
		id = ""
		if order := s.drainOrder(); len(order) > 0 {
			id = order[0]
		}
	}
	if id == "" || carriedElsewhere(&s.snap, &s.cfg.Config, id) < s.snap.Used+s.headroom+s.cfg.MaxAboveWatermark {
		if c.drainENI != "" {
			s.r.log.Info("ENI no longer drained: the node needs it", "node", s.cn.Name, "eni", c.drainENI)
		}
		c.drainENI = ""
		return ""
	}
	if c.drainENI != id {
		s.r.log.Info("draining the least-used ENI", "node", s.cn.Name, "eni", id)
	}
	c.drainENI = id
	return id
}

// carriedElsewhere counts the addresses the node's usable ENIs other
// than except can hold (each ENI's slots, its primary address apart; a
// slot holds a /28 under prefix delegation): the node does not need
// except while its pods and headroom fit in them.
func carriedElsewhere(snap *snapshot.Node, cfg *pool.Config, except string) int {
	perSlot := 1
	if cfg.PrefixDelegation && snap.Type.PrefixDelegation() {
		perSlot = pool.IPsPerPrefix
	}
	n := 0
	for i := range snap.ENIs {
		if e := &snap.ENIs[i]; e.ID != except && pool.Usable(e, cfg) {
			n += max(snap.Type.IPv4PerENI-1, 0) * perSlot
		}
	}
	return n
}

// stopDrainingENI puts the drained ENI back in service (its marked
// addresses are taken back) and plans again.
func (s *deciding) stopDrainingENI() pool.Plan {
	s.r.log.Info("ENI no longer drained: the other ENIs cannot cover the node", "node", s.cn.Name, "eni", s.snap.Draining)
	s.mem.consolidation.drainENI, s.snap.Draining = "", ""
	if s.pool.abortRelease(&s.snap) > 0 {
		s.countPool()
	}
	return pool.Compute(&s.snap, &s.cfg.Config)
}

// markDrainingENI marks every free address of the ENI being drained:
// Cilium's agent hands none out, so new pods land on the other ENIs, and
// the planner makes up for them there (snapshot.Node.Draining).
func (s *deciding) markDrainingENI() {
	id := s.mem.consolidation.drainENI
	if id == "" {
		return
	}
	n := 0
	for key, entry := range s.cn.Spec.IPAM.Pool {
		if entry.Resource != id || entry.Owner != "" || s.pool.inHandshake(key) {
			continue
		}
		if _, used := s.cn.Status.IPAM.Used[key]; used {
			continue
		}
		if ip, err := netip.ParseAddr(key); err != nil || s.claimed(ip) {
			continue
		}
		s.pool.mark(key)
		n++
	}
	if n > 0 {
		s.r.log.Info("marked the free addresses of the ENI being drained", "node", s.cn.Name, "eni", id, "ips", n)
	}
}

// outstandingRelease counts the addresses marked or acknowledged but not
// released yet, apart from the drained prefix's (held until all 16 are
// acknowledged, they must not stop other releases) and those kept for a
// first placement (poolView.heldFirst, kept as long as their claim
// waits).
func (s *deciding) outstandingRelease() int {
	n := 0
	for key, st := range s.cn.Status.IPAM.ReleaseIPs {
		if st != ipamoption.IPAMMarkForRelease && st != ipamoption.IPAMReadyForRelease {
			continue
		}
		if ip, err := netip.ParseAddr(key); err == nil && (s.draining(ip) || ip.Is6()) {
			continue // the IPv6 window's release never waits on EC2
		}
		if d := s.snap.Draining; d != "" && s.cn.Spec.IPAM.Pool[key].Resource == d {
			continue
		}
		if s.pool != nil && s.pool.heldFirst[key] {
			continue
		}
		n++
	}
	return n
}
