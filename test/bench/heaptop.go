package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// heapEntry is one function's in-use bytes in a heap profile: what it
// allocated itself and is still live (pprof's flat column).
type heapEntry struct {
	Func string
	MiB  float64
}

// heapTop returns the n functions holding the most in-use bytes of the
// heap profile at path, and the profile's total, in MiB, read with go
// tool pprof (the bench builds the binaries with the same toolchain).
func heapTop(ctx context.Context, binary, path string, n int) ([]heapEntry, float64, error) {
	// pprof's MB are MiB (its memory units are powers of 1024).
	return pprofTop(ctx, binary, path, "", "inuse_space", "MB", n)
}

// pprofTop returns the n functions with the largest flat value of
// sampleIndex in the profile at path (less the profile at base, if not
// empty: what happened between the two), and the profile's total, in
// unit ("MB", pprof's MiB, or "s"), read with go tool pprof.
func pprofTop(ctx context.Context, binary, path, base, sampleIndex, unit string, n int) ([]heapEntry, float64, error) {
	args := []string{"tool", "pprof", "-unit=" + unit, "-top", fmt.Sprintf("-nodecount=%d", n)}
	if sampleIndex != "" {
		args = append(args, "-sample_index="+sampleIndex)
	}
	if base != "" {
		args = append(args, "-diff_base="+base)
	}
	out, err := exec.CommandContext(ctx, "go", append(args, binary, path)...).Output()
	if err != nil {
		return nil, 0, fmt.Errorf("go tool pprof %s, %w", path, err)
	}
	var (
		top   []heapEntry
		total float64
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		// "Showing nodes accounting for 93.02MB, 96.45% of 96.44MB total"
		if _, rest, ok := strings.Cut(line, "% of "); ok {
			if v, ok := strings.CutSuffix(rest, unit+" total"); ok {
				total, _ = strconv.ParseFloat(v, 64)
			}
			continue
		}
		// "   10.51MB 10.90% 36.85%    11.53MB 11.95%  github.com/..."
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[0], unit) {
			continue
		}
		flat, err := strconv.ParseFloat(strings.TrimSuffix(f[0], unit), 64)
		if err != nil {
			continue
		}
		top = append(top, heapEntry{Func: strings.Join(f[5:], " "), MiB: flat})
	}
	return top, total, nil
}

// addHeapTop adds the top entries of the heap profile at path to the
// report's figures, under label.
func (r *Report) addHeapTop(ctx context.Context, label, binary, path string) {
	top, total, err := heapTop(ctx, binary, path, 8)
	if err != nil {
		r.add(label+", heap profile unreadable", err.Error(), "")
		return
	}
	r.add(label+", heap profile in use (sampled)", total, "MiB")
	for _, e := range top {
		r.add(fmt.Sprintf("%s, heap: %s", label, e.Func), e.MiB, "MiB")
	}
}
