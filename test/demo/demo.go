package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/schedtest"
	"github.com/enipam/enipam/test/stack"
)

// errInterrupted ends a demo stopped before it was ready.
var errInterrupted = errors.New("interrupted")

// processGrace is how long a process may take to stop after SIGTERM.
const processGrace = 10 * time.Second

// world is one run of the demo: what it started, so that shutdown stops
// it in order.
type world struct {
	o   Options
	p   *progress
	out io.Writer
	// log gets everything that is not the demo's own output: the agents',
	// client-go's and envtest's logs.
	log     *slog.Logger
	logFile *os.File
	logDir  string
	// kubectl is the built kubectl of `make tools`.
	kubectl    string
	kubeconfig string

	bins     stack.Binaries
	cluster  *cluster.Cluster
	sim      *stack.EC2Sim
	vpc      vpcView
	operator *stack.Process
	metrics  string
	agents   *agentsim.Sim
	// agents6 runs the dual-stack node's agent (agentsim's families are
	// per Sim).
	agents6 *agentsim.Sim
	// stopAgents ends the agents' context; they are done when
	// agents.Done() and agents6.Done() are closed.
	stopAgents context.CancelFunc
	nodes      []node
	// sched is kube-scheduler with enipam's extender, kcm
	// kube-controller-manager: they run the StatefulSet of the static-IP
	// part; schedLog holds the extender's log.
	sched    *schedtest.Scheduler
	schedLog *os.File
	kcm      *stack.Process
	// stopKubelets ends the simulated kubelets' watch.
	stopKubelets context.CancelFunc
	// before and after are where the StatefulSet's pod ran.
	before, after placed
	// cancelProcs ends the context the processes were started with, the
	// backstop behind their ordered Stop.
	cancelProcs context.CancelFunc
	failed      bool
}

// Run runs the demo, printing to out, until it has printed the filled
// pools and, unless o.Once, until ctx ends; then it stops everything it
// started, in order, and returns. It fails if the pools are not filled
// within o.Wait, or if a process it started stops on its own.
//
// Run is meant to be the whole of a process (cmd/enipam-demo): it points
// klog and controller-runtime's logger, process-wide, at the demo's log
// file, so client-go never writes to the terminal.
func Run(ctx context.Context, o Options, out io.Writer) (err error) {
	if err := o.Validate(); err != nil {
		return err
	}
	start := time.Now()
	d := &world{o: o, p: &progress{w: out}, out: out}
	unlock, err := d.prepare()
	if err != nil {
		return err
	}
	defer unlock()
	var procCtx context.Context
	procCtx, d.cancelProcs = context.WithCancel(context.Background())
	defer func() {
		d.failed = err != nil
		if err != nil && !errors.Is(err, errInterrupted) {
			d.explainFailure()
		}
		if serr := d.shutdown(); serr != nil && err == nil {
			err = serr
		}
		d.logFile.Close()
	}()

	steps := []struct {
		name string
		f    func(context.Context) error
		// after prints what the step made, once its line is done.
		after func()
	}{
		{d.buildStepName(), d.build, nil},
		{"starting etcd and kube-apiserver " + cluster.KubernetesVersion + " with the CiliumNode and ENIPolicy CRDs", d.startCluster, nil},
		{"starting ec2sim with the demo VPC, IPv6 CIDRs added", func(context.Context) error { return d.startEC2(procCtx) }, d.describeVPC},
		{"creating ENIPolicy " + policyName + ": pod IPs on secondary ENIs in the subnets and security group tagged " + podsTag + "=true, " +
			"and ENIPolicy " + dualStackPolicyName + ": the same and IPv6 for the nodes labelled " + dualStackLabel + "=true (the " + dualStackType + ")", d.createPolicy, nil},
		{"starting enipam-operator", func(context.Context) error { return d.startOperator(procCtx) }, nil},
		{"joining the instances as nodes, each with a simulated cilium-agent, and waiting for their first IPs", d.joinNodes, nil},
		{"starting pods: a few per node, more on larger instances", d.startPods, d.describePods},
		{"waiting until every pool has " + strconv.Itoa(preAllocate) + " free IPs again", d.waitFilled, nil},
	}
	for _, s := range steps {
		if err := d.p.step(s.name, func() error { return s.f(ctx) }); err != nil {
			if ctx.Err() != nil {
				return errInterrupted
			}
			return err
		}
		if s.after != nil {
			s.after()
		}
	}
	d.p.printf("ready in %s\n", formatDuration(time.Since(start)))
	if err := d.report(ctx); err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	d.p.printf("\nA StatefulSet pod keeps its IP and its public IP wherever it is rescheduled:\n")
	for _, s := range []struct {
		name string
		f    func(context.Context) error
	}{
		{"starting kube-scheduler " + cluster.KubernetesVersion + " with enipam's extender, and kube-controller-manager", func(context.Context) error { return d.startScheduling(procCtx) }},
		{"running StatefulSet db (one pod, annotations " + enipamv1alpha1.StaticIPAnnotation + " and " + enipamv1alpha1.PublicIPAnnotation + "), then cordoning its node and deleting its pod", d.reschedule},
	} {
		if err := d.p.step(s.name, func() error { return s.f(ctx) }); err != nil {
			if ctx.Err() != nil {
				return errInterrupted
			}
			return err
		}
	}
	if err := d.describeReschedule(ctx); err != nil {
		return err
	}
	if err := d.invariants(ctx); err != nil {
		return err
	}
	if o.Once {
		d.p.printf("\nOnce mode (DEMO_ONCE=1): stopping now; `make demo` keeps it running.\n")
		return nil
	}
	d.p.printf("\nRunning; Ctrl-C stops everything.\n")
	return d.watch(ctx)
}

