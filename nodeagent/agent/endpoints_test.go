package agent_test

import (
	"slices"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

// askEndpoints writes spec.endpointQueries as the operator does and
// returns the generation it made.
func askEndpoints(t *testing.T, node string, ips ...string) int64 {
	t.Helper()
	return patchSpec(t, node, func(spec *enipamv1alpha1.NodeRoutingSpec) { spec.EndpointQueries = ips })
}

// TestAgentReportsEndpointsOfAskedAddresses: a node with Cilium's
// endpoint routes (pods on lxc veths, a /32 route each) whose NodeRouting
// asks about two addresses. The agent answers for the spec's generation:
// the running pod's address present, the other absent. When the pod's
// veth goes (its CNI DEL), the agent answers again at once, without a
// resync (an hour away): the link's removal wakes it. Asking nothing
// removes the report.
func TestAgentReportsEndpointsOfAskedAddresses(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth0", "02:00:00:00:03:00")
	ns.AddENILink(t, "eth1", "02:00:00:00:03:01")
	pod, other := kerneltest.New(t), kerneltest.New(t)
	kerneltest.ConnectPod(t, ns, "lxc0a1b2c3d", pod, "10.0.2.10")
	kerneltest.ConnectPod(t, ns, "lxc5e6f7a8b", other, "10.0.2.20")
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-primary", 0, "02:00:00:00:03:00", "10.0.1.0/24"), awsENI("eni-a", 1, "02:00:00:00:03:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a", "10.0.2.11": "eni-a", "10.0.2.20": "eni-a"})
	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = time.Hour
	a, _ := startAgent(t, cfg, env.Config, ns.Kernel())
	eventually(t, "agent ready", func() bool { return a.Ready() == nil })
	if r := nodeRouting(t, cn.Name).Status.Endpoints; r != nil {
		t.Fatalf("endpoints reported without a query: %+v", r)
	}

	gen := askEndpoints(t, cn.Name, "10.0.2.10", "10.0.2.11")
	eventually(t, "an answer for the asked generation", func() bool {
		r := nodeRouting(t, cn.Name).Status.Endpoints
		return r != nil && r.ObservedGeneration == gen
	})
	r := nodeRouting(t, cn.Name).Status.Endpoints
	if !r.EndpointRoutes || !slices.Equal(r.Present, []string{"10.0.2.10"}) || !slices.Equal(r.Absent, []string{"10.0.2.11"}) {
		t.Fatalf("report = %+v; want endpoint routes, 10.0.2.10 present, 10.0.2.11 absent", r)
	}
	if !r.EndpointGone("10.0.2.11", gen) || r.EndpointGone("10.0.2.10", gen) || r.EndpointGone("10.0.2.11", gen+1) {
		t.Error("EndpointGone disagrees with the report")
	}

	ns.DelLink(t, "lxc0a1b2c3d")
	eventually(t, "10.0.2.10 absent after its veth went", func() bool {
		return nodeRouting(t, cn.Name).Status.Endpoints.EndpointGone("10.0.2.10", gen)
	})

	askEndpoints(t, cn.Name)
	eventually(t, "report removed once nothing is asked", func() bool {
		return nodeRouting(t, cn.Name).Status.Endpoints == nil
	})
}
