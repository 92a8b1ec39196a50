package bench

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim/wire"
)

// fleetVPCIPv6 is the IPv6 /56 dualStackFleet gives fleetScenario's VPC;
// each subnet gets a /64 of it.
const fleetVPCIPv6 = "2600:1f18:abc:de00::/56"

var subnetLine = regexp.MustCompile(`(?m)^(  - \{id: subnet-[^,]+, name: [^,]+, cidr: [^,]+), zone:`)

// dualStackFleet is fleetScenario with an IPv6 /56 on the VPC and a /64
// of it on every subnet, as test/e2e's IPv6 scenario sets them up.
func dualStackFleet(n int, typ string, realistic bool) string {
	s := fleetScenario(n, typ, "", realistic)
	s = strings.Replace(s, "  cidrs: [", "  ipv6Cidr: "+fleetVPCIPv6+"\n  cidrs: [", 1)
	i := 0
	return subnetLine.ReplaceAllStringFunc(s, func(line string) string {
		i++
		m := subnetLine.FindStringSubmatch(line)
		return fmt.Sprintf("%s, ipv6Cidr: 2600:1f18:abc:de%02x::/64, zone:", m[1], i)
	})
}

// familyPolicy governs every node with the scale-up's families and pool
// knobs (the same as the operator's flags, so the IPv4 side is the IPv4
// scale-up's).
func familyPolicy(s ScaleUp) *enipamv1alpha1.ENIPolicy {
	pre := int32(s.PreAllocate)
	p := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench-families"},
		Spec: enipamv1alpha1.ENIPolicySpec{IPFamilies: s.IPFamilies, PreAllocate: &pre}}
	if s.NewENI {
		first := int32(1)
		p.Spec.FirstInterfaceIndex = &first
	}
	return p
}

// familyCounts is one CiliumNode's pool entries by family.
type familyCounts struct{ v4, v6 int }

func poolByFamily(cn *ciliumv2.CiliumNode) (pool familyCounts) {
	for ip := range cn.Spec.IPAM.Pool {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		if a.Is6() {
			pool.v6++
		} else {
			pool.v4++
		}
	}
	return pool
}

// familyWatch records, per node and family, when a list of the
// CiliumNodes first showed an address in the pool and the pool at full;
// times are from t0 and as precise as the lists are frequent.
type familyWatch struct {
	t0                   time.Time
	full                 int
	first4, first6       map[string]time.Duration
	reached4, reached6   map[string]time.Duration
	families4, families6 bool
	// listDuration is the longest list, what a time here may be late by
	// beyond the interval between lists.
	listDuration time.Duration
}

func newFamilyWatch(t0 time.Time, full int, families []enipamv1alpha1.IPFamily) *familyWatch {
	return &familyWatch{t0: t0, full: full,
		first4: map[string]time.Duration{}, first6: map[string]time.Duration{},
		reached4: map[string]time.Duration{}, reached6: map[string]time.Duration{},
		families4: len(families) == 0 || slices.Contains(families, enipamv1alpha1.IPv4Family),
		families6: enipamv1alpha1.WantsIPv6(families)}
}

// look lists the CiliumNodes once and records what is new.
func (f *familyWatch) look(ctx context.Context, w *world) error {
	start := time.Now()
	var list ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &list); err != nil {
		return err
	}
	at := time.Since(f.t0)
	f.listDuration = max(f.listDuration, time.Since(start))
	for i := range list.Items {
		cn := &list.Items[i]
		c := poolByFamily(cn)
		note := func(m map[string]time.Duration, ok bool) {
			if _, seen := m[cn.Name]; !seen && ok {
				m[cn.Name] = at
			}
		}
		note(f.first4, c.v4 > 0)
		note(f.first6, c.v6 > 0)
		note(f.reached4, c.v4 >= f.full)
		note(f.reached6, c.v6 >= f.full)
	}
	return nil
}

// done says whether every node reached full in each family it runs.
func (f *familyWatch) done(nodes int) bool {
	return (!f.families4 || len(f.reached4) >= nodes) && (!f.families6 || len(f.reached6) >= nodes)
}

