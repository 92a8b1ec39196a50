package e2e

import (
	"context"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// TestPolicyReachesNodesAcrossAgentRestarts: the fleet of six (two
// m5.xlarge under the secondary policy, first interface index 1) fills
// its pools; then every simulated cilium-agent restarts the way Cilium's
// does, replacing its CiliumNode's labels and annotations
// (nodediscovery's mutateNodeResource). The policy's first interface
// index then changes to 2: it reaches both nodes' NodeRouting, nothing of
// the operator's is in a CiliumNode's metadata or spec.eni, the pools stay
// served, and the ledger (routed before handed included) counts nothing.
func TestPolicyReachesNodesAcrossAgentRestarts(t *testing.T) {
	w := newWorld(t, fleetScenario)
	if err := env.Client.Create(w.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	w.startOperator("--vpc-id=vpc-0f000000000000001")
	sim, names := w.fleet(agentsim.Options{})
	ctx, cancel := context.WithTimeout(w.ctx, 120*time.Second)
	defer cancel()
	if err := sim.WaitReady(ctx, len(names)); err != nil {
		t.Fatalf("agents ready: %v", err)
	}
	for _, name := range names {
		waitNode(t, ctx, name, "8 free IPs", func(cn *ciliumv2.CiliumNode) bool { return free(cn) >= 8 })
	}
	for _, name := range names {
		if err := sim.RestartAgent(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p := &enipamv1alpha1.ENIPolicy{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "secondary"}, p); err != nil {
			return false, err
		}
		two := int32(2)
		p.Spec.FirstInterfaceIndex = &two
		return env.Client.Update(ctx, p) == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	secondary := 0
	for _, name := range names {
		cn := &ciliumv2.CiliumNode{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cn); err != nil {
			t.Fatal(err)
		}
		if cn.Labels["pool"] != "secondary" {
			continue
		}
		secondary++
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			nr := &enipamv1alpha1.NodeRouting{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, nr); err != nil {
				return false, nil
			}
			return nr.Spec.FirstInterfaceIndex == 2, nil
		})
		if err != nil {
			t.Errorf("%s: NodeRouting never took the policy's first interface index 2", name)
		}
	}
	if secondary != 2 {
		t.Fatalf("%d nodes labelled pool=secondary after the restarts, want 2", secondary)
	}
	for _, name := range names {
		cn := waitNode(t, ctx, name, "8 free IPs", func(cn *ciliumv2.CiliumNode) bool { return free(cn) >= 8 })
		for k := range cn.Annotations {
			if len(k) > 10 && k[:10] == "enipam.io/" {
				t.Errorf("%s: operator state in annotation %s", name, k)
			}
		}
		if cn.Spec.ENI.FirstInterfaceIndex != nil {
			t.Errorf("%s: spec.eni.first-interface-index %d written by the operator", name, *cn.Spec.ENI.FirstInterfaceIndex)
		}
	}
	w.checkPools(sim)
	f := sim.Figures()
	t.Logf("violations %+v; handouts checked routed before handed %d (waiting %d)", f.Violations, f.RoutedChecks, f.RoutedPending)
	if f.Violations.Total() != 0 {
		t.Errorf("violations %+v: %v", f.Violations, sim.Ledger().ViolationDetails())
	}
	if f.RoutedChecks == 0 {
		t.Error("no handout was checked against the routing reports")
	}
}
