package agent_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

// withoutRoutesField replaces the stored NodeRouting CRD with one whose
// status has no routesSpecENIs (an earlier chart's), until restore is
// called or the test ends, and waits until the apiserver refuses that
// field in an apply to node's NodeRouting (and, on restoring, accepts it
// again).
func withoutRoutesField(t *testing.T, node string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	const name = "noderoutings.enipam.io"
	edit := func(drop bool) {
		for range 5 {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				t.Fatal(err)
			}
			for i := range crd.Spec.Versions {
				st := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["status"]
				if drop {
					delete(st.Properties, "routesSpecENIs")
				} else {
					st.Properties["routesSpecENIs"] = apiextensionsv1.JSONSchemaProps{Type: "boolean"}
				}
				crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["status"] = st
			}
			if err := env.Client.Update(ctx, crd); err == nil {
				return
			}
		}
		t.Fatal("could not update the NodeRouting CRD")
	}
	refused := func() bool {
		data, _ := json.Marshal(map[string]any{"apiVersion": enipamv1alpha1.GroupVersion.String(), "kind": "NodeRouting",
			"metadata": map[string]any{"name": node}, "status": map[string]any{"routesSpecENIs": true}})
		nr := &enipamv1alpha1.NodeRouting{}
		nr.Name = node
		err := env.Client.Status().Patch(ctx, nr, client.RawPatch(types.ApplyPatchType, data), client.FieldOwner("schema-probe"), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), ".status.routesSpecENIs: field not declared in schema")
	}
	edit(true)
	var once sync.Once
	restore = func() {
		once.Do(func() {
			edit(false)
			eventually(t, "the NodeRouting CRD with status.routesSpecENIs again", func() bool { return !refused() })
		})
	}
	t.Cleanup(restore)
	eventually(t, "the apiserver refusing status.routesSpecENIs", refused)
	return restore
}

// TestAgentReportsUnderACRDWithoutRoutesSpecENIs: under a stored
// NodeRouting CRD without status.routesSpecENIs (a chart upgraded without
// its CRDs), whose apply of it the apiserver refuses, the agent still
// reports the node routed, without the field, as an earlier agent: the
// operator then keeps status.eni.enis current for it, which it routes.
func TestAgentReportsUnderACRDWithoutRoutesSpecENIs(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth1", "02:00:00:00:0b:01")
	eni := awsENI("eni-a", 1, "02:00:00:00:0b:01", "10.0.2.0/24")
	eni.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.2.10"))}
	cn := createCiliumNode(t, []awstypes.ENI{eni}, map[string]string{"10.0.2.10": "eni-a"})
	withoutRoutesField(t, cn.Name)

	a, _ := startAgent(t, testConfig(cn.Name), env.Config, ns.Kernel())
	eventually(t, "10.0.2.10 routed and reported, the node Routed", func() bool {
		c := readyCondition(t, cn.Name)
		return hasRule(t, ns, "10.0.2.10", 11) && reported(t, cn.Name, "eni-a", "10.0.2.10") &&
			c != nil && c.Reason == enipamv1alpha1.ReasonRouted && a.Ready() == nil
	})
	if nodeRouting(t, cn.Name).Status.RoutesSpecENIs {
		t.Error("status.routesSpecENIs stored under a CRD without it")
	}
}

// TestAgentTriesRoutesSpecENIsAgainAfterTheRetry: once the apiserver
// refused status.routesSpecENIs, the agent reports without it until the
// retry's ten minutes have passed, even where the CRDs were upgraded
// meanwhile; after them, its next report carries the field again, and
// the operator takes it for an agent that routes spec.enis.
func TestAgentTriesRoutesSpecENIsAgainAfterTheRetry(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth1", "02:00:00:00:0b:02")
	eni := awsENI("eni-a", 1, "02:00:00:00:0b:02", "10.0.3.0/24")
	eni.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.3.10"))}
	cn := createCiliumNode(t, []awstypes.ENI{eni}, map[string]string{"10.0.3.10": "eni-a"})
	restore := withoutRoutesField(t, cn.Name)

	var skew atomic.Int64
	startAgentWith(t, testConfig(cn.Name), env.Config, ns.Kernel(), func(a *agent.Agent) {
		agent.SetClock(a, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	})
	eventually(t, "10.0.3.10 routed and reported", func() bool {
		return hasRule(t, ns, "10.0.3.10", 11) && reported(t, cn.Name, "eni-a", "10.0.3.10")
	})
	restore()

	listed := func(ips ...string) enipamv1alpha1.NodeENI {
		return enipamv1alpha1.NodeENI{ID: "eni-a", MAC: "02:00:00:00:0b:02", Number: 1, SubnetCIDR: "10.0.3.0/24",
			VPCCIDRs: []string{"10.0.0.0/16"}, Addresses: ips}
	}
	// Within the retry, the CRD upgraded: still reported without it.
	skew.Store(int64(9 * time.Minute))
	setSpecENIs(t, cn.Name, listed("10.0.3.10", "10.0.3.11"))
	eventually(t, "10.0.3.11, listed in spec.enis, routed and reported", func() bool {
		return hasRule(t, ns, "10.0.3.11", 11) && reported(t, cn.Name, "eni-a", "10.0.3.11")
	})
	if nodeRouting(t, cn.Name).Status.RoutesSpecENIs {
		t.Error("status.routesSpecENIs reported again before the retry")
	}
	// Past it: the next report carries the field.
	skew.Store(int64(11 * time.Minute))
	setSpecENIs(t, cn.Name, listed("10.0.3.10", "10.0.3.11", "10.0.3.12"))
	eventually(t, "10.0.3.12 reported, with status.routesSpecENIs", func() bool {
		return reported(t, cn.Name, "eni-a", "10.0.3.12") && nodeRouting(t, cn.Name).Status.RoutesSpecENIs
	})
}
