package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/faultproxy"
	"github.com/enipam/enipam/test/stack"
)

// The VPC of every run: a node subnet and a pod subnet (tagged pods=true)
// per zone, each a /16.
const (
	vpcID       = "vpc-0c0000000000000c1"
	clusterName = "chaos"
	// secondaryLabel marks the nodes whose pod IPs live off the primary
	// ENI, in the pod subnets.
	secondaryLabel = "enipam.io/chaos-secondary"
)

// scenarioYAML is ec2sim's scenario: EC2's throttling and latencies, its
// attach and detach delays, an eventual-consistency window, a share of
// InternalError answers on every action, and room for the static pods'
// Elastic IPs beside EC2's default 5.
func scenarioYAML(o Options) string {
	return fmt.Sprintf(`account: "123456789012"
clusterName: chaos
region: us-east-1
seed: %d
zones: [us-east-1a, us-east-1b]
vpcs:
- id: %s
  cidrs: [10.0.0.0/16, 10.1.0.0/16, 10.2.0.0/16, 10.3.0.0/16]
  subnets:
  - {id: subnet-0c0000000000000a1, name: nodes-a, cidr: 10.0.0.0/16, zone: us-east-1a}
  - {id: subnet-0c0000000000000b1, name: nodes-b, cidr: 10.1.0.0/16, zone: us-east-1b}
  - {id: subnet-0c0000000000000a2, name: pods-a, cidr: 10.2.0.0/16, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0c0000000000000b2, name: pods-b, cidr: 10.3.0.0/16, zone: us-east-1b, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0c0000000000000c1, name: nodes}
profile: realistic
timing: {attachDelay: {min: 2s, max: 5s}, detachDelay: {min: 1s, max: 3s}, eventualConsistency: %s}
elasticIPLimit: %d
%s`, o.Seed, vpcID, o.EventualConsistency, 5+2*o.StaticReplicas, faultsYAML(o.EC2FaultRate))
}

func faultsYAML(rate float64) string {
	if rate == 0 {
		return ""
	}
	return fmt.Sprintf("faults: {rules: [{action: \"*\", code: InternalError, rate: %g}]}\n", rate)
}

// world is one run's stack: its own control plane, ec2sim, a fault proxy
// in front of the apiserver for the operator and one for the agents, the
// operator binary under a supervisor, and the simulated agents.
type world struct {
	opts    Options
	dir     string
	rng     *rand.Rand
	start   time.Time
	cluster *cluster.Cluster
	sim     *stack.EC2Sim
	// opProxy carries the operator's requests, agentProxy the agents'.
	opProxy, agentProxy *faultproxy.Proxy
	op                  *supervisor
	// leader is the last operator process seen taking the Lease.
	leader     *stack.Process
	agents     *agentsim.Sim
	stopAgents context.CancelFunc
	pods       *workload
	// static is the static-IP workload (nil without one).
	static *statics
}

func (w *world) say(format string, args ...any) {
	if w.opts.Progress != nil {
		fmt.Fprintf(w.opts.Progress, "[%6.1fs] %s: %s\n", time.Since(w.start).Seconds(), w.opts.Name, fmt.Sprintf(format, args...))
	}
}

