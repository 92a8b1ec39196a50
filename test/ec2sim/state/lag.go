package state

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Changes reach describes late. "The result of an API command you run
// that affects your Amazon EC2 resources might not be immediately visible
// to all subsequent commands you run" (Eventual consistency in the Amazon
// EC2 API, EC2 developer guide). Each change to an ENI or an Elastic IP
// that a LagConfig window covers is recorded with the state it left
// behind; until the change's window has passed, DescribeNetworkInterfaces,
// DescribeInstances and DescribeAddresses (their filters included) show
// that earlier state. Changes to one resource reach describes in the
// order they were made: a later change with a shorter window waits for
// the earlier ones. The calls that change resources, and IMDS, always see
// the current state. New ENIs are apart: see consistency.go.

// LagConfig is how long each kind of change takes to reach describes, a
// duration drawn per change from its Range (zero: at once).
type LagConfig struct {
	// Assign: addresses and prefixes added by AssignPrivateIpAddresses.
	Assign Range `json:"assign"`
	// Unassign: addresses and prefixes removed by
	// UnassignPrivateIpAddresses (and the Elastic IPs they shed).
	Unassign Range `json:"unassign"`
	// Reassign: a reassigned address that has landed (see move), on both
	// ENIs and its Elastic IP.
	Reassign Range `json:"reassign"`
	// Attach and Detach: AttachNetworkInterface and
	// DetachNetworkInterface (the attachment appearing, or leaving
	// attached).
	Attach Range `json:"attach"`
	Detach Range `json:"detach"`
	// Tags: CreateTags and DeleteTags on ENIs and Elastic IPs.
	Tags Range `json:"tags"`
	// Associate and Disassociate: AssociateAddress and
	// DisassociateAddress, on the address and on the ENIs involved.
	Associate    Range `json:"associate"`
	Disassociate Range `json:"disassociate"`
	// Share is the share of changes that lag, drawn per change from the
	// scenario's seed; 0 means every change.
	Share float64 `json:"share,omitempty"`
}