// prepare checks the tools, creates the output directories, takes the
// lock of o.out and opens the log file. The returned func drops the lock.
func (d *world) prepare() (func(), error) {
	binDir, err := cluster.BinaryDir()
	if err != nil {
		return nil, err
	}
	d.kubectl = filepath.Join(binDir, "kubectl")
	if _, err := os.Stat(d.kubectl); err != nil {
		return nil, fmt.Errorf("kubectl not found in %s: run `make tools` (builds the control plane from source once)", binDir)
	}
	d.logDir = filepath.Join(d.o.Out, "logs")
	if err := os.MkdirAll(d.logDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lock(filepath.Join(d.o.Out, "demo.lock"))
	if err != nil {
		return nil, err
	}
	if d.logFile, err = os.Create(filepath.Join(d.logDir, "demo.log")); err != nil {
		unlock()
		return nil, err
	}
	d.log = slog.New(slog.NewTextHandler(d.logFile, nil))
	// client-go and envtest log through klog and controller-runtime's
	// logger; both would otherwise write to the terminal.
	klog.SetSlogLogger(d.log)
	ctrllog.SetLogger(logr.FromSlogHandler(d.log.Handler()))
	d.kubeconfig = filepath.Join(d.o.Out, "kubeconfig")
	return unlock, nil
}

// lock takes an exclusive lock on path, so two demos never share one
// output directory (its kubeconfig and running binaries).
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(f)
		f.Close()
		return nil, fmt.Errorf("another demo (pid %s) is running in %s: stop it first, or give this one another --out",
			strings.TrimSpace(string(pid)), filepath.Dir(path))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

func (d *world) buildStepName() string {
	name := "building enipam-operator, enipam-agent and ec2sim into " + d.rel(d.o.binDir())
	if _, err := os.Stat(filepath.Join(d.o.binDir(), "enipam-operator")); err != nil {
		name += " (the first build takes a minute or two)"
	}
	return name
}

func (d *world) build(ctx context.Context) error {
	var err error
	d.bins, err = stack.Build(ctx, d.o.Root, d.o.binDir())
	return err
}

func (d *world) startCluster(context.Context) error {
	c, err := cluster.Start()
	if err != nil {
		return err
	}
	d.cluster = c
	kc, err := c.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing a kubeconfig, %w", err)
	}
	return os.WriteFile(d.kubeconfig, kc, 0o600)
}

func (d *world) startEC2(procCtx context.Context) error {
	scenario, err := d.writeScenario()
	if err != nil {
		return err
	}
	sim, err := stack.StartEC2Sim(procCtx, d.bins.EC2Sim, d.logDir, scenario)
	if err != nil {
		return err
	}
	d.sim = sim
	dump, err := sim.Admin.Dump(procCtx)
	if err != nil {
		return fmt.Errorf("reading ec2sim's state, %w", err)
	}
	d.vpc, err = newVPCView(dump)
	return err
}

// watch waits for ctx to end, failing early if a process dies.
func (d *world) watch(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.p.printf("\n")
			return nil
		case <-t.C:
			if err := d.checkProcesses(); err != nil {
				return err
			}
		}
	}
}

// checkProcesses reports a process that ended on its own.
func (d *world) checkProcesses() error {
	for _, p := range []*stack.Process{d.operator, d.simProcess(), d.kcm, d.schedProcess()} {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited; the last lines of %s:\n%s", p.Name, d.rel(p.LogPath), p.Tail(20))
		}
	}
	return nil
}

