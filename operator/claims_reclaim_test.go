package operator_test

import (
	"context"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// gone reports whether the claim no longer exists.
func (w *staticWorld) gone(name string) bool {
	err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &enipamv1alpha1.StaticIPClaim{})
	return apierrors.IsNotFound(err)
}

// ordinary reports whether ip is an ordinary entry of node's pool, in no
// handshake.
func (w *staticWorld) ordinary(node, ip string) bool {
	cn := w.node(node)
	e, ok := cn.Spec.IPAM.Pool[ip]
	_, hs := cn.Status.IPAM.ReleaseIPs[ip]
	return ok && e.Owner == "" && !hs
}

// TestADeletedClaimsAddressIsAnOrdinaryPoolAddressAgain: deleting db-0's
// claim (Retain) while its pod still runs removes the stamp, keeps the
// address in node-1's pool with the pod, and lets the finalizer go.
func TestADeletedClaimsAddressIsAnOrdinaryPoolAddressAgain(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	if err := w.c.Delete(context.Background(), w.claim("db-0")); err != nil {
		t.Fatal(err)
	}
	w.until(l, "the claim is gone", func() bool { return w.gone("db-0") })
	if !w.ordinary("node-1", ip) {
		t.Fatalf("%s is not an ordinary entry of node-1's pool:%s", ip, w.describe())
	}
	if w.used["node-1"][ip] != "default/db-0" {
		t.Errorf("the pod lost %s", ip)
	}
}

// TestAfterUnusedKeepsTheAddressWithinItsTTLAndReturnsItAfter: an
// AfterUnused claim (TTL 5 s) keeps db-0's address while its pod comes
// back within the TTL, and returns it to node-1's pool once no pod of
// its name existed for the TTL. The TTL leaves room for a loaded
// machine: the pod is gone until the operator has seen it gone.
func TestAfterUnusedKeepsTheAddressWithinItsTTLAndReturnsItAfter(t *testing.T) {
	const ttl = 5 * time.Second
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{ReclaimPolicy: enipamv1alpha1.ReclaimAfterUnused, UnusedTTL: &metav1.Duration{Duration: ttl}})
	w.target("db-0", "node-1")
	w.until(l, "db-0 bound", func() bool { return w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound })
	ip := w.claim("db-0").Status.Address
	w.pod("db-0", "node-1", true)
	w.allocate("node-1", "default/db-0")

	// Gone for less than the TTL, then back.
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	goneAt := time.Now()
	w.until(l, "lastUsed recorded", func() bool { return w.claim("db-0").Status.LastUsed != nil })
	if away := time.Since(goneAt); away >= ttl {
		t.Fatalf("the operator took %v to see db-0 gone, not within the TTL %v: the test cannot tell a pod back in time", away, ttl)
	}
	w.pod("db-0", "node-1", true)
	if got := w.allocate("node-1", "default/db-0"); got != ip {
		t.Fatalf("db-0 came back with %s, want %s", got, ip)
	}
	for deadline := time.Now().Add(ttl + time.Second); time.Now().Before(deadline); {
		w.step(l)
		if w.gone("db-0") {
			t.Fatal("the claim was released while its pod ran")
		}
	}
	w.until(l, "lastUsed cleared", func() bool { return w.claim("db-0").Status.LastUsed == nil })

	// Gone for good.
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "the claim is released", func() bool { return w.gone("db-0") })
	w.until(l, ip+" is ordinary again", func() bool { return w.ordinary("node-1", ip) })
}

