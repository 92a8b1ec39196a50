package e2e

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestWithStatefulSetReleasesTheOrdinalsAScaleDownRemoves: StatefulSet db
// of 3 static-IP pods with the WithStatefulSet reclaim policy, run by the
// real kube-controller-manager's StatefulSet controller, scheduled by the
// real kube-scheduler and enipam's extender. Each pod runs with its
// claim's address and each claim gets an owner reference to db. Scaled to
// 1, the StatefulSet controller deletes db-1 and db-2: their claims are
// deleted and their addresses are no longer stamped in any pool, while
// db-0 keeps its claim, its address and its stamp. Scaled back to 3, db-1
// and db-2 get new claims (new UIDs) and run with their addresses. The
// StatefulSet deleted, every claim goes. db-0 only ever started with its
// address; the ledger counts no violation and the pools hold to EC2.
func TestWithStatefulSetReleasesTheOrdinalsAScaleDownRemoves(t *testing.T) {
	w := newStaticWorld(t)
	sts := w.statefulSetWith("db", 3, map[string]string{enipamv1alpha1.StaticIPAnnotation: string(enipamv1alpha1.ReclaimWithStatefulSet)})
	pods := []string{"db-0", "db-1", "db-2"}
	ips, uids := map[string]string{}, map[string]types.UID{}
	for _, p := range pods {
		_, ips[p] = w.running(p, 2*time.Minute)
		c, _ := w.claim(p)
		uids[p] = c.UID
		if c.Spec.ReclaimPolicy != enipamv1alpha1.ReclaimWithStatefulSet {
			t.Fatalf("%s's claim has reclaim policy %q", p, c.Spec.ReclaimPolicy)
		}
	}
	t.Logf("placed: %v", ips)
	for _, p := range pods {
		w.eventually(p+"'s claim owned by StatefulSet db", 30*time.Second, func() bool {
			c, ok := w.claim(p)
			return ok && slices.ContainsFunc(c.OwnerReferences, func(r metav1.OwnerReference) bool {
				return r.Kind == "StatefulSet" && r.Name == "db" && r.UID == sts.UID
			})
		})
	}

	w.scale(sts, 1)
	for _, p := range pods[1:] {
		w.eventually(p+"'s claim deleted", time.Minute, func() bool { _, ok := w.claim(p); return !ok })
		w.eventually(ips[p]+" no longer stamped for "+p, 30*time.Second, func() bool {
			_, owner := w.inPool(ips[p])
			return owner != w.ns+"/"+p
		})
		if _, ok := w.pod(p); ok {
			w.eventually(p+" gone", 30*time.Second, func() bool { _, ok := w.pod(p); return !ok })
		}
	}
	c, ok := w.claim("db-0")
	if !ok || c.UID != uids["db-0"] || c.Status.Phase != enipamv1alpha1.ClaimBound || c.Status.Address != ips["db-0"] {
		t.Fatalf("db-0's claim after the scale-down: %v%s", ok, w.describe())
	}
	if pools, owner := w.inPool(ips["db-0"]); len(pools) != 1 || owner != w.ns+"/db-0" {
		t.Errorf("db-0's %s is in the pools of %v (owner %q), want one, stamped for db-0", ips["db-0"], pools, owner)
	}
	if p, ok := w.pod("db-0"); !ok || p.Status.PodIP != ips["db-0"] {
		t.Errorf("db-0 runs with %q, want %s", p.Status.PodIP, ips["db-0"])
	}

	w.scale(sts, 3)
	for _, p := range pods[1:] {
		node, ip := w.running(p, 2*time.Minute)
		c, _ := w.claim(p)
		t.Logf("%s back on %s with %s (before %s), claim %s (before %s)", p, node, ip, ips[p], c.UID, uids[p])
		if c.UID == uids[p] {
			t.Errorf("%s runs under its old claim %s", p, c.UID)
		}
	}

	if err := env.Client.Delete(w.ctx, sts); err != nil {
		t.Fatal(err)
	}
	w.eventually("every claim gone with the StatefulSet", 2*time.Minute, func() bool {
		var list enipamv1alpha1.StaticIPClaimList
		return env.Client.List(w.ctx, &list, client.InNamespace(w.ns)) == nil && len(list.Items) == 0
	})
	w.onlyIPs(map[string]string{"db-0": ips["db-0"]})
	w.checkPools(w.sim)
	if v := w.sim.Ledger().Violations(); v.Total() != 0 {
		t.Errorf("ledger: %+v %v", v, w.sim.Ledger().ViolationDetails())
	}
	w.releases()
}