func (d *world) schedProcess() *stack.Process {
	if d.sched == nil {
		return nil
	}
	return d.sched.KubeScheduler
}

func (d *world) simProcess() *stack.Process {
	if d.sim == nil {
		return nil
	}
	return d.sim.Process
}

// shutdown stops what was started: the operator first (it calls ec2sim
// and the apiserver), ec2sim, the agents, then kube-apiserver before etcd.
func (d *world) shutdown() error {
	var names []string
	if d.sched != nil {
		names = append(names, "kube-scheduler")
	}
	if d.kcm != nil {
		names = append(names, "kube-controller-manager")
	}
	if d.operator != nil {
		names = append(names, "enipam-operator")
	}
	if d.sim != nil {
		names = append(names, "ec2sim")
	}
	if d.agents != nil {
		names = append(names, "the agents")
	}
	if d.cluster != nil {
		names = append(names, "kube-apiserver", "etcd")
	}
	if len(names) == 0 {
		d.cancelProcs()
		return nil
	}
	return d.p.step("stopping "+joinList(names), func() error {
		var errs []error
		if d.sched != nil {
			if err := d.sched.Stop(); err != nil && !d.failed {
				errs = append(errs, fmt.Errorf("kube-scheduler and its extender: %v", err))
			}
			d.schedLog.Close()
		}
		for _, p := range []*stack.Process{d.kcm, d.operator, d.simProcess()} {
			if p == nil {
				continue
			}
			if err := p.Stop(processGrace); err != nil && !d.failed {
				errs = append(errs, fmt.Errorf("%s exited with %v; see %s", p.Name, err, d.rel(p.LogPath)))
			}
		}
		if d.stopKubelets != nil {
			d.stopKubelets()
		}
		if d.stopAgents != nil {
			d.stopAgents()
			for _, s := range []*agentsim.Sim{d.agents, d.agents6} {
				if s != nil {
					<-s.Done()
				}
			}
		}
		if d.cluster != nil {
			if err := d.cluster.Stop(d.failed); err != nil {
				errs = append(errs, fmt.Errorf("stopping the control plane (logs in %s), %w", d.cluster.LogDir, err))
			}
		}
		d.cancelProcs()
		return errors.Join(errs...)
	})
}

// explainFailure points at the logs after a failed step.
func (d *world) explainFailure() {
	if d.operator != nil {
		d.p.printf("\nThe last lines of %s:\n%s\n", d.rel(d.operator.LogPath), d.operator.Tail(15))
	}
	d.p.printf("\nLogs: %s", d.rel(d.logDir))
	if d.cluster != nil {
		d.p.printf(", and the control plane's in %s (kept)", d.cluster.LogDir)
	}
	d.p.printf("\n\n")
}

// rel shortens path to be relative to the working directory when it is
// below it.
func (d *world) rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// joinList joins "a", "b" and "c" as "a, b and c".
func joinList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// vpcView is what the demo shows and checks of ec2sim's VPC.
type vpcView struct {
	dump ec2sim.Dump
	// subnetNames and groupNames map IDs to Name tags.
	subnetNames, groupNames map[string]string
	// podSubnets and podGroups are the IDs tagged podsTag=true.
	podSubnets, podGroups map[string]bool
}

func newVPCView(dump ec2sim.Dump) (vpcView, error) {
	v := vpcView{
		dump:        dump,
		subnetNames: map[string]string{}, groupNames: map[string]string{},
		podSubnets: map[string]bool{}, podGroups: map[string]bool{},
	}
	if len(dump.Vpcs) != 1 || len(dump.Instances) == 0 {
		return v, fmt.Errorf("ec2sim's demo scenario has %d VPCs and %d instances, want one VPC and some instances", len(dump.Vpcs), len(dump.Instances))
	}
	for _, s := range dump.Subnets {
		v.subnetNames[s.SubnetID] = tag(s.Tags, "Name")
		if tag(s.Tags, podsTag) == "true" {
			v.podSubnets[s.SubnetID] = true
		}
	}
	for _, g := range dump.SecurityGroups {
		v.groupNames[g.GroupID] = g.GroupName
		if tag(g.Tags, podsTag) == "true" {
			v.podGroups[g.GroupID] = true
		}
	}
	return v, nil
}

// vpcIPv6 names the VPC's IPv6 CIDR blocks, or says it has none.
func vpcIPv6(vpc ec2sim.Vpc) string {
	var out []string
	for _, c := range vpc.IPv6Cidrs {
		out = append(out, c.IPv6CidrBlock)
	}
	if len(out) == 0 {
		return "(no IPv6)"
	}
	return strings.Join(out, ", ")
}

func tag(tags []ec2sim.Tag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}
