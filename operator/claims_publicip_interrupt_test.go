package operator_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// TestPublicIPInterrupted: claim db-0 asks for an allocated public IP.
// Each row kills the operator at one step of associating it, of moving
// its address (and the Elastic IP with it) from node-1 to node-2, or of
// releasing it with the claim; a fresh operator with no memory of the
// first finishes. The Elastic IP invariants hold after every reconcile of
// both lives (never on an unstamped pool address or another pod's, never
// two per claim), and after one collector pass at the end: the claim's
// Elastic IP associated with its address on the ENI that holds it, or,
// once the claim is gone, released; none leaked; exactly one ever
// allocated.
func TestPublicIPInterrupted(t *testing.T) {
	type phase int
	const (
		associating phase = iota
		moving
		releasing
	)
	rows := []struct {
		name  string
		phase phase
		// arm sets the failure up; fired says when it happened.
		arm func(w *staticWorld) (fired func() bool)
		// associates: AssociateAddress calls of the second life.
		associates int
	}{
		{name: "after the intent, before AllocateAddress", phase: associating, associates: 1, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.AllocateAddress, false)
		}},
		{name: "right after AllocateAddress", phase: associating, associates: 1, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.AllocateAddress, true)
		}},
		{name: "after the ENI is recorded, before AssociateAddress", phase: associating, associates: 1, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.AssociateAddress, false)
		}},
		{name: "right after AssociateAddress", phase: associating, associates: 0, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.AssociateAddress, true)
		}},
		{name: "right after EC2 moved the address with its Elastic IP", phase: moving, associates: 0, arm: func(w *staticWorld) func() bool {
			w.api.(*killingCloud).armed = true
			return func() bool { return w.api.(*killingCloud).done }
		}},
		{name: "right after EC2 moved the address, its association lost", phase: moving, associates: 1, arm: func(w *staticWorld) func() bool {
			k := w.api.(*killingCloud)
			k.armed = true
			return func() bool {
				if !k.done {
					return false
				}
				// Not what EC2 documents; enipam associates it again.
				for _, a := range w.state.Dump().Addresses {
					if a.AssociationID != "" {
						if _, err := w.state.DisassociateAddress(a.AssociationID, ""); err != nil {
							w.t.Fatal(err)
						}
					}
				}
				return true
			}
		}},
		{name: "right after DisassociateAddress", phase: releasing, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.DisassociateAddress, true)
		}},
		{name: "before ReleaseAddress", phase: releasing, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.ReleaseAddress, false)
		}},
		{name: "right after ReleaseAddress", phase: releasing, arm: func(w *staticWorld) func() bool {
			return w.kill(cloudfake.ReleaseAddress, true)
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newStaticWorld(t)
			w.api = &killingCloud{Cloud: w.cloud}
			first := w.start()
			var fired func() bool
			node := "node-1"
			switch row.phase {
			case associating:
				fired = row.arm(w)
				w.converge(first)
				w.createClaim("db-0", enipamv1alpha1.StaticIPClaimSpec{PublicIP: &enipamv1alpha1.PublicIPRequest{Allocate: true}})
				w.target("db-0", "node-1")
			case moving:
				w.placedPublic(first, enipamv1alpha1.PublicIPRequest{Allocate: true})
				fired = row.arm(w)
				w.release("node-1", "default/db-0")
				w.pod("db-0", "node-1", false)
				w.target("db-0", "node-2")
				node = "node-2"
			case releasing:
				w.placedPublic(first, enipamv1alpha1.PublicIPRequest{Allocate: true})
				fired = row.arm(w)
				w.release("node-1", "default/db-0")
				w.pod("db-0", "node-1", false)
				if err := w.c.Delete(context.Background(), w.claim("db-0")); err != nil {
					t.Fatal(err)
				}
			}
			w.until(first, "the failure", fired)
			first.cancel()
			w.invariants()
			w.cloud.ResetCalls()

			second := w.start()
			if row.phase == releasing {
				w.until(second, "db-0's claim gone", func() bool {
					err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "db-0"}, &enipamv1alpha1.StaticIPClaim{})
					return err != nil
				})
				for range 3 {
					w.step(second)
				}
				if n := len(w.eips()); n != 0 {
					t.Errorf("%d Elastic IPs left after the claim went: %+v", n, w.eips())
				}
			} else {
				_, ip := w.stampedOn("default/db-0")
				w.until(second, "db-0 stamped on "+node, func() bool {
					n, got := w.stampedOn("default/db-0")
					ip = got
					return n == node
				})
				w.associatedWith(second, ip, node)
				if n := w.cloud.Calls()[cloudfake.AssociateAddress]; n != row.associates {
					t.Errorf("%d AssociateAddress calls in the second life, want %d", n, row.associates)
				}
				if n := len(w.eips()); n != 1 {
					t.Errorf("%d Elastic IPs allocated, want 1: %+v", n, w.eips())
				}
			}
			w.atRest(second)
		})
	}
}

// kill makes the next call of action fail as if the operator died
// before it (after: EC2 acted, the answer lost), and returns whether it
// happened.
func (w *staticWorld) kill(action cloudfake.Action, after bool) func() bool {
	done := false
	fn := func() error { done = true; return errKilled }
	if after {
		w.cloud.After(action, 1, fn)
	} else {
		w.cloud.Before(action, 1, fn)
	}
	return func() bool { return done }
}
