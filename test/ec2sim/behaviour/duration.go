package behaviour

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// Duration is a time.Duration that reads and writes as Go duration text
// ("150ms", "2s") in scenario YAML and admin JSON. A bare number is taken as
// seconds.
type Duration time.Duration

// MarshalJSON writes d as duration text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads duration text or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be text like \"150ms\" or a number of seconds, got %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Range is a uniform distribution of durations between Min and Max. The zero
// Range is always zero; a Max below Min is treated as Min.
type Range struct {
	Min Duration `json:"min"`
	Max Duration `json:"max"`
}

// Sample draws from r with rng.
func (r Range) Sample(rng *rand.Rand) time.Duration {
	lo, hi := time.Duration(r.Min), time.Duration(r.Max)
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// Validate rejects a negative bound.
func (r Range) Validate() error {
	if r.Min < 0 || r.Max < 0 {
		return fmt.Errorf("negative duration in range %v..%v", time.Duration(r.Min), time.Duration(r.Max))
	}
	return nil
}
