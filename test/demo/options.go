package demo

import (
	"errors"
	"flag"
	"path/filepath"
	"time"
)

// Options configure a demo run.
type Options struct {
	// Root is the repository the binaries are built from.
	Root string
	// Out holds the kubeconfig and the logs.
	Out string
	// BinDir receives the built binaries; <Out>/bin when empty.
	BinDir string
	// Once stops the demo as soon as it has printed the filled pools.
	Once bool
	// Wait bounds each wait for the operator: the agents' first IPs, the
	// pods' IPs, the filled pools.
	Wait time.Duration
}

// DefaultOptions returns the options of `make demo` for the repository at
// root.
func DefaultOptions(root string) Options {
	return Options{Root: root, Out: filepath.Join(root, "_out", "demo"), Wait: 2 * time.Minute}
}

// AddFlags registers the options on fs, with the current values as
// defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Out, "out", o.Out, "directory for the kubeconfig and logs")
	fs.StringVar(&o.BinDir, "bin-dir", o.BinDir, "directory for the built binaries (default <out>/bin)")
	fs.BoolVar(&o.Once, "once", o.Once, "stop once the filled pools are printed (env DEMO_ONCE=1)")
	fs.DurationVar(&o.Wait, "wait", o.Wait, "how long each wait for the operator may take before the demo gives up")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	var errs []error
	if !filepath.IsAbs(o.Root) || !filepath.IsAbs(o.Out) || (o.BinDir != "" && !filepath.IsAbs(o.BinDir)) {
		errs = append(errs, errors.New("the repository, output and binary directories must be absolute paths"))
	}
	if o.Wait <= 0 {
		errs = append(errs, errors.New("--wait must be positive"))
	}
	return errors.Join(errs...)
}

// binDir is where the binaries go.
func (o *Options) binDir() string {
	if o.BinDir != "" {
		return o.BinDir
	}
	return filepath.Join(o.Out, "bin")
}
