package operator_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// patchWithGeneration patches a NodeRouting in the in-memory apiserver
// and, as kube-apiserver does, makes a new generation when its spec
// changed.
func (w *staticWorld) patchWithGeneration(ctx context.Context, c client.WithWatch, nr *enipamv1alpha1.NodeRouting, patch client.Patch, opts ...client.PatchOption) error {
	before := &enipamv1alpha1.NodeRouting{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(nr), before); err != nil {
		return c.Patch(ctx, nr, patch, opts...)
	}
	if w.failQueriesOf == nr.Name && !slices.Equal(before.Spec.EndpointQueries, nr.Spec.EndpointQueries) {
		w.failQueriesOf = ""
		return errors.New("endpoint queries patch lost")
	}
	if err := c.Patch(ctx, nr, patch, opts...); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before.Spec, nr.Spec) {
		return nil
	}
	nr.Generation = before.Generation + 1
	return c.Update(ctx, nr)
}

// endpoints plays enipam-agent's answer to the node's endpoint queries:
// an address a pod holds on the node (its endpoint lives until its CNI
// DEL, w.release) is present; another is absent only where Cilium runs
// with endpoint routes.
func (w *staticWorld) endpoints(node string, nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.EndpointReport {
	if len(nr.Spec.EndpointQueries) == 0 {
		return nil
	}
	r := &enipamv1alpha1.EndpointReport{ObservedGeneration: nr.Generation, EndpointRoutes: w.endpointRoutes[node]}
	for _, ip := range nr.Spec.EndpointQueries {
		switch _, held := w.used[node][ip]; {
		case held:
			r.Present = append(r.Present, ip)
		case r.EndpointRoutes:
			r.Absent = append(r.Absent, ip)
		}
	}
	return r
}

// inPoolOf reports whether node's pool lists ip.
func (w *staticWorld) inPoolOf(node, ip string) bool {
	_, ok := w.node(node).Spec.IPAM.Pool[ip]
	return ok
}

// TestStaticIPMovesOnTheAgentsWordBeforeTheHandshake: db-0's address,
// stamped on node-1, is asked onto node-2; Cilium's agent on node-1 does
// not answer the release handshake (its next CiliumNode write is up to
// 15 s away). Once the pod is gone and node-1's enipam-agent, asked
// after that, reports no endpoint holding the address (Cilium's endpoint
// routes), the address leaves node-1's pool, moves in EC2 and is stamped
// on node-2, with the handshake still unanswered; the new pod gets it.
// Nodes: m5.large, first interface index 1, pre-allocate 4.
func TestStaticIPMovesOnTheAgentsWordBeforeTheHandshake(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	w.slowHandshake["node-1"] = true
	w.endpointRoutes["node-1"] = true

	w.target("db-0", "node-2")
	for range 3 {
		w.step(l)
	}
	if !w.inPoolOf("node-1", ip) {
		t.Fatalf("db-0's address left node-1 while its pod runs there:%s", w.describe())
	}
	if q := w.routingOf("node-1").Spec.EndpointQueries; len(q) != 0 {
		t.Errorf("node-1 asked about %v while the pod is bound there", q)
	}

	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
	if got := w.routingOf("node-1").Spec.EndpointQueries; len(got) != 0 {
		t.Errorf("node-1 still asked about %v after the move", got)
	}
	w.pod("db-0", "node-2", true)
	if got := w.allocate("node-2", "default/db-0"); got != ip {
		t.Fatalf("db-0 got %s on node-2, want %s", got, ip)
	}
	if got := testCounter(t, l, "enipam_static_ips_fast_moves_total"); got != 1 {
		t.Errorf("fast moves %v, want 1", got)
	}
}

// TestStaticIPMoveWaitsForTheHandshakeWithoutAFreshAbsence: as above,
// but the report cannot be trusted, so the address stays in node-1's
// pool until Cilium's agent answers the handshake, and then moves:
//   - the pod was force-deleted: gone from the API, its endpoint still
//     on node-1 until its CNI DEL (the report says present);
//   - node-1's Cilium runs without endpoint routes (nothing is absent);
//   - node-1's enipam-agent does not answer (no report);
//   - the report that says absent is one from before the operator
//     restarted: the new process asks again first.
func TestStaticIPMoveWaitsForTheHandshakeWithoutAFreshAbsence(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs once the claim asks for node-2, with the pod still
		// bound to node-1.
		setup func(w *staticWorld, l *staticLife) *staticLife
	}{
		{"endpoint still there after a force delete", func(w *staticWorld, l *staticLife) *staticLife {
			w.endpointRoutes["node-1"] = true
			w.pod("db-0", "node-1", false) // no CNI DEL yet
			return l
		}},
		{"no endpoint routes", func(w *staticWorld, l *staticLife) *staticLife {
			w.release("node-1", "default/db-0")
			w.pod("db-0", "node-1", false)
			return l
		}},
		{"no report", func(w *staticWorld, l *staticLife) *staticLife {
			w.endpointRoutes["node-1"], w.quiet["node-1"] = true, true
			w.release("node-1", "default/db-0")
			w.pod("db-0", "node-1", false)
			return l
		}},
		{"report from before an operator restart", func(w *staticWorld, l *staticLife) *staticLife {
			w.endpointRoutes["node-1"] = true
			w.release("node-1", "default/db-0")
			w.pod("db-0", "node-1", false)
			// The first process asks and its answer comes, but it stops
			// before it acts on it; the agent then falls quiet.
			ctx := context.Background()
			_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
			w.agentStep("node-1")
			if r := w.routingOf("node-1").Status.Endpoints; r == nil || !slices.Contains(r.Absent, w.claim("db-0").Status.Address) {
				t.Fatalf("no absent answer to act on: %+v", r)
			}
			w.quiet["node-1"] = true
			l.cancel()
			return w.start()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newStaticWorld(t)
			l := w.start()
			ip := w.placed(l)
			w.slowHandshake["node-1"] = true
			w.target("db-0", "node-2")
			w.step(l)
			l = tc.setup(w, l)
			for range 10 {
				w.step(l)
			}
			if !w.inPoolOf("node-1", ip) {
				t.Fatalf("db-0's address left node-1 before the handshake:%s", w.describe())
			}
			if st := w.node("node-1").Status.IPAM.ReleaseIPs[ip]; st != ipamoption.IPAMMarkForRelease {
				t.Errorf("node-1's release-ips[%s] = %q, want the handshake under way", ip, st)
			}

			w.release("node-1", "default/db-0") // the CNI DEL, where there was none
			w.slowHandshake["node-1"] = false
			w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
			w.step(l)
			w.moved(ip, "node-2", "i-0a000000000000002")
		})
	}
}

