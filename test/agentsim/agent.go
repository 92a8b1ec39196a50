package agentsim

import (
	"container/list"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// agentDeps is what an agent needs from its Sim, spelled out.
type agentDeps struct {
	ledger          *Ledger
	log             *slog.Logger
	interval        time.Duration
	allocateTimeout time.Duration
	// enqueue asks for a status write of the named agent after delay.
	enqueue func(name string, delay time.Duration)
	// onReady is called, without the agent's lock, once the agent is Ready.
	onReady func(*Agent)
	// onRelease, if set, is called with the node's name, without the
	// agent's lock, after a pod's address was released (its CNI DEL).
	onRelease func(node string)
	// v4 and v6 are the families every pod gets an address of (Cilium's
	// enable-ipv4 and enable-ipv6); neither is IPv4.
	v4, v6 bool
}

// allocation is an IP handed out by an agent.
type allocation struct {
	owner, resource string
	// outOfPool: the IP left the pool while held; counted once.
	outOfPool bool
}

// poolMark: the pool first held size IPs at at.
type poolMark struct {
	size int
	at   time.Time
}

// nodeCounters are an agent's figures.
type nodeCounters struct {
	allocations        int
	waits              int
	waitTotal, waitMax time.Duration
	writes, conflicts  int
	failedWrites       int
	violations         int
}

// Agent simulates the cilium-agent of one node in `ipam: crd` mode. Its
// methods are safe for concurrent use. Callbacks given to AllocateAsync run
// without the agent's lock held, on the goroutine that made the IP
// available (the caller's, the informer's or a timer's): they must not block.
type Agent struct {
	name string
	deps agentDeps

	mu sync.Mutex
	// node is the latest CiliumNode seen (nil before the first, or after
	// deletion). It is shared with the informer's cache: read-only.
	node *ciliumv2.CiliumNode
	rv   uint64
	// pooledAt is the CiliumNode revision in which each pool IP was first
	// seen in the pool (since it last entered it).
	pooledAt map[string]uint64
	// release is status.ipam.release-ips as seen, with this agent's answers.
	release map[string]ipamtypes.IPReleaseStatus
	// readyAcked holds the IPs whose ready-for-release reached the
	// apiserver (seen there) and still stands.
	readyAcked map[string]struct{}
	// reserved maps an owner to the pool entry reserved for it (static IP).
	reserved  map[string]string
	allocated map[string]allocation
	// owners maps an owner to its addresses, one per family (IPv4 first).
	owners  map[string][]string
	waiters list.List
	pending map[string]*waiter
	// poolReady: the initial IPs were seen; started: router and health
	// hold IPs, the node is Ready; announce: started, not yet told.
	poolReady bool
	started   bool
	announce  bool
	stopped   bool

	// addedAt: the agent started (the node joined); readyAt: it became
	// Ready; growth: when the pool first reached each larger size.
	addedAt, readyAt time.Time
	growth           []poolMark

	writePending bool
	lastWrite    time.Time
	// dirtySince is when the oldest change not yet written was made.
	dirtySince time.Time
	counters   nodeCounters
}

func newAgent(name string, deps agentDeps) *Agent {
	if !deps.v4 && !deps.v6 {
		deps.v4 = true // no family named: IPv4, as Cilium's default
	}
	return &Agent{
		name:       name,
		deps:       deps,
		addedAt:    time.Now(),
		readyAcked: map[string]struct{}{},
		pooledAt:   map[string]uint64{},
		reserved:   map[string]string{},
		allocated:  map[string]allocation{},
		owners:     map[string][]string{},
		pending:    map[string]*waiter{},
	}
}

// Name is the node's (and its CiliumNode's) name.
func (a *Agent) Name() string { return a.name }

// Ready reports whether the agent has its initial IPs and router and
// health IPs: a node a scheduler would place pods on.
func (a *Agent) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started
}

// PoolReachedAt returns when this agent first saw at least n IPs in its
// pool, and false if it never has: for figures like the time from a node's
// start to its pre-allocate IPs.
func (a *Agent) PoolReachedAt(n int) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.growth {
		if m.size >= n {
			return m.at, true
		}
	}
	return time.Time{}, false
}

// initialIPs is how many IPs the pool must hold before the agent starts:
// min-allocate, else pre-allocate, else 2 (router and health).
func initialIPs(spec ipamtypes.IPAMSpec) int {
	switch {
	case spec.MinAllocate != 0:
		return spec.MinAllocate
	case spec.PreAllocate != 0:
		return spec.PreAllocate
	}
	return 2
}

