package operator_test

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"strings"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestOverlappingPoliciesResolvedAndReported: two policies match the same
// node, "wide" (priority 10, pre-allocate 6) and "narrow" (priority 1,
// pre-allocate 3) → narrow governs the node (its pool holds 3 + the
// agent's 2), both are Accepted, wide reports a Conflict naming narrow,
// a PolicyConflict event says so, and enipam_node_policy names narrow for
// the node (the join that sums pool series per policy).
func TestOverlappingPoliciesResolvedAndReported(t *testing.T) {
	r := newRig(t, vpcScenario)
	for _, p := range []*enipamv1alpha1.ENIPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "wide"}, Spec: enipamv1alpha1.ENIPolicySpec{Priority: 10, PreAllocate: i32(6)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "narrow"}, Spec: enipamv1alpha1.ENIPolicySpec{Priority: 1, PreAllocate: i32(3),
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}},
	} {
		if err := r.c.Create(r.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	_, reg, _ := r.startOperator(r.options())
	r.addNode("node-p", "i-0a000000000000001", "us-east-1a", map[string]string{"team": "a"}, ipamtypes.IPAMSpec{})
	r.waitNode("node-p", 20*time.Second, "the narrow policy's pool", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 5 })

	var wide, narrow enipamv1alpha1.ENIPolicy
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKey{Name: "wide"}, &wide); err != nil {
			return false, err
		}
		if err := r.c.Get(ctx, client.ObjectKey{Name: "narrow"}, &narrow); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(wide.Status.Conditions, enipamv1alpha1.ConditionConflict) && narrow.Status.MatchedNodes == 1, nil
	})
	if err != nil {
		t.Fatalf("policy status never settled: wide %+v, narrow %+v", wide.Status, narrow.Status)
	}
	if c := apimeta.FindStatusCondition(wide.Status.Conditions, enipamv1alpha1.ConditionConflict); !strings.Contains(c.Message, "narrow on 1 nodes") {
		t.Errorf("conflict message %q does not name the winner", c.Message)
	}
	for _, p := range []enipamv1alpha1.ENIPolicy{wide, narrow} {
		if !apimeta.IsStatusConditionTrue(p.Status.Conditions, enipamv1alpha1.ConditionAccepted) {
			t.Errorf("%s not accepted: %+v", p.Name, p.Status.Conditions)
		}
	}
	if wide.Status.MatchedNodes != 0 {
		t.Errorf("wide governs %d nodes, want 0", wide.Status.MatchedNodes)
	}
	r.waitEvent("wide", "PolicyConflict")
	r.waitEvent("node-p", "PolicyConflict")
	if got := nodePolicy(t, reg, "node-p", "narrow"); got != 1 {
		t.Errorf("enipam_node_policy{node=node-p,policy=narrow} = %v, want 1", got)
	}
}

// nodePolicy finds the enipam_node_policy series of node and policy.
func nodePolicy(t *testing.T, reg *prometheus.Registry, node, policy string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "enipam_node_policy" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["node"] == node && labels["policy"] == policy {
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no enipam_node_policy series for %s/%s in %v", node, policy, mf.GetMetric())
	}
	t.Fatal("enipam_node_policy not exported")
	return 0
}

// TestNothingLeftAfterTermination: a node's new ENI misses its
// delete-on-termination (the Modify fails once); the operator repairs the
// flag, so when the instance terminates EC2 deletes the ENI with it and
// nothing of enipam remains.
func TestNothingLeftAfterTermination(t *testing.T) {
	r := newRig(t, vpcScenario)
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	if err := r.sim.SetFaults(ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{
		{Action: "ModifyNetworkInterfaceAttribute", Code: "UnauthorizedOperation", Count: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-t", "i-0a000000000000002", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{})
	r.waitNode("node-t", 20*time.Second, "pool filled, error cleared", func(cn *ciliumv2.CiliumNode) bool {
		return freeIPs(cn) >= 8 && cn.Status.IPAM.OperatorStatus.Error == ""
	})
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		attached, _ := r.enisOf("i-0a000000000000002")
		for _, e := range attached {
			if e.Attachment.DeviceIndex == 1 {
				return e.Attachment.DeleteOnTermination, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("delete-on-termination never repaired: %v", err)
	}
	if err := r.admin.TerminateInstance(r.ctx, "i-0a000000000000002"); err != nil {
		t.Fatal(err)
	}
	for _, e := range r.dump().NetworkInterfaces {
		for _, tag := range e.Tags {
			if tag.Key == "enipam.io/cluster" {
				t.Errorf("ENI %s (%s) outlived its instance", e.NetworkInterfaceID, e.Status)
			}
		}
	}
}
