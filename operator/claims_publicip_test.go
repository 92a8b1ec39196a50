package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// publicIPs checks the claims' Elastic IPs (agentsim.CheckPublicIPs)
// against EC2 as it is now.
func (w *staticWorld) publicIPs(atRest bool) agentsim.PublicIPFindings {
	w.t.Helper()
	var claims enipamv1alpha1.StaticIPClaimList
	if err := w.c.List(context.Background(), &claims); err != nil {
		w.t.Fatal(err)
	}
	var nodes []ciliumv2.CiliumNode
	for _, n := range staticNodes {
		nodes = append(nodes, *w.node(n.name))
	}
	return agentsim.CheckPublicIPs(claims.Items, nodes, w.state.Dump(), "test", atRest)
}

// seedEIPs allocates n Elastic IPs carrying tags, as a user's pool, and
// returns their allocation IDs.
func (w *staticWorld) seedEIPs(n int, tags map[string]string) []string {
	w.t.Helper()
	var ids []string
	for range n {
		spec := ec2sim.TagSpecification{ResourceType: "elastic-ip"}
		for k, v := range tags {
			spec.Tags = append(spec.Tags, ec2sim.Tag{Key: k, Value: v})
		}
		out, err := w.state.AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{spec}})
		if err != nil {
			w.t.Fatal(err)
		}
		ids = append(ids, out.AllocationID)
	}
	return ids
}

// eips returns EC2's Elastic IPs by allocation ID.
func (w *staticWorld) eips() map[string]ec2sim.Address {
	out := map[string]ec2sim.Address{}
	for _, a := range w.state.Dump().Addresses {
		out[a.AllocationID] = a
	}
	return out
}

// placedPublic places claim db-0, asking for req, on node-1 with its pod
// running there, and waits until its Elastic IP is associated. It returns
// the private address and the allocation ID.
func (w *staticWorld) placedPublic(l *staticLife, req enipamv1alpha1.PublicIPRequest) (string, string) {
	w.t.Helper()
	w.converge(l)
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{PublicIP: &req})
	w.target("db-0", "node-1")
	w.until(l, "db-0 bound on node-1", func() bool {
		node, _ := w.stampedOn("default/db-0")
		return node == "node-1" && w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound
	})
	_, ip := w.stampedOn("default/db-0")
	w.pod("db-0", "node-1", true)
	if got := w.allocate("node-1", "default/db-0"); got != ip {
		w.t.Fatalf("db-0 got %s, want its stamped %s", got, ip)
	}
	alloc := w.associatedWith(l, ip, "node-1")
	return ip, alloc
}

// associatedWith waits until db-0's recorded Elastic IP is associated
// with ip on the ENI EC2 has it on, of node's instance, and returns its
// allocation ID.
func (w *staticWorld) associatedWith(l *staticLife, ip, node string) string {
	w.t.Helper()
	var alloc string
	w.until(l, "db-0's Elastic IP on "+ip+" of "+node, func() bool {
		rec := w.claim("db-0").Status.PublicIP
		eni, instance, _ := w.eniHolding(ip)
		if rec == nil || rec.AssociationID == "" || instance != instanceOf(node) {
			return false
		}
		a := w.eips()[rec.AllocationID]
		alloc = rec.AllocationID
		return a.PrivateIPAddress == ip && a.NetworkInterfaceID == eni && rec.ENIID == eni
	})
	return alloc
}

func instanceOf(node string) string {
	for _, n := range staticNodes {
		if n.name == node {
			return n.instance
		}
	}
	return ""
}

// deleteClaim deletes db-0 (its pod gone first) and waits until the
// claim is gone.
func (w *staticWorld) deleteClaim(l *staticLife, node string) {
	w.t.Helper()
	w.release(node, "default/db-0")
	w.pod("db-0", node, false)
	held := w.claim("db-0").Status.PublicIP != nil
	if err := w.c.Delete(context.Background(), w.claim("db-0")); err != nil {
		w.t.Fatal(err)
	}
	// The pool first: it keeps the stamp while the claim holds an
	// Elastic IP, so the address never goes back with one on it.
	_, _ = l.pools.Reconcile(context.Background(), reqNode(node))
	w.invariants()
	if n, _ := w.stampedOn("default/db-0"); held && n != node {
		w.t.Errorf("db-0's stamp left %s's pool while its Elastic IP is recorded", node)
	}
	w.until(l, "db-0's claim gone", func() bool {
		var list enipamv1alpha1.StaticIPClaimList
		_ = w.c.List(context.Background(), &list)
		return len(list.Items) == 0
	})
}