// parseRV reads a resourceVersion as the etcd revision it is in practice;
// 0 if it is not one, which disables the ordering check.
func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// observe takes a new version of the CiliumNode: checks what left the
// pool, answers the release handshake, starts the agent once the initial
// IPs are there, and serves waiting pods. Versions older than the one
// already seen are ignored, so a read after a conflict and the watch can
// both feed it.
func (a *Agent) observe(cn *ciliumv2.CiliumNode) {
	now := time.Now()
	rv := parseRV(cn.ResourceVersion)
	a.mu.Lock()
	if a.stopped || (rv != 0 && rv <= a.rv) {
		if rv == a.rv && a.node != nil {
			// The watch's copy of the version this agent wrote: the same
			// object, but shared with the informer's cache.
			a.node = cn
		}
		a.mu.Unlock()
		return
	}
	prev := a.node
	a.node, a.rv = cn, rv
	pool := cn.Spec.IPAM.Pool
	for ip := range pool {
		if _, ok := a.pooledAt[ip]; !ok {
			a.pooledAt[ip] = rv
		}
	}
	for ip := range a.pooledAt {
		if _, ok := pool[ip]; !ok {
			delete(a.pooledAt, ip)
		}
	}
	a.checkRemovalsLocked(prev, pool, cn.Status.IPAM.ReleaseIPs, now)
	if n := len(a.growth); n == 0 || len(pool) > a.growth[n-1].size {
		a.growth = append(a.growth, poolMark{size: len(pool), at: now})
	}

	a.release = maps.Clone(cn.Status.IPAM.ReleaseIPs)
	for ip, status := range a.release {
		if status == ReadyForRelease {
			a.readyAcked[ip] = struct{}{}
		}
	}
	for ip := range a.readyAcked {
		if s, ok := a.release[ip]; !ok || s == MarkedForRelease || s == DoNotRelease {
			delete(a.readyAcked, ip)
		}
	}
	answered := answerHandshake(a.release, pool, a.inUseLocked)

	clear(a.reserved)
	for ip, e := range pool {
		if e.Owner != "" {
			a.reserved[e.Owner] = ip
		}
	}

	// Cilium's agent starts serving once the pool holds its minimum and,
	// when it asked for a static IP (spec.ipam.static-ip-tags), an
	// operator reported one (pkg/ipam/crd.go, newNodeStore's wait on
	// hasMinimumIPsInPool and staticIPStatus).
	staticIPReady := len(cn.Spec.IPAM.StaticIPTags) == 0 || cn.Status.IPAM.AssignedStaticIP != ""
	if !a.poolReady && pool != nil && len(pool) >= initialIPs(cn.Spec.IPAM) && staticIPReady {
		a.poolReady = true
		// Router then health, ahead of any pod, as the agent takes them
		// before it serves CNI requests.
		for _, owner := range []string{HealthOwner, RouterOwner} {
			w := &waiter{owner: owner, infra: true, since: now}
			w.elem = a.waiters.PushFront(w)
			a.pending[owner] = w
		}
		a.deps.log.Debug("initial IPs available", "node", a.name, "pool", len(pool))
	}
	done := a.serveLocked(now)
	if answered {
		a.triggerLocked(now)
	}
	a.unlockAndFinish(done)
}

// unlockAndFinish releases the lock, then tells the Sim if the agent just
// started and runs the callbacks of finished allocations.
func (a *Agent) unlockAndFinish(done []finished) {
	announce := a.announce
	a.announce = false
	a.mu.Unlock()
	if announce {
		a.deps.onReady(a)
	}
	finish(done)
}

