// Command enipam-demo shows enipam at work on one machine, with nothing
// installed but Go and the tools of `make tools`. `make demo` runs it.
//
// It builds enipam-operator and ec2sim (cached in _out/demo/bin), starts
// etcd and kube-apiserver on free ports with Cilium's CiliumNode CRD and
// enipam's CRDs, and ec2sim with its built-in demo VPC: 10.0.0.0/16 over two
// zones, node subnets, pod subnets and a pod security group tagged
// enipam.io/pods=true, and three instances of different types. It creates
// an ENIPolicy that puts pod IPs on secondary ENIs in the tagged subnets,
// joins the three instances as nodes (the Node the kubelet registers, the
// CiliumNode the cilium-agent creates), runs the real enipam-operator and a
// simulated cilium-agent per node (package agentsim) with a few pods each,
// waits until every pool is filled, and prints what a user would look at:
// `kubectl get ciliumnodes`, `kubectl get enipolicies`, a summary per node
// and the KUBECONFIG line to explore the cluster.
//
// It then keeps running until interrupted (Ctrl-C) and stops everything in
// order: the operator, ec2sim, the agents, kube-apiserver, then etcd. With
// DEMO_ONCE=1 (or --once) it stops as soon as it has printed, and exits 0.
//
// Its files live under --out (default _out/demo of the repository): the
// kubeconfig, logs/ with each process's log, and bin/ with the built
// binaries (or --bin-dir).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/enipam/enipam/test/cluster"
)

// options are the command's flags.
type options struct {
	// root is the repository the binaries are built from.
	root string
	// out holds the kubeconfig and the logs; binDir the built binaries.
	out, binDir string
	// once stops the demo as soon as it has printed.
	once bool
	// wait bounds the time from the first process started to filled pools.
	wait time.Duration
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.out, "out", o.out, "directory for the kubeconfig and logs")
	fs.StringVar(&o.binDir, "bin-dir", o.binDir, "directory for the built binaries (default <out>/bin)")
	fs.BoolVar(&o.once, "once", o.once, "stop once the filled pools are printed (env DEMO_ONCE=1)")
	fs.DurationVar(&o.wait, "wait", o.wait, "how long the pools may take to fill before the demo gives up")
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return fmt.Errorf("%w: run the demo from the enipam repository (make demo)", err)
	}
	o := options{root: root, out: filepath.Join(root, "_out", "demo"), wait: 3 * time.Minute}
	if v := os.Getenv("DEMO_ONCE"); v != "" {
		if o.once, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("DEMO_ONCE=%q: want 1 or 0", v)
		}
	}
	fs := flag.NewFlagSet("enipam-demo", flag.ExitOnError)
	o.addFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return err
	}
	if o.binDir == "" {
		o.binDir = filepath.Join(o.out, "bin")
	}
	if o.binDir, err = filepath.Abs(o.binDir); err != nil {
		return err
	}
	if o.wait <= 0 {
		return errors.New("--wait must be positive")
	}

	// The first signal stops the demo in order; the processes it started
	// sit in their own process groups, so a Ctrl-C reaches only the demo,
	// which stops them one by one. Later signals are ignored while it does.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return run(ctx, o, os.Stdout)
}
