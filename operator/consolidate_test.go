package operator_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestEmptiedSecondaryENIDetachedAndDeleted: m5.large (3 ENIs of 9
// secondary addresses), pods on the primary ENI, pre-allocate 4, excess
// released at once, consolidation after 2 s, ec2sim's realistic timing
// (attachments and detachments taking seconds, describes lagging), the
// ENI collector every half second. 16 pods grow the pool over
// three ENIs; then every pod goes but those on the primary ENI and one on
// the first secondary ENI. Playing Cilium's agent (acknowledging every
// address marked that no pod uses), the test sees the last secondary ENI,
// which carries no pod, drained first, detached and deleted: gone from
// EC2, from status.eni.enis, with an ENIConsolidated event and
// enipam_consolidations_total{kind="eni"} 1. The ENI carrying a pod is
// never chosen and keeps its pod's address; no address in use ever
// leaves the pool; the pool holds what EC2 shows; no ENI is left
// unattached. Then two pods stay on the primary ENI, which now carries
// the node: device 1's free addresses go out of service around its pod
// while the primary ENI takes the headroom, and once the pod goes the ENI
// is deleted too (a second consolidation).
func TestEmptiedSecondaryENIDetachedAndDeleted(t *testing.T) {
	const node, instance = "node-cons", "i-0a000000000000001"
	r := newRig(t, vpcScenario)
	if err := r.sim.State().SetTiming(ec2sim.RealisticTiming()); err != nil {
		t.Fatal(err)
	}
	opts := r.options()
	opts.ReleaseExcessIPs, opts.ReleaseDelay = true, 0
	opts.Consolidation.Enabled, opts.Consolidation.Delay = true, 2*time.Second
	// The collector runs often and takes any unattached ENI of the
	// cluster older than a second: it may delete the detached ENI first.
	opts.GCInterval, opts.GCMinAge = 500*time.Millisecond, time.Second
	_, reg, _ := r.startOperator(opts)
	r.addNode(node, instance, "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	for range 4 {
		r.waitNode(node, 30*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
		r.use(node, 4)
	}
	r.waitNode(node, 30*time.Second, "three ENIs, 4 free", func(cn *ciliumv2.CiliumNode) bool {
		return len(r.told(cn)) == 3 && freeIPs(cn) >= 4
	})
	byNumber := map[int]string{}
	for id, e := range r.told(r.node(node)) {
		byNumber[e.Number] = id
	}
	primary, busy, last := byNumber[0], byNumber[1], byNumber[2]
	if primary == "" || busy == "" || last == "" {
		t.Fatalf("ENIs by device index %v, want 0, 1 and 2", byNumber)
	}

	grown := time.Now()
	// Every pod goes but those on the primary ENI and one on device 1.
	var pinned string
	r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) {
		kept := ipamtypes.AllocationMap{}
		for ip, a := range cn.Status.IPAM.Used {
			res := cn.Spec.IPAM.Pool[ip].Resource
			if res == primary || (res == busy && (pinned == "" || pinned == ip)) {
				if res == busy {
					pinned = ip
				}
				kept[ip] = a
			}
		}
		cn.Status.IPAM.Used = kept
	})
	if pinned == "" {
		t.Fatal("no pod on the first secondary ENI")
	}
	used := r.node(node).Status.IPAM.Used

	// The agent acknowledges whatever is marked and unused, until the
	// emptied ENI is gone from EC2.
	var sawBusyMarked bool
	ack := func(done func() bool) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			cn := r.node(node)
			for ip := range used {
				if _, ok := cn.Spec.IPAM.Pool[ip]; !ok {
					t.Fatalf("address %s in use left the pool", ip)
				}
				if st, ok := cn.Status.IPAM.ReleaseIPs[ip]; ok && st != ipamoption.IPAMDoNotRelease {
					sawBusyMarked = true
				}
			}
			ack := false
			for _, st := range cn.Status.IPAM.ReleaseIPs {
				ack = ack || st == ipamoption.IPAMMarkForRelease
			}
			if ack {
				r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) {
					for ip, st := range cn.Status.IPAM.ReleaseIPs {
						if st != ipamoption.IPAMMarkForRelease {
							continue
						}
						if _, inUse := cn.Status.IPAM.Used[ip]; inUse {
							cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMDoNotRelease
						} else {
							cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
						}
					}
				})
			}
			return done(), nil
		}
	}
	err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 60*time.Second, true, ack(func() bool {
		for _, e := range r.dump().NetworkInterfaces {
			if e.NetworkInterfaceID == last {
				return false
			}
		}
		return true
	}))
	if err != nil {
		attached, _ := r.enisOf(instance)
		t.Fatalf("ENI %s (device 2, no pod) never deleted: %v; attached %d ENIs", last, err, len(attached))
	}
	if sawBusyMarked {
		t.Error("an address in use was marked for release")
	}

	cn := r.waitNode(node, 20*time.Second, "spec.enis without the deleted ENI, no operator-status error", func(cn *ciliumv2.CiliumNode) bool {
		_, listed := r.told(cn)[last]
		return !listed && cn.Status.IPAM.OperatorStatus.Error == ""
	})
	attached, orphans := r.enisOf(instance)
	if len(attached) != 2 || len(orphans) != 0 {
		t.Errorf("EC2: %d ENIs attached, %d unattached of the cluster; want 2 and 0", len(attached), len(orphans))
	}
	onENI := map[string]string{}
	for _, e := range attached {
		for _, a := range e.PrivateIPAddresses {
			if !a.Primary {
				onENI[a.PrivateIPAddress] = e.NetworkInterfaceID
			}
		}
	}
	if onENI[pinned] != busy {
		t.Errorf("the pod's address %s is on %q in EC2, want %s (the ENI with a pod is never consolidated)", pinned, onENI[pinned], busy)
	}
	for ip, e := range cn.Spec.IPAM.Pool {
		if e.Resource == last {
			t.Errorf("pool entry %s names the deleted ENI", ip)
		}
		if st := cn.Status.IPAM.ReleaseIPs[ip]; st == ipamoption.IPAMReleased {
			continue
		}
		if onENI[ip] != e.Resource {
			t.Errorf("pool entry %s on %s, EC2 shows it on %q", ip, e.Resource, onENI[ip])
		}
	}
	r.waitEvent(node, "ENIConsolidated")
	// The attachments of the growth may outlast the rig's routing
	// patience (2 s); once grown, no address waits for the agent.
	for _, ev := range r.events(node) {
		late := ev.EventTime.After(grown) || (ev.Series != nil && ev.Series.LastObservedTime.After(grown))
		if ev.Reason == "AwaitingRouting" && late {
			t.Errorf("event %s after the growth: %s", ev.Reason, ev.Note)
		}
	}
	if got := labelledCounter(t, reg, "enipam_consolidations_total", "kind", "eni"); got != 1 {
		t.Errorf("enipam_consolidations_total{kind=eni} = %v, want 1", got)
	}
	if got := r.calls("DetachNetworkInterface"); got != 1 {
		t.Errorf("DetachNetworkInterface calls = %d, want 1", got)
	}

	// The primary ENI carries the node's pods and headroom: device 1 is
	// drained next, its free addresses out of service while its pod
	// runs; once the pod goes, it is deleted too.
	// Two pods stay on the primary ENI: device 1 goes out of service
	// while its pod runs, the primary takes the headroom.
	r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) {
		kept := ipamtypes.AllocationMap{pinned: cn.Status.IPAM.Used[pinned]}
		for ip, a := range cn.Status.IPAM.Used {
			if len(kept) < 3 && cn.Spec.IPAM.Pool[ip].Resource == primary {
				kept[ip] = a
			}
		}
		cn.Status.IPAM.Used = kept
	})
	used = r.node(node).Status.IPAM.Used
	if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 60*time.Second, true, ack(func() bool {
		cn := r.node(node)
		onPrimary := 0
		for ip, e := range cn.Spec.IPAM.Pool {
			_, leaving := cn.Status.IPAM.ReleaseIPs[ip]
			if e.Resource == busy && ip != pinned && !leaving {
				return false
			}
			if _, inUse := cn.Status.IPAM.Used[ip]; e.Resource == primary && !leaving && !inUse {
				onPrimary++
			}
		}
		return onPrimary >= 4
	})); err != nil {
		t.Fatalf("device 1 never drained around its pod (the headroom on the primary ENI): %v", err)
	}
	r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) { delete(cn.Status.IPAM.Used, pinned) })
	delete(used, pinned)
	if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 60*time.Second, true, ack(func() bool {
		for _, e := range r.dump().NetworkInterfaces {
			if e.NetworkInterfaceID == busy {
				return false
			}
		}
		return true
	})); err != nil {
		t.Fatalf("ENI %s (device 1) never deleted once its pod left: %v", busy, err)
	}
	r.waitNode(node, 20*time.Second, "the pool on the primary ENI alone, 4 free", func(cn *ciliumv2.CiliumNode) bool {
		for _, e := range cn.Spec.IPAM.Pool {
			if e.Resource != primary {
				return false
			}
		}
		return len(r.told(cn)) == 1 && freeIPs(cn) >= 4
	})
	if got := labelledCounter(t, reg, "enipam_consolidations_total", "kind", "eni"); got != 2 {
		t.Errorf("enipam_consolidations_total{kind=eni} = %v, want 2", got)
	}
	if attached, orphans := r.enisOf(instance); len(attached) != 1 || len(orphans) != 0 {
		t.Errorf("EC2: %d ENIs attached, %d unattached of the cluster; want 1 and 0", len(attached), len(orphans))
	}
}

