package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

// routingScenario: one m5.large in a /24 node subnet of a /16 VPC, with a
// pod subnet beside it.
const routingScenario = `
account: "123456789012"
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

// TestPodIPOnSecondaryENIGetsItsRule: the operator binary, under
// --first-interface-index=1 and a policy selecting the tagged pod subnet,
// gives the node a second ENI in the pod subnet; the node agent runs on a network namespace whose links carry the
// MACs ec2sim gave the ENIs; when pods use IPs and the pool grows, the new
// IP's rule `from <ip> lookup 11` appears, and its table routes via the
// pod subnet's gateway.
func TestPodIPOnSecondaryENIGetsItsRule(t *testing.T) {
	w := newWorld(t, routingScenario)
	ctx := w.ctx
	c := env.Client
	policy := &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       enipamv1alpha1.ENIPolicySpec{SubnetTags: map[string]string{"pods": "true"}},
	}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	w.startOperator("--first-interface-index=1", "--pre-allocate=4", "--vpc-id=vpc-0e000000000000001")
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-r1"},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0e000000000000001"},
	}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "node-r1"}}); err != nil {
		t.Fatal(err)
	}
	cn := waitNode(t, ctx, "node-r1", "a second ENI with 4 IPs", func(cn *ciliumv2.CiliumNode) bool {
		return len(cn.Status.ENI.ENIs) == 2 && len(cn.Spec.IPAM.Pool) >= 4
	})

	ns := kerneltest.New(t)
	for _, eni := range cn.Status.ENI.ENIs {
		ns.AddENILink(t, fmt.Sprintf("eth%d", eni.Number), eni.MAC)
	}
	cfg := agent.DefaultConfig("node-r1")
	a, err := agent.New(cfg, env.Config, ns.Kernel(), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { stop(); <-done })

	for ip := range cn.Spec.IPAM.Pool {
		waitRule(t, ns.Handle, ip, 11)
	}
	// Pods take three IPs: the pool grows on the same ENI (it has room),
	// and the new IPs get rules.
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
	cn = waitNode(t, ctx, "node-r1", "the pool to grow", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) > len(before) })
	grown := 0
	for ip, e := range cn.Spec.IPAM.Pool {
		if before[ip] {
			continue
		}
		if cn.Status.ENI.ENIs[e.Resource].Number != 1 {
			t.Fatalf("new IP %s is on device %d, want 1", ip, cn.Status.ENI.ENIs[e.Resource].Number)
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
		if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw != nil && r.Gw.String() == gw.String() {
			haveDefault = true
		}
	}
	if !haveDefault {
		t.Errorf("table 11 has no default route via the pod subnet's gateway %s: %v", gw, routes)
	}
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
		t.Fatalf("%s: %s never happened: %v; last status %+v", name, what, err, last.Status.IPAM.OperatorStatus)
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