// atRest runs one collector pass and checks the claims' Elastic IPs at
// rest: each where it belongs, none leaked.
func (w *staticWorld) atRest(l *staticLife) agentsim.PublicIPFindings {
	w.t.Helper()
	if _, err := l.gc.Pass(context.Background()); err != nil {
		w.t.Fatalf("collector pass: %v", err)
	}
	f := w.publicIPs(true)
	w.t.Logf("at rest: %s", f)
	if f.Total() != 0 {
		w.t.Errorf("Elastic IPs at rest: %v", f.Details)
	}
	return f
}

// TestPublicIPFollowsItsStaticIP: claim db-0 asks for an allocated public
// IP. Once its address is stamped on node-1, an Elastic IP tagged with the
// cluster and the claim is allocated and associated with the address on
// node-1's ENI. The pod moves to node-2: EC2 moves the association with
// the address (no second AssociateAddress), and the claim records the new
// ENI. The claim deleted, the Elastic IP is disassociated and released
// before the address goes back to node-2's pool as an ordinary one. At no
// step is an Elastic IP on an unstamped pool address. Nodes: m5.large,
// first interface index 1, pre-allocate 4.
func TestPublicIPFollowsItsStaticIP(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip, alloc := w.placedPublic(l, enipamv1alpha1.PublicIPRequest{Allocate: true})
	a := w.eips()[alloc]
	tags := map[string]string{}
	for _, tag := range a.Tags {
		tags[tag.Key] = tag.Value
	}
	c := w.claim("db-0")
	if tags[cloud.TagCluster] != "test" || tags[cloud.TagClaim] != "default/db-0" || tags[cloud.TagClaimUID] != string(c.UID) || tags[cloud.TagManagedBy] != cloud.ManagedBy {
		t.Errorf("Elastic IP tags %v", tags)
	}
	if c.Status.PublicIP.PublicIP != a.PublicIP || !c.Status.PublicIP.Allocated {
		t.Errorf("status.publicIP %+v, EC2 has %s", c.Status.PublicIP, a.PublicIP)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, enipamv1alpha1.ClaimPublicIPReady); cond == nil || cond.Status != "True" {
		t.Errorf("PublicIPReady %+v", cond)
	}

	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.target("db-0", "node-2")
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	if got := w.associatedWith(l, ip, "node-2"); got != alloc {
		t.Errorf("db-0 has %s on node-2, had %s", got, alloc)
	}
	w.pod("db-0", "node-2", true)
	w.allocate("node-2", "default/db-0")
	if n := w.cloud.Calls()[cloudfake.AssociateAddress]; n != 1 {
		t.Errorf("%d AssociateAddress calls, want 1: the move carries the association", n)
	}
	w.atRest(l)

	w.deleteClaim(l, "node-2")
	if _, ok := w.eips()[alloc]; ok {
		t.Errorf("%s still allocated after its claim went", alloc)
	}
	if e, ok := w.node("node-2").Spec.IPAM.Pool[ip]; !ok || e.Owner != "" {
		t.Errorf("%s in node-2's pool: %v (%+v), want an ordinary entry", ip, ok, e)
	}
	w.atRest(l)
}

