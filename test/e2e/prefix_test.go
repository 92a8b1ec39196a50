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

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/test/agentsim"
)

// prefixScenario: one m5.large (nitro: 3 ENIs of 10 slots) in a /20.
const prefixScenario = `
account: "123456789012"
clusterName: e2e
region: us-east-1
seed: 17
zones: [us-east-1a]
vpcs:
- id: vpc-0b000000000000001
  cidrs: [10.4.0.0/16]
  subnets:
  - {id: subnet-0b000000000000001, name: nodes, cidr: 10.4.0.0/20, zone: us-east-1a}
  securityGroups:
  - {id: sg-0b000000000000001, name: nodes}
instances:
- {id: i-0b000000000000001, type: m5.large, subnet: nodes, securityGroups: [nodes]}
`

// TestPrefixNodeGrowsAndShrinks: the operator binary with prefix
// delegation, pre-allocate 8 and release after 2 s serves one m5.large;
// its enipam-agent runs on a network namespace, its cilium-agent is
// simulated. A burst of 60 pods grows the pool /28 by /28 on the primary
// ENI to five (62 addresses used, 8 free kept); the agent routes each
// prefix with one pair of rules (egress, ingress), not one per address. Then all pods but one leave: whole free /28s go back to EC2 through the handshake (one
// Unassign of the prefix), the /28 holding the remaining pod's address
// never does, and the agent's rules follow. The ledger counts no address
// handed out twice, released in use or without the agent's consent; the
// pools hold to EC2's state; the agent's rule count is printed at the
// peak and at the end.
func TestPrefixNodeGrowsAndShrinks(t *testing.T) {
	w := newWorld(t, prefixScenario)
	ctx := w.ctx
	const name, instance = "node-pd", "i-0b000000000000001"
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	dump, err := w.sim.Admin.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns := kerneltest.New(t)
	for _, e := range dump.NetworkInterfaces {
		index := ns.AddENILink(t, "ens5", e.MacAddress)
		if err := ns.Handle.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}); err != nil {
			t.Fatal(err)
		}
	}
	w.startOperator("--vpc-id=vpc-0b000000000000001", "--prefix-delegation", "--pre-allocate=8",
		"--release-excess-ips=true", "--excess-ip-release-delay=2s")
	w.startAgent(name, ns)

	sim, err := agentsim.New(env.Config, agentsim.Options{NoRouting: true, UpdateInterval: 500 * time.Millisecond,
		AllocateTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); <-sim.Done() })
	if err := sim.Start(sctx); err != nil {
		t.Fatal(err)
	}
	cilium := sim.AddAgent(name)
	if err := agentsim.CreateNode(ctx, env.Client, agentsim.NodeSpec{Name: name, InstanceID: instance}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	if err := sim.WaitReady(wctx, 1); err != nil {
		t.Fatalf("agent ready: %v", err)
	}

	results := make(chan agentsim.Result, 60)
	for i := range 60 {
		cilium.AllocateAsync(fmt.Sprintf("web/web-%d", i), func(r agentsim.Result) { results <- r })
	}
	for range 60 {
		select {
		case r := <-results:
			if r.Err != nil {
				t.Fatalf("a pod got no IP: %v", r.Err)
			}
		case <-wctx.Done():
			t.Fatalf("pods still waiting: %+v", sim.Figures().Waits)
		}
	}
	// The pool settles with pre-allocate free above the 62 used (the
	// pods', cilium-agent's router and health): five /28s.
	var peak []netip.Prefix
	cn := waitNode(t, ctx, name, "the peak pool", func(cn *ciliumv2.CiliumNode) bool {
		peak = w.prefixesOf(instance)
		return len(cn.Spec.IPAM.Pool) >= 62+8 && len(cn.Spec.IPAM.Pool) == 16*len(peak)
	})
	peakRules := waitRules(t, ns, 2*len(peak)+1)
	for ip := range cn.Spec.IPAM.Pool {
		if !inAny(peak, netip.MustParseAddr(ip)) {
			t.Errorf("pool address %s is in none of the ENI's prefixes %v", ip, peak)
		}
	}

	// All pods but web-0 leave.
	kept, _ := cilium.IP("web/web-0")
	for i := 1; i < 60; i++ {
		cilium.Release(fmt.Sprintf("web/web-%d", i))
	}
	var end []netip.Prefix
	err = wait.PollUntilContextTimeout(wctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		end = w.prefixesOf(instance)
		cn := &ciliumv2.CiliumNode{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cn); err != nil {
			return false, nil
		}
		return len(end) < len(peak) && len(cn.Status.IPAM.ReleaseIPs) == 0 && len(cn.Spec.IPAM.Pool) == len(end)*16, nil
	})
	if err != nil {
		t.Fatalf("the pool never shrank: EC2 prefixes %v (peak %v)", end, peak)
	}
	endRules := waitRules(t, ns, 2*len(end)+1)
	keptPrefix := slices.IndexFunc(end, func(p netip.Prefix) bool { return p.Contains(kept) })
	if keptPrefix < 0 {
		t.Errorf("the prefix holding web-0's %s was released: EC2 keeps %v", kept, end)
	}
	for _, p := range end {
		if !slices.Contains(peak, p) {
			t.Errorf("prefix %s appeared while shrinking", p)
		}
	}
	counters, err := w.sim.Admin.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counters.Succeeded("UnassignPrivateIpAddresses") == 0 {
		t.Error("no Unassign: nothing was released")
	}
	f := sim.Figures()
	w.checkPools(sim)
	t.Logf("prefix delegation, 60-pod burst: %d /28s at the peak (%d rules), %d after the pods left (%d rules), %d Unassign calls; ledger %+v",
		len(peak), peakRules, len(end), endRules, counters.Succeeded("UnassignPrivateIpAddresses"), f.Violations)
	if n := f.Violations.Total(); n != 0 {
		t.Errorf("%d violations: %v", n, sim.Ledger().ViolationDetails())
	}
}

// prefixesOf returns the /28s EC2 shows on the instance's ENIs, sorted.
func (w *world) prefixesOf(instance string) []netip.Prefix {
	w.t.Helper()
	dump, err := w.sim.Admin.Dump(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []netip.Prefix
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment == nil || e.Attachment.InstanceID != instance {
			continue
		}
		for _, p := range e.IPv4Prefixes {
			out = append(out, netip.MustParsePrefix(p.IPv4Prefix))
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// waitRules waits until the namespace holds want enipam rules (with the
// default configuration, an egress and an ingress rule per prefix and the
// connmark rule) and returns the count.
func waitRules(t *testing.T, ns *kerneltest.Namespace, want int) int {
	t.Helper()
	n := 0
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		rules, err := ns.Handle.RuleList(netlink.FAMILY_V4)
		if err != nil {
			return false, err
		}
		n = 0
		for _, r := range rules {
			if r.Protocol == routing.DefaultProtocol {
				n++
			}
		}
		return n == want, nil
	})
	if err != nil {
		t.Fatalf("enipam rules: %d, want %d (two per prefix and the connmark rule): %v", n, want, err)
	}
	return n
}

func inAny(ps []netip.Prefix, ip netip.Addr) bool {
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(ip) })
}
