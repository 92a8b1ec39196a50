package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium/cilium/pkg/node/addressing"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/stack"
)

// What the demo's ENIPolicy asks for.
const (
	policyName = "pods"
	// podsTag marks the pod subnets and the pod security group of the demo
	// VPC (value "true").
	podsTag = "enipam.io/pods"
	// preAllocate is half Cilium's default of 8: the t3.medium's two
	// secondary ENIs hold 10 IPs, enough for its 3 pods, the router and
	// health IPs and 4 free, where 8 free would leave it at capacity.
	preAllocate = 4
	// clusterName tags the ENIs the operator creates.
	clusterName = "demo"
)

// agentUpdateInterval is how often a simulated agent writes
// status.ipam.used; Cilium's default is 15 s, too long to watch.
const agentUpdateInterval = time.Second

// node is one instance of the demo VPC joined as a node.
type node struct {
	name, instanceID, instanceType, zone, privateIP string
	// pods are the owners ("namespace/name") of the pods placed on it.
	pods []string
}

// podsFor is how many pods the demo places on an instance type: a few,
// more on larger instances.
func podsFor(instanceType string) int {
	switch instanceType {
	case "t3.medium":
		return 3
	case "m5.large":
		return 6
	case "m5.4xlarge":
		return 10
	}
	return 4
}

// describeVPC prints the scenario the operator works in.
func (d *world) describeVPC() {
	v := d.vpc
	vpc := v.dump.Vpcs[0]
	var zones []string
	for _, s := range v.dump.Subnets {
		if !slices.Contains(zones, s.AvailabilityZone) {
			zones = append(zones, s.AvailabilityZone)
		}
	}
	var podSubnets, podGroups, instances []string
	for _, s := range v.dump.Subnets {
		if v.podSubnets[s.SubnetID] {
			podSubnets = append(podSubnets, fmt.Sprintf("%s %s", v.subnetNames[s.SubnetID], s.CidrBlock))
		}
	}
	for _, g := range v.dump.SecurityGroups {
		if v.podGroups[g.GroupID] {
			podGroups = append(podGroups, fmt.Sprintf("%s (%s)", g.GroupName, g.GroupID))
		}
	}
	for _, in := range v.dump.Instances {
		instances = append(instances, fmt.Sprintf("%s %s", in.InstanceType, in.Placement.AvailabilityZone))
	}
	d.p.printf("    %s %s %s over %s\n", vpc.VpcID, vpc.CidrBlock, vpcIPv6(vpc), joinList(zones))
	d.p.printf("    pod subnets (%s=true): %s\n", podsTag, strings.Join(podSubnets, ", "))
	d.p.printf("    pod security group (%s=true): %s\n", podsTag, strings.Join(podGroups, ", "))
	d.p.printf("    instances: %s\n", strings.Join(instances, ", "))
}

// policy is the demo's ENIPolicy: every node's pod IPs on secondary ENIs
// (the primary ENI and its node subnet stay the host's), in the subnets
// and with the security group tagged podsTag=true, preAllocate free IPs
// ahead of the pods. Its priority lets dualStackPolicy win on the nodes
// both match.
func policy() *enipamv1alpha1.ENIPolicy {
	one, pre := int32(1), int32(preAllocate)
	return &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: enipamv1alpha1.ENIPolicySpec{
			Priority:            10,
			FirstInterfaceIndex: &one,
			SubnetTags:          map[string]string{podsTag: "true"},
			SecurityGroupTags:   map[string]string{podsTag: "true"},
			PreAllocate:         &pre,
		},
	}
}

func (d *world) createPolicy(ctx context.Context) error {
	for _, p := range []*enipamv1alpha1.ENIPolicy{policy(), dualStackPolicy()} {
		if err := d.cluster.Client.Create(ctx, p); err != nil {
			return fmt.Errorf("creating ENIPolicy %s, %w", p.Name, err)
		}
	}
	return nil
}

func (d *world) startOperator(procCtx context.Context) error {
	addr, err := cluster.FreeAddr()
	if err != nil {
		return err
	}
	p, err := stack.StartOperator(procCtx, d.bins.Operator, d.logDir, "enipam-operator", d.kubeconfig,
		d.sim.Endpoints.EC2, clusterName, "--metrics-bind-address="+addr)
	if err != nil {
		return err
	}
	d.operator, d.metrics = p, addr
	return nil
}

