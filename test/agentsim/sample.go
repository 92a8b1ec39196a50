package agentsim

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// maxSample bounds the durations a durationSample keeps.
const maxSample = 100_000

// durationSample keeps a uniform sample of at most maxSample durations
// (reservoir sampling) and the exact count and maximum, so percentiles stay
// cheap over runs of any length. Safe for concurrent use.
type durationSample struct {
	mu    sync.Mutex
	kept  []time.Duration
	count int
	max   time.Duration
	rng   *rand.Rand
}

func (s *durationSample) add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	s.max = max(s.max, d)
	if len(s.kept) < maxSample {
		s.kept = append(s.kept, d)
		return
	}
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(1, 2))
	}
	if i := s.rng.IntN(s.count); i < maxSample {
		s.kept[i] = d
	}
}

// summary returns the count, the 50th and 99th percentiles and the maximum.
func (s *durationSample) summary() LagFigures {
	s.mu.Lock()
	kept := slices.Clone(s.kept)
	f := LagFigures{Count: s.count, Max: s.max}
	s.mu.Unlock()
	slices.Sort(kept)
	f.P50, f.P99 = Percentile(kept, 50), Percentile(kept, 99)
	return f
}

// LagFigures summarize how long changes to status.ipam.used waited for the
// write that carried them: at most the update interval when the
// simulator keeps up, more when the apiserver or the QPS limit holds
// writes back.
type LagFigures struct {
	Count         int
	P50, P99, Max time.Duration
}
