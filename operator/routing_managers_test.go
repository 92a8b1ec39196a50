package operator_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestNodeRoutingFieldsHaveOneWriterEach: a node served on m5.large
// (pre-allocate 4) with the node's agent reporting: the apiserver's
// managedFields of its NodeRouting show the spec written by the operator
// alone (FieldManagerOperator) and the status by the agent alone
// (FieldManagerAgent), each of them having written.
func TestNodeRoutingFieldsHaveOneWriterEach(t *testing.T) {
	r := newRig(t, vpcScenario)
	r.startOperator(r.options())
	r.addNode("node-1", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-1", 30*time.Second, "4 free IPs", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })

	nr := r.routing("node-1")
	writers := map[string][]string{} // top-level field -> managers
	for _, m := range nr.ManagedFields {
		if m.FieldsV1 == nil {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(m.FieldsV1.Raw, &fields); err != nil {
			t.Fatalf("managedFields of %s: %v", m.Manager, err)
		}
		for f := range fields {
			if !slices.Contains(writers[f], m.Manager) {
				writers[f] = append(writers[f], m.Manager)
			}
		}
	}
	if got := writers["f:spec"]; !slices.Equal(got, []string{enipamv1alpha1.FieldManagerOperator}) {
		t.Errorf("spec written by %v, want %s alone (all writers: %v)", got, enipamv1alpha1.FieldManagerOperator, writers)
	}
	if got := writers["f:status"]; !slices.Equal(got, []string{enipamv1alpha1.FieldManagerAgent}) {
		t.Errorf("status written by %v, want %s alone (all writers: %v)", got, enipamv1alpha1.FieldManagerAgent, slices.Sorted(maps.Keys(writers)))
	}
}