// TestPublicIPFromAPoolStaysAllocated: claim db-0 takes a free Elastic IP
// of the user's pool (tag pool=web; one of the two is already associated
// elsewhere by the user, so the other is taken). Disassociated behind
// enipam's back, it is associated again at the next look at EC2. The
// claim deleted, it is disassociated and stays allocated.
func TestPublicIPFromAPoolStaysAllocated(t *testing.T) {
	w := newStaticWorld(t)
	pool := w.seedEIPs(2, map[string]string{"pool": "web"})
	l := w.start()
	w.converge(l)
	primary := ""
	for _, e := range w.state.Dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.InstanceID == instanceOf("node-3") && e.Attachment.DeviceIndex == 0 {
			primary = e.NetworkInterfaceID
		}
	}
	if _, err := w.state.AssociateAddress(ec2sim.AssociateAddressRequest{AllocationID: pool[0], NetworkInterfaceID: primary}); err != nil {
		t.Fatal(err)
	}
	_ = l.inv.Addresses().Refresh(context.Background())
	ip, alloc := w.placedPublic(l, enipamv1alpha1.PublicIPRequest{PoolTags: map[string]string{"pool": "web"}})
	if alloc != pool[1] {
		t.Fatalf("db-0 took %s, want the free %s", alloc, pool[1])
	}
	if w.claim("db-0").Status.PublicIP.Allocated {
		t.Error("a pool address recorded as allocated by enipam")
	}

	a := w.eips()[alloc]
	if _, err := w.state.DisassociateAddress(a.AssociationID, ""); err != nil {
		t.Fatal(err)
	}
	// The next describe past the cache's consistency grace (1 s here)
	// shows it: the operator's own association outweighs older describes.
	w.until(l, "the cache sees the disassociation", func() bool {
		if err := l.inv.Addresses().Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		list, _ := l.inv.Addresses().List(context.Background())
		return slices.ContainsFunc(list, func(a cloud.Address) bool { return a.AllocationID == alloc && !a.Associated() })
	})
	if w.associatedWith(l, ip, "node-1") != alloc {
		t.Fatal("another address associated")
	}
	if n := w.cloud.Calls()[cloudfake.AssociateAddress]; n != 2 {
		t.Errorf("%d AssociateAddress calls, want 2", n)
	}
	w.atRest(l)

	w.deleteClaim(l, "node-1")
	eips := w.eips()
	if got, ok := eips[alloc]; !ok || got.AssociationID != "" {
		t.Errorf("pool address %s after the claim went: present %v, %+v", alloc, ok, got)
	}
	if eips[pool[0]].AssociationID == "" {
		t.Error("the user's own association of the pool's other address was undone")
	}
	if n := w.cloud.Calls()[cloudfake.ReleaseAddress]; n != 0 {
		t.Errorf("%d ReleaseAddress calls for a pool address", n)
	}
	w.atRest(l)
}

// TestPublicIPBadInputMovesNothing: each request that cannot be served
// gets its PublicIPReady condition and a Warning event, no Elastic IP is
// associated or allocated, and the claim's private address stays Bound.
func TestPublicIPBadInputMovesNothing(t *testing.T) {
	rows := []struct {
		name   string
		seed   func(w *staticWorld) enipamv1alpha1.PublicIPRequest
		reason string
	}{
		{name: "unknown allocation ID", reason: enipamv1alpha1.ReasonPublicIPNotFound, seed: func(*staticWorld) enipamv1alpha1.PublicIPRequest {
			return enipamv1alpha1.PublicIPRequest{AllocationID: "eipalloc-0123456789abcdef0"}
		}},
		{name: "allocation ID associated elsewhere", reason: enipamv1alpha1.ReasonPublicIPTaken, seed: func(w *staticWorld) enipamv1alpha1.PublicIPRequest {
			id := w.seedEIPs(1, nil)[0]
			if _, err := w.state.AssociateAddress(ec2sim.AssociateAddressRequest{AllocationID: id, InstanceID: instanceOf("node-3")}); err != nil {
				w.t.Fatal(err)
			}
			return enipamv1alpha1.PublicIPRequest{AllocationID: id}
		}},
		{name: "empty pool", reason: enipamv1alpha1.ReasonPublicIPUnavailable, seed: func(*staticWorld) enipamv1alpha1.PublicIPRequest {
			return enipamv1alpha1.PublicIPRequest{PoolTags: map[string]string{"pool": "none"}}
		}},
		{name: "the account's quota reached", reason: enipamv1alpha1.ReasonPublicIPUnavailable, seed: func(w *staticWorld) enipamv1alpha1.PublicIPRequest {
			w.seedEIPs(5, map[string]string{"team": "other"})
			return enipamv1alpha1.PublicIPRequest{Allocate: true}
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newStaticWorld(t)
			req := row.seed(w)
			before := w.eips()
			l := w.start()
			w.converge(l)
			w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{PublicIP: &req})
			w.target("db-0", "node-1")
			var cond *metav1.Condition
			w.until(l, "the claim says why", func() bool {
				cond = meta.FindStatusCondition(w.claim("db-0").Status.Conditions, enipamv1alpha1.ClaimPublicIPReady)
				return cond != nil && cond.Reason == row.reason
			})
			for range 3 {
				w.step(l)
			}
			c := w.claim("db-0")
			if c.Status.Phase != enipamv1alpha1.ClaimBound {
				t.Errorf("claim %s, want its private address Bound", c.Status.Phase)
			}
			if c.Status.PublicIP != nil && c.Status.PublicIP.AllocationID != "" {
				t.Errorf("status.publicIP %+v", c.Status.PublicIP)
			}
			after := w.eips()
			if len(after) != len(before) {
				t.Errorf("%d Elastic IPs, %d before", len(after), len(before))
			}
			for id, a := range after {
				if a.AssociationID != before[id].AssociationID {
					t.Errorf("%s's association changed: %q, was %q", id, a.AssociationID, before[id].AssociationID)
				}
			}
			if !w.hasEvent(row.reason) {
				t.Errorf("no Warning event naming %s", row.reason)
			}
			t.Logf("%s: %s", cond.Reason, cond.Message)
		})
	}
}

