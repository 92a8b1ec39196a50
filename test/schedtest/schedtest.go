// Package schedtest runs enipam-scheduler the way the chart deploys it,
// against a real control plane, for tests: the real kube-scheduler (built
// by `make tools` into bin/k8s/<version>/) with the
// KubeSchedulerConfiguration the chart renders, and the extender
// in-process with the arguments the chart renders, both optionally under
// the chart's ServiceAccount (impersonated).
//
// The chart's ports are fixed numbers; Render asks for free ones, so
// tests on a shared machine never collide.
package schedtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/enipam/enipam/scheduler/extender"
	"github.com/enipam/enipam/scheduler/tracker"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/stack"
)

// Parts are what the chart renders for the scheduler: kube-scheduler's
// configuration and the arguments of both containers.
type Parts struct {
	// Config is the ConfigMap's config.yaml.
	Config string
	// KubeSchedulerArgs and ExtenderArgs are the containers' args.
	KubeSchedulerArgs, ExtenderArgs []string
}

// PartsOf extracts the Parts from the chart's scheduler ConfigMap and
// Deployment.
func PartsOf(cm *corev1.ConfigMap, d *appsv1.Deployment) (Parts, error) {
	p := Parts{Config: cm.Data["config.yaml"]}
	for _, c := range d.Spec.Template.Spec.Containers {
		switch c.Name {
		case "kube-scheduler":
			p.KubeSchedulerArgs = c.Args
		case "extender":
			p.ExtenderArgs = c.Args
		}
	}
	if p.Config == "" || p.KubeSchedulerArgs == nil || p.ExtenderArgs == nil {
		return p, fmt.Errorf("the chart rendered no scheduler configuration or containers (config %d bytes, args %v / %v)", len(p.Config), p.KubeSchedulerArgs, p.ExtenderArgs)
	}
	return p, nil
}

// FreePorts returns --set arguments giving the chart's scheduler ports
// free local ones.
func FreePorts() ([]string, error) {
	keys := []string{"kubeScheduler.port", "extender.port", "extender.healthPort", "extender.metricsPort"}
	addrs, err := cluster.FreeAddrs(len(keys))
	if err != nil {
		return nil, err
	}
	var out []string
	for i, key := range keys {
		out = append(out, "--set", "scheduler."+key+"="+addrs[i][strings.LastIndex(addrs[i], ":")+1:])
	}
	return out, nil
}

// Render runs the repository's helm on the chart for a release in
// namespace, with free ports and the given extra arguments, and returns
// the scheduler's Parts.
func Render(ctx context.Context, namespace string, args ...string) (Parts, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return Parts{}, err
	}
	ports, err := FreePorts()
	if err != nil {
		return Parts{}, err
	}
	home, err := os.MkdirTemp("", "enipam-helm-")
	if err != nil {
		return Parts{}, err
	}
	defer os.RemoveAll(home)
	full := append([]string{"template", "enipam", filepath.Join(root, "charts", "enipam"), "--namespace", namespace,
		"--kube-version", cluster.KubernetesVersion, "--set", "clusterName=schedtest", "--show-only", "templates/scheduler-config.yaml", "--show-only", "templates/scheduler-deployment.yaml"},
		append(ports, args...)...)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "helm"), full...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return Parts{}, fmt.Errorf("helm template: %w\n%s", err, ee.Stderr)
		}
		return Parts{}, fmt.Errorf("helm template (bin/helm is built by `make tools`): %w", err)
	}
	var cm corev1.ConfigMap
	var d appsv1.Deployment
	for _, doc := range strings.Split(string(out), "\n---\n") {
		switch {
		case strings.Contains(doc, "\nkind: ConfigMap\n"):
			err = yaml.UnmarshalStrict([]byte(doc), &cm)
		case strings.Contains(doc, "\nkind: Deployment\n"):
			err = yaml.UnmarshalStrict([]byte(doc), &d)
		}
		if err != nil {
			return Parts{}, fmt.Errorf("decoding the rendered chart, %w", err)
		}
	}
	return PartsOf(&cm, &d)
}

// Options say how to run the Parts.
type Options struct {
	// Kubeconfig reaches the apiserver as a cluster admin.
	Kubeconfig []byte
	// As, when set, is the user both components act as
	// (system:serviceaccount:<namespace>:<name> for the chart's
	// ServiceAccount); the admin only vouches for the impersonation.
	As string
	// BinDir holds kube-scheduler; Dir receives its configuration and logs.
	BinDir, Dir string
	// Log receives the extender's logs.
	Log io.Writer
}