// checkRemovalsLocked counts the IPs that left the pool against the
// contract: any IP still in use, and any free IP without a ready-for-release
// the operator could have seen, but for a stamped one released on
// enipam-agent's word (the fast move of a static address).
func (a *Agent) checkRemovalsLocked(prev *ciliumv2.CiliumNode, pool ipamtypes.AllocationMap, release map[string]ipamtypes.IPReleaseStatus, now time.Time) {
	if prev != nil {
		for ip := range prev.Spec.IPAM.Pool {
			if _, ok := pool[ip]; ok {
				continue
			}
			if _, used := a.allocated[ip]; used {
				continue
			}
			if prev.Spec.IPAM.Pool[ip].Owner != "" && release[ip] == Released {
				// A claimed address moving away, released on
				// enipam-agent's word that no endpoint holds it (no pod
				// holds it here: checked above). Cilium gives a stamped
				// entry to its owner alone; the ledger's double
				// allocation check sees any second holder.
				continue
			}
			if _, ok := a.readyAcked[ip]; !ok {
				a.counters.violations++
				a.deps.ledger.violation(Violation{Kind: ReleasedWithoutReady, Node: a.name, IP: ip, At: now})
				a.deps.log.Warn("IP left the pool without ready-for-release", "node", a.name, "ip", ip)
			}
		}
	}
	for ip, al := range a.allocated {
		_, inPool := pool[ip]
		switch {
		case !inPool && !al.outOfPool:
			al.outOfPool = true
			a.allocated[ip] = al
			a.counters.violations++
			a.deps.ledger.violation(Violation{Kind: RemovedWhileUsed, Node: a.name, IP: ip, Owner: al.owner, At: now})
			a.deps.log.Warn("IP left the pool while in use", "node", a.name, "ip", ip, "owner", al.owner)
		case inPool && al.outOfPool:
			al.outOfPool = false
			a.allocated[ip] = al
		}
	}
}

// observeDeleted forgets the CiliumNode, as the agent does when its
// CiliumNode is deleted: allocations wait until it comes back.
func (a *Agent) observeDeleted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.node = nil
}

func (a *Agent) inUseLocked(ip string) bool {
	_, ok := a.allocated[ip]
	return ok
}

// triggerLocked asks for a status write, folded with any already asked
// for and no sooner than the update interval after the last one began,
// like Cilium's trigger with MinInterval (pkg/ipam/crd.go newNodeStore
// builds it with MinInterval ipam-cilium-node-update-rate, 15 s by default
// in daemon/cmd/daemon_main.go; pkg/trigger/trigger.go Trigger.waiter runs
// a trigger at once after a quiet interval, else sleeps the rest of it,
// folding the triggers meanwhile into one run).
func (a *Agent) triggerLocked(now time.Time) {
	if a.dirtySince.IsZero() {
		a.dirtySince = now
	}
	if a.writePending || a.stopped {
		return
	}
	a.writePending = true
	delay := max(0, a.lastWrite.Add(a.deps.interval).Sub(now))
	a.deps.enqueue(a.name, delay)
}

// statusToWrite starts a status write: it returns a copy of the CiliumNode
// with status.ipam.used and release-ips as the agent knows them, or nil if
// there is nothing to write to, and since when the changes it carries
// waited.
func (a *Agent) statusToWrite(now time.Time) (*ciliumv2.CiliumNode, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writePending = false
	if a.node == nil || a.stopped {
		return nil, time.Time{}
	}
	since := a.dirtySince
	a.dirtySince = time.Time{}
	a.lastWrite = now
	cn := a.node.DeepCopy()
	used := make(ipamtypes.AllocationMap, len(a.allocated))
	for ip, al := range a.allocated {
		used[ip] = ipamtypes.AllocationIP{Owner: al.owner, Resource: al.resource}
	}
	cn.Status.IPAM.Used = used
	cn.Status.IPAM.ReleaseIPs = maps.Clone(a.release)
	return cn, since
}

// wrote, conflicted and writeFailed account a status write's outcome; a
// failed write is retried after the update interval, as Cilium does.
func (a *Agent) wrote() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counters.writes++
}

func (a *Agent) conflicted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counters.conflicts++
}

func (a *Agent) writeFailed(now, dirtySince time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counters.failedWrites++
	if !dirtySince.IsZero() && (a.dirtySince.IsZero() || dirtySince.Before(a.dirtySince)) {
		a.dirtySince = dirtySince
	}
	a.triggerLocked(now)
}

// stop abandons every waiting pod; with forget, it also gives up every
// IP in the ledger (the node is gone).
func (a *Agent) stop(forget bool) {
	now := time.Now()
	a.mu.Lock()
	a.stopped = true
	var done []finished
	for e := a.waiters.Front(); e != nil; {
		next := e.Next()
		done = append(done, a.abandonLocked(e.Value.(*waiter), now, ErrStopped))
		e = next
	}
	if forget {
		for owner, ips := range a.owners {
			for _, ip := range ips {
				a.deps.ledger.drop(a.name, ip, owner)
			}
		}
	}
	a.mu.Unlock()
	finish(done)
}
