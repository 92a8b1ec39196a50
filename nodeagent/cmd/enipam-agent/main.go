// Command enipam-agent sets up, on one node, the ENI links and policy
// routing that make pod IPs on VPC ENIs work: for each ENI the node's
// NodeRouting spec selects among its CiliumNode's ENIs, route table
// 10+<device number> via the subnet gateway and the rules of its pod
// addresses (plus MTU, link up and loose rp_filter on secondary ENIs), and
// the NodePort return path; then it reports what is routed in the
// NodeRouting's status.
//
// It runs as a DaemonSet on the host network with NET_ADMIN, needs no
// cloud credentials, and reads only its own NodeRouting and CiliumNode
// (--node-name, by default the NODE_NAME of the downward API).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("NODE_NAME"), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "enipam-agent:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program: flags, wiring, and running until ctx ends or a
// component fails. nodeName is the downward API's NODE_NAME.
func run(ctx context.Context, args []string, nodeName string, stderr io.Writer) error {
	opts := agent.NewOptions(nodeName)
	fs := flag.NewFlagSet("enipam-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	level, _ := opts.SlogLevel()
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// client-go and controller-runtime log through their own package-level
	// loggers; route both into the same handler.
	klog.SetSlogLogger(log)
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))

	kube, err := kubeConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	nl, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("opening netlink, %w", err)
	}
	defer nl.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := agent.New(opts.Config, kube, kernel.New(nl, netns.None(), kernel.WithProcSysNet(opts.ProcSysNet)), reg, log)
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
	if opts.HealthAddress != "" {
		srv := &agent.Server{Addr: opts.HealthAddress, Handler: a.HealthHandler(), Log: log.With("server", "health")}
		runnable("health server", srv.Start)
	}
	if opts.MetricsAddress != "" {
		srv := &agent.Server{Addr: opts.MetricsAddress, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), Log: log.With("server", "metrics")}
		runnable("metrics server", srv.Start)
	}
	runnable("agent", a.Start)
	log.Info("enipam-agent started", "node", opts.NodeName, "mtu", opts.Routing.MTU,
		"egressPriority", opts.Routing.EgressPriority, "ingressPriority", opts.Routing.IngressPriority,
		"egress", opts.Routing.Egress, "nodePortConnmark", opts.Routing.Connmark, "startupTaintKey", opts.StartupTaintKey)
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
