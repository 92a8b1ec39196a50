package operator_test

import (
	"context"
	"net/netip"
	"testing"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// killingCloud dies right after EC2 moved a static address: the
// reassignment went through, the operator never learnt it.
type killingCloud struct {
	*cloudfake.Cloud
	armed bool
	done  bool
}

func (k *killingCloud) AssignAddresses(ctx context.Context, eniID string, ips []netip.Addr, reassign bool) error {
	err := k.Cloud.AssignAddresses(ctx, eniID, ips, reassign)
	if k.armed && !k.done {
		k.done = true
		return errKilled
	}
	return err
}

// TestInterruptedMoves: each row kills the operator at one step of a
// move of db-0's address from node-1 to node-2, then a fresh operator
// with no memory of the first finishes it. The invariants hold after
// every reconcile of both lives, and the address ends stamped on node-2,
// on its ENI only.
func TestInterruptedMoves(t *testing.T) {
	rows := []struct {
		name string
		// interrupt runs the first life into the failure.
		interrupt func(w *staticWorld, l *staticLife)
	}{
		{name: "after node-1's mark (its spec patch lost)", interrupt: func(w *staticWorld, l *staticLife) {
			w.until(l, "node-1 marks it", func() bool {
				_, marked := w.node("node-1").Status.IPAM.ReleaseIPs[w.claim("db-0").Status.Address]
				return marked
			})
		}},
		{name: "between node-1's released status and its spec patch", interrupt: func(w *staticWorld, l *staticLife) {
			ip := w.claim("db-0").Status.Address
			w.until(l, "the agent acknowledges", func() bool {
				return w.node("node-1").Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReadyForRelease
			})
			w.failSpecOf = "node-1"
			_, _ = l.pools.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "node-1"}})
			w.invariants()
			if st := w.node("node-1").Status.IPAM.ReleaseIPs[ip]; st != ipamoption.IPAMReleased {
				t.Fatalf("release state %q after the lost spec patch: the row tests nothing", st)
			}
		}},
		{name: "after it left node-1's pool, before EC2 moved it", interrupt: func(w *staticWorld, l *staticLife) {
			ip := w.claim("db-0").Status.Address
			for range 40 {
				_, _ = l.claims.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "db-0"}})
				_, _ = l.pools.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "node-1"}})
				w.agentStep("node-1")
				w.invariants()
				if _, in := w.node("node-1").Spec.IPAM.Pool[ip]; !in {
					return
				}
			}
			t.Fatal("the address never left node-1's pool")
		}},
		{name: "right after EC2 moved it", interrupt: func(w *staticWorld, l *staticLife) {
			w.api.(*killingCloud).armed = true
			w.until(l, "EC2 moves it", func() bool { return w.api.(*killingCloud).done })
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newStaticWorld(t)
			w.api = &killingCloud{Cloud: w.cloud}
			first := w.start()
			ip := w.placed(first)
			w.release("node-1", "default/db-0")
			w.pod("db-0", "node-1", false)
			w.target("db-0", "node-2")
			row.interrupt(w, first)
			first.cancel()
			w.invariants()

			second := w.start()
			w.until(second, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
			for range 3 {
				w.step(second)
			}
			w.moved(ip, "node-2", "i-0a000000000000002")
		})
	}
}

// TestAStaticAddressChangesItsMindBeforeItMoves: the scheduler asks for
// node-2, then (its bind retried) for node-3 before anything moved, then
// back for node-1 while node-1's agent acknowledged the mark: the address
// never leaves node-1 for a node no longer asked, and ends where the
// claim asks last.
func TestAStaticAddressChangesItsMindBeforeItMoves(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.target("db-0", "node-2")
	w.target("db-0", "node-3")
	w.until(l, "node-1's agent acknowledges", func() bool {
		return w.node("node-1").Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReadyForRelease
	})
	w.target("db-0", "node-1")
	w.until(l, "db-0 bound on node-1 again", func() bool {
		n, _ := w.stampedOn("default/db-0")
		return n == "node-1" && w.claim("db-0").Status.Phase == enipamv1alpha1.ClaimBound
	})
	if _, in, _ := w.eniHolding(ip); in != "i-0a000000000000001" {
		t.Errorf("%s is on %s, want node-1's instance", ip, in)
	}
}