// labelledCounter reads the counter of reg named name with one label.
func labelledCounter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestLeastUsedPrefixDrainedWhole: m5.large with prefix delegation,
// pre-allocate 4, excess released at once. The pool grows to three /28s;
// then the pods left are 3 in one prefix (A) and 1 in another (B), none
// in the third (C). Playing Cilium's agent, the test sees C released
// whole, and B's 15 free members marked and, acknowledged, held out of
// service (ready-for-release, still listed) while its pod runs; once that
// pod goes its address follows, and B is released whole: EC2 keeps only
// A, the pool holds A's 16 addresses (at most pre-allocate + 16 free),
// enipam_consolidations_total{kind="prefix"} is 1 with a
// PrefixConsolidated event, and no address in use ever left the pool.
func TestLeastUsedPrefixDrainedWhole(t *testing.T) {
	const node, instance = "node-frag", "i-0a000000000000001"
	r := newRig(t, vpcScenario)
	opts := r.options()
	opts.ReleaseExcessIPs, opts.ReleaseDelay, opts.PrefixDelegation = true, 0, true
	opts.Consolidation.Enabled = true
	_, reg, _ := r.startOperator(opts)
	r.addNode(node, instance, "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode(node, 20*time.Second, "one prefix", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 16 })
	r.use(node, 16)
	r.waitNode(node, 20*time.Second, "two prefixes", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 32 })
	r.use(node, 14)
	r.waitNode(node, 20*time.Second, "three prefixes", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 48 })
	_, told := r.waitTold(node)
	var prefixes []netip.Prefix
	for _, e := range told {
		for _, p := range e.Prefixes {
			prefixes = append(prefixes, netip.Prefix(p.Prefix))
		}
	}
	if len(prefixes) != 3 {
		t.Fatalf("prefixes %v, want 3", prefixes)
	}
	slices.SortFunc(prefixes, netip.Prefix.Compare)
	a, b, c := prefixes[0], prefixes[1], prefixes[2]
	members := func(p netip.Prefix) []string {
		var out []string
		for ip := p.Addr(); p.Contains(ip); ip = ip.Next() {
			out = append(out, ip.String())
		}
		return out
	}
	keepA, keepB := members(a)[:3], members(b)[5]
	r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) {
		used := ipamtypes.AllocationMap{}
		for _, ip := range append(slices.Clone(keepA), keepB) {
			used[ip] = ipamtypes.AllocationIP{Owner: "default/pod-" + ip, Resource: cn.Spec.IPAM.Pool[ip].Resource}
		}
		cn.Status.IPAM.Used = used
	})

	// ack acknowledges every marked address no pod uses, and checks that
	// no address in use left the pool; it reports whether cond holds.
	ack := func(cond func(cn *ciliumv2.CiliumNode) bool) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			cn := r.node(node)
			for ip := range cn.Status.IPAM.Used {
				if _, ok := cn.Spec.IPAM.Pool[ip]; !ok {
					t.Fatalf("address %s in use left the pool", ip)
				}
			}
			marked := false
			for _, st := range cn.Status.IPAM.ReleaseIPs {
				marked = marked || st == ipamoption.IPAMMarkForRelease
			}
			if marked {
				r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) {
					for ip, st := range cn.Status.IPAM.ReleaseIPs {
						if st != ipamoption.IPAMMarkForRelease {
							continue
						}
						if _, inUse := cn.Status.IPAM.Used[ip]; inUse {
							cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMDoNotRelease
						} else {
							cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
						}
					}
				})
				return false, nil
			}
			return cond(cn), nil
		}
	}
	held := func(cn *ciliumv2.CiliumNode) bool {
		for _, ip := range members(b) {
			if ip == keepB {
				continue
			}
			if _, listed := cn.Spec.IPAM.Pool[ip]; !listed || cn.Status.IPAM.ReleaseIPs[ip] != ipamoption.IPAMReadyForRelease {
				return false
			}
		}
		return true
	}
	cGone := func(cn *ciliumv2.CiliumNode) bool {
		_, listed := cn.Spec.IPAM.Pool[c.Addr().String()]
		return !listed
	}
	if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 30*time.Second, true, ack(func(cn *ciliumv2.CiliumNode) bool {
		return cGone(cn) && held(cn)
	})); err != nil {
		cn := r.node(node)
		t.Fatalf("C released and B's free members held: %v; pool %d, release-ips %v", err, len(cn.Spec.IPAM.Pool), cn.Status.IPAM.ReleaseIPs)
	}
	// B's members stay held, never taken back, while its pod runs.
	for range 5 {
		time.Sleep(time.Second)
		if cn := r.node(node); !held(cn) {
			t.Fatalf("B's acknowledged members were taken back while B drains: release-ips %v", cn.Status.IPAM.ReleaseIPs)
		}
	}

	// B's pod goes.
	r.agentUpdate(node, func(cn *ciliumv2.CiliumNode) { delete(cn.Status.IPAM.Used, keepB) })
	if err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 30*time.Second, true, ack(func(cn *ciliumv2.CiliumNode) bool {
		return len(cn.Spec.IPAM.Pool) == 16
	})); err != nil {
		cn := r.node(node)
		t.Fatalf("B never released: %v; pool %d, release-ips %v", err, len(cn.Spec.IPAM.Pool), cn.Status.IPAM.ReleaseIPs)
	}
	cn := r.node(node)
	for ip := range cn.Spec.IPAM.Pool {
		if !a.Contains(netip.MustParseAddr(ip)) {
			t.Errorf("pool keeps %s outside prefix %s", ip, a)
		}
	}
	if free := freeIPs(cn); free > 4+16 {
		t.Errorf("%d free addresses, want at most pre-allocate + 16", free)
	}
	attached, _ := r.enisOf(instance)
	var inEC2 []string
	for _, e := range attached {
		for _, p := range e.IPv4Prefixes {
			inEC2 = append(inEC2, p.IPv4Prefix)
		}
	}
	if len(inEC2) != 1 || inEC2[0] != a.String() {
		t.Errorf("EC2 shows prefixes %v, want only %s", inEC2, a)
	}
	r.waitEvent(node, "PrefixConsolidated")
	if got := labelledCounter(t, reg, "enipam_consolidations_total", "kind", "prefix"); got != 1 {
		t.Errorf("enipam_consolidations_total{kind=prefix} = %v, want 1", got)
	}
}
