// Package e2e runs enipam end to end: the real enipam-operator and ec2sim
// binaries built from this repository, a real kube-apiserver + etcd,
// simulated cilium-agents, and the node agent on real interfaces in a
// network namespace.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/stack"
)

var (
	env  *cluster.Cluster
	bins stack.Binaries
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := cluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "enipam-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if bins, err = stack.Build(ctx, root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return cluster.Main(m, func(c *cluster.Cluster) { env = c })
}

// world is one test's stack: ec2sim and the operator as processes, their
// logs printed when the test fails.
type world struct {
	t          *testing.T
	ctx        context.Context
	dir        string
	kubeconfig string
	sim        *stack.EC2Sim
	procs      []*stack.Process
}

// newWorld starts ec2sim from a scenario in YAML, under ec2sim's realistic
// profile (throttling, latencies, delays, asynchronous moves, lags: see
// test/ec2sim/README.md) unless the scenario names a profile or
// ENIPAM_E2E_PROFILE=default asks for ec2sim's kind defaults.
func newWorld(t *testing.T, scenarioYAML string) *world {
	t.Helper()
	if !strings.Contains("\n"+scenarioYAML, "\nprofile:") && os.Getenv("ENIPAM_E2E_PROFILE") != "default" {
		scenarioYAML = strings.TrimRight(scenarioYAML, "\n") + "\nprofile: realistic\n"
	}
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	kc, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := os.WriteFile(w.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(scenario, []byte(scenarioYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	w.sim, err = stack.StartEC2Sim(ctx, bins.EC2Sim, dir, scenario)
	if err != nil {
		t.Fatal(err)
	}
	w.procs = append(w.procs, w.sim.Process)
	t.Cleanup(func() {
		for _, p := range w.procs {
			if err := p.Stop(10 * time.Second); err != nil {
				t.Errorf("%s exited with %v", p.Name, err)
			}
			if t.Failed() {
				t.Logf("---- last lines of %s ----\n%s", p.Name, p.Tail(40))
			}
		}
		cancel()
		cleanupAPI(t)
	})
	return w
}

// startOperator runs the enipam-operator binary against the world.
func (w *world) startOperator(args ...string) *stack.Process {
	w.t.Helper()
	p, err := stack.StartOperator(w.ctx, bins.Operator, w.dir, fmt.Sprintf("enipam-operator-%d", len(w.procs)),
		w.kubeconfig, w.sim.Endpoints.EC2, "e2e", append([]string{"--resync-interval=10s", "--log-level=debug"}, args...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.procs = append(w.procs, p)
	return p
}