// testCounter reads a counter of the life's pool controller.
func testCounter(t *testing.T, l *staticLife, name string) float64 {
	t.Helper()
	return gatherCounter(t, l.reg, name)
}

// gatherCounter reads an unlabelled counter from reg.
func gatherCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// TestAnAbsenceAskedForAnEarlierMoveIsNotUsed: db-0's address leaves
// node-1 and node-1's enipam-agent answers absent; before the operator
// acts, the claim asks for node-1 again and the pod comes back there
// (the operator's write withdrawing the query is lost), then the pod is
// force-deleted (its endpoint still there) and the claim asks for node-2
// again, while node-1's agent says nothing new. The absence answered for
// the earlier move is not used: the address stays until the handshake
// says it may go, after the pod's CNI DEL.
func TestAnAbsenceAskedForAnEarlierMoveIsNotUsed(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	w.slowHandshake["node-1"], w.endpointRoutes["node-1"] = true, true
	ctx := context.Background()

	w.target("db-0", "node-2")
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
	w.agentStep("node-1")
	if r := w.routingOf("node-1").Status.Endpoints; r == nil || !slices.Contains(r.Absent, ip) {
		t.Fatalf("no absent answer: %+v", r)
	}
	w.quiet["node-1"] = true

	w.target("db-0", "node-1")
	w.pod("db-0", "node-1", true)
	if got := w.allocate("node-1", "default/db-0"); got != ip {
		t.Fatalf("db-0 got %s back on node-1, want %s", got, ip)
	}
	w.failQueriesOf = "node-1"
	_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
	if w.failQueriesOf != "" {
		t.Fatal("the operator did not try to withdraw the query")
	}

	w.pod("db-0", "node-1", false) // force-deleted: no CNI DEL yet
	w.target("db-0", "node-2")
	for range 10 {
		w.step(l)
	}
	if !w.inPoolOf("node-1", ip) {
		t.Fatalf("db-0's address left node-1 on an earlier move's answer while its endpoint is there:%s", w.describe())
	}
	w.release("node-1", "default/db-0")
	w.slowHandshake["node-1"], w.quiet["node-1"] = false, false
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
}

