package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

// TestNodeRoutingFieldsHaveOneWriterEach: one m5.large (routingScenario)
// whose NodeRouting an earlier operator and agent wrote by create and
// merge patch, under managers of their own: a spec with an exclude tag
// the policy no longer has, and a status reporting an ENI the node does
// not have. The node agent starts first, on a network namespace: its
// report no longer lists that ENI (the earlier agent shares the fields
// the apply leaves out, and the agent removes them by one merge patch).
// The operator binary (--first-interface-index=1) then serves the node
// until its pool holds addresses the agent reported routed on the ENI
// it attached. The NodeRouting's managedFields
// then name one writer per field: every entry owning part of the spec,
// the owner references or the finalizers is enipam-operator's server-side
// apply; every entry owning part of the status is enipam-agent's apply
// through the status subresource; the earlier writers own nothing. And
// what the earlier writers left and the new ones do not apply is gone:
// the exclude tag, the ENI the node does not have.
func TestNodeRoutingFieldsHaveOneWriterEach(t *testing.T) {
	w := newWorld(t, routingScenario)
	ctx := w.ctx
	c := env.Client
	const name = "node-w1"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	legacy := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: enipamv1alpha1.NodeRoutingSpec{
		InstanceID: "i-0e000000000000001", FirstInterfaceIndex: 1, ExcludeInterfaceTags: map[string]string{"earlier": "policy"},
	}}
	if err := c.Create(ctx, legacy, client.FieldOwner("earlier-operator")); err != nil {
		t.Fatal(err)
	}
	report := []byte(`{"status":{"enis":[{"id":"eni-0e0000000000000ff","number":3,"ips":["10.1.64.250"]}],"routedENIs":1,"routedIPs":1}}`)
	if err := c.Status().Patch(ctx, legacy, client.RawPatch(types.MergePatchType, report), client.FieldOwner("earlier-agent")); err != nil {
		t.Fatal(err)
	}

	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0e000000000000001"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}

	// The agent reports before any operator runs: its apply cannot remove
	// what the earlier agent's merge patch also owns, so its report is
	// made exact by one merge patch.
	ns := kerneltest.New(t)
	a, err := agent.New(agent.DefaultConfig(name), env.Config, ns.Kernel(), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { stop(); <-done })
	waitNodeRouting(t, ctx, name, "the agent's first report, without the earlier ENI", func(nr *enipamv1alpha1.NodeRouting) bool {
		c := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && len(nr.Status.ENIs) == 0 && nr.Status.RoutedENIs == 0
	})

	w.startOperator("--first-interface-index=1", "--pre-allocate=4", "--vpc-id=vpc-0e000000000000001")
	listed := waitNodeRouting(t, ctx, name, "a second ENI listing its addresses", hasSecondENI)
	for _, eni := range listed.Spec.ENIs {
		ns.AddENILink(t, fmt.Sprintf("eth%d", eni.Number), eni.MAC)
	}
	waitNode(t, ctx, name, "4 addresses pooled", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) >= 4 })
	nr := waitNodeRouting(t, ctx, name, "the agent's Ready report of the current spec, without the earlier ENI and exclude tag", func(nr *enipamv1alpha1.NodeRouting) bool {
		c := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && nr.Status.ObservedGeneration == nr.Generation &&
			len(nr.Spec.ExcludeInterfaceTags) == 0 && !nr.Status.Routes("eni-0e0000000000000ff", "10.1.64.250")
	})
	if nr.Spec.Capacity == nil || nr.Spec.InstanceID != "i-0e000000000000001" {
		t.Errorf("spec %+v, want the operator's instance and capacity", nr.Spec)
	}

	var spec, status int
	for _, m := range nr.ManagedFields {
		owns := ownedRoots(t, m)
		if owns["f:spec"] || owns["f:ownerReferences"] || owns["f:finalizers"] {
			spec++
			if m.Manager != enipamv1alpha1.FieldManagerOperator || m.Operation != metav1.ManagedFieldsOperationApply || m.Subresource != "" {
				t.Errorf("%s (%s, subresource %q) owns %v, want enipam-operator's apply alone on the spec", m.Manager, m.Operation, m.Subresource, owns)
			}
		}
		if owns["f:status"] {
			status++
			if m.Manager != enipamv1alpha1.FieldManagerAgent || m.Operation != metav1.ManagedFieldsOperationApply || m.Subresource != "status" {
				t.Errorf("%s (%s, subresource %q) owns %v, want enipam-agent's apply alone on the status", m.Manager, m.Operation, m.Subresource, owns)
			}
		}
	}
	if spec != 1 || status != 1 {
		t.Errorf("%d managers own the spec and %d the status, want 1 and 1: %+v", spec, status, nr.ManagedFields)
	}
	t.Logf("managedFields: %d entries; spec owned by %d (enipam-operator, Apply), status by %d (enipam-agent, Apply, status)", len(nr.ManagedFields), spec, status)
}

// ownedRoots is what a managedFields entry owns among the spec, the
// status, the owner references and the finalizers.
func ownedRoots(t *testing.T, m metav1.ManagedFieldsEntry) map[string]bool {
	t.Helper()
	var set map[string]json.RawMessage
	if m.FieldsV1 == nil {
		return nil
	}
	if err := json.Unmarshal(m.FieldsV1.GetRawBytes(), &set); err != nil {
		t.Fatal(err)
	}
	owns := map[string]bool{"f:spec": set["f:spec"] != nil, "f:status": set["f:status"] != nil}
	if md := set["f:metadata"]; md != nil {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(md, &meta); err != nil {
			t.Fatal(err)
		}
		owns["f:ownerReferences"], owns["f:finalizers"] = meta["f:ownerReferences"] != nil, meta["f:finalizers"] != nil
	}
	return owns
}
