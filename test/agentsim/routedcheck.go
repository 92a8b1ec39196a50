package agentsim

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// routeKey is an address routed on an ENI of a node.
type routeKey struct {
	node, eni, ip string
}

// prefixKey is an IPv6 prefix (/80) routed on an ENI of a node: kept
// whole, it stands for every address inside it.
type prefixKey struct {
	node, eni string
	prefix    netip.Prefix
}

// listing is a span of NodeRouting revisions in which the node's agent
// listed an address as routed; to is 0 while it still does.
type listing struct{ from, to uint64 }

// routedCheck is a handout whose verdict waits until the NodeRouting
// watch has caught up with the CiliumNode revision the address was pooled
// in: watches of two resources are not ordered, but resourceVersions of one
// etcd are one sequence of revisions.
type routedCheck struct {
	key    routeKey
	pooled uint64
	owner  string
	at     time.Time
}

// observeRouting takes a NodeRouting revision of a node: which addresses
// its agent lists as routed on which ENI, of both families (an IPv4
// prefix stands for its 16 addresses, an IPv6 /80 for every address
// inside it). Then it judges the handouts that were waiting for it.
func (l *Ledger) observeRouting(node string, rv uint64, status *enipamv1alpha1.NodeRoutingStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last := l.routingRV[node]; rv <= last {
		// The list that followed a watch gap delivers again a node
		// whose NodeRouting did not change since the watch last
		// delivered it: its status stood as seen through the list's
		// revision, which is taken as seen there.
		g := l.routingGapsLocked()
		if rv != last || g == nil || g.upTo <= last {
			return
		}
		l.routingSteady[node] = append(l.routingSteady[node], listing{from: last, to: g.upTo})
		rv = g.upTo
	}
	l.routingRV[node] = rv
	l.routingObserved[node] = append(l.routingObserved[node], rv)
	seen := l.routingSeen[node]
	if seen.count == 0 {
		seen.first = rv
	}
	seen.count, seen.last = seen.count+1, rv
	l.routingSeen[node] = seen
	listed := map[routeKey]bool{}
	listed6 := map[prefixKey]bool{}
	for _, e := range status.ENIs {
		for _, ip := range e.IPs {
			listed[routeKey{node, e.ID, ip}] = true
		}
		for _, ip := range e.IPv6 {
			if addr, err := netip.ParseAddr(ip); err == nil {
				listed[routeKey{node, e.ID, addr.String()}] = true
			}
		}
		for _, p := range e.IPv6Prefixes {
			if pfx, err := netip.ParsePrefix(p); err == nil {
				listed6[prefixKey{node, e.ID, pfx.Masked()}] = true
			}
		}
		for _, p := range e.Prefixes {
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				continue
			}
			for ip := pfx.Masked().Addr(); pfx.Contains(ip); ip = ip.Next() {
				listed[routeKey{node, e.ID, ip.String()}] = true
			}
		}
	}
	for k := range listed {
		spans := l.routes[k]
		if n := len(spans); n == 0 || spans[n-1].to != 0 {
			l.routes[k] = append(spans, listing{from: rv})
		}
	}
	for k, spans := range l.routes {
		if k.node == node && !listed[k] && spans[len(spans)-1].to == 0 {
			spans[len(spans)-1].to = rv
		}
	}
	for k := range listed6 {
		spans := l.routes6[k]
		if n := len(spans); n == 0 || spans[n-1].to != 0 {
			l.routes6[k] = append(spans, listing{from: rv})
		}
	}
	for k, spans := range l.routes6 {
		if k.node == node && !listed6[k] && spans[len(spans)-1].to == 0 {
			spans[len(spans)-1].to = rv
		}
	}
	kept := l.pendingRoutes[:0]
	for _, c := range l.pendingRoutes {
		if c.key.node == node && rv >= c.pooled {
			l.judgeLocked(c)
			continue
		}
		kept = append(kept, c)
	}
	l.pendingRoutes = kept
}

// handedOut checks a handout of ip (pooled on eni in the CiliumNode
// revision pooled) against the agent's reports: the address must have been
// listed as routed on that ENI in a NodeRouting revision at or before the
// one it was pooled in. Without a routing watch (no NodeRouting seen for
// the node yet) the verdict waits.
func (l *Ledger) handedOut(node, eni, ip, owner string, pooled uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := routedCheck{key: routeKey{node, eni, ip}, pooled: pooled, owner: owner, at: now}
	if l.routingRV[node] < pooled {
		l.pendingRoutes = append(l.pendingRoutes, c)
		return
	}
	l.judgeLocked(c)
}

