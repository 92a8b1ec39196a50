package staticsim

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"
)

var tracesFlag = flag.String("traces", "", "TestTraces writes the traces and operator logs of -seeds seeds from -from to this file")

// TestTraces writes, for each seed of a range, its counts, its trace and
// its operator's debug log to the file -traces names (run alone: the
// operator log is global). Two such files, from before and after a
// change, compared with the log's wall-clock times taken out
// (sed -E 's/^time=[^ ]+ //'), tell whether the change kept every seed's
// steps.
func TestTraces(t *testing.T) {
	if *tracesFlag == "" {
		t.Skip("no -traces file")
	}
	f, err := os.Create(*tracesFlag)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := DefaultConfig()
	cfg.Trace = true
	defer func() { Log = nil }()
	for seed := *fromFlag; seed < *fromFlag+uint64(*seedsFlag); seed++ {
		var buf bytes.Buffer
		Log = &buf
		r := Run(seed, cfg)
		fmt.Fprintf(f, "seed %d steps %d hash %x kinds %s binds %d starts %d moves %d restarts %d kills %d landings %d failed %v %v %q %q\n",
			seed, r.Steps, r.Hash, r.Kinds, r.Binds, r.Starts, r.Moves, r.Restarts, r.Crashes, r.Landings, r.Failed(), r.Err, r.Violations, r.Unsettled)
		for _, l := range r.Trace {
			fmt.Fprintln(f, l)
		}
		if _, err := f.Write(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
}