// Scheduler is kube-scheduler and its extender, running.
type Scheduler struct {
	// KubeScheduler is the process; its logs are in Options.Dir.
	KubeScheduler *stack.Process
	// URL is the extender's urlPrefix; HealthURL and MetricsURL serve its
	// probes and metrics.
	URL, HealthURL, MetricsURL string

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// Start starts the extender with the chart's arguments, waits until it is
// ready (its caches synced), then starts kube-scheduler with the chart's
// configuration (its kubeconfig pointing at the test's apiserver) and
// arguments. Stop it with Stop.
func Start(ctx context.Context, parts Parts, o Options) (*Scheduler, error) {
	kubeconfig, err := writeKubeconfig(o)
	if err != nil {
		return nil, err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	opts := extender.NewOptions()
	fs := newFlagSet()
	opts.AddFlags(fs)
	if err := fs.Parse(parts.ExtenderArgs); err != nil {
		return nil, fmt.Errorf("the extender refuses the chart's arguments %v, %w", parts.ExtenderArgs, err)
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("the extender refuses the chart's settings, %w", err)
	}
	restCfg.QPS, restCfg.Burst = opts.QPS, opts.Burst
	s := &Scheduler{URL: "http://" + local(opts.Address), HealthURL: "http://" + local(opts.HealthAddress), MetricsURL: "http://" + local(opts.MetricsAddress)}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := s.startExtender(runCtx, opts, restCfg, o.Log); err != nil {
		s.Stop()
		return nil, err
	}
	if err := waitHTTP(ctx, s.HealthURL+"/readyz", time.Minute); err != nil {
		s.Stop()
		return nil, fmt.Errorf("extender never ready: %w", err)
	}

	cfg, err := schedulerConfig(parts.Config, kubeconfig)
	if err != nil {
		s.Stop()
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		s.Stop()
		return nil, err
	}
	args := []string{"--bind-address=127.0.0.1"}
	for _, a := range parts.KubeSchedulerArgs {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + cfgPath
		}
		args = append(args, a)
	}
	s.KubeScheduler, err = stack.Start(runCtx, "kube-scheduler", o.Dir, filepath.Join(o.BinDir, "kube-scheduler"), nil, args...)
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// startExtender wires the extender as its command does, on restCfg.
func (s *Scheduler) startExtender(ctx context.Context, opts *extender.Options, restCfg *rest.Config, logs io.Writer) error {
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	scheme, err := tracker.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	track := tracker.New(c, opts.Tracker, log.With("component", "tracker"))
	ext, err := extender.New(track, c, opts.Config, reg, log.With("component", "extender"))
	if err != nil {
		return err
	}
	run := func(name string, f func(context.Context) error) {
		s.wg.Go(func() {
			if err := f(ctx); err != nil {
				s.mu.Lock()
				s.errs = append(s.errs, fmt.Errorf("%s: %w", name, err))
				s.mu.Unlock()
			}
		})
	}
	run("tracker", track.Start)
	run("extender server", func(ctx context.Context) error { return extender.Serve(ctx, opts.Address, ext.Handler(), log) })
	run("health server", func(ctx context.Context) error {
		return extender.Serve(ctx, opts.HealthAddress, ext.HealthHandler(), log)
	})
	run("metrics server", func(ctx context.Context) error {
		return extender.Serve(ctx, opts.MetricsAddress, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), log)
	})
	return nil
}

// Stop stops kube-scheduler (it releases its Lease), then the extender,
// and returns what failed on the way.
func (s *Scheduler) Stop() error {
	var errs []error
	if s.KubeScheduler != nil {
		if err := s.KubeScheduler.Stop(10 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("kube-scheduler: %w", err))
		}
	}
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(append(errs, s.errs...)...)
}

// writeKubeconfig writes the admin kubeconfig, impersonating o.As if set.
func writeKubeconfig(o Options) (string, error) {
	cfg, err := clientcmd.Load(o.Kubeconfig)
	if err != nil {
		return "", err
	}
	if o.As != "" {
		for _, auth := range cfg.AuthInfos {
			auth.Impersonate = o.As
		}
	}
	path := filepath.Join(o.Dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// schedulerConfig is the chart's configuration with its client pointed at
// kubeconfig instead of the in-cluster service account.
func schedulerConfig(chart, kubeconfig string) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(chart), &cfg); err != nil {
		return nil, fmt.Errorf("decoding the chart's KubeSchedulerConfiguration, %w", err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	return yaml.Marshal(cfg)
}

// local turns ":port" into "127.0.0.1:port".
func local(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("enipam-scheduler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// WithoutExtender returns the Parts with kube-scheduler's configuration
// stripped of its extenders: the same profile placing pods on its own
// plugins alone, for comparisons.
func WithoutExtender(p Parts) (Parts, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(p.Config), &cfg); err != nil {
		return p, fmt.Errorf("decoding the chart's KubeSchedulerConfiguration, %w", err)
	}
	delete(cfg, "extenders")
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return p, err
	}
	p.Config = string(out)
	return p, nil
}
