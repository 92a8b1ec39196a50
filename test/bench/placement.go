package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/schedtest"
)

// Placement is the placement scenario: the same trace of pod bursts onto
// the same cluster, once with enipam-scheduler's extender and once with
// the same kube-scheduler profile without it. Some nodes are at capacity
// (3 ENIs × 9 addresses, all but 2 held by running pods), some sit in a
// subnet with one free address left, the rest can grow. It reports, for
// each run, the pods that waited for an address in Cilium's agent, how
// long, and those still waiting at the end: pods bound where no address
// is or can come.
type Placement struct {
	Roomy, Full, Cramped int
	Bursts, PerBurst     int
	Gap, Settle          time.Duration
}

// DefaultPlacement is 4 roomy, 4 full and 2 cramped nodes and 3 bursts of
// 25 pods 5 s apart (the same quick).
func DefaultPlacement(bool) Placement {
	return Placement{Roomy: 4, Full: 4, Cramped: 2, Bursts: 3, PerBurst: 25, Gap: 5 * time.Second, Settle: 45 * time.Second}
}

// Name is the scenario's report name.
func (Placement) Name() string { return "placement" }

// placementScenario: one zone, roomy and full nodes in a /20, cramped
// ones in a /28 that seeding leaves one address short of full.
func (p Placement) scenario() string {
	return fmt.Sprintf(`account: "123456789012"
clusterName: bench
region: us-east-1
seed: 7
zones: [us-east-1a]
vpcs:
- id: vpc-0c0000000000000c1
  cidrs: [10.4.0.0/16]
  subnets:
  - {id: subnet-0c0000000000000a1, name: nodes, cidr: 10.4.0.0/20, zone: us-east-1a}
  - {id: subnet-0c0000000000000a2, name: cramped, cidr: 10.4.16.0/28, zone: us-east-1a}
  securityGroups:
  - {id: sg-0c0000000000000c1, name: nodes}
instances:
- {name: roomy, count: %d, type: m5.large, subnet: nodes, securityGroups: [nodes]}
- {name: full, count: %d, type: m5.large, subnet: nodes, securityGroups: [nodes], secondaryIPs: 9, enis: [{deviceIndex: 1, secondaryIPs: 9, deleteOnTermination: true}, {deviceIndex: 2, secondaryIPs: 9, deleteOnTermination: true}]}
- {name: cramped, count: %d, type: m5.large, subnet: cramped, securityGroups: [nodes], secondaryIPs: 4}
profile: realistic
`, p.Roomy, p.Full, p.Cramped)
}

// placementRun is what one run measured.
type placementRun struct {
	bound, pending, withIP int
	waits                  agentsim.WaitFigures
	bindToIP               []time.Duration
	violations             int
}

// Run runs the trace twice and reports both.
func (p Placement) Run(ctx context.Context, e *Env) (*Report, error) {
	rep := &Report{Scenario: p.Name(), Started: time.Now(), Params: map[string]any{
		"roomyNodes": p.Roomy, "fullNodes": p.Full, "crampedNodes": p.Cramped, "bursts": p.Bursts, "podsPerBurst": p.PerBurst,
		"gap": p.Gap.String(), "settle": p.Settle.String(), "instanceType": "m5.large", "preAllocate": 8, "ec2": "ec2sim realistic",
		"agentUpdateInterval": "1s",
	}}
	runs := map[bool]placementRun{}
	for _, withExtender := range []bool{true, false} {
		r, err := p.run(ctx, e, withExtender)
		if err != nil {
			return nil, err
		}
		runs[withExtender] = r
	}
	for _, withExtender := range []bool{true, false} {
		r := runs[withExtender]
		label := "with extender"
		if !withExtender {
			label = "without extender"
		}
		rep.add(label+": pods bound", r.bound, "")
		rep.add(label+": pods left Pending by the scheduler", r.pending, "")
		rep.add(label+": pods with an address", r.withIP, "")
		rep.add(label+": pods that waited for an address (waits ended)", r.waits.Count, "")
		rep.add(label+": pods still waiting for an address at the end", r.waits.Pending, "")
		rep.add(label+": wait p50", r.waits.P50, "")
		rep.add(label+": wait p99", r.waits.P99, "")
		rep.add(label+": wait max", r.waits.Max, "")
		rep.add(label+": bound to address p50", agentsim.Percentile(r.bindToIP, 50), "")
		rep.add(label+": bound to address p99", agentsim.Percentile(r.bindToIP, 99), "")
		rep.add(label+": ledger violations", r.violations, "")
	}
	with := runs[true]
	rep.target("with the extender, no pod bound where no address is or can come", "0 still waiting",
		fmt.Sprintf("%d still waiting", with.waits.Pending), with.waits.Pending == 0)
	rep.target("ledger violations (both runs)", "0", fmt.Sprint(with.violations+runs[false].violations), with.violations+runs[false].violations == 0)
	rep.Ran = Seconds(time.Since(rep.Started))
	return rep, nil
}

