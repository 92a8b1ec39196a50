// Command simtraces writes, for each seed of a range, the static-IP
// simulation's counts, its trace and its operator's debug log, to
// standard output. Two such outputs, from before and after a change,
// compared with the log's wall-clock times taken out
// (sed -E 's/^time=[^ ]+ //'), tell whether the change kept every seed's
// steps:
//
//	go run ./test/staticsim/cmd/simtraces -from 1 -seeds 150 > before.txt
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/enipam/enipam/test/staticsim"
)

func main() {
	from := flag.Uint64("from", 1, "the first seed")
	seeds := flag.Int("seeds", 150, "how many seeds")
	flag.Parse()
	out := bufio.NewWriter(os.Stdout)
	cfg := staticsim.DefaultConfig()
	cfg.Trace = true
	for seed := *from; seed < *from+uint64(*seeds); seed++ {
		var buf bytes.Buffer
		staticsim.Log = &buf
		r := staticsim.Run(seed, cfg)
		fmt.Fprintf(out, "seed %d steps %d hash %x kinds %s binds %d starts %d moves %d restarts %d kills %d landings %d failed %v %v %q %q\n",
			seed, r.Steps, r.Hash, r.Kinds, r.Binds, r.Starts, r.Moves, r.Restarts, r.Crashes, r.Landings, r.Failed(), r.Err, r.Violations, r.Unsettled)
		for _, l := range r.Trace {
			fmt.Fprintln(out, l)
		}
		out.Write(buf.Bytes())
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
