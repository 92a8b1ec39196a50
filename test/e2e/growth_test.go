package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// fleetScenario: one VPC, a node subnet and a tagged pod subnet per zone,
// and two instances each of m5.large, m5.xlarge and t3.medium.
const fleetScenario = `
account: "123456789012"
clusterName: e2e
region: us-east-1
seed: 5
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0f000000000000001
  cidrs: [10.2.0.0/16]
  subnets:
  - {id: subnet-0f000000000000001, name: nodes-a, cidr: 10.2.0.0/22, zone: us-east-1a}
  - {id: subnet-0f000000000000002, name: nodes-b, cidr: 10.2.4.0/22, zone: us-east-1b}
  - {id: subnet-0f000000000000003, name: pods-a, cidr: 10.2.64.0/18, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0f000000000000004, name: pods-b, cidr: 10.2.128.0/18, zone: us-east-1b, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0f000000000000001, name: nodes}
instances:
- {id: i-0f000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0f000000000000002, type: m5.large, subnet: nodes-b, securityGroups: [nodes]}
- {id: i-0f000000000000003, type: m5.xlarge, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0f000000000000004, type: m5.xlarge, subnet: nodes-b, securityGroups: [nodes]}
- {id: i-0f000000000000005, type: t3.medium, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0f000000000000006, type: t3.medium, subnet: nodes-b, securityGroups: [nodes]}
`

// fleet joins the scenario's six instances as nodes with simulated
// cilium-agents (status writes every 500 ms); the m5.xlarge nodes are
// labelled pool=secondary.
func (w *world) fleet(opts agentsim.Options) (*agentsim.Sim, []string) {
	w.t.Helper()
	return w.fleetWith(opts, nil)
}

// fleetWith is fleet with each node's spec changed by edit first.
func (w *world) fleetWith(opts agentsim.Options, edit func(*agentsim.NodeSpec)) (*agentsim.Sim, []string) {
	w.t.Helper()
	dump, err := w.sim.Admin.Dump(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var specs []agentsim.NodeSpec
	var names []string
	for _, in := range dump.Instances {
		spec := agentsim.NodeSpec{
			Name: "node-" + in.InstanceID, InstanceID: in.InstanceID,
			AvailabilityZone: in.Placement.AvailabilityZone, InstanceType: in.InstanceType,
		}
		if in.InstanceType == "m5.xlarge" {
			spec.Labels = map[string]string{"pool": "secondary"}
		}
		if edit != nil {
			edit(&spec)
		}
		specs = append(specs, spec)
		names = append(names, spec.Name)
	}
	if opts.UpdateInterval == 0 {
		opts.UpdateInterval = 500 * time.Millisecond
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	sim, err := agentsim.New(env.Config, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	w.t.Cleanup(func() { cancel(); <-sim.Done() })
	if err := sim.Start(ctx); err != nil {
		w.t.Fatal(err)
	}
	for _, s := range specs {
		sim.AddAgent(s.Name)
	}
	if err := agentsim.CreateNodes(w.ctx, env.Client, specs, 8); err != nil {
		w.t.Fatal(err)
	}
	return sim, names
}

// secondaryPolicy keeps pod IPs of pool=secondary nodes off the primary
// ENI, in the tagged pod subnets.
func secondaryPolicy() *enipamv1alpha1.ENIPolicy {
	one := int32(1)
	return &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secondary"},
		Spec: enipamv1alpha1.ENIPolicySpec{
			NodeSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "secondary"}},
			FirstInterfaceIndex: &one,
			SubnetTags:          map[string]string{"pods": "true"},
		},
	}
}

