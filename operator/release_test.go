package operator_test

import (
	"context"
	"slices"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestExcessReleasedThroughHandshake: m5.large, pre-allocate 4, release
// on with no delay. Pods take 8 IPs (the pool grows to 12) and leave: 8
// are excess and marked. Playing the agent, the test refuses one
// (do-not-release) and acknowledges the others → the operator unassigns
// the 7 with one call per ENI, marks them released and drops them from the pool;
// the refused IP stays.
func TestExcessReleasedThroughHandshake(t *testing.T) {
	r := newRig(t, vpcScenario)
	opts := r.options()
	opts.ReleaseExcessIPs, opts.ReleaseDelay = true, 0
	r.startOperator(opts)
	r.addNode("node-rel", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-rel", 20*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	r.use("node-rel", 4)
	r.waitNode("node-rel", 20*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	r.use("node-rel", 4)
	r.waitNode("node-rel", 20*time.Second, "12 in pool", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 12 && freeIPs(cn) >= 4 })

	// The pods leave.
	r.agentUpdate("node-rel", func(cn *ciliumv2.CiliumNode) { cn.Status.IPAM.Used = nil })
	cn := r.waitNode("node-rel", 20*time.Second, "8 marked", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Status.IPAM.ReleaseIPs) == 8 })
	var marked []string
	for ip, st := range cn.Status.IPAM.ReleaseIPs {
		if st != ipamoption.IPAMMarkForRelease {
			t.Fatalf("%s is %q, want marked-for-release", ip, st)
		}
		marked = append(marked, ip)
	}
	slices.Sort(marked)
	refused := marked[0]
	enisTouched := map[string]bool{}
	for _, ip := range marked[1:] {
		enisTouched[cn.Spec.IPAM.Pool[ip].Resource] = true
	}
	r.agentUpdate("node-rel", func(cn *ciliumv2.CiliumNode) {
		for _, ip := range marked {
			cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
		}
		cn.Status.IPAM.ReleaseIPs[refused] = ipamoption.IPAMDoNotRelease
	})
	cn = r.waitNode("node-rel", 20*time.Second, "7 released", func(cn *ciliumv2.CiliumNode) bool {
		n := 0
		for _, st := range cn.Status.IPAM.ReleaseIPs {
			if st == ipamoption.IPAMReleased {
				n++
			}
		}
		return n == 7 && len(cn.Spec.IPAM.Pool) == 5
	})
	if _, ok := cn.Spec.IPAM.Pool[refused]; !ok {
		t.Errorf("refused IP %s left the pool", refused)
	}
	if st := cn.Status.IPAM.ReleaseIPs[refused]; st == ipamoption.IPAMReleased || st == ipamoption.IPAMDoNotRelease {
		t.Errorf("refused IP's handshake entry is %q, want it cleared (or marked anew)", st)
	}
	if got := r.calls("UnassignPrivateIpAddresses"); got != int64(len(enisTouched)) {
		t.Errorf("UnassignPrivateIpAddresses calls = %d, want one per ENI: %d", got, len(enisTouched))
	}
	attached, _ := r.enisOf("i-0a000000000000001")
	onENI := map[string]bool{}
	for _, e := range attached {
		for _, a := range e.PrivateIPAddresses {
			onENI[a.PrivateIPAddress] = true
		}
	}
	for _, ip := range marked[1:] {
		if onENI[ip] {
			t.Errorf("released IP %s is still on the ENI", ip)
		}
	}
	for ip := range cn.Spec.IPAM.Pool {
		if !onENI[ip] {
			t.Errorf("pool IP %s is not on the ENI", ip)
		}
	}
}

// agentUpdate changes a CiliumNode's status as the agent would, retrying
// on conflicts.
func (r *rig) agentUpdate(name string, change func(*ciliumv2.CiliumNode)) {
	r.t.Helper()
	err := wait.PollUntilContextTimeout(r.ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cn := r.node(name)
		change(cn)
		if err := r.c.Status().Update(ctx, cn); err != nil {
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return false, err
		}
		return true, nil
	})
	if err != nil {
		r.t.Fatalf("updating %s: %v", name, err)
	}
}
