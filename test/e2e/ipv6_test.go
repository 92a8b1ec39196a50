package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// ipv6Scenario: one VPC with an IPv6 /56, a node subnet with a /64 in
// each zone, two m5.large and a t3.medium (all taking IPv6 /80s).
const ipv6Scenario = `
account: "123456789012"
clusterName: e2e
region: us-east-1
seed: 6
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0f000000000000001
  cidrs: [10.2.0.0/16]
  ipv6Cidr: 2600:1f18:abc:de00::/56
  subnets:
  - {id: subnet-0f000000000000001, name: nodes-a, cidr: 10.2.0.0/22, ipv6Cidr: 2600:1f18:abc:de01::/64, zone: us-east-1a}
  - {id: subnet-0f000000000000002, name: nodes-b, cidr: 10.2.4.0/22, ipv6Cidr: 2600:1f18:abc:de02::/64, zone: us-east-1b}
  securityGroups:
  - {id: sg-0f000000000000001, name: nodes}
instances:
- {id: i-0f000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0f000000000000002, type: m5.large, subnet: nodes-b, securityGroups: [nodes]}
- {id: i-0f000000000000005, type: t3.medium, subnet: nodes-a, securityGroups: [nodes]}
`

// familiesPolicy governs every node with the given ipFamilies.
func familiesPolicy(families ...enipamv1alpha1.IPFamily) *enipamv1alpha1.ENIPolicy {
	return &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "families"}, Spec: enipamv1alpha1.ENIPolicySpec{IPFamilies: families}}
}

// primaryWindows returns, per instance, the IPv6 /80s ec2sim shows on its
// primary ENI.
func (w *world) primaryWindows() map[string][]netip.Prefix {
	w.t.Helper()
	dump, err := w.sim.Admin.Dump(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string][]netip.Prefix{}
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment == nil || e.Attachment.DeviceIndex != 0 {
			continue
		}
		for _, p := range e.IPv6Prefixes {
			out[e.Attachment.InstanceID] = append(out[e.Attachment.InstanceID], netip.MustParsePrefix(p.IPv6Prefix))
		}
	}
	return out
}

// free6 counts the IPv6 pool addresses neither used nor on their way out.
func free6(cn *ciliumv2.CiliumNode) int {
	n := 0
	for ip := range cn.Spec.IPAM.Pool {
		_, used := cn.Status.IPAM.Used[ip]
		_, leaving := cn.Status.IPAM.ReleaseIPs[ip]
		if a := netip.MustParseAddr(ip); a.Is6() && !used && !leaving {
			n++
		}
	}
	return n
}

