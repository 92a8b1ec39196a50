package operator_test

import (
	"context"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestEmptiedSecondaryENIDetachedAndDeleted: m5.large (3 ENIs of 9
// secondary addresses), pods on the primary ENI, pre-allocate 4, excess
// released at once, consolidation after 2 s. 16 pods grow the pool over
// three ENIs; then every pod goes but those on the primary ENI and one on
// the first secondary ENI. Playing Cilium's agent (acknowledging every
// address marked that no pod uses), the test sees the last secondary ENI,
// which carries no pod, drained first, detached and deleted: gone from
// EC2, from status.eni.enis, with an ENIConsolidated event and
// enipam_consolidations_total{kind="eni"} 1. The ENI carrying a pod is
// never chosen and keeps its pod's address; no address in use ever
// leaves the pool; the pool holds what EC2 shows; no ENI is left
// unattached.
func TestEmptiedSecondaryENIDetachedAndDeleted(t *testing.T) {
	const node, instance = "node-cons", "i-0a000000000000001"
	r := newRig(t, vpcScenario)
	opts := r.options()
	opts.ReleaseExcessIPs, opts.ReleaseDelay = true, 0
	opts.Consolidation.Enabled, opts.Consolidation.Delay = true, 2*time.Second
	_, reg, _ := r.startOperator(opts)
	r.addNode(node, instance, "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	for range 4 {
		r.waitNode(node, 30*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
		r.use(node, 4)
	}
	cn := r.waitNode(node, 30*time.Second, "three ENIs, 4 free", func(cn *ciliumv2.CiliumNode) bool {
		return len(cn.Status.ENI.ENIs) == 3 && freeIPs(cn) >= 4
	})
	byNumber := map[int]string{}
	for id, e := range cn.Status.ENI.ENIs {
		byNumber[e.Number] = id
	}
	primary, busy, last := byNumber[0], byNumber[1], byNumber[2]
	if primary == "" || busy == "" || last == "" {
		t.Fatalf("ENIs by device index %v, want 0, 1 and 2", byNumber)
	}

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
	err := wait.PollUntilContextTimeout(r.ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
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
		for _, e := range r.dump().NetworkInterfaces {
			if e.NetworkInterfaceID == last {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		attached, _ := r.enisOf(instance)
		t.Fatalf("ENI %s (device 2, no pod) never deleted: %v; attached %d ENIs", last, err, len(attached))
	}
	if sawBusyMarked {
		t.Error("an address in use was marked for release")
	}

	cn = r.waitNode(node, 20*time.Second, "status without the deleted ENI", func(cn *ciliumv2.CiliumNode) bool {
		_, listed := cn.Status.ENI.ENIs[last]
		return !listed
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
	if got := labelledCounter(t, reg, "enipam_consolidations_total", "kind", "eni"); got != 1 {
		t.Errorf("enipam_consolidations_total{kind=eni} = %v, want 1", got)
	}
	if got := r.calls("DetachNetworkInterface"); got != 1 {
		t.Errorf("DetachNetworkInterface calls = %d, want 1", got)
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
