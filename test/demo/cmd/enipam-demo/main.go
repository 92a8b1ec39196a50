// Command enipam-demo runs enipam's demo (package demo): `make demo`.
//
//	enipam-demo [--once] [--out _out/demo] [--bin-dir DIR] [--wait 2m]
//
// DEMO_ONCE=1 is --once: print the filled pools, stop everything, exit 0.
// Otherwise it runs until Ctrl-C. It must run inside the repository, whose
// binaries it builds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/demo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return fmt.Errorf("%w: run the demo from the enipam repository (make demo)", err)
	}
	o := demo.DefaultOptions(root)
	if v := os.Getenv("DEMO_ONCE"); v != "" {
		if o.Once, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("DEMO_ONCE=%q: want 1 or 0", v)
		}
	}
	fs := flag.NewFlagSet("enipam-demo", flag.ExitOnError)
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, p := range []*string{&o.Out, &o.BinDir} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	if err := o.Validate(); err != nil {
		return err
	}

	// The first signal stops the demo in order; the processes it started
	// sit in process groups of their own, so a Ctrl-C reaches only the
	// demo, which stops them one by one. Later signals are ignored while
	// it does.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return demo.Run(ctx, o, os.Stdout)
}