// runFamilies is the IPv6 end-to-end run for a policy's families: three
// nodes join, ten pods land on each, every pod gets one address of each
// family, its IPv6 one of the /80 ec2sim shows on its node's primary ENI
// (one AssignIpv6Addresses per node, none more); the pods go, the IPv6
// window's excess leaves by the handshake (release after 2 s) with no
// EC2 call, five new pods get IPv6 addresses none of the released ones,
// and every invariant holds for both families.
func runFamilies(t *testing.T, families ...enipamv1alpha1.IPFamily) (w *world, sim *agentsim.Sim, names []string) {
	w = newWorld(t, ipv6Scenario)
	if err := env.Client.Create(w.ctx, familiesPolicy(families...)); err != nil {
		t.Fatal(err)
	}
	w.startOperator("--vpc-id=vpc-0f000000000000001", "--release-excess-ips=true", "--excess-ip-release-delay=2s")
	sim, names = w.fleet(agentsim.Options{IPFamilies: families, AllocateTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Minute)
	defer cancel()
	if err := sim.WaitReady(ctx, len(names)); err != nil {
		t.Fatalf("agents ready: %v; figures %+v", err, sim.Figures())
	}
	wantFamilies := len(families)

	type pod struct {
		node, owner string
		ips         []netip.Addr
	}
	allocate := func(prefix string, perNode int) []pod {
		results := make(chan pod, perNode*len(names))
		for i := range perNode * len(names) {
			node := names[i%len(names)]
			owner := fmt.Sprintf("web/%s-%d", prefix, i)
			sim.Agent(node).AllocateAsync(owner, func(r agentsim.Result) {
				if r.Err != nil {
					t.Errorf("%s on %s: %v", owner, node, r.Err)
				}
				results <- pod{node, owner, r.IPs}
			})
		}
		var out []pod
		for range perNode * len(names) {
			select {
			case p := <-results:
				out = append(out, p)
			case <-ctx.Done():
				t.Fatalf("pods still waiting: %+v", sim.Figures().Waits)
			}
		}
		return out
	}
	pods := allocate("web", 10)

	windows := w.primaryWindows()
	instanceOf := map[string]string{}
	for _, name := range names {
		instanceOf[name] = waitNode(t, ctx, name, "its instance", func(cn *ciliumv2.CiliumNode) bool { return cn.Spec.InstanceID != "" }).Spec.InstanceID
		if got := windows[instanceOf[name]]; len(got) != 1 || got[0].Bits() != 80 {
			t.Errorf("%s (%s): primary ENI holds IPv6 prefixes %v, want one /80", name, instanceOf[name], got)
		}
	}
	for _, p := range pods {
		var v4, v6 int
		for _, ip := range p.ips {
			if ip.Is4() {
				v4++
				continue
			}
			v6++
			if win := windows[instanceOf[p.node]]; len(win) == 0 || !win[0].Contains(ip) {
				t.Errorf("%s on %s got %s, outside its node's primary /80 %v", p.owner, p.node, ip, win)
			}
		}
		if v4+v6 != wantFamilies || v6 != 1 {
			t.Errorf("%s got %v, want one address of each of %v", p.owner, p.ips, families)
		}
	}

	// The pods go; the window's excess is released by the handshake:
	// what leaves the pool is what was released.
	before := map[netip.Addr]bool{}
	for _, name := range names {
		// Ten pods, router and health use 12, and 8 are kept free.
		_, v6 := family(waitNode(t, ctx, name, "an IPv6 window of 20, 8 free", func(cn *ciliumv2.CiliumNode) bool {
			_, v6 := family(cn.Spec.IPAM.Pool)
			return len(v6) == 20 && free6(cn) == 8
		}).Spec.IPAM.Pool)
		for _, ip := range v6 {
			before[ip] = true
		}
	}
	for _, p := range pods {
		sim.Agent(p.node).Release(p.owner)
	}
	released := map[netip.Addr]bool{}
	for ip := range before {
		released[ip] = true
	}
	for _, name := range names {
		cn := waitNode(t, ctx, name, "the IPv6 window back to 10 (8 free, router, health)", func(cn *ciliumv2.CiliumNode) bool {
			_, v6 := family(cn.Spec.IPAM.Pool)
			return len(v6) == 10 && free6(cn) == 8
		})
		_, v6 := family(cn.Spec.IPAM.Pool)
		for _, ip := range v6 {
			delete(released, ip)
		}
	}
	if len(released) != len(before)-10*len(names) {
		t.Errorf("%d IPv6 addresses left the pools, want %d", len(released), len(before)-10*len(names))
	}
	for _, p := range allocate("late", 5) {
		for _, ip := range p.ips {
			if released[ip] {
				t.Errorf("%s got %s, released a moment ago", p.owner, ip)
			}
		}
	}

	// A handout is judged once the routing watch saw a NodeRouting
	// revision at or after the pool's: a node whose report stopped
	// changing (IPv6 alone: the /80 is reported once) is touched, again
	// each second until every handout is judged.
	touches := 0
	touch := func() {
		touches++
		for _, name := range names {
			nr := &enipamv1alpha1.NodeRouting{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, nr); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(nr.DeepCopy())
			nr.Labels = map[string]string{"e2e.enipam.io/touched": fmt.Sprint(touches)}
			if err := env.Client.Patch(ctx, nr, patch); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		if sim.Figures().RoutedPending == 0 {
			return true, nil
		}
		touch()
		return false, nil
	}); err != nil {
		t.Errorf("handouts still waiting for the routing watch after %d touches: %d", touches, sim.Figures().RoutedPending)
	}
	f := sim.Figures()
	if f.RoutedChecks < len(pods) {
		t.Errorf("%d handouts judged routed before handed, want at least the %d pods'", f.RoutedChecks, len(pods))
	}
	if n := f.Violations.Total(); n != 0 {
		t.Fatalf("%d violations: %v", n, sim.Ledger().ViolationDetails())
	}
	w.checkPools(sim)
	counters, err := w.sim.Admin.Counters(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := counters.Succeeded("AssignIpv6Addresses"); got != int64(len(names)) {
		t.Errorf("%d AssignIpv6Addresses calls for %d nodes, want one each", got, len(names))
	}
	if got := counters.Succeeded("UnassignIpv6Addresses"); got != 0 {
		t.Errorf("%d UnassignIpv6Addresses calls, want none (the window releases by the handshake alone)", got)
	}
	t.Logf("%v: %d pods, %d IPv6 addresses released, EC2 calls %v", families, len(pods)+5*len(names), len(released), counters.Calls)
	return w, sim, names
}

// family splits a pool's addresses by family.
func family(m ipamtypes.AllocationMap) (v4, v6 []netip.Addr) {
	for key := range m {
		ip := netip.MustParseAddr(key)
		if ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	return v4, v6
}

// TestDualStackEndToEnd: runFamilies with IPv4 and IPv6: every pod also
// gets an IPv4 pool address.
func TestDualStackEndToEnd(t *testing.T) {
	runFamilies(t, enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family)
}

// TestIPv6OnlyEndToEnd: runFamilies with IPv6 alone: no IPv4 address is
// pooled or asked of EC2.
func TestIPv6OnlyEndToEnd(t *testing.T) {
	w, _, names := runFamilies(t, enipamv1alpha1.IPv6Family)
	for _, name := range names {
		cn := &ciliumv2.CiliumNode{}
		if err := env.Client.Get(w.ctx, client.ObjectKey{Name: name}, cn); err != nil {
			t.Fatal(err)
		}
		if v4, _ := family(cn.Spec.IPAM.Pool); len(v4) != 0 {
			t.Errorf("%s pools IPv4 %v on an IPv6-only policy", name, v4)
		}
	}
	counters, err := w.sim.Admin.Counters(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface"} {
		if n := counters.Succeeded(action); n != 0 {
			t.Errorf("%d %s calls on an IPv6-only policy", n, action)
		}
	}
}
