// Command enipam-scheduler is a kube-scheduler extender: it keeps pods
// off nodes that have no VPC address for them and cannot get one, prefers
// nodes whose address is already there, and binds pods (a static-IP pod
// only once its address is stamped in its node's pool). kube-scheduler
// calls it over HTTP (filter, prioritize and bind verbs); it answers from
// informer caches of CiliumNodes, NodeRoutings, StaticIPClaims and pods
// not yet started, with no cloud credentials; its only writes are a
// static-IP pod's claim (created from the pod's annotation, or asked for
// the pod's node) and Bindings. See docs/static-ips.md, "Static IPs for
// StatefulSets".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/scheduler/extender"
	"github.com/enipam/enipam/scheduler/tracker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "enipam-scheduler:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program: flags, wiring, and serving until ctx ends or
// a component fails; stdout gets only --version's line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := extender.NewOptions()
	fs := flag.NewFlagSet("enipam-scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if showVersion.Requested(stdout, "enipam-scheduler") {
		return nil
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	level, _ := opts.SlogLevel()
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	klog.SetSlogLogger(log)
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))

	kube, err := kubeConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	kube.QPS, kube.Burst = opts.QPS, opts.Burst
	scheme, err := tracker.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(kube, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("kubernetes client, %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	track := tracker.New(c, opts.Tracker, log.With("component", "tracker"))
	ext, err := extender.New(track, c, opts.Config, reg, log.With("component", "extender"))
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	runnable := func(name string, start func(context.Context) error) {
		wg.Go(func() {
			if err := start(ctx); err != nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	serve := func(name, addr string, h http.Handler) {
		if addr != "" {
			runnable(name+" server", func(ctx context.Context) error {
				return extender.Serve(ctx, addr, h, log.With("server", name))
			})
		}
	}
	runnable("tracker", track.Start)
	serve("extender", opts.Address, ext.Handler())
	serve("health", opts.HealthAddress, ext.HealthHandler())
	serve("metrics", opts.MetricsAddress, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	log.Info("enipam-scheduler started", "address", opts.Address, "settleTimeout", opts.SettleTimeout,
		"holdTTL", opts.Tracker.HoldTTL, "startedPodGrace", opts.Tracker.StartedGrace)
	<-ctx.Done()
	cancel(nil)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// kubeConfig loads the kubeconfig file, or the in-cluster configuration
// when path is empty.
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes configuration (or pass --kubeconfig), %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s, %w", path, err)
	}
	return cfg, nil
}
