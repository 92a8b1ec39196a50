package state

import "time"

// Remap is one remap EC2 carried out, or is carrying out, for
// AssignPrivateIpAddresses with AllowReassignment: Address asked onto
// NetworkInterfaceID at Asked, due Delay later (the delay drawn from
// TimingConfig.ReassignDelay), and how it ended. A benchmark reads them
// to tell EC2's own share of a move from the rest.
type Remap struct {
	Address            string    `json:"address"`
	NetworkInterfaceID string    `json:"networkInterfaceId"`
	Asked              time.Time `json:"asked"`
	Delay              Duration  `json:"delay"`
	// Outcome is RemapPending until the move ends: RemapLanded (Ended is
	// when the address reached the ENI, the first call at or after its
	// due time), RemapSuperseded (asked onto another ENI before it
	// landed) or RemapLost (its target or the address was gone).
	Outcome string    `json:"outcome"`
	Ended   time.Time `json:"ended,omitzero"`
}

// The outcomes of a Remap.
const (
	RemapPending    = "pending"
	RemapLanded     = "landed"
	RemapSuperseded = "superseded"
	RemapLost       = "lost"
)

// maxRemapLog bounds the remaps kept: the oldest go first.
const maxRemapLog = 4096

// logRemap records a move just queued and returns its entry's sequence
// number; the caller holds the lock.
func (s *State) logRemap(ip, eniID string, d time.Duration) uint64 {
	s.remapSeq++
	if len(s.remapLog) == maxRemapLog {
		s.remapLog = append(s.remapLog[:0], s.remapLog[1:]...)
	}
	s.remapLog = append(s.remapLog, remapEntry{seq: s.remapSeq, Remap: Remap{
		Address: ip, NetworkInterfaceID: eniID, Asked: s.now(), Delay: Duration(d), Outcome: RemapPending,
	}})
	return s.remapSeq
}

// endRemap records how the move logged as seq ended; the caller holds
// the lock. A move dropped from the log meanwhile is not recorded.
func (s *State) endRemap(seq uint64, outcome string) {
	for i := len(s.remapLog) - 1; i >= 0; i-- {
		if e := &s.remapLog[i]; e.seq == seq {
			e.Outcome, e.Ended = outcome, s.now()
			return
		}
	}
}

// remapEntry is one Remap of the log with its sequence number.
type remapEntry struct {
	seq uint64
	Remap
}

// Remaps returns the remaps EC2 was asked for, oldest first (at most the
// last 4096), with the outcome of each as it stands.
func (s *State) Remaps() []Remap {
	s.lock()
	defer s.unlock()
	out := make([]Remap, len(s.remapLog))
	for i, e := range s.remapLog {
		out[i] = e.Remap
	}
	return out
}