func (l *Ledger) judgeLocked(c routedCheck) {
	l.routedChecks++
	covers := func(spans []listing) bool {
		for _, s := range spans {
			if s.from <= c.pooled && (s.to == 0 || s.to > c.pooled) {
				return true
			}
		}
		return false
	}
	if covers(l.routes[c.key]) {
		return
	}
	if ip, err := netip.ParseAddr(c.key.ip); err == nil && ip.Is6() {
		for k, spans := range l.routes6 {
			if k.node == c.key.node && k.eni == c.key.eni && k.prefix.Contains(ip) && covers(spans) {
				return
			}
		}
	}
	if g := l.missedLocked(c.key.node, c.pooled); g != nil {
		// The node's status at the pool's revision may be one the watch
		// never delivered: no verdict, counted and named apart.
		l.unjudged++
		if len(l.unjudgedTexts) < 5 {
			l.unjudgedTexts = append(l.unjudgedTexts, fmt.Sprintf("%s on %s (ENI %s), pooled at revision %d, watch gap after %d up to %d",
				c.key.ip, c.key.node, c.key.eni, c.pooled, g.after, g.upTo))
		}
		return
	}
	// What the ledger saw, so that a breach can be told from a watch
	// that missed revisions: the spans the address was listed in, and
	// the node's NodeRouting revisions seen.
	seen := l.routingSeen[c.key.node]
	l.recordLocked(Violation{Kind: HandedBeforeRouted, Node: c.key.node, IP: c.key.ip, Owner: c.owner,
		Other: fmt.Sprintf("ENI %s, pooled at revision %d, listed %v, routing revisions seen %d (%d to %d)",
			c.key.eni, c.pooled, l.routes[c.key], seen.count, seen.first, seen.last), At: c.at})
}

// routingSeen counts the NodeRouting revisions the ledger took of a node.
type routingSeen struct {
	count       int
	first, last uint64
}

// watchGap is a span of revisions (after, upTo] the ledger's NodeRouting
// watch may have missed: from the last revision it delivered before an
// error ended it to the revision of the list that followed (upTo 0 until
// that list comes). A NodeRouting written in the gap and overwritten
// before the list is never seen.
type watchGap struct{ after, upTo uint64 }

// routingWatchError counts an error that ended the ledger's NodeRouting
// watch, whose last delivered revision was lastRV: the informer lists
// again, and a revision written meanwhile and overwritten before the list
// is never seen, which would make the routed-before-handed check judge on
// a gap that was not there. The revisions from lastRV to the list's are
// a gap (missedLocked).
func (l *Ledger) routingWatchError(err error, lastRV uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watchErrors++
	if len(l.watchErrorTexts) < 5 {
		l.watchErrorTexts = append(l.watchErrorTexts, err.Error())
	}
	if g := l.routingGapsLocked(); g != nil && g.upTo == 0 {
		g.after = min(g.after, lastRV) // no list since the last error
		return
	}
	l.routingGaps = append(l.routingGaps, watchGap{after: lastRV})
}

// routingListed records the revision of a list of the ledger's
// NodeRouting informer: the end of the open watch gap, if any (the
// first list, at the start, closes none).
func (l *Ledger) routingListed(rv uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.routingGapsLocked(); g != nil && g.upTo == 0 {
		g.upTo = rv
	}
}

// routingGapsLocked is the last watch gap, nil when there was none.
func (l *Ledger) routingGapsLocked() *watchGap {
	if n := len(l.routingGaps); n > 0 {
		return &l.routingGaps[n-1]
	}
	return nil
}

// missedLocked returns a watch gap that may hide the node's NodeRouting
// status at revision pooled: the last revision of it the ledger took at
// or before pooled (0: none) was delivered before the gap, which began
// before pooled, and the list that ended the gap did not show the
// NodeRouting unchanged through pooled. A revision taken after a gap
// began was delivered by the list that ended it or by the watch after
// that list, so the status stood as taken until the next one (a list
// returns each object at its latest revision).
func (l *Ledger) missedLocked(node string, pooled uint64) *watchGap {
	for _, s := range l.routingSteady[node] {
		if s.from <= pooled && pooled <= s.to {
			return nil
		}
	}
	seen := l.routingObserved[node]
	var last uint64
	if i, _ := slices.BinarySearch(seen, pooled+1); i > 0 {
		last = seen[i-1]
	}
	for i := range l.routingGaps {
		if g := &l.routingGaps[i]; g.after < pooled && last <= g.after {
			return g
		}
	}
	return nil
}

// RoutedUnjudged returns how many handouts the routed-before-handed
// check could not judge, as the node's NodeRouting status at the
// revision they were pooled in fell in a gap of the ledger's watch, and
// the first few.
func (l *Ledger) RoutedUnjudged() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unjudged, slices.Clone(l.unjudgedTexts)
}

// RoutingWatchErrors returns how many errors ended the ledger's
// NodeRouting watch, and the first few.
func (l *Ledger) RoutingWatchErrors() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watchErrors, slices.Clone(l.watchErrorTexts)
}

// RoutedChecks returns how many handouts were judged against the agents'
// routing reports, and how many wait for the NodeRouting watch to catch up.
func (l *Ledger) RoutedChecks() (judged, pending int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.routedChecks, len(l.pendingRoutes)
}
