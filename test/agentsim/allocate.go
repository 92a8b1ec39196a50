package agentsim

import (
	"container/list"
	"context"
	"errors"
	"net/netip"
	"time"
)

// Owners Cilium's agent gives its own endpoints' IPs in status.ipam.used.
const (
	RouterOwner = "router"
	HealthOwner = "health"
)

// Errors an allocation ends with when it gets no IP.
var (
	// ErrTimeout: no free IP within Options.AllocateTimeout.
	ErrTimeout = errors.New("no free IP in the pool within the allocate timeout")
	// ErrPodDeleted: the pod was released while it waited.
	ErrPodDeleted = errors.New("pod deleted while waiting for an IP")
	// ErrStopped: the agent was removed or the Sim stopped.
	ErrStopped = errors.New("agent stopped")
	// ErrOwnerBusy: the owner already holds or waits for an IP on this
	// agent, or is one of the agent's own (router, health).
	ErrOwnerBusy = errors.New("owner already holds or waits for an IP")
)

// Result is how an allocation ended: an IP, or an error and no IP.
type Result struct {
	// IP is the pod's address of its first family (IPv4 unless the
	// agent runs IPv6 alone); IPs are all of them, one per family the
	// agent allocates, IPv4 first.
	IP  netip.Addr
	IPs []netip.Addr
	// Waited is how long the pod waited for a free IP; 0 if the pool had one.
	Waited time.Duration
	Err    error
}

// waiter is an allocation not yet served.
type waiter struct {
	owner string
	// infra marks the router and health endpoints: served first, not pods.
	infra bool
	since time.Time
	// waited: not served at once, so it counts as a wait.
	waited bool
	done   func(Result)
	timer  *time.Timer
	elem   *list.Element
}

// finished is a callback to run once the agent's lock is released.
type finished struct {
	w *waiter
	r Result
}

func finish(done []finished) {
	for _, f := range done {
		if f.w.done != nil {
			f.w.done(f.r)
		}
	}
}

// AllocateAsync asks for an IP for owner ("namespace/pod") and calls done
// once with the outcome. As Cilium's agent in crd mode, it takes the pool
// entry stamped with owner if there is one, whatever its state, else any
// free pool IP (no owner, not in use, not in the release handshake). If there is
// none, or the agent is not yet started, the pod waits, first come first
// served, until an IP frees up or arrives in the pool; the wait is counted.
// done may run before AllocateAsync returns.
func (a *Agent) AllocateAsync(owner string, done func(Result)) {
	now := time.Now()
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		done(Result{Err: ErrStopped})
		return
	}
	if _, held := a.owners[owner]; held || a.pending[owner] != nil || owner == RouterOwner || owner == HealthOwner {
		a.mu.Unlock()
		done(Result{Err: ErrOwnerBusy})
		return
	}
	w := &waiter{owner: owner, since: now, done: done}
	a.pending[owner] = w
	w.elem = a.waiters.PushBack(w)
	served := a.serveLocked(now)
	if a.pending[owner] == w {
		w.waited = true
		if t := a.deps.allocateTimeout; t > 0 {
			w.timer = time.AfterFunc(t, func() { a.expire(w) })
		}
	}
	a.unlockAndFinish(served)
}

// Allocate is AllocateAsync that blocks until the outcome; if ctx ends
// first, the pod is given up as deleted and ctx's error returned.
func (a *Agent) Allocate(ctx context.Context, owner string) (Result, error) {
	ch := make(chan Result, 1)
	a.AllocateAsync(owner, func(r Result) { ch <- r })
	select {
	case r := <-ch:
		return r, r.Err
	case <-ctx.Done():
		a.Release(owner)
		return Result{}, ctx.Err()
	}
}

// Release deletes owner's pod: frees its IP (written to status.ipam.used
// with the next write), or ends its wait with ErrPodDeleted. It reports
// whether owner held or waited for an IP here.
func (a *Agent) Release(owner string) bool {
	if owner == RouterOwner || owner == HealthOwner {
		return false
	}
	now := time.Now()
	a.mu.Lock()
	if w := a.pending[owner]; w != nil {
		f := a.abandonLocked(w, now, ErrPodDeleted)
		a.mu.Unlock()
		finish([]finished{f})
		return true
	}
	ips, ok := a.owners[owner]
	if !ok {
		a.mu.Unlock()
		return false
	}
	delete(a.owners, owner)
	for _, ip := range ips {
		if al := a.allocated[ip]; al.owner == owner {
			delete(a.allocated, ip)
		}
		a.deps.ledger.drop(a.name, ip, owner)
	}
	a.triggerLocked(now)
	a.unlockAndFinish(a.serveLocked(now))
	if a.deps.onRelease != nil {
		a.deps.onRelease(a.name)
	}
	return true
}

// IP returns the IP owner holds on this agent (of its first family,
// as Result.IP).
func (a *Agent) IP(owner string) (netip.Addr, bool) {
	ips := a.IPs(owner)
	if len(ips) == 0 {
		return netip.Addr{}, false
	}
	return ips[0], true
}

// IPs returns every IP owner holds on this agent, one per family, IPv4
// first.
func (a *Agent) IPs(owner string) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []netip.Addr
	for _, ip := range a.owners[owner] {
		if addr, err := netip.ParseAddr(ip); err == nil {
			out = append(out, addr)
		}
	}
	return out
}

// expire ends w's wait with ErrTimeout, unless it already ended.
func (a *Agent) expire(w *waiter) {
	a.mu.Lock()
	if a.pending[w.owner] != w {
		a.mu.Unlock()
		return
	}
	f := a.abandonLocked(w, time.Now(), ErrTimeout)
	a.mu.Unlock()
	finish([]finished{f})
}

