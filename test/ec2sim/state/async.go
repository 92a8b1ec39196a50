package state

import (
	"container/heap"
	"net/netip"
	"slices"
	"time"
)

// EC2 finishes some work after the call that asked for it has answered:
// attachments and detachments (state.go), the move of an address
// reassigned from another ENI, and the return of a released address to
// the subnet. Each is an event on the State's queue, run by the first
// call that takes the lock at or after its due time, on the State's
// clock; a test with a ManualClock steps through them without sleeping.

// event is work due at due; seq keeps events due at the same instant in
// the order they were queued.
type event struct {
	due  time.Time
	seq  uint64
	fire func()
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// after queues fire to run, under the lock, once the clock reaches due.
func (s *State) after(due time.Time, fire func()) {
	s.eventSeq++
	heap.Push(&s.pending, event{due: due, seq: s.eventSeq, fire: fire})
}

// runDue runs the events due at now, in due order.
// NextDue is when the earliest asynchronous work still pending (an
// attachment, a detachment, an address move, a cooldown) is due; false
// when none is. Until then, and until the next action, the state does
// not change: a caller that polls it can skip its dumps.
func (s *State) NextDue() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return time.Time{}, false
	}
	return s.pending[0].due, true
}

func (s *State) runDue(now time.Time) {
	for len(s.pending) > 0 && !s.pending[0].due.After(now) {
		heap.Pop(&s.pending).(event).fire()
	}
}

// addrKey names one address of one subnet's address book.
type addrKey struct {
	space *addrSpace
	off   uint32
}

// A move is an address AssignPrivateIpAddresses with AllowReassignment
// moves onto to. "Remapping an IP address is an asynchronous operation"
// (AssignPrivateIpAddresses, EC2 API reference): until the move lands,
// after TimingConfig.ReassignDelay, the address stays where it was in
// every describe, in IMDS and in its Elastic IP's association, and it
// takes one of to's IPv4 slots already (to.incoming), so that landing
// never overfills it. A later reassignment of the same address
// supersedes the move.
type move struct {
	key addrKey
	to  *eni
	// logged is its entry in the remap log (remaplog.go).
	logged uint64
}

// startMove queues the move of the address at k onto to, landing after d.
// Asked again onto the same ENI while on its way, the move keeps its
// time: the remap asked for is already under way.
func (s *State) startMove(k addrKey, to *eni, d time.Duration) {
	if old := s.moves[k]; old != nil {
		if old.to == to {
			return
		}
		old.to.incoming--
		s.endRemap(old.logged, RemapSuperseded)
	}
	m := &move{key: k, to: to, logged: s.logRemap(k.space.addr(k.off).String(), to.id, d)}
	s.moves[k] = m
	to.incoming++
	s.after(s.now().Add(d), func() { s.land(m) })
}

// land completes a move. The address is taken from the ENI holding it
// as a secondary address, or taken fresh if it was released meanwhile
// (cooling down or not); if by then it is another ENI's primary address
// or part of a prefix, or to was deleted, the move is lost, as a remap
// of what no longer exists would be.
func (s *State) land(m *move) {
	if s.moves[m.key] != m {
		return // superseded
	}
	delete(s.moves, m.key)
	m.to.incoming--
	if m.to.removed {
		s.endRemap(m.logged, RemapLost)
		return
	}
	sp, off := m.key.space, m.key.off
	ip := sp.addr(off)
	switch owner := sp.owner(off); {
	case owner == m.to:
		s.endRemap(m.logged, RemapLanded)
		return
	case owner != nil:
		if owner.ips[0] == ip || !slices.Contains(owner.ips, ip) {
			s.endRemap(m.logged, RemapLost)
			return
		}
		commit := s.changing(s.timing.Lag.Reassign, []*eni{owner, m.to}, owner.eips)
		defer commit()
		s.takeOver(owner, m.to, off)
	case !sp.taken(off):
		defer s.changing(s.timing.Lag.Reassign, []*eni{m.to}, nil)()
		sp.take(off, m.to)
	case !s.cooling[m.key].IsZero():
		defer s.changing(s.timing.Lag.Reassign, []*eni{m.to}, nil)()
		delete(s.cooling, m.key)
		sp.reassign(off, m.to)
	default:
		s.endRemap(m.logged, RemapLost)
		return // reserved, or held by a prefix
	}
	m.to.ips = append(m.to.ips, ip)
	s.endRemap(m.logged, RemapLanded)
}

// takeOver moves the secondary address at off from old to e, with any
// Elastic IP associated with it. The caller appends it to e.ips.
func (s *State) takeOver(old, e *eni, off uint32) {
	sp := e.subnet.space
	ip := sp.addr(off)
	old.ips = slices.DeleteFunc(old.ips, func(a netip.Addr) bool { return a == ip })
	// "When you move a secondary private IP address to another network
	// interface, any Elastic IP address that is associated with the IP
	// address is also moved" (AssignPrivateIpAddresses, EC2 API
	// reference); the association keeps its ID.
	for _, eip := range slices.Clone(old.eips) {
		if eip.privateIP == ip {
			old.eips = slices.DeleteFunc(old.eips, func(x *address) bool { return x == eip })
			eip.eni = e
			e.eips = append(e.eips, eip)
		}
	}
	sp.reassign(off, e)
}

// releaseAddr returns the address at off to its subnet. With a
// TimingConfig.ReleaseCooldown it first cools down: held by no ENI, yet
// neither handed out fresh nor assignable by name (the in-use answer)
// nor counted available, until the cooldown ends. A move already asked
// for it still lands.
func (s *State) releaseAddr(sp *addrSpace, off uint32) {
	d := time.Duration(s.timing.ReleaseCooldown)
	if d <= 0 {
		sp.release(off)
		return
	}
	sp.reassign(off, nil)
	k := addrKey{space: sp, off: off}
	due := s.now().Add(d)
	s.cooling[k] = due
	s.after(due, func() {
		if s.cooling[k].Equal(due) {
			delete(s.cooling, k)
			sp.release(off)
		}
	})
}

// releasePrefix returns a /28 to its subnet, each address cooling down
// as releaseAddr says.
func (s *State) releasePrefix(sp *addrSpace, off uint32) {
	for i := uint32(0); i < prefixSize; i++ {
		s.releaseAddr(sp, off+i)
	}
}