// ipv6Calls counts the IPv6 EC2 calls that succeeded.
func ipv6Calls(c wire.Counters) int64 {
	return c.Succeeded("AssignIpv6Addresses") + c.Succeeded("UnassignIpv6Addresses")
}

// violationsByFamily splits the ledger's recorded breaches (the first
// 1000, with their addresses) by family.
func violationsByFamily(details []agentsim.Violation) (v4, v6 map[agentsim.ViolationKind]int) {
	v4, v6 = map[agentsim.ViolationKind]int{}, map[agentsim.ViolationKind]int{}
	for _, d := range details {
		if a, err := netip.ParseAddr(d.IP); err == nil && a.Is6() {
			v6[d.Kind]++
		} else {
			v4[d.Kind]++
		}
	}
	return v4, v6
}

// onlyFamily copies the CiliumNodes keeping the pool, used and release
// entries of one family, for a pool check of that family alone.
func onlyFamily(nodes []ciliumv2.CiliumNode, v6 bool) []ciliumv2.CiliumNode {
	keep := func(ip string) bool {
		a, err := netip.ParseAddr(ip)
		return err == nil && a.Is6() == v6
	}
	out := make([]ciliumv2.CiliumNode, len(nodes))
	for i := range nodes {
		cn := nodes[i].DeepCopy()
		for ip := range cn.Spec.IPAM.Pool {
			if !keep(ip) {
				delete(cn.Spec.IPAM.Pool, ip)
			}
		}
		for ip := range cn.Status.IPAM.Used {
			if !keep(ip) {
				delete(cn.Status.IPAM.Used, ip)
			}
		}
		for ip := range cn.Status.IPAM.ReleaseIPs {
			if !keep(ip) {
				delete(cn.Status.IPAM.ReleaseIPs, ip)
			}
		}
		out[i] = *cn
	}
	return out
}

// poolFindingsByFamily holds each family's pools to EC2's state as
// poolFindings does, with two looks a grace apart.
func (w *world) poolFindingsByFamily(ctx context.Context) (v4, v6 agentsim.PoolFindings, err error) {
	const grace = 3 * time.Second
	c4, c6 := agentsim.NewPoolChecker(grace), agentsim.NewPoolChecker(grace)
	for look := range 2 {
		if look > 0 {
			select {
			case <-ctx.Done():
				return v4, v6, ctx.Err()
			case <-time.After(grace + 500*time.Millisecond):
			}
		}
		var list ciliumv2.CiliumNodeList
		if err := w.cluster.Client.List(ctx, &list); err != nil {
			return v4, v6, err
		}
		dump, err := w.sim.Admin.Dump(ctx)
		if err != nil {
			return v4, v6, err
		}
		now := time.Now()
		v4 = c4.Check(onlyFamily(list.Items, false), dump, now)
		v6 = c6.Check(onlyFamily(list.Items, true), dump, now)
	}
	return v4, v6, nil
}

