package state

import "time"

// EC2 is eventually consistent: an ENI just created may be unknown for a
// while to describes and to the calls that change it. A new ENI made by
// CreateNetworkInterface lags (or, with a ConsistencyShare, may lag) for
// TimingConfig.EventualConsistency in describes and for
// TimingConfig.MutationConsistency in mutating calls, counted from its
// creation with the windows in force at the time of the call. ENIs seeded
// by a scenario and the primary ENIs of launched instances never lag: they
// existed long before anyone asks.

// drawLag decides whether a new ENI lags, from the lag stream of the
// seed; the stream is drawn from only when a share below 1 is set.
func (s *State) drawLag() bool {
	share := s.timing.ConsistencyShare
	if share <= 0 || share >= 1 {
		return true
	}
	return s.lagRNG.Float64() < share
}

// young reports whether e, at now, still lags window after its creation.
func young(e *eni, window Duration, now time.Time) bool {
	return e.lags && window > 0 && now.Before(e.created.Add(time.Duration(window)))
}

// eniVisible is the predicate describes apply: ENIs within the
// eventual-consistency window are hidden.
func (s *State) eniVisible() func(*eni) bool {
	window := s.timing.EventualConsistency
	if window <= 0 {
		return func(*eni) bool { return true }
	}
	now := s.now()
	return func(e *eni) bool { return !young(e, window, now) }
}

// eniToChange is eniByID for the actions that change an ENI: within the
// mutation window a new ENI is InvalidNetworkInterfaceID.NotFound, as EC2
// answers before the ID has propagated.
func (s *State) eniToChange(id string) (*eni, error) {
	e, err := s.eniByID(id)
	if err != nil {
		return nil, err
	}
	if young(e, s.timing.MutationConsistency, s.now()) {
		return nil, eniNotFound(id)
	}
	return e, nil
}
