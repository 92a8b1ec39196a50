package agent

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/routing"
)

// Options are enipam-agent's command-line settings.
type Options struct {
	Config
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
	// HealthAddress serves /healthz and /readyz; empty disables it.
	HealthAddress string
	// MetricsAddress serves /metrics; empty disables it.
	MetricsAddress string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// ProcSysNet is where the node's network sysctls are read and written:
	// /proc/sys/net, or a hostPath mount of it when the container's own
	// /proc/sys is read-only (kernel.WithProcSysNet).
	ProcSysNet string
	// StateDir is where the node keeps what the agent must remember to
	// undo its changes (the rp_filter values it loosened); empty: nothing
	// is recorded (kernel.WithStateDir).
	StateDir string
	// Cleanup runs once instead of the agent: remove everything enipam
	// owns from this node's kernel, then exit.
	Cleanup bool
	// Uninstall runs once instead of the agent: ask every node's agent to
	// remove its routing, wait for their reports, then exit (the chart's
	// pre-delete hook).
	Uninstall bool
	// UninstallTimeout bounds the wait of Uninstall.
	UninstallTimeout time.Duration
	// Resume runs once instead of the agent: withdraw the uninstall's
	// request from every NodeRouting so each node is routed again, then
	// exit (the chart's pre-install, pre-upgrade and pre-rollback hook).
	Resume bool
}

// Default listen addresses; chosen clear of Cilium's own ports on the
// host network.
const (
	DefaultHealthAddress  = ":9881"
	DefaultMetricsAddress = ":9882"
)

// NewOptions returns the defaults; nodeName is the default of --node-name
// (the composition root passes the downward API's NODE_NAME).
func NewOptions(nodeName string) *Options {
	return &Options{
		Config:         DefaultConfig(nodeName),
		HealthAddress:  DefaultHealthAddress,
		MetricsAddress: DefaultMetricsAddress,
		LogLevel:       "info",
		ProcSysNet:     kernel.DefaultProcSysNet,
		StateDir:       kernel.DefaultStateDir,

		UninstallTimeout: 2 * time.Minute,
	}
}

// AddFlags registers the options on fs, with the current values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "name of this node and of its CiliumNode (default: $NODE_NAME)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; empty for in-cluster configuration")
	fs.IntVar(&o.Routing.MTU, "mtu", o.Routing.MTU, "MTU set on every managed ENI link")
	fs.IntVar(&o.Routing.EgressPriority, "egress-rule-priority", o.Routing.EgressPriority, "priority of the 'from <pod IP> lookup <ENI table>' rules")
	fs.IntVar(&o.Routing.IngressPriority, "ingress-rule-priority", o.Routing.IngressPriority, "priority of the 'to <pod IP> lookup main' rules; 0 installs none")
	fs.Func("egress", `which traffic of pod addresses leaves by their ENI: "all" (everything; nothing on the node may masquerade it) or "vpc" (only traffic to the VPC's CIDRs; the rest leaves by the primary interface, where Cilium masquerades it) (default "`+string(o.Routing.Egress)+`")`, func(v string) error {
		o.Routing.Egress = routing.EgressMode(v)
		return nil
	})
	fs.BoolVar(&o.Routing.Connmark, "nodeport-connmark", o.Routing.Connmark, "send replies of connections that arrived on the primary interface (NodePort and hostPort through kube-proxy) back out of it: nf_tables table 'enipam' and a fwmark rule, as Cilium's ENI mode does")
	fs.StringVar(&o.StartupTaintKey, "startup-taint-key", o.StartupTaintKey, "taint removed from the Node once routing is ready (e.g. enipam.io/agent-not-ready); empty: none")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", o.ResyncInterval, "how often links, rules and routes are re-read and repaired")
	fs.DurationVar(&o.LinkWaitTimeout, "link-wait-timeout", o.LinkWaitTimeout, "how long an ENI's link may be missing before a LinkNotFound event")
	fs.DurationVar(&o.LinkWaitBackoff, "link-wait-backoff", o.LinkWaitBackoff, "first retry delay while a link is missing or a change failed (doubles up to --resync-interval)")
	fs.StringVar(&o.HealthAddress, "health-address", o.HealthAddress, "listen address of /healthz and /readyz; empty disables")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "listen address of /metrics; empty disables")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "directory on the node where the rp_filter values the agent loosens are recorded, so --cleanup and the uninstall can put them back (a tmpfs: cleared on reboot with the sysctls); empty records nothing")
	fs.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "instead of running: remove every rule, route and nf_tables table enipam owns from this node (and the rp_filter values recorded under --state-dir), then exit; needs no Kubernetes access. Stop the node's agent first, or it routes the node again")
	fs.BoolVar(&o.Uninstall, "uninstall", o.Uninstall, "instead of running: annotate every NodeRouting with "+enipamv1alpha1.AnnotationCleanup+" so each node's agent removes enipam's routing, wait for their reports up to --uninstall-timeout, then exit (the chart's pre-delete hook)")
	fs.DurationVar(&o.UninstallTimeout, "uninstall-timeout", o.UninstallTimeout, "how long --uninstall waits for the agents' reports")
	fs.BoolVar(&o.Resume, "resume", o.Resume, "instead of running: remove the "+enipamv1alpha1.AnnotationCleanup+" annotation --uninstall set from every NodeRouting, so each node's agent routes it again, then exit (the chart's pre-install, pre-upgrade and pre-rollback hook); annotations set by anyone else stay")
	fs.StringVar(&o.ProcSysNet, "proc-sys-net", o.ProcSysNet, "directory showing the node's /proc/sys/net (a hostPath mount of it in a container that is not privileged, whose own /proc/sys is read-only)")
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	var errs []error
	modes := 0
	for _, on := range []bool{o.Cleanup, o.Uninstall, o.Resume} {
		if on {
			modes++
		}
	}
	switch {
	case modes > 1:
		errs = append(errs, errors.New("--cleanup, --uninstall and --resume exclude each other"))
	case o.Resume: // no node, nothing to wait for
	case o.Cleanup:
		errs = append(errs, o.Routing.Validate()) // no node, no Kubernetes
	case o.Uninstall:
		if o.UninstallTimeout <= 0 {
			errs = append(errs, fmt.Errorf("--uninstall-timeout %v must be positive", o.UninstallTimeout))
		}
	default:
		errs = append(errs, o.Config.Validate())
	}
	if o.StateDir != "" && !filepath.IsAbs(o.StateDir) {
		errs = append(errs, fmt.Errorf("--state-dir must be an absolute path, got %q", o.StateDir))
	}
	if _, err := o.SlogLevel(); err != nil {
		errs = append(errs, err)
	}
	if !filepath.IsAbs(o.ProcSysNet) {
		errs = append(errs, fmt.Errorf("--proc-sys-net must be an absolute path, got %q", o.ProcSysNet))
	}
	if o.HealthAddress != "" && o.HealthAddress == o.MetricsAddress {
		errs = append(errs, fmt.Errorf("health and metrics cannot share the address %s", o.HealthAddress))
	}
	return errors.Join(errs...)
}

// SlogLevel parses LogLevel.
func (o *Options) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(o.LogLevel))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", o.LogLevel)
	}
	return l, nil
}