// TestAStaticIPMovesBackBeforeTheOldAgentDroppedItsRelease: db-0's
// address leaves node-1 on its enipam-agent's word and is stamped on
// node-2; node-1's Cilium agent has not written since, so node-1's
// release-ips still says released. The pod then moves back to node-1:
// the stale entry is withdrawn and the address stamped there at once,
// without waiting for node-1's agent.
func TestAStaticIPMovesBackBeforeTheOldAgentDroppedItsRelease(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	for _, n := range []string{"node-1", "node-2"} {
		w.slowHandshake[n], w.endpointRoutes[n] = true, true
	}
	w.target("db-0", "node-2")
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	if st := w.node("node-1").Status.IPAM.ReleaseIPs[ip]; st != ipamoption.IPAMReleased {
		t.Fatalf("node-1's release-ips[%s] = %q, want the released entry its agent has not dropped yet", ip, st)
	}
	w.pod("db-0", "node-2", true)
	w.allocate("node-2", "default/db-0")

	w.target("db-0", "node-1")
	w.release("node-2", "default/db-0")
	w.pod("db-0", "node-2", false)
	w.until(l, "db-0's address stamped on node-1 again", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-1" })
	w.step(l)
	w.moved(ip, "node-1", "i-0a000000000000001")
}

func (w *staticWorld) routingOf(node string) *enipamv1alpha1.NodeRouting {
	w.t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: node}, nr); err != nil {
		w.t.Fatal(err)
	}
	return nr
}

// TestAStaticIPLeavesItsOldPoolAheadOfThatNodesGrowth: node-1's
// enipam-agent has answered that no endpoint holds db-0's address, and
// in the same reconcile node-1's pool must grow (its pods took every free
// address). The address moving to node-2 leaves node-1's pool in a
// write made before node-1's AssignPrivateIpAddresses: node-2 reassigns
// it only once no pool lists it, so that write is the move's next step
// and must not wait for another EC2 call (150-400 ms on EC2, more in its
// buckets). Nodes: m5.large, first interface index 1, pre-allocate 4.
func TestAStaticIPLeavesItsOldPoolAheadOfThatNodesGrowth(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	w.slowHandshake["node-1"] = true
	w.endpointRoutes["node-1"] = true
	w.target("db-0", "node-2")
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "node-1's enipam-agent answered", func() bool {
		r := w.routingOf("node-1").Status.Endpoints
		return r != nil && slices.Contains(r.Absent, ip)
	})
	if !w.inPoolOf("node-1", ip) {
		t.Fatalf("db-0's address left node-1 before the test could fill its pool:%s", w.describe())
	}
	cn := w.node("node-1")
	for key, e := range cn.Spec.IPAM.Pool {
		if _, held := w.used["node-1"][key]; !held && e.Owner == "" {
			w.used["node-1"][key] = "default/p-" + key
		}
	}
	w.agentStep("node-1")

	called, pooledAtCall := false, false
	w.cloud.Before(cloudfake.AssignPrivateIpAddresses, 1, func() error {
		called, pooledAtCall = true, w.inPoolOf("node-1", ip)
		return nil
	})
	w.step(l)
	if !called {
		t.Fatalf("no AssignPrivateIpAddresses in the reconcile that released db-0's address:%s", w.describe())
	}
	if pooledAtCall {
		t.Errorf("node-1's pool still listed %s when node-1's AssignPrivateIpAddresses went out: the move waited for it", ip)
	}
	if w.inPoolOf("node-1", ip) {
		t.Errorf("db-0's address still in node-1's pool after node-1's agent said no endpoint holds it:%s", w.describe())
	}
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
}
