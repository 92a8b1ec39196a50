package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/poolcontroller"
)

// TestReportNamingAnotherNodesENIIsIgnored: two m5.large nodes,
// pre-allocate 4. node-b's agent is down, so the addresses EC2 assigned
// on its ENI wait to be routed. node-a's report is then forged to list
// node-b's ENI and those addresses as routed on node-a (as a compromised
// node, or one writing with another node's credentials, would). The
// operator names the ENI in a ForeignENIReported event on node-a and
// pools none of those addresses, on either node; node-a's own pool is
// untouched.
func TestReportNamingAnotherNodesENIIsIgnored(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.agents.setDown("node-b", true)
	r.startOperator(r.options())
	r.addNode("node-a", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.addNode("node-b", "i-0a000000000000002", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})

	a := r.waitNode("node-a", 20*time.Second, "4 free", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	r.waitEvent("node-b", poolcontroller.ReasonAwaitingRouting)
	b := r.waitNode("node-b", 20*time.Second, "addresses on its ENIs", func(cn *ciliumv2.CiliumNode) bool {
		for _, e := range r.told(cn) {
			if len(e.Addresses) > 1 {
				return true
			}
		}
		return false
	})
	if len(b.Spec.IPAM.Pool) != 0 {
		t.Fatalf("node-b's pool has %d addresses although its agent routed none", len(b.Spec.IPAM.Pool))
	}
	var forged enipamv1alpha1.RoutedENI
	for _, e := range r.told(b) {
		if len(e.Addresses) > len(forged.IPs) {
			forged = enipamv1alpha1.RoutedENI{ID: e.ID, MAC: e.MAC, Number: int32(e.Number), Table: int32(10 + e.Number)}
			for _, ip := range e.Addresses {
				forged.IPs = append(forged.IPs, ip.String())
			}
		}
	}

	// node-a's agent stops; its report gains node-b's ENI.
	r.agents.setDown("node-a", true)
	nr := r.routing("node-a")
	want := nr.DeepCopy()
	want.Status.ENIs = append(want.Status.ENIs, forged)
	if err := r.c.Status().Patch(r.ctx, want, client.MergeFrom(nr)); err != nil {
		t.Fatal(err)
	}

	ev := r.waitEvent("node-a", poolcontroller.ReasonForeignENIReported)
	if !strings.Contains(ev.Note, forged.ID) || !strings.Contains(ev.Note, "i-0a000000000000002") {
		t.Errorf("event note %q names neither the ENI %s nor its instance", ev.Note, forged.ID)
	}
	// The operator has acted on the forged report; nothing of it is pooled.
	// Looked at over a few reconciles (the resync is fast in tests).
	var got map[string]*ciliumv2.CiliumNode
	err := wait.PollUntilContextTimeout(r.ctx, 200*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		got = map[string]*ciliumv2.CiliumNode{"node-a": r.node("node-a"), "node-b": r.node("node-b")}
		for name, cn := range got {
			for _, ip := range forged.IPs {
				if _, ok := cn.Spec.IPAM.Pool[ip]; ok {
					t.Errorf("%s's pool has %s of %s, reported routed only by node-a's forged report", name, ip, forged.ID)
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err == nil {
		t.FailNow()
	}
	if len(got["node-b"].Spec.IPAM.Pool) != 0 {
		t.Errorf("node-b's pool has %d addresses; its agent routed none", len(got["node-b"].Spec.IPAM.Pool))
	}
	if n := len(got["node-a"].Spec.IPAM.Pool); n != len(a.Spec.IPAM.Pool) {
		t.Errorf("node-a's pool went from %d to %d addresses", len(a.Spec.IPAM.Pool), n)
	}
}
