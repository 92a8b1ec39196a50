package agentsim_test

import (
	"context"
	"slices"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// endpointReport reads the NodeRouting's endpoint report.
func endpointReport(t *testing.T, name string) *enipamv1alpha1.EndpointReport {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	return nr.Status.Endpoints
}

// TestEndpointAnswersAndFastRelease: a node whose Cilium runs with endpoint routes; db-0 holds its stamped address. The
// simulated enipam-agent answers the query about it present while the
// pod holds it and absent once the pod is deleted (its CNI DEL). The
// operator then releases the stamped entry without the agent's
// ready-for-release, as the fast move does: no violation. An ordinary
// free address leaving the same way is still one. Without endpoint
// routes nothing is ever reported absent.
//
// Not parallel: every running Sim's enipam-agents report on every
// NodeRouting, so no other Sim may run meanwhile.
func TestEndpointAnswersAndFastRelease(t *testing.T) {
	for _, routes := range []bool{true, false} {
		t.Run(map[bool]string{true: "routes", false: "plain"}[routes], func(t *testing.T) { endpointAnswers(t, routes) })
	}
}

func endpointAnswers(t *testing.T, routes bool) {
	name := nodeName(t, "n")
	addrs := ips(map[bool]string{true: "10.9.0.", false: "10.9.1."}[routes], 4)
	const owner = "default/db-0"
	static := addrs[0]
	p := pool(addrs...)
	p[static] = ipamtypes.AllocationIP{Owner: owner, Resource: p[static].Resource}
	createNode(t, name, ipamtypes.IPAMSpec{}, p)
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: enipamv1alpha1.NodeRoutingSpec{EndpointQueries: []string{static}}}
	if err := env.Client.Create(context.Background(), nr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), nr) })
	sim := startSim(t, agentsim.Options{EndpointRoutes: routes})
	a := sim.AddAgent(name)
	waitReady(t, a)
	if ip := allocateNow(t, a, owner); ip != static {
		t.Fatalf("db-0 got %s, want %s", ip, static)
	}
	eventually(t, "the query answered", func() bool {
		r := endpointReport(t, name)
		return r != nil && r.ObservedGeneration == nr.Generation && (!routes || slices.Contains(r.Present, static))
	})
	a.Release(owner)
	if !routes {
		if r := endpointReport(t, name); r.EndpointRoutes || len(r.Absent) != 0 || len(r.Present) != 0 {
			t.Errorf("without endpoint routes the report is %+v, want nothing known", r)
		}
		return
	}
	eventually(t, "absent after the CNI DEL", func() bool {
		return endpointReport(t, name).EndpointGone(static, nr.Generation)
	})

	free := freeIPs(a, addrs[1:], owner)[0]
	setRelease(t, name, map[string]ipamtypes.IPReleaseStatus{static: agentsim.Released, free: agentsim.Released})
	p2 := pool(addrs...)
	delete(p2, static)
	delete(p2, free)
	setPool(t, name, p2)
	// (The node has no ENIs in status.eni.enis, so the routed check
	// counts its addresses handed before routed: not looked at here.)
	eventually(t, "the ordinary address's removal counted", func() bool { return sim.Ledger().Violations().ReleasedWithoutReady == 1 })
	for _, d := range sim.Ledger().ViolationDetails() {
		if d.Kind == agentsim.ReleasedWithoutReady && d.IP != free || d.Kind == agentsim.RemovedWhileUsed {
			t.Errorf("violation %s, want only %s released without ready", d, free)
		}
	}
}
