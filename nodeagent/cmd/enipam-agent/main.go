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
//
// Two one-shot modes remove enipam for good: --uninstall (the chart's
// pre-delete hook) asks every node's agent to remove its routing and waits
// for their reports; --cleanup removes everything enipam owns from the
// kernel of the node it runs on. A third, --resume (the chart's
// pre-install, pre-upgrade and pre-rollback hook), withdraws what
// --uninstall asked, so a release installed again routes every node.
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
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/internal/version"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/metadata"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/uninstall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("NODE_NAME"), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "enipam-agent:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program: flags, wiring, and running until ctx ends or a
// component fails. nodeName is the downward API's NODE_NAME; stdout
// gets only --version's line.
func run(ctx context.Context, args []string, nodeName string, stdout, stderr io.Writer) error {
	opts := agent.NewOptions(nodeName)
	fs := flag.NewFlagSet("enipam-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.AddFlags(fs)
	showVersion := version.AddFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if showVersion.Requested(stdout, "enipam-agent") {
		return nil
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

	if opts.Cleanup {
		return cleanup(ctx, opts, log)
	}
	kube, err := kubeConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	if opts.Uninstall {
		return uninstallAll(ctx, opts, kube, log)
	}
	if opts.Resume {
		return resumeAll(ctx, kube, log)
	}
	nl, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("opening netlink, %w", err)
	}
	defer nl.Close()

	// The instance's metadata service, where the SDK looks for it
	// (AWS_EC2_METADATA_SERVICE_ENDPOINT, else 169.254.169.254).
	opts.Metadata = metadata.New(os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := agent.New(opts.Config, kube, kernel.New(nl, netns.None(), kernel.WithProcSysNet(opts.ProcSysNet), kernel.WithStateDir(opts.StateDir)), reg, log)
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

// cleanup removes everything enipam owns from this node's kernel: the
// --cleanup run, by hand or from a Job on the node after the agents are
// gone.
func cleanup(ctx context.Context, opts *agent.Options, log *slog.Logger) error {
	nl, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("opening netlink, %w", err)
	}
	defer nl.Close()
	k := kernel.New(nl, netns.None(), kernel.WithProcSysNet(opts.ProcSysNet), kernel.WithStateDir(opts.StateDir))
	res, err := routing.NewConverger(k, opts.Routing).Cleanup(ctx)
	log.Info("removed enipam's routing from this node", "removed", res.String(), "rules", len(res.Plan.DelRules),
		"routes", len(res.Plan.DelRoutes), "connmarkTable", res.Plan.Connmark != nil, "rpFilter", res.RPFilter)
	return err
}

// uninstallAll asks every node's agent to remove its routing and waits
// for their reports: the chart's pre-delete hook.
func uninstallAll(ctx context.Context, opts *agent.Options, kube *rest.Config, log *slog.Logger) error {
	c, err := newClient(kube)
	if err != nil {
		return err
	}
	uo := uninstall.DefaultOptions()
	uo.Timeout = opts.UninstallTimeout
	out, err := uninstall.Run(ctx, c, uo, log)
	log.Info("uninstall: "+out.Summary(), "cleaned", out.Cleaned, "noAgent", out.NoAgent, "pending", out.Pending)
	if err != nil {
		return fmt.Errorf("%w; the nodes listed keep their routing: fix their agents and retry, or uninstall without hooks (helm uninstall --no-hooks) and run enipam-agent --cleanup on them; to keep enipam instead, helm rollback routes every node again", err)
	}
	return nil
}

// resumeAll withdraws the uninstall's request from every NodeRouting: the
// chart's pre-install, pre-upgrade and pre-rollback hook.
func resumeAll(ctx context.Context, kube *rest.Config, log *slog.Logger) error {
	c, err := newClient(kube)
	if err != nil {
		return err
	}
	out, err := uninstall.Resume(ctx, c, uninstall.Requester, log)
	log.Info("resume: "+out.Summary(), "resumed", out.Resumed, "kept", out.Kept)
	return err
}

// newClient is the one-shot modes' client for Nodes and NodeRoutings.
func newClient(kube *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(kube, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client, %w", err)
	}
	return c, nil
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