// abandonLocked ends w without an IP and accounts the wait.
func (a *Agent) abandonLocked(w *waiter, now time.Time, err error) finished {
	a.dequeueLocked(w)
	waited := now.Sub(w.since)
	if !w.infra {
		outcome := WaitAbandoned
		if errors.Is(err, ErrTimeout) {
			outcome = WaitTimedOut
		}
		a.countWaitLocked(waited)
		a.deps.ledger.wait(waited, outcome)
	}
	return finished{w: w, r: Result{Waited: waited, Err: err}}
}

func (a *Agent) dequeueLocked(w *waiter) {
	a.waiters.Remove(w.elem)
	delete(a.pending, w.owner)
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (a *Agent) countWaitLocked(d time.Duration) {
	a.counters.waits++
	a.counters.waitTotal += d
	a.counters.waitMax = max(a.counters.waitMax, d)
}

// serveLocked hands IPs to waiters in arrival order, router and health
// first, as long as there are IPs for them: one of each family the agent
// allocates (Cilium's CNI ADD takes an IPv4 and an IPv6 address on a
// dual-stack node and fails, to be retried, when one family has none; a
// pod here waits for both).
func (a *Agent) serveLocked(now time.Time) []finished {
	if !a.poolReady || a.node == nil || a.waiters.Len() == 0 {
		return nil
	}
	var done []finished
	var free4, free6 []string
	scanned := false
	for e := a.waiters.Front(); e != nil; {
		next := e.Next()
		w := e.Value.(*waiter)
		if !scanned {
			free4, free6, scanned = a.freeIPsLocked(false), a.freeIPsLocked(true), true
		}
		var ips []string
		ok := true
		if a.deps.v4 {
			ip, stamped := a.reservedFreeLocked(w.owner)
			switch n := len(free4); {
			case stamped:
				ips = append(ips, ip)
			case n > 0:
				ips = append(ips, free4[n-1])
			default:
				ok = false
			}
		}
		if ok && a.deps.v6 {
			if n := len(free6); n > 0 {
				ips = append(ips, free6[n-1])
			} else {
				ok = false
			}
		}
		switch {
		case ok:
			// Take what was granted off the free lists.
			for _, ip := range ips {
				if n := len(free4); n > 0 && free4[n-1] == ip {
					free4 = free4[:n-1]
				}
				if n := len(free6); n > 0 && free6[n-1] == ip {
					free6 = free6[:n-1]
				}
			}
			done = append(done, a.grantLocked(w, ips, now))
		case w.infra:
			// Pods wait behind the agent's own endpoints.
			return done
		case (a.deps.v4 && len(free4) == 0 && len(a.reserved) == 0) || (a.deps.v6 && len(free6) == 0):
			return done
		}
		e = next
	}
	return done
}

// reservedFreeLocked returns the pool entry stamped with owner, as
// Cilium's nodeStore.allocateNext (pkg/ipam/crd.go) does in crd mode: the
// first entry whose owner matches is handed out before any free one,
// without looking at the release handshake or at whether another pod
// holds it (crdAllocator.markAllocated then overwrites that holder). So an
// operator that stamps an address in use, or leaves a stamp on an address
// it is releasing, shows up in the ledger as a double allocation.
func (a *Agent) reservedFreeLocked(owner string) (string, bool) {
	ip, ok := a.reserved[owner]
	if !ok || !isIPv4(ip) {
		return "", false
	}
	return ip, true
}

// freeIPsLocked lists the pool IPs of one family anyone may take.
func (a *Agent) freeIPsLocked(v6 bool) []string {
	var free []string
	for ip, e := range a.node.Spec.IPAM.Pool {
		if e.Owner != "" || a.inUseLocked(ip) || inHandshake(a.release, ip) || isIPv6(ip) != v6 || (!v6 && !isIPv4(ip)) {
			continue
		}
		free = append(free, ip)
	}
	return free
}

func isIPv6(ip string) bool {
	addr, err := netip.ParseAddr(ip)
	return err == nil && addr.Is6() && !addr.Is4In6()
}

func isIPv4(ip string) bool {
	addr, err := netip.ParseAddr(ip)
	return err == nil && addr.Is4()
}

// grantLocked hands ips (one per family) to w and accounts them.
func (a *Agent) grantLocked(w *waiter, ips []string, now time.Time) finished {
	a.dequeueLocked(w)
	for _, ip := range ips {
		resource := a.node.Spec.IPAM.Pool[ip].Resource
		a.allocated[ip] = allocation{owner: w.owner, resource: resource}
		a.deps.ledger.take(a.name, ip, w.owner, !w.infra, now)
		a.deps.ledger.handedOut(a.name, resource, ip, w.owner, a.pooledAt[ip], now)
	}
	a.owners[w.owner] = ips
	var waited time.Duration
	if w.waited {
		waited = now.Sub(w.since)
	}
	if w.infra && !a.started && len(a.owners[RouterOwner]) > 0 && len(a.owners[HealthOwner]) > 0 {
		a.started, a.announce, a.readyAt = true, true, now
	}
	if !w.infra {
		a.counters.allocations++
		if w.waited {
			a.countWaitLocked(waited)
			a.deps.ledger.wait(waited, WaitSatisfied)
			a.deps.log.Info("pod waited for an IP", "node", a.name, "owner", w.owner, "since", w.since, "waited", waited, "pool", len(a.node.Spec.IPAM.Pool))
		}
	}
	a.triggerLocked(now)
	r := Result{Waited: waited}
	for _, ip := range ips {
		addr, _ := netip.ParseAddr(ip)
		r.IPs = append(r.IPs, addr)
	}
	r.IP = r.IPs[0]
	return finished{w: w, r: r}
}
