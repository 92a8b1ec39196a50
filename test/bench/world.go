package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/stack"
)

// Env is what every scenario needs: the binaries, where logs go, and
// where progress is told.
type Env struct {
	Bins     stack.Binaries
	LogDir   string
	Progress io.Writer
	// OperatorArgs are added to every operator's arguments (last, so they
	// win), e.g. --log-level=debug.
	OperatorArgs []string
	start        time.Time
}

// NewEnv builds the binaries of the repository at root into dir/bin and
// keeps logs under dir/logs.
func NewEnv(ctx context.Context, root, dir string, progress io.Writer) (*Env, error) {
	e := &Env{LogDir: filepath.Join(dir, "logs"), Progress: progress, start: time.Now()}
	e.say("building enipam-operator, enipam-agent and ec2sim")
	bins, err := stack.Build(ctx, root, filepath.Join(dir, "bin"))
	if err != nil {
		return nil, err
	}
	e.Bins = bins
	return e, os.MkdirAll(e.LogDir, 0o755)
}

func (e *Env) say(format string, args ...any) {
	fmt.Fprintf(e.Progress, "[%6.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// world is one scenario's stack: its own control plane, ec2sim, the
// operator binary, and the simulated agents.
type world struct {
	env        *Env
	dir        string
	cluster    *cluster.Cluster
	sim        *stack.EC2Sim
	op         *stack.Process
	metricsURL string
	agents     *agentsim.Sim
	stopAgents context.CancelFunc
	// agentsCtx ends with the agents; what plays the nodes beside them
	// (kubelets) runs under it.
	agentsCtx context.Context
	// sched is the real kube-scheduler, when the scenario binds pods.
	sched *stack.Process
	// opArgs are the operator's arguments, for restarts.
	opArgs []string
	ops    int
}

// startWorld starts everything but the agents' nodes.
func (e *Env) startWorld(ctx context.Context, name, scenarioYAML string, opArgs []string, simOpts agentsim.Options) (*world, error) {
	dir := filepath.Join(e.LogDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &world{env: e, dir: dir}
	e.say("%s: starting etcd and kube-apiserver", name)
	c, err := cluster.Start()
	if err != nil {
		return nil, err
	}
	w.cluster = c
	kc, err := c.KubeConfig()
	if err != nil {
		w.stop()
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	scenario := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		w.stop()
		return nil, err
	}
	if err := os.WriteFile(scenario, []byte(scenarioYAML), 0o600); err != nil {
		w.stop()
		return nil, err
	}
	e.say("%s: starting ec2sim", name)
	if w.sim, err = stack.StartEC2Sim(ctx, e.Bins.EC2Sim, dir, scenario); err != nil {
		w.stop()
		return nil, err
	}
	metricsAddr, err := cluster.FreeAddr()
	if err != nil {
		w.stop()
		return nil, err
	}
	w.metricsURL = "http://" + metricsAddr + "/metrics"
	e.say("%s: starting enipam-operator %v", name, opArgs)
	args := append(append([]string{"--metrics-bind-address=" + metricsAddr}, opArgs...), e.OperatorArgs...)
	w.opArgs, w.ops = args, 1
	if w.op, err = stack.StartOperator(ctx, e.Bins.Operator, dir, "enipam-operator", kubeconfig, w.sim.Endpoints.EC2, "bench", args...); err != nil {
		w.stop()
		return nil, err
	}
	if simOpts.Logger == nil {
		simOpts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if simOpts.Routing.Metadata == nil {
		simOpts.Routing.Metadata = w.sim.LocalIPv4s
	}
	if w.agents, err = agentsim.New(c.Config, simOpts); err != nil {
		w.stop()
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	w.stopAgents, w.agentsCtx = cancel, actx
	if err := w.agents.Start(actx); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

// waitSynced waits until the operator has described the VPC once, then
// resets ec2sim's counters so the figures count the scenario only.
func (w *world) waitSynced(ctx context.Context) error {
	for {
		c, err := w.sim.Admin.Counters(ctx)
		if err == nil && c.Succeeded("DescribeNetworkInterfaces") > 0 {
			return w.sim.Admin.ResetCounters(ctx)
		}
		if w.op.Exited() {
			return fmt.Errorf("operator exited:\n%s", w.op.Tail(20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restartOperator stops the operator and starts a new one with its
// arguments and extra (later flags win), logging to enipam-operator-<n>.
func (w *world) restartOperator(ctx context.Context, extra ...string) error {
	if err := w.op.Stop(10 * time.Second); err != nil {
		return err
	}
	w.ops++
	name := fmt.Sprintf("enipam-operator-%d", w.ops)
	w.env.say("%s: restarting enipam-operator %v", filepath.Base(w.dir), extra)
	op, err := stack.StartOperator(ctx, w.env.Bins.Operator, w.dir, name, filepath.Join(w.dir, "kubeconfig"), w.sim.Endpoints.EC2, "bench",
		append(slices.Clone(w.opArgs), extra...)...)
	if err != nil {
		return err
	}
	w.op = op
	return nil
}

// stop ends everything, the agents and the operator before the control
// plane.
func (w *world) stop() {
	if w.stopAgents != nil {
		w.stopAgents()
		<-w.agents.Done()
	}
	for _, p := range []*stack.Process{w.sched, w.op, processOf(w.sim)} {
		if p != nil {
			_ = p.Stop(10 * time.Second)
		}
	}
	if w.cluster != nil {
		_ = w.cluster.Stop(false)
	}
}

func processOf(s *stack.EC2Sim) *stack.Process {
	if s == nil {
		return nil
	}
	return s.Process
}

// metrics scrapes the operator's metrics.
func (w *world) metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// sum adds the values of a counter or gauge family whose labels include
// match.
func sum(families map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range f.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			total += float64(m.Summary.GetSampleCount())
		}
	}
	return total
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// statusErrors counts CiliumNodes whose operator-status holds an error.
func (w *world) statusErrors(ctx context.Context) (int, error) {
	errs, err := w.statusErrorMessages(ctx)
	return len(errs), err
}

// statusErrorMessages returns the operator-status error of every
// CiliumNode that holds one, by node name.
func (w *world) statusErrorMessages(ctx context.Context) (map[string]string, error) {
	var list ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	errs := map[string]string{}
	for _, cn := range list.Items {
		if msg := cn.Status.IPAM.OperatorStatus.Error; msg != "" {
			errs[cn.Name] = msg
		}
	}
	return errs, nil
}

// fetch saves the body of a GET to path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// poolFindings holds the pools to EC2's state (agentsim.PoolChecker) with
// two looks a grace apart, the way every scenario ends.
func (w *world) poolFindings(ctx context.Context) (agentsim.PoolFindings, error) {
	const grace = 3 * time.Second
	checker := agentsim.NewPoolChecker(grace)
	var f agentsim.PoolFindings
	for look := range 2 {
		if look > 0 {
			select {
			case <-ctx.Done():
				return f, ctx.Err()
			case <-time.After(grace + 500*time.Millisecond):
			}
		}
		var list ciliumv2.CiliumNodeList
		if err := w.cluster.Client.List(ctx, &list); err != nil {
			return f, err
		}
		dump, err := w.sim.Admin.Dump(ctx)
		if err != nil {
			return f, err
		}
		f = checker.Check(list.Items, dump, time.Now())
	}
	return f, nil
}

// addPoolFindings reports the pool/EC2 invariant and makes it a target.
func (r *Report) addPoolFindings(f agentsim.PoolFindings) {
	r.add("IPs in two pools", f.InTwoPools, "")
	r.add("free pool IPs off their ENI in EC2", f.FreeOffENI, "")
	r.add("released IPs still in a pool", f.ReleasedInPool, "")
	r.add("stamped pool IPs off their ENI in EC2", f.StampedOffENI, "")
	r.target("pools follow EC2", "0", fmt.Sprint(f.Total()), f.Total() == 0)
}

// kubeconfigPath is the admin kubeconfig startWorld wrote for the
// world's processes.
func (w *world) kubeconfigPath() string { return filepath.Join(w.dir, "kubeconfig") }

// histogram is a Prometheus histogram read from a scrape: its count,
// sum and cumulative buckets.
type histogram struct {
	count, sum float64
	le, cum    []float64
}

// readHistogram adds up the histograms of a family.
func readHistogram(families map[string]*dto.MetricFamily, name string) histogram {
	var h histogram
	f, ok := families[name]
	if !ok {
		return h
	}
	for _, m := range f.Metric {
		mh := m.Histogram
		if mh == nil {
			continue
		}
		h.count += float64(mh.GetSampleCount())
		h.sum += mh.GetSampleSum()
		for i, b := range mh.Bucket {
			if i >= len(h.le) {
				h.le, h.cum = append(h.le, b.GetUpperBound()), append(h.cum, 0)
			}
			h.cum[i] += float64(b.GetCumulativeCount())
		}
	}
	return h
}

// since is what h gained after earlier, a scrape of the same histogram.
func (h histogram) since(earlier histogram) histogram {
	d := histogram{count: h.count - earlier.count, sum: h.sum - earlier.sum, le: h.le, cum: make([]float64, len(h.cum))}
	for i := range h.cum {
		d.cum[i] = h.cum[i]
		if i < len(earlier.cum) {
			d.cum[i] -= earlier.cum[i]
		}
	}
	return d
}

// mean is the mean sample, 0 without samples.
func (h histogram) mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / h.count
}

// bound is the upper bound of the first bucket holding at least the q-th
// share of the samples (0 when none, or beyond the last bucket).
func (h histogram) bound(q float64) float64 {
	for i, c := range h.cum {
		if h.count > 0 && c >= q*h.count {
			return h.le[i]
		}
	}
	return 0
}
