package operator_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// TestStaticIPMovesOnTheAgentsWordThroughTheAPIServer: the fast move with
// the real operator against kube-apiserver (its generations, watches and
// caches) and ec2sim over HTTP; agentsim plays Cilium's agents (with
// endpoint routes) and enipam-agents. db-0's address is stamped on
// node-1 and its pod gets it there. The pod is deleted (its CNI DEL) and
// node-1's Cilium agent stops at once, so nothing ever answers node-1's
// release handshake; the claim then asks for node-2. The address is
// stamped on node-2 all the same, on node-1's enipam-agent's word, and
// node-1's handshake never said ready-for-release. Nodes: m5.large, first
// interface index 1, pre-allocate 4.
func TestStaticIPMovesOnTheAgentsWordThroughTheAPIServer(t *testing.T) {
	r := newRig(t, staticScenario)
	ctx := context.Background()
	for _, n := range staticNodes[:2] {
		r.agents.setDown(n.name, true) // agentsim's enipam-agents report instead
	}
	policy := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: enipamv1alpha1.ENIPolicySpec{
		FirstInterfaceIndex: i32(1), SubnetTags: map[string]string{"pods": "true"},
	}}
	if err := r.c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-0"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	t.Cleanup(func() { // after the operator stopped: its finalizer goes by hand
		c := &enipamv1alpha1.StaticIPClaim{}
		if r.c.Get(ctx, client.ObjectKeyFromObject(claim), c) == nil {
			c.Finalizers = nil
			_ = r.c.Update(ctx, c)
			_ = r.c.Delete(ctx, c)
		}
	})
	sim, err := agentsim.New(env.Config, agentsim.Options{UpdateInterval: 200 * time.Millisecond, SampleInterval: -1, EndpointRoutes: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(ctx)
	t.Cleanup(func() { stopSim(); <-sim.Done() })
	if err := sim.Start(simCtx); err != nil {
		t.Fatal(err)
	}
	for _, n := range staticNodes[:2] {
		r.addNode(n.name, n.instance, n.zone, nil, ipamtypes.IPAMSpec{PreAllocate: 4})
		sim.AddAgent(n.name)
	}
	_, reg, _ := r.startOperator(r.options())
	for _, n := range staticNodes[:2] {
		r.waitNode(n.name, time.Minute, "a pool of 4 free addresses", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	}

	claim.Spec.NodeName = "node-1" // enipam-scheduler's bind
	if err := r.c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	var ip string
	stampedOn := func(node string) func(*ciliumv2.CiliumNode) bool {
		return func(cn *ciliumv2.CiliumNode) bool {
			for key, e := range cn.Spec.IPAM.Pool {
				if _, hs := cn.Status.IPAM.ReleaseIPs[key]; e.Owner == "default/db-0" && !hs {
					ip = key
					return true
				}
			}
			return false
		}
	}
	r.waitNode("node-1", time.Minute, "db-0's address stamped", stampedOn("node-1"))
	res, err := sim.Agent("node-1").Allocate(ctx, "default/db-0")
	if err != nil || res.IP.String() != ip {
		t.Fatalf("db-0 got %v (%v) on node-1, want %s", res.IP, err, ip)
	}

	sim.Agent("node-1").Release("default/db-0") // the pod's CNI DEL
	sim.RemoveAgent("node-1")                   // and Cilium's agent there says nothing more
	c := &enipamv1alpha1.StaticIPClaim{}
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(claim), c); err != nil {
		t.Fatal(err)
	}
	orig := c.DeepCopy()
	c.Spec.NodeName = "node-2"
	if err := r.c.Patch(ctx, c, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	moved := ip
	r.waitNode("node-2", time.Minute, "db-0's address stamped on node-2", func(cn *ciliumv2.CiliumNode) bool {
		return stampedOn("node-2")(cn) && ip == moved
	})
	old := r.node("node-1")
	if _, ok := old.Spec.IPAM.Pool[ip]; ok {
		t.Errorf("%s still in node-1's pool", ip)
	}
	if st := old.Status.IPAM.ReleaseIPs[ip]; st != ipamoption.IPAMReleased {
		t.Errorf("node-1's release-ips[%s] = %q, want released without Cilium's answer", ip, st)
	}
	if got := gatherCounter(t, reg, "enipam_static_ips_fast_moves_total"); got != 1 {
		t.Errorf("fast moves %v, want 1", got)
	}
	if v := sim.Ledger().Violations(); v.Total() != 0 {
		t.Errorf("violations %+v: %v", v, sim.Ledger().ViolationDetails())
	}
}