// TestWithStatefulSetReleasesBelowTheOrdinal: claims web-0..web-2 of a
// StatefulSet web (WithStatefulSet); scaled to 2, web-2's claim is
// released and its address returns to the pool; web-0 and web-1 keep
// theirs, and get an owner reference to the StatefulSet.
func TestWithStatefulSetReleasesBelowTheOrdinal(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
	if err := w.c.Create(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		w.createClaim(name, enipamv1alpha1.StaticIPClaimSpec{ReclaimPolicy: enipamv1alpha1.ReclaimWithStatefulSet})
		w.target(name, "node-2")
	}
	w.until(l, "three claims bound", func() bool {
		for _, name := range []string{"web-0", "web-1", "web-2"} {
			if w.claim(name).Status.Phase != enipamv1alpha1.ClaimBound {
				return false
			}
		}
		return true
	})
	ip := w.claim("web-2").Status.Address
	sts.Spec.Replicas = ptr.To[int32](2)
	if err := w.c.Update(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	w.until(l, "web-2's claim released", func() bool { return w.gone("web-2") })
	w.until(l, ip+" is ordinary again", func() bool { return w.ordinary("node-2", ip) })
	for _, name := range []string{"web-0", "web-1"} {
		c := w.claim(name)
		if c.Status.Phase != enipamv1alpha1.ClaimBound {
			t.Errorf("%s is %s", name, c.Status.Phase)
		}
		if len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != "uid-web" {
			t.Errorf("%s owner references %+v", name, c.OwnerReferences)
		}
	}
}

// TestAFirstPlacementSkipsAnAddressAPodTookUnseen: the free address the
// operator marks for db-0's first placement was handed to another pod
// moments before (the agent has not reported it): a first placement is
// marked before it is stamped, so the agent refuses to release it, it is
// never stamped for db-0, and another address is marked, acknowledged
// and stamped; no two pods hold one address.
func TestAFirstPlacementSkipsAnAddressAPodTookUnseen(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{})
	w.target("db-0", "node-1")
	before := map[string]ipamtypes.IPReleaseStatus{}
	for ip, state := range w.node("node-1").Status.IPAM.ReleaseIPs {
		before[ip] = state
	}
	ctx := context.Background()
	_, _ = l.claims.Reconcile(ctx, reqClaim("db-0"))
	_, _ = l.pools.Reconcile(ctx, reqNode("node-1"))
	cn := w.node("node-1")
	for ip, e := range cn.Spec.IPAM.Pool {
		if e.Owner == "default/db-0" {
			t.Fatalf("%s stamped for db-0 before the agent confirmed no pod holds it:%s", ip, w.describe())
		}
	}
	var marked string
	for ip, state := range cn.Status.IPAM.ReleaseIPs {
		if state == ipamoption.IPAMMarkForRelease && before[ip] != state {
			marked = ip
		}
	}
	if marked == "" {
		t.Fatalf("nothing marked for db-0:%s", w.describe())
	}
	w.used["node-1"][marked] = "default/web-9" // handed out before the mark, unreported
	w.until(l, "db-0 bound", func() bool { return w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound })
	if got := w.claim("db-0").Status.Address; got == marked {
		t.Fatalf("db-0 bound to %s, which web-9 holds", got)
	}
	if e := w.node("node-1").Spec.IPAM.Pool[marked]; e.Owner == "default/db-0" {
		t.Fatalf("%s, which web-9 holds, is stamped for db-0", marked)
	}
}

// TestAClaimedAddressOfAnotherSubnetGetsAnENIThere: a claim asks for
// 10.0.0.50, a free address of the node subnet, on node-2, whose usable
// ENIs (first interface index 1) are all in the pod subnet. The operator
// creates an ENI of node-2 in the node subnet, assigns the address to it,
// and stamps it in node-2's pool once routed.
func TestAClaimedAddressOfAnotherSubnetGetsAnENIThere(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	w.converge(l)
	created := w.cloud.Calls()[cloudfake.CreateNetworkInterface]
	w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{Address: "10.0.0.50", NodeName: "node-2"})
	w.until(l, "db-0 bound on node-2", func() bool { return w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound })
	w.moved("10.0.0.50", "node-2", "i-0a000000000000002")
	if got := w.cloud.Calls()[cloudfake.CreateNetworkInterface] - created; got != 1 {
		t.Errorf("%d ENIs created for the claim, want 1", got)
	}
	if got := w.claim("db-0").Status.SubnetID; got != "subnet-0a000000000000001" {
		t.Errorf("claim subnet %s", got)
	}
}