// run plays the trace once.
func (p Placement) run(ctx context.Context, e *Env, withExtender bool) (placementRun, error) {
	name := "placement-with-extender"
	if !withExtender {
		name = "placement-without-extender"
	}
	var out placementRun
	w, err := e.startWorld(ctx, name, p.scenario(), []string{"--vpc-id=vpc-0c0000000000000c1", "--release-excess-ips=false"},
		agentsim.Options{UpdateInterval: time.Second, SampleInterval: -1})
	if err != nil {
		return out, err
	}
	defer w.stop()
	if err := w.waitSynced(ctx); err != nil {
		return out, err
	}
	specs, err := w.existing(ctx)
	if err != nil {
		return out, err
	}
	full := map[string]bool{} // seeded with 3 ENIs, before the operator adds any
	for _, sp := range specs {
		full[sp.Name] = w.isFull(ctx, sp.Name)
	}
	names, err := w.join(ctx, specs)
	if err != nil {
		return out, err
	}
	kubelet, sched, err := w.startScheduling(ctx, name, withExtender)
	if err != nil {
		return out, err
	}
	defer func() { _ = sched.Stop() }()
	for _, n := range names {
		if err := kubelet.Register(ctx, n); err != nil {
			return out, err
		}
	}
	ready, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := w.agents.WaitReady(ready, len(names)); err != nil {
		return out, fmt.Errorf("agents ready: %w", err)
	}
	// Full nodes: wait for their 27 addresses, then hold all but 2 free
	// with running pods the scheduler does not see (as pods of another
	// scheduler would).
	for _, n := range names {
		a := w.agents.Agent(n)
		if !full[n] {
			continue
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			if _, ok := a.PoolReachedAt(27); ok {
				break
			}
			if time.Now().After(deadline) {
				return out, fmt.Errorf("%s never pooled its 27 addresses", n)
			}
		}
		for i := range 23 {
			if _, err := a.Allocate(ready, fmt.Sprintf("other/held-%s-%d", n, i)); err != nil {
				return out, fmt.Errorf("holding addresses on %s: %w", n, err)
			}
		}
	}
	time.Sleep(3 * time.Second) // the agents report what they hold
	e.say("%s: %d bursts of %d pods", name, p.Bursts, p.PerBurst)
	c := w.cluster.Client
	for b := range p.Bursts {
		for i := range p.PerBurst {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%d-%d", b, i), Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{SchedulerName: "enipam-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
			}
			if err := c.Create(ctx, pod); err != nil {
				return out, err
			}
		}
		time.Sleep(p.Gap)
	}
	time.Sleep(p.Settle)
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("default")); err != nil {
		return out, err
	}
	for _, pod := range pods.Items {
		switch {
		case pod.Status.PodIP != "":
			out.bound++
			out.withIP++
		case pod.Spec.NodeName != "":
			out.bound++
		default:
			out.pending++
		}
	}
	fig := w.agents.Figures()
	out.waits = fig.Waits
	out.violations = fig.Violations.Total()
	out.bindToIP = kubelet.BindToIP()
	e.say("%s: %d bound (%d with an address), %d pending; waits %+v", name, out.bound, out.withIP, out.pending, out.waits)
	return out, nil
}

// isFull reports whether a node's instance has 3 ENIs: before the
// operator served it, one seeded full (27 addresses).
func (w *world) isFull(ctx context.Context, node string) bool {
	dump, err := w.sim.Admin.Dump(ctx)
	if err != nil {
		return false
	}
	enis := 0
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment != nil && "node-"+e.Attachment.InstanceID == node {
			enis++
		}
	}
	return enis == 3
}

// startScheduling starts the kubelets of the world's nodes and
// kube-scheduler with the chart's configuration, with or without the
// extender.
func (w *world) startScheduling(ctx context.Context, name string, withExtender bool) (*agentsim.Kubelet, *schedtest.Scheduler, error) {
	kubelet := agentsim.NewKubelet(w.agents, agentsim.KubeletOptions{CNIDelay: 50 * time.Millisecond})
	// The kubelets' watch ends with the agents, before kube-apiserver
	// stops (which waits for open watches otherwise).
	kctx, cancel := context.WithCancel(ctx)
	stopAgents := w.stopAgents
	w.stopAgents = func() { cancel(); stopAgents() }
	if err := kubelet.Start(kctx); err != nil {
		return nil, nil, err
	}
	parts, err := schedtest.Render(ctx, "default")
	if err != nil {
		return nil, nil, err
	}
	if !withExtender {
		if parts, err = schedtest.WithoutExtender(parts); err != nil {
			return nil, nil, err
		}
	}
	kc, err := w.cluster.KubeConfig()
	if err != nil {
		return nil, nil, err
	}
	sched, err := schedtest.Start(ctx, parts, schedtest.Options{Kubeconfig: kc, BinDir: w.cluster.BinDir, Dir: filepath.Join(w.dir), Log: io.Discard})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: starting kube-scheduler, %w", name, err)
	}
	return kubelet, sched, nil
}