// joinNodes starts a simulated cilium-agent per instance, registers each
// instance as a node the way it joins a cluster running Cilium, and waits
// until every agent is ready: its CiliumNode's pool holds its first IPs,
// from the operator.
func (d *world) joinNodes(ctx context.Context) error {
	var specs []agentsim.NodeSpec
	for _, in := range d.vpc.dump.Instances {
		n := node{
			name: in.PrivateDNSName, instanceID: in.InstanceID, instanceType: in.InstanceType,
			zone: in.Placement.AvailabilityZone, privateIP: in.PrivateIPAddress,
		}
		d.nodes = append(d.nodes, n)
		spec := agentsim.NodeSpec{
			Name: n.name, InstanceID: n.instanceID, AvailabilityZone: n.zone,
			InstanceType: n.instanceType, InternalIP: n.privateIP,
		}
		if n.dualStack() {
			spec.Labels = map[string]string{dualStackLabel: "true"}
		}
		specs = append(specs, spec)
	}
	slices.SortFunc(d.nodes, func(a, b node) int { return strings.Compare(a.name, b.name) })

	// agentsim's families are per Sim: the dual-stack node's agent runs in
	// a Sim of its own, with both, sharing the ledger (one account of the
	// handouts) and the first Sim's routing simulator (every node's
	// NodeRouting).
	ledger := agentsim.NewLedger()
	sim, err := agentsim.New(d.cluster.Config, agentsim.Options{
		UpdateInterval: agentUpdateInterval,
		SampleInterval: -1,
		Ledger:         ledger,
		// Each node's enipam-agent confirms a static address's remap
		// from its instance's metadata, as on EC2.
		Routing: agentsim.RoutingOptions{Metadata: d.sim.LocalIPv4s},
		Logger:  d.log.With("component", "agentsim"),
	})
	if err != nil {
		return err
	}
	sim6, err := agentsim.New(d.cluster.Config, agentsim.Options{
		UpdateInterval: agentUpdateInterval,
		SampleInterval: -1,
		Ledger:         ledger,
		NoRouting:      true,
		IPFamilies:     []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family},
		Logger:         d.log.With("component", "agentsim-dual-stack"),
	})
	if err != nil {
		return err
	}
	simCtx, cancel := context.WithCancel(context.Background())
	d.stopAgents = cancel
	if err := sim.Start(simCtx); err != nil {
		return fmt.Errorf("starting the agents, %w", err)
	}
	d.agents = sim
	if err := sim6.Start(simCtx); err != nil {
		return fmt.Errorf("starting the dual-stack agent, %w", err)
	}
	d.agents6 = sim6
	for _, n := range d.nodes {
		if n.dualStack() {
			sim6.AddAgent(n.name)
		} else {
			sim.AddAgent(n.name)
		}
	}
	if err := agentsim.CreateNodes(ctx, d.cluster.Client, specs, len(specs)); err != nil {
		return err
	}
	if err := d.waitReady(ctx); err != nil {
		return err
	}
	return d.announceRouterIPs(ctx)
}

// announceRouterIPs adds each agent's router IP to its CiliumNode's
// spec.addresses as CiliumInternalIP, as cilium-agent does once it holds
// one (the simulated agents leave spec alone).
func (d *world) announceRouterIPs(ctx context.Context) error {
	for _, n := range d.nodes {
		ip, ok := d.agentOf(n).IP(agentsim.RouterOwner)
		if !ok {
			return fmt.Errorf("agent of %s is ready without a router IP", n.name)
		}
		cn := &ciliumv2.CiliumNode{}
		if err := d.cluster.Client.Get(ctx, client.ObjectKey{Name: n.name}, cn); err != nil {
			return fmt.Errorf("reading CiliumNode %s, %w", n.name, err)
		}
		patch := client.MergeFrom(cn.DeepCopy())
		cn.Spec.Addresses = append(cn.Spec.Addresses, ciliumv2.NodeAddress{Type: addressing.NodeCiliumInternalIP, IP: ip.String()})
		if err := d.cluster.Client.Patch(ctx, cn, patch); err != nil {
			return fmt.Errorf("setting the CiliumInternalIP of %s, %w", n.name, err)
		}
	}
	return nil
}

// agentOf returns n's simulated agent.
func (d *world) agentOf(n node) *agentsim.Agent {
	if n.dualStack() {
		return d.agents6.Agent(n.name)
	}
	return d.agents.Agent(n.name)
}

// waitReady waits until every agent is ready, within o.wait.
func (d *world) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Wait)
	defer cancel()
	dual := 0
	for _, n := range d.nodes {
		if n.dualStack() {
			dual++
		}
	}
	err := d.agents.WaitReady(ctx, len(d.nodes)-dual)
	if err == nil {
		err = d.agents6.WaitReady(ctx, dual)
	}
	if err != nil {
		if procErr := d.checkProcesses(); procErr != nil {
			return procErr
		}
		return fmt.Errorf("waiting for the agents' first IPs: %w", err)
	}
	return nil
}

// startPods places the pods on their nodes all at once, as a deployment
// scaled up would, and waits until each has its IP. Pods that find their
// node's pool empty wait until the operator has grown it.
func (d *world) startPods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Wait)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	seq := 0
	for i := range d.nodes {
		n := &d.nodes[i]
		a := d.agentOf(*n)
		for range podsFor(n.instanceType) {
			seq++
			owner := fmt.Sprintf("default/web-%d", seq)
			n.pods = append(n.pods, owner)
			wg.Go(func() {
				if _, err := a.Allocate(ctx, owner); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("pod %s on %s: %w", owner, n.name, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		if procErr := d.checkProcesses(); procErr != nil {
			return procErr
		}
		return fmt.Errorf("%d pods got no IP, the first: %w", len(errs), errs[0])
	}
	return nil
}

// describePods prints how the pods fared.
func (d *world) describePods() {
	total := 0
	var counts []string
	for _, n := range d.nodes {
		total += len(n.pods)
		counts = append(counts, fmt.Sprintf("%d on the %s", len(n.pods), n.instanceType))
	}
	w := d.agents.Figures().Waits
	d.p.printf("    %d pods got IPs (%s)", total, joinList(counts))
	if w.Count > 0 {
		d.p.printf("; %d of them arrived at a pool with no free IP and waited for the operator to grow it (longest %s)",
			w.Count, formatDuration(w.Max))
	}
	d.p.printf("\n")
}