// hasEvent reports whether the claim controller recorded an event whose
// message names reason.
func (w *staticWorld) hasEvent(reason string) bool {
	for {
		select {
		case e := <-w.recorder.Events:
			if strings.HasPrefix(e, "Warning") && strings.Contains(e, reason) {
				return true
			}
		default:
			return false
		}
	}
}

// TestAPublicIPRequestIsCheckedByTheAPIServer: kube-apiserver refuses,
// with the CRD's own words, a public IP request that sets none or
// several of allocate, poolTags and allocationID, pool tags under
// enipam.io/, and an allocation ID that is not one; it takes each kind
// alone.
func TestAPublicIPRequestIsCheckedByTheAPIServer(t *testing.T) {
	ctx := context.Background()
	rows := []struct {
		req  enipamv1alpha1.PublicIPRequest
		want string // "" accepted
	}{
		{enipamv1alpha1.PublicIPRequest{Allocate: true}, ""},
		{enipamv1alpha1.PublicIPRequest{PoolTags: map[string]string{"pool": "web"}}, ""},
		{enipamv1alpha1.PublicIPRequest{AllocationID: "eipalloc-0123456789abcdef0"}, ""},
		{enipamv1alpha1.PublicIPRequest{}, "set exactly one of allocate: true, poolTags, allocationID"},
		{enipamv1alpha1.PublicIPRequest{Allocate: true, AllocationID: "eipalloc-0123456789abcdef0"}, "set exactly one of"},
		{enipamv1alpha1.PublicIPRequest{PoolTags: map[string]string{"enipam.io/cluster": "test"}}, "poolTags keys under enipam.io/ are reserved"},
		{enipamv1alpha1.PublicIPRequest{AllocationID: "198.51.100.7"}, "spec.publicIP.allocationID"},
	}
	for i, row := range rows {
		c := &enipamv1alpha1.StaticIPClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("public-%d", i)},
			Spec:       enipamv1alpha1.StaticIPClaimSpec{PublicIP: &row.req},
		}
		err := env.Client.Create(ctx, c)
		switch {
		case row.want == "" && err != nil:
			t.Errorf("%+v refused: %v", row.req, err)
		case row.want != "" && (err == nil || !strings.Contains(err.Error(), row.want)):
			t.Errorf("%+v: got %v, want a refusal naming %q", row.req, err, row.want)
		}
		if err == nil {
			_ = env.Client.Delete(ctx, c)
		}
	}
}