// startWorld starts everything; the nodes join later.
func startWorld(ctx context.Context, o Options) (_ *world, err error) {
	dir := filepath.Join(o.Dir, o.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &world{opts: o, dir: dir, rng: rand.New(rand.NewPCG(o.Seed, 0x6368616f73)), start: time.Now()}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	w.say("starting etcd and kube-apiserver")
	if w.cluster, err = cluster.Start(); err != nil {
		return nil, err
	}
	scenario := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(scenario, []byte(scenarioYAML(o)), 0o600); err != nil {
		return nil, err
	}
	if w.sim, err = stack.StartEC2Sim(ctx, o.Bins.EC2Sim, dir, scenario); err != nil {
		return nil, err
	}
	if w.opProxy, err = faultproxy.New(w.cluster.Config, faultproxy.Options{Seed: o.Seed}); err != nil {
		return nil, err
	}
	if w.agentProxy, err = faultproxy.New(w.cluster.Config, faultproxy.Options{Seed: o.Seed + 1}); err != nil {
		return nil, err
	}
	if err := w.cluster.Client.Create(ctx, secondaryPolicy()); err != nil {
		return nil, fmt.Errorf("creating the ENIPolicy, %w", err)
	}
	kc, err := w.opProxy.KubeConfig()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	w.op = newSupervisor(o.Bins.Operator, dir, kubeconfig, w.sim.Endpoints.EC2, operatorArgs(o), w.say)
	w.say("starting enipam-operator %s", strings.Join(operatorArgs(o), " "))
	if err := w.op.start(ctx); err != nil {
		return nil, err
	}

	agentOpts := agentsim.Options{
		UpdateInterval: o.AgentUpdateInterval, QPS: 1000, Burst: 2000, Writers: 32,
		AllocateTimeout: 30 * time.Minute, SampleInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if w.agents, err = agentsim.New(w.agentProxy.Config(), agentOpts); err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	w.stopAgents = cancel
	if err := w.agents.Start(actx); err != nil {
		return nil, err
	}
	if err := startRouting(actx, w); err != nil {
		return nil, fmt.Errorf("starting the routing reports, %w", err)
	}
	if o.StaticReplicas > 0 {
		w.say("starting kube-controller-manager, kube-scheduler with enipam's extender, and the kubelets")
		if w.static, err = startStatics(ctx, actx, w); err != nil {
			return nil, err
		}
	}
	w.pods = newWorkload(w)
	return w, nil
}

// operatorArgs are the operator's flags in a run: short intervals so a
// run converges in minutes, excess released through the handshake,
// emptied ENIs consolidated after the same delay (so their detach and
// delete fall inside the run and the end's look at unattached ENIs sees
// them done, not a consolidation started after the quiet), and a Lease
// when the run takes the apiserver away.
func operatorArgs(o Options) []string {
	args := []string{
		"--vpc-id=" + vpcID,
		"--resync-interval=" + o.ResyncInterval.String(),
		"--gc-interval=" + o.GCInterval.String(),
		"--gc-min-age=" + gcMinAge(o).String(),
		fmt.Sprintf("--pre-allocate=%d", o.PreAllocate),
		"--release-excess-ips=true",
		"--excess-ip-release-delay=" + o.ReleaseDelay.String(),
		"--consolidation-delay=" + o.ReleaseDelay.String(),
	}
	if o.leaderElection() {
		args = append(args, "--leader-elect=true", "--leader-election-namespace=default", "--leader-election-id=enipam-operator")
	}
	return args
}

// gcMinAge is the collector's minimum age in a run: an ENI younger than
// that by its creation tag is never collected (a process killed between
// create and attach leaves one for its successor to adopt), so the end of
// a run waits for it; a few passes long, not the operator's default of a
// minute.
func gcMinAge(o Options) time.Duration { return 4 * o.GCInterval }

// secondaryPolicy keeps the pod IPs of the labelled nodes off the primary
// ENI, in the pod subnets: every one of those nodes needs new ENIs.
func secondaryPolicy() *enipamv1alpha1.ENIPolicy {
	one := int32(1)
	return &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secondary"},
		Spec: enipamv1alpha1.ENIPolicySpec{
			NodeSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{secondaryLabel: "true"}},
			FirstInterfaceIndex: &one,
			SubnetTags:          map[string]string{"pods": "true"},
		},
	}
}

// stop ends everything, the agents and the operator before the control
// plane, and keeps the logs.
func (w *world) stop() {
	w.static.stop()
	if w.stopAgents != nil {
		w.stopAgents()
		<-w.agents.Done()
	}
	if w.op != nil {
		w.op.stop()
	}
	for _, p := range []*faultproxy.Proxy{w.opProxy, w.agentProxy} {
		if p != nil {
			p.Close()
		}
	}
	if w.sim != nil {
		_ = w.sim.Stop(10 * time.Second)
	}
	if w.cluster != nil {
		_ = w.cluster.Stop(true)
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// between draws a duration uniformly in [lo, hi].
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}
