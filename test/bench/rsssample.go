package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/enipam/enipam/test/stack"
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

// memReading is one reading of the operator's memory, in MiB: its RSS
// from /proc, split into anonymous and file pages, and the Go runtime's
// view of its heap from the operator's metrics, read right after.
type memReading struct {
	rss, anon, file float64
	gomem           goMemory
}

// goMemory is the Go runtime's view of the operator's memory, in MiB,
// from its metrics (go_memstats_*).
type goMemory struct {
	// heapAlloc is the bytes of heap objects, live or not yet swept.
	heapAlloc float64
	// heapInuse is the heap's spans holding at least one object.
	heapInuse float64
	// heapIdle is the heap's spans holding none; heapReleased is the
	// part of them returned to the kernel.
	heapIdle, heapReleased float64
	// nextGC is the heap's size at which the next cycle starts.
	nextGC float64
	// stacks is the goroutines' stacks.
	stacks float64
	// gcCycles is the number of completed cycles since the start.
	gcCycles float64
}

// goMemoryOf reads goMemory from a scrape of the operator's metrics.
func goMemoryOf(m map[string]*dto.MetricFamily) goMemory {
	mib := func(name string) float64 { return sum(m, name, nil) / (1 << 20) }
	return goMemory{
		heapAlloc: mib("go_memstats_heap_alloc_bytes"), heapInuse: mib("go_memstats_heap_inuse_bytes"),
		heapIdle: mib("go_memstats_heap_idle_bytes"), heapReleased: mib("go_memstats_heap_released_bytes"),
		nextGC: mib("go_memstats_next_gc_bytes"), stacks: mib("go_memstats_stack_inuse_bytes"),
		gcCycles: sum(m, "go_gc_duration_seconds", nil),
	}
}

// String is the figures, in MiB, in the order the report names them.
func (g goMemory) String() string {
	return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f / %.1f / %.1f", g.heapAlloc, g.heapInuse, g.heapIdle, g.heapReleased, g.nextGC, g.stacks)
}

// goMemoryNames names goMemory's String figures.
const goMemoryNames = "heap allocated / heap in use / heap idle / of it released / next GC's goal / stacks"

// memReadings are the readings of a window.
type memReadings []memReading

// of is one figure of every reading.
func (r memReadings) of(f func(memReading) float64) rssReadings {
	out := make(rssReadings, len(r))
	for i := range r {
		out[i] = f(r[i])
	}
	return out
}

// rss is the RSS of every reading.
func (r memReadings) rss() rssReadings { return r.of(func(m memReading) float64 { return m.rss }) }

// add adds to rep, for each figure, its min / mean / max through the
// readings.
func (r memReadings) add(rep *Report, every time.Duration) {
	figures := []struct {
		name string
		f    func(memReading) float64
	}{
		{"anonymous pages", func(m memReading) float64 { return m.anon }},
		{"file pages (the binary's)", func(m memReading) float64 { return m.file }},
		{"Go heap allocated", func(m memReading) float64 { return m.gomem.heapAlloc }},
		{"Go heap in use", func(m memReading) float64 { return m.gomem.heapInuse }},
		{"Go heap idle", func(m memReading) float64 { return m.gomem.heapIdle }},
		{"Go heap released", func(m memReading) float64 { return m.gomem.heapReleased }},
		{"Go next GC's goal", func(m memReading) float64 { return m.gomem.nextGC }},
		{"Go stacks", func(m memReading) float64 { return m.gomem.stacks }},
		{"Go heap in use less heap allocated", func(m memReading) float64 { return m.gomem.heapInuse - m.gomem.heapAlloc }},
	}
	for _, f := range figures {
		rep.add(fmt.Sprintf("operator %s through the window, read every %s: min / mean / max", f.name, every), r.of(f.f).String(), "MiB")
	}
}

// sampleMemory reads the operator's memory every interval for window:
// its RSS from /proc first, then its metrics (a scrape allocates in the
// operator it measures, after the reading of its RSS).
func (w *world) sampleMemory(ctx context.Context, window, interval time.Duration) (memReadings, error) {
	var r memReadings
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
		m, err := w.metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the operator's metrics, %w", err)
		}
		r = append(r, memReading{rss: mib(u.RSSBytes), anon: mib(u.AnonRSSBytes), file: mib(u.FileRSSBytes), gomem: goMemoryOf(m)})
	}
	return r, nil
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// rssSplit is "anonymous / file" MiB of u.
func rssSplit(u stack.Usage) string {
	return fmt.Sprintf("%.1f / %.1f", mib(u.AnonRSSBytes), mib(u.FileRSSBytes))
}