// Validate rejects negative windows and a share outside 0..1.
func (c LagConfig) Validate() error {
	for name, r := range c.ranges() {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if c.Share < 0 || c.Share > 1 {
		return fmt.Errorf("share %v outside 0..1", c.Share)
	}
	return nil
}

func (c LagConfig) ranges() map[string]Range {
	return map[string]Range{"assign": c.Assign, "unassign": c.Unassign, "reassign": c.Reassign, "attach": c.Attach,
		"detach": c.Detach, "tags": c.Tags, "associate": c.Associate, "disassociate": c.Disassociate}
}

// history is what describes show of one resource while changes to it
// are on their way: shown now; then, as each pending change lands (due,
// in order), the state it left, which is the next one's starting state
// (next), or the live resource after the last.
type history[T any] struct {
	shown T
	next  []T
	due   []time.Time
}

// record adds a change made from state pre, due to reach describes at
// due (or when the change before it does, if later). It returns the
// due time kept.
func record[T any](h **history[T], pre T, due time.Time) time.Time {
	if *h == nil {
		*h = &history[T]{shown: pre}
	} else {
		(*h).next = append((*h).next, pre)
	}
	if n := len((*h).due); n > 0 && due.Before((*h).due[n-1]) {
		due = (*h).due[n-1]
	}
	(*h).due = append((*h).due, due)
	return due
}

// land makes the oldest pending change visible; it reports whether the
// resource is current again.
func land[T any](h **history[T]) bool {
	hh := *h
	if hh == nil {
		return true
	}
	hh.due = hh.due[1:]
	if len(hh.next) == 0 {
		*h = nil
		return true
	}
	hh.shown, hh.next = hh.next[0], hh.next[1:]
	return false
}

// changeLag draws how long a change of a kind with window r takes to
// reach describes: zero when r is zero or the change is not among the
// Share that lag. Draws come from a stream of their own, so turning lags
// on moves no other draw.
func (s *State) changeLag(r Range) time.Duration {
	if r.Max <= 0 && r.Min <= 0 {
		return 0
	}
	if share := s.timing.Lag.Share; share > 0 && share < 1 && s.changeRNG.Float64() >= share {
		return 0
	}
	return r.Sample(s.changeRNG)
}

// changing freezes what describes show of enis and addrs before a change
// whose window is r; the returned commit, called once the change is
// made, keeps describes on the frozen state until the drawn lag has
// passed. A change that does not lag costs no copy. Nil entries are
// ignored, so a caller can pass what may be absent.
func (s *State) changing(r Range, enis []*eni, addrs []*address) (commit func()) {
	d := s.changeLag(r)
	if d <= 0 {
		return func() {}
	}
	enis = slices.Compact(slices.DeleteFunc(slices.Clone(enis), func(e *eni) bool { return e == nil }))
	addrs = slices.Compact(slices.DeleteFunc(slices.Clone(addrs), func(a *address) bool { return a == nil }))
	preENIs := make([]*eni, len(enis))
	for i, e := range enis {
		preENIs[i] = e.frozen()
	}
	preAddrs := make([]*address, len(addrs))
	for i, a := range addrs {
		preAddrs[i] = a.frozen()
	}
	return func() {
		due := s.now().Add(d)
		for i, e := range enis {
			if e.removed {
				continue
			}
			at := record(&e.hist, preENIs[i], due)
			s.laggingENIs[e] = struct{}{}
			s.after(at, func() {
				if land(&e.hist) {
					delete(s.laggingENIs, e)
				}
			})
		}
		for i, a := range addrs {
			if a.removed {
				continue
			}
			at := record(&a.hist, preAddrs[i], due)
			s.after(at, func() { land(&a.hist) })
		}
	}
}

// frozen is a copy of e as it stands, for describes to show later: its
// addresses, prefixes, groups, tags, attachment and Elastic IP
// associations are copied, the subnet and instance it refers to are not.
func (e *eni) frozen() *eni {
	c := *e
	c.hist = nil
	c.tags = slices.Clone(e.tags)
	c.ips = slices.Clone(e.ips)
	c.prefixes = slices.Clone(e.prefixes)
	c.ipv6s = slices.Clone(e.ipv6s)
	c.ipv6Prefixes = slices.Clone(e.ipv6Prefixes)
	c.groups = slices.Clone(e.groups)
	if e.attachment != nil {
		a := *e.attachment
		c.attachment = &a
	}
	c.eips = make([]*address, len(e.eips))
	for i, a := range e.eips {
		c.eips[i] = a.frozen()
	}
	return &c
}

// frozen is a copy of a as it stands; the ENI it names is not copied.
func (a *address) frozen() *address {
	c := *a
	c.hist = nil
	c.tags = slices.Clone(a.tags)
	return &c
}

// shown is the ENI as describes show it now.
func (e *eni) shown() *eni {
	if e.hist != nil {
		return e.hist.shown
	}
	return e
}

// shown is the Elastic IP as describes show it now.
func (a *address) shown() *address {
	if a.hist != nil {
		return a.hist.shown
	}
	return a
}

// instanceENIs are the ENIs describes show attached to in, as they show
// them, by network card, device index and creation: those in its slots
// whose shown attachment is still to in, and those detached already
// whose shown attachment still is.
func (s *State) instanceENIs(in *instance) []*eni {
	var out []*eni
	seen := map[*eni]bool{}
	consider := func(e *eni) {
		if seen[e] {
			return
		}
		seen[e] = true
		if sh := e.shown(); sh.attachment != nil && sh.attachment.instance == in {
			out = append(out, sh)
		}
	}
	for _, e := range in.slots {
		consider(e)
	}
	for e := range s.laggingENIs {
		consider(e)
	}
	slices.SortFunc(out, func(a, b *eni) int {
		return cmp.Or(cmp.Compare(a.attachment.networkCard, b.attachment.networkCard),
			cmp.Compare(a.attachment.deviceIndex, b.attachment.deviceIndex), cmp.Compare(a.seq, b.seq))
	})
	return out
}
