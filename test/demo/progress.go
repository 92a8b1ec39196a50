package demo

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// tickEvery is how often a long step says it is still under way.
const tickEvery = 15 * time.Second

// progress prints the demo's steps as hack/tools.sh prints its own: one
// line per step with its duration, and a line every tickEvery while a long
// step runs, so a first build never looks stuck.
type progress struct {
	mu sync.Mutex
	w  io.Writer
}

// printf writes a line between steps.
func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// step prints "==> name ...", runs f, and ends the line with f's duration
// or its failure.
func (p *progress) step(name string, f func() error) error {
	start := time.Now()
	p.printf("==> %s ...", name)
	broken := false // a tick line ended the step's first line
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				p.mu.Lock()
				if !broken {
					fmt.Fprintln(p.w)
					broken = true
				}
				fmt.Fprintf(p.w, "    ... %s\n", formatDuration(now.Sub(start)))
				p.mu.Unlock()
			}
		}
	}()
	err := f()
	close(stop)
	<-ticked

	outcome := formatDuration(time.Since(start))
	if err != nil {
		outcome = "failed after " + outcome
	}
	if broken {
		p.printf("    %s: %s\n", name, outcome)
	} else {
		p.printf(" %s\n", outcome)
	}
	return err
}

// formatDuration prints d as a person reads it: 40ms, 3.2s, 1m12s.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
