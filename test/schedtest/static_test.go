package schedtest_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestAStaticPodWithNoEligibleNodeStaysPendingAndSaysWhy: the real
// kube-scheduler with the chart's configuration. db-0's claim holds
// 10.1.64.9 in a subnet of us-east-1b (as enipam-operator records it);
// the cluster's nodes are in us-east-1a, one of them with room. The pod
// stays Pending and its FailedScheduling event names the address, its
// subnet and zone for every node; nothing is bound and the claim is not
// asked for a node.
func TestAStaticPodWithNoEligibleNodeStaysPendingAndSaysWhy(t *testing.T) {
	w := newWorld(t, "zone")
	zoneA := func(free int32) *enipamv1alpha1.NodeCapacity {
		return &enipamv1alpha1.NodeCapacity{MaxIPs: 27, PoolIPs: 10, CanGrow: true, AvailabilityZone: "us-east-1a", FreeENISlots: 1,
			SubnetSlots: []enipamv1alpha1.SubnetSlots{{SubnetID: "subnet-a", Free: free}}}
	}
	w.node("a1", pool{used: 2, free: 8, capacity: zoneA(5)})
	w.node("a2", pool{used: 2, free: 8, capacity: zoneA(0)})
	w.seenByExtender(map[string]int64{"a1": 10, "a2": 10})
	claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "db-0"},
		Spec: enipamv1alpha1.StaticIPClaimSpec{Address: "10.1.64.9", ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
	w.create(claim)
	claim.Status = enipamv1alpha1.StaticIPClaimStatus{Address: "10.1.64.9", SubnetID: "subnet-b", AvailabilityZone: "us-east-1b",
		Phase: enipamv1alpha1.ClaimPending, ObservedGeneration: claim.Generation}
	if err := env.Client.Status().Update(bg, claim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the extender's claim watch

	w.pods("db", 1, nil)
	w.eventually("db-0's FailedScheduling", time.Minute, func() bool { return w.failedScheduling("db-0") != "" })
	msg := w.failedScheduling("db-0")
	if want := "2 static IP 10.1.64.9 lives in subnet-b, us-east-1b"; !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling %q lacks %q", msg, want)
	}
	if n := w.boundTo("db-0"); n != "" {
		t.Errorf("db-0 bound to %s", n)
	}
	got := &enipamv1alpha1.StaticIPClaim{}
	if err := env.Client.Get(bg, client.ObjectKey{Namespace: w.ns, Name: "db-0"}, got); err != nil || got.Spec.NodeName != "" {
		t.Errorf("claim asked for %q (%v)", got.Spec.NodeName, err)
	}
	t.Logf("event: %s", msg)
}