// applyPolicy creates p and waits until the operator has seen it (its
// status carries its generation), so the nodes joining next are governed
// by it from their first reconcile.
func (w *world) applyPolicy(ctx context.Context, p *enipamv1alpha1.ENIPolicy) error {
	if err := w.cluster.Client.Create(ctx, p); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var got enipamv1alpha1.ENIPolicy
		if err := w.cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		if got.Generation > 0 && got.Status.ObservedGeneration == got.Generation {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ENIPolicy %s not observed by the operator within a minute: %+v", p.Name, got.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// mutatingCalls counts the non-describe EC2 calls that succeeded.
func mutatingCalls(c wire.Counters) int64 {
	var n int64
	for action := range c.Calls {
		if !strings.HasPrefix(action, "Describe") {
			n += c.Succeeded(action)
		}
	}
	return n
}

// podsPhase lands s.Pods pods on every node once the scale-up is done,
// waits until each family's pool has grown back to pre-allocate free
// beyond them, and reports what EC2 calls that took (before: the counters
// at the scale-up's end): for IPv6 the window refills from the /80 with
// none.
func (s ScaleUp) podsPhase(ctx context.Context, e *Env, w *world, rep *Report, names []string, before wire.Counters) error {
	e.say("%s: %d pods land on each node", s.Name(), s.Pods)
	total := s.Pods * len(names)
	results := make(chan agentsim.Result, total)
	for i := range total {
		node := names[i%len(names)]
		w.agents.Agent(node).AllocateAsync(fmt.Sprintf("bench/pod-%d", i), func(r agentsim.Result) { results <- r })
	}
	deadline := time.After(time.Duration(len(names))*time.Second + 3*time.Minute)
	var waits []time.Duration
	for range total {
		select {
		case r := <-results:
			if r.Err != nil {
				return fmt.Errorf("a pod got no address: %w", r.Err)
			}
			if len(r.IPs) != len(s.IPFamilies) {
				return fmt.Errorf("a pod got %v, want one address of each of %v", r.IPs, s.IPFamilies)
			}
			waits = append(waits, r.Waited)
		case <-deadline:
			return fmt.Errorf("%d of %d pods got addresses before the deadline", len(waits), total)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	slices.Sort(waits)
	// The pools grow back: pods, router and health used, pre-allocate
	// free, in each family the node runs.
	want := s.Pods + s.PreAllocate + 2
	watch := newFamilyWatch(time.Now(), want, s.IPFamilies)
	for !watch.done(len(names)) {
		if err := watch.look(ctx, w); err != nil {
			return err
		}
		if watch.done(len(names)) {
			break
		}
		select {
		case <-deadline:
			return fmt.Errorf("pools at %d per family after the pods: %d nodes IPv4, %d IPv6 of %d", want, len(watch.reached4), len(watch.reached6), len(names))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	// Let a late call (there should be none for IPv6) be counted.
	time.Sleep(10 * time.Second)
	after, err := w.sim.Admin.Counters(ctx)
	if err != nil {
		return err
	}
	n := float64(len(names))
	v6Calls := ipv6Calls(after) - ipv6Calls(before)
	mutating := mutatingCalls(after) - mutatingCalls(before)
	rep.add("pods phase: pods placed (one address of each family)", total, "")
	rep.add("pods phase: pod waits p50 / p99", fmt.Sprintf("%s / %s", percentile(waits, 0.5).Round(time.Millisecond), percentile(waits, 0.99).Round(time.Millisecond)), "")
	rep.add(fmt.Sprintf("pods phase: every pool back at %d per family in", want), watch.lastSeen().Round(100*time.Millisecond), "")
	rep.add("pods phase: EC2 mutating calls per node, IPv4", float64(mutating-v6Calls)/n, "")
	rep.add("pods phase: EC2 IPv6 calls", v6Calls, "calls")
	rep.target("no IPv6 EC2 call while the /80 lasts (pods phase)", "0", fmt.Sprint(v6Calls), v6Calls == 0)
	return nil
}

// lastSeen is when the last node reached full in the families it runs.
func (f *familyWatch) lastSeen() time.Duration {
	var last time.Duration
	for _, m := range []map[string]time.Duration{f.reached4, f.reached6} {
		for _, d := range m {
			last = max(last, d)
		}
	}
	return last
}

// addFamilyPoolFindings reports the pool/EC2 invariant for each family
// and makes it a target.
func (r *Report) addFamilyPoolFindings(v4, v6 agentsim.PoolFindings) {
	both := func(a, b int) string { return fmt.Sprintf("%d / %d", a, b) }
	r.add("IPs in two pools IPv4 / IPv6", both(v4.InTwoPools, v6.InTwoPools), "")
	r.add("free pool IPs off their ENI in EC2 IPv4 / IPv6", both(v4.FreeOffENI, v6.FreeOffENI), "")
	r.add("released IPs still in a pool IPv4 / IPv6", both(v4.ReleasedInPool, v6.ReleasedInPool), "")
	r.add("stamped pool IPs off their ENI in EC2 IPv4 / IPv6", both(v4.StampedOffENI, v6.StampedOffENI), "")
	// Both checks look at all of EC2's addresses: its breaches count once.
	r.add("IPs (or IPv6 prefixes) on two ENIs in EC2", v4.OnTwoENIs, "")
	total := v4.Total() + v6.Total() - v6.OnTwoENIs
	r.target("pools follow EC2, both families", "0", fmt.Sprint(total), total == 0)
}