// TestFleetGrowsEndToEnd: six nodes of three types join (two under a
// policy that puts pod IPs on a new ENI in the pod subnet); every agent
// becomes ready with pre-allocate 8 free; then a deployment of 60 pods
// lands at once. Every pod gets an IP, no IP is handed out twice or
// released in use, exactly one ENI is created per node that needed one,
// and no ENI is left unattached.
func TestFleetGrowsEndToEnd(t *testing.T) {
	w := newWorld(t, fleetScenario)
	if err := env.Client.Create(w.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	w.startOperator("--vpc-id=vpc-0f000000000000001")
	sim, names := w.fleet(agentsim.Options{})
	ctx, cancel := context.WithTimeout(w.ctx, 90*time.Second)
	defer cancel()
	if err := sim.WaitReady(ctx, len(names)); err != nil {
		t.Fatalf("agents ready: %v; figures %+v", err, sim.Figures())
	}
	for _, name := range names {
		waitNode(t, ctx, name, "8 free IPs", func(cn *ciliumv2.CiliumNode) bool { return free(cn) >= 8 })
	}

	results := make(chan agentsim.Result, 60)
	for i := range 60 {
		a := sim.Agent(names[i%len(names)])
		a.AllocateAsync(fmt.Sprintf("web/web-%d", i), func(r agentsim.Result) { results <- r })
	}
	for range 60 {
		select {
		case r := <-results:
			if r.Err != nil {
				t.Fatalf("allocation failed: %v", r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("pods still waiting: %+v", sim.Figures().Waits)
		}
	}

	f := sim.Figures()
	if n := f.Violations.Total(); n != 0 {
		t.Fatalf("%d violations: %v", n, sim.Ledger().ViolationDetails())
	}
	w.checkPools(sim)
	counters, err := w.sim.Admin.Counters(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two m5.xlarge under the policy need an ENI each; each t3.medium's
	// primary holds 5, so it needs one more too. The burst (10 pods per
	// node) may fill more, but never duplicates one.
	if got := counters.Succeeded("CreateNetworkInterface"); got < 4 || got != counters.Succeeded("AttachNetworkInterface") {
		t.Errorf("ENIs created %d, attached %d; want at least 4 and every one attached", got, counters.Succeeded("AttachNetworkInterface"))
	}
	dump, err := w.sim.Admin.Dump(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range dump.NetworkInterfaces {
		if e.Status == "available" {
			t.Errorf("ENI %s left unattached", e.NetworkInterfaceID)
		}
	}
	t.Logf("60-pod burst: %d waits (p99 %s), EC2 calls %v", f.Waits.Count, f.Waits.P99, counters.Calls)
}

// TestChurnEndsWithZeroViolations: ten nodes, pods arriving at 0.5/s per
// node living 4 s on average, a 40-pod deployment scaled up and back, and
// excess IPs released through the handshake after 2 s, for 25 s. Nothing
// is handed out twice or released while in use, and every pod got an IP.
func TestChurnEndsWithZeroViolations(t *testing.T) {
	w := newWorld(t, fleetScenario+`
- {name: churn, count: 4, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`)
	w.startOperator("--vpc-id=vpc-0f000000000000001", "--release-excess-ips=true", "--excess-ip-release-delay=2s")
	sim, names := w.fleet(agentsim.Options{AllocateTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Minute)
	defer cancel()
	if err := sim.WaitReady(ctx, len(names)); err != nil {
		t.Fatalf("agents ready: %v", err)
	}
	churn := agentsim.NewChurn(sim, agentsim.ChurnConfig{
		Seed: 1, ArrivalRate: 0.5, MeanLifetime: 4 * time.Second, Duration: 25 * time.Second,
		Bursts:      []agentsim.Burst{{At: 8 * time.Second, Pods: 40, Hold: 8 * time.Second, Name: "web"}},
		DeleteAtEnd: true,
	})
	rep, err := churn.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := sim.Figures()
	if n := f.Violations.Total(); n != 0 {
		t.Fatalf("%d violations: %v", n, sim.Ledger().ViolationDetails())
	}
	w.checkPools(sim)
	if rep.Failed != 0 || rep.Started == 0 {
		t.Errorf("churn: %d pods started, %d failed to get an IP", rep.Started, rep.Failed)
	}
	released := int64(0)
	if c, err := w.sim.Admin.Counters(w.ctx); err == nil {
		released = c.Succeeded("UnassignPrivateIpAddresses")
	}
	t.Logf("churn: %d pods (%d burst), %d waits (p99 %s), %d release calls, idle IPs now %d over %d nodes",
		rep.Started, rep.BurstPods, f.Waits.Count, f.Waits.P99, released, f.IdleIPs, f.Nodes)
}

// free counts the pool IPs neither used nor on their way out.
func free(cn *ciliumv2.CiliumNode) int {
	n := 0
	for ip := range cn.Spec.IPAM.Pool {
		_, used := cn.Status.IPAM.Used[ip]
		_, leaving := cn.Status.IPAM.ReleaseIPs[ip]
		if !used && !leaving {
			n++
		}
	}
	return n
}

// checkPools holds the pools to EC2's state (agentsim.PoolChecker): no
// address in two pools, no free pool address off its ENI of the node's
// instance, no released address left in a pool, each past a grace of 3 s
// (two looks that far apart). It prints the counts with the ledger's.
func (w *world) checkPools(sim *agentsim.Sim) {
	w.t.Helper()
	f := w.poolFindings()
	figures := sim.Figures()
	w.t.Logf("invariants: %d IPs in two pools, %d free pool IPs off their ENI, %d stamped off their ENI, %d released IPs in a pool, %d on two ENIs; ledger %+v; %d handouts checked routed before handed (%d waiting)",
		f.InTwoPools, f.FreeOffENI, f.StampedOffENI, f.ReleasedInPool, f.OnTwoENIs, figures.Violations, figures.RoutedChecks, figures.RoutedPending)
	if f.Total() != 0 {
		w.t.Errorf("pools against EC2: %d breaches: %v", f.Total(), f.Details)
	}
}

// poolFindings runs agentsim.PoolChecker over the CiliumNodes named (all
// when none are) and ec2sim's state, with two looks 3 s apart.
func (w *world) poolFindings(names ...string) agentsim.PoolFindings {
	w.t.Helper()
	checker := agentsim.NewPoolChecker(3 * time.Second)
	var f agentsim.PoolFindings
	for look := range 2 {
		if look > 0 {
			time.Sleep(3500 * time.Millisecond)
		}
		var list ciliumv2.CiliumNodeList
		if err := env.Client.List(w.ctx, &list); err != nil {
			w.t.Fatal(err)
		}
		if len(names) > 0 {
			list.Items = slices.DeleteFunc(list.Items, func(cn ciliumv2.CiliumNode) bool { return !slices.Contains(names, cn.Name) })
		}
		dump, err := w.sim.Admin.Dump(w.ctx)
		if err != nil {
			w.t.Fatal(err)
		}
		f = checker.Check(list.Items, dump, time.Now())
	}
	return f
}
