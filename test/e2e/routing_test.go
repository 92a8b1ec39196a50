package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// routingScenario: one m5.large in a /24 node subnet of a /16 VPC, with a
// pod subnet beside it.
const routingScenario = `
account: "123456789012"
clusterName: e2e
region: us-east-1
seed: 11
zones: [us-east-1a]
vpcs:
- id: vpc-0e000000000000001
  cidrs: [10.1.0.0/16]
  subnets:
  - {id: subnet-0e000000000000001, name: nodes, cidr: 10.1.0.0/24, zone: us-east-1a}
  - {id: subnet-0e000000000000002, name: pods, cidr: 10.1.64.0/20, zone: us-east-1a, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0e000000000000001, name: nodes}
instances:
- {id: i-0e000000000000001, type: m5.large, subnet: nodes, securityGroups: [nodes]}
`

// TestSecondaryENIRoutedBeforePooled: the NodeRouting contract end to end.
// The operator binary, under --first-interface-index=1 and a policy
// selecting the tagged pod subnet, creates the node's NodeRouting (spec:
// its instance, first interface index 1) and a second ENI in the pod
// subnet, whose addresses it lists in the NodeRouting's spec.enis but
// does not pool: nothing reports them routed yet. The node agent then
// starts on a network namespace whose links carry the MACs ec2sim gave the
// ENIs. It routes the listed addresses (`from <ip> lookup 11`, table 11
// via the pod subnet's gateway), reports them in the NodeRouting's status
// with Ready=True, and only then does the operator pool them. When pods use
// IPs and the pool grows on the same ENI, every new address is again
// routed and reported before it is pooled: at every look, each pool IP of
// the ENI is in the status read after the CiliumNode.
func TestSecondaryENIRoutedBeforePooled(t *testing.T) {
	w := newWorld(t, routingScenario)
	ctx := w.ctx
	c := env.Client
	const name = "node-r1"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	policy := &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       enipamv1alpha1.ENIPolicySpec{SubnetTags: map[string]string{"pods": "true"}},
	}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	w.startOperator("--first-interface-index=1", "--pre-allocate=4", "--vpc-id=vpc-0e000000000000001")
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0e000000000000001"},
	}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}

	nr := waitNodeRouting(t, ctx, name, "the operator's NodeRouting", func(nr *enipamv1alpha1.NodeRouting) bool {
		return nr.Spec.InstanceID != ""
	})
	if nr.Spec.InstanceID != "i-0e000000000000001" || nr.Spec.FirstInterfaceIndex != 1 {
		t.Errorf("NodeRouting spec %+v, want instance i-0e000000000000001 and first interface index 1", nr.Spec)
	}
	// The agent is told of the node's ENIs in the NodeRouting's spec.
	nr = waitNodeRouting(t, ctx, name, "a second ENI listing its addresses", hasSecondENI)
	eniID := ""
	for _, e := range nr.Spec.ENIs {
		if e.Number == 1 {
			eniID = e.ID
		}
	}
	cn := &ciliumv2.CiliumNode{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cn); err != nil {
		t.Fatal(err)
	}
	for ip, a := range cn.Spec.IPAM.Pool {
		if a.Resource == eniID {
			t.Fatalf("%s pooled on %s before any agent reported it routed", ip, eniID)
		}
	}

	ns := kerneltest.New(t)
	for _, eni := range nr.Spec.ENIs {
		ns.AddENILink(t, fmt.Sprintf("eth%d", eni.Number), eni.MAC)
	}
	a, err := agent.New(agent.DefaultConfig(name), env.Config, ns.Kernel(), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { stop(); <-done })

	// routedBeforePooled checks the invariant on one look and returns the
	// ENI's pool IPs.
	routedBeforePooled := func(cn *ciliumv2.CiliumNode) []string {
		t.Helper()
		nr := &enipamv1alpha1.NodeRouting{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, nr); err != nil {
			t.Fatal(err)
		}
		var ips []string
		for ip, e := range cn.Spec.IPAM.Pool {
			if e.Resource != eniID {
				continue
			}
			if !nr.Status.Routes(eniID, ip) {
				t.Fatalf("%s is in the pool but not in the NodeRouting status %+v", ip, nr.Status.ENIs)
			}
			ips = append(ips, ip)
		}
		return ips
	}
	cn = waitNode(t, ctx, name, "4 IPs of the new ENI pooled", func(cn *ciliumv2.CiliumNode) bool {
		return len(routedBeforePooled(cn)) >= 4
	})
	for _, ip := range routedBeforePooled(cn) {
		waitRule(t, ns.Handle, ip, 11)
	}
	nr = waitNodeRouting(t, ctx, name, "Ready", func(nr *enipamv1alpha1.NodeRouting) bool {
		c := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady)
		// The operator may write the spec again (a generation) after a
		// Ready report; wait for the report of the current one.
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == enipamv1alpha1.ReasonRouted &&
			nr.Status.ObservedGeneration == nr.Generation
	})
	if nr.Status.ObservedGeneration != nr.Generation || nr.Status.RoutedENIs != 1 {
		t.Errorf("status observes generation %d of %d and %d ENIs, want the current one and 1", nr.Status.ObservedGeneration, nr.Generation, nr.Status.RoutedENIs)
	}

	// Pods take three IPs: the pool grows on the same ENI (it has room),
	// and the new IPs are routed and reported before they are pooled.
	before := map[string]bool{}
	used := ipamtypes.AllocationMap{}
	for ip, e := range cn.Spec.IPAM.Pool {
		before[ip] = true
		if len(used) < 3 {
			used[ip] = ipamtypes.AllocationIP{Owner: "default/pod-" + ip, Resource: e.Resource}
		}
	}
	cn.Status.IPAM.Used = used
	if err := c.Status().Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	cn = waitNode(t, ctx, name, "the pool to grow", func(cn *ciliumv2.CiliumNode) bool {
		return len(routedBeforePooled(cn)) > len(before)
	})
	grown := 0
	for ip, e := range cn.Spec.IPAM.Pool {
		if before[ip] {
			continue
		}
		if e.Resource != eniID {
			t.Fatalf("new IP %s is on %s, want %s", ip, e.Resource, eniID)
		}
		waitRule(t, ns.Handle, ip, 11)
		grown++
	}
	if grown == 0 {
		t.Fatal("no new IP to check")
	}
	routes, err := ns.Handle.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 11}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	gw := netip.MustParseAddr("10.1.64.1")
	var haveDefault bool
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw != nil && r.Gw.String() == gw.String() && r.Protocol == routing.DefaultProtocol {
			haveDefault = true
		}
	}
	if !haveDefault {
		t.Errorf("table 11 has no default route via the pod subnet's gateway %s: %v", gw, routes)
	}
	f := w.poolFindings(name)
	t.Logf("invariants: %d IPs in two pools, %d free pool IPs off their ENI, %d released IPs in a pool, %d on two ENIs",
		f.InTwoPools, f.FreeOffENI, f.ReleasedInPool, f.OnTwoENIs)
	if f.Total() != 0 {
		t.Errorf("pools against EC2: %d breaches: %v", f.Total(), f.Details)
	}
}

