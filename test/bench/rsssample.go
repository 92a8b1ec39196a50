package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// rssReadings are the operator's RSS in MiB, read at a fixed interval: a
// single reading falls anywhere in the minute between two resyncs, so
// the goal is judged on every reading of the window.
type rssReadings []float64

func (r rssReadings) max() float64 {
	if len(r) == 0 {
		return 0
	}
	return slices.Max(r)
}

// above counts the readings above limit MiB.
func (r rssReadings) above(limit float64) int {
	n := 0
	for _, v := range r {
		if v > limit {
			n++
		}
	}
	return n
}

// String is "min / mean / max (n readings)".
func (r rssReadings) String() string {
	if len(r) == 0 {
		return "no reading"
	}
	var total float64
	for _, v := range r {
		total += v
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f (%d readings)", slices.Min(r), total/float64(len(r)), slices.Max(r), len(r))
}

// sampleRSS reads the operator's RSS every interval for window, from
// /proc (a metrics scrape would allocate in the operator it measures).
func (w *world) sampleRSS(ctx context.Context, window, interval time.Duration) (rssReadings, error) {
	var r rssReadings
	end := time.Now().Add(window)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		u, err := w.op.Usage()
		if err != nil {
			return nil, err
		}
		r = append(r, float64(u.RSSBytes)/(1<<20))
	}
	return r, nil
}