// hasSecondENI reports whether the NodeRouting's spec.enis, the ENIs
// the agent routes, lists device 1 with addresses.
func hasSecondENI(nr *enipamv1alpha1.NodeRouting) bool {
	return slices.ContainsFunc(nr.Spec.ENIs, func(e enipamv1alpha1.NodeENI) bool { return e.Number == 1 && len(e.Addresses) > 0 })
}

func waitNode(t *testing.T, ctx context.Context, name, what string, cond func(*ciliumv2.CiliumNode) bool) *ciliumv2.CiliumNode {
	t.Helper()
	var last *ciliumv2.CiliumNode
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cn := &ciliumv2.CiliumNode{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cn); err != nil {
			return false, nil
		}
		last = cn
		return cond(cn), nil
	})
	if err != nil {
		status := "none"
		if last != nil {
			status = fmt.Sprintf("%+v", last.Status.IPAM.OperatorStatus)
		}
		t.Fatalf("%s: %s never happened: %v; last operator status %s", name, what, err, status)
	}
	return last
}

func waitNodeRouting(t *testing.T, ctx context.Context, name, what string, cond func(*enipamv1alpha1.NodeRouting) bool) *enipamv1alpha1.NodeRouting {
	t.Helper()
	var last *enipamv1alpha1.NodeRouting
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		nr := &enipamv1alpha1.NodeRouting{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, nr); err != nil {
			return false, nil
		}
		last = nr
		return cond(nr), nil
	})
	if err != nil {
		t.Fatalf("NodeRouting %s: %s never happened: %v; last %+v", name, what, err, last)
	}
	return last
}

// waitRule waits for `from ip/32 lookup table` in the namespace.
func waitRule(t *testing.T, h *netlink.Handle, ip string, table int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		rules, err := h.RuleList(netlink.FAMILY_V4)
		if err != nil {
			return false, err
		}
		for _, r := range rules {
			if r.Src != nil && r.Src.IP.String() == ip && r.Table == table {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no rule from %s lookup %d: %v", ip, table, err)
	}
}
