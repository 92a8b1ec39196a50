package operator_test

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// TestStaticIPInterrupted: the node of interruptScenario asks for a static
// IP (Cilium's static-ip-tags) from a pool of two tagged Elastic IPs. Each
// row kills the operator at one step of associating or releasing it; a
// fresh operator, with no memory of the first, ends with exactly one
// address on the instance's primary address and reported, or none once
// the node is gone or stops asking, and never two.
func TestStaticIPInterrupted(t *testing.T) {
	rows := []struct {
		name string
		// interrupt runs the first life into the failure.
		interrupt func(w *interruptWorld, l *life)
		// deleteNode deletes the CiliumNode between the lives.
		deleteNode bool
		// want: the associations on the instance at the end;
		// associates: the AssociateAddress calls of the second life.
		want, associates int
	}{
		{name: "after the record, before AssociateAddress", want: 1, associates: 1,
			interrupt: func(w *interruptWorld, l *life) {
				w.cloud.Before(cloudfake.AssociateAddress, 1, cloudfake.Fail(errKilled))
				_ = w.reconcile(l)
			}},
		{name: "right after AssociateAddress", want: 1,
			interrupt: func(w *interruptWorld, l *life) {
				w.cloud.After(cloudfake.AssociateAddress, 1, cloudfake.Fail(errKilled))
				_ = w.reconcile(l)
			}},
		{name: "right after AssociateAddress, then the node goes", want: 0, deleteNode: true,
			interrupt: func(w *interruptWorld, l *life) {
				w.cloud.After(cloudfake.AssociateAddress, 1, cloudfake.Fail(errKilled))
				_ = w.reconcile(l)
			}},
		{name: "right after DisassociateAddress of a node that went", want: 0,
			interrupt: func(w *interruptWorld, l *life) {
				w.until(l, func() bool { return w.node().Status.IPAM.AssignedStaticIP != "" })
				w.cloud.After(cloudfake.DisassociateAddress, 1, cloudfake.Fail(errKilled))
				if err := w.c.Delete(context.Background(), w.node()); err != nil {
					t.Fatal(err)
				}
				_, _ = l.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "node-1"}})
			}},
		{name: "right after DisassociateAddress of a node that stopped asking", want: 0,
			interrupt: func(w *interruptWorld, l *life) {
				w.until(l, func() bool { return w.node().Status.IPAM.AssignedStaticIP != "" })
				w.cloud.After(cloudfake.DisassociateAddress, 1, cloudfake.Fail(errKilled))
				cn := w.node()
				cn.Spec.IPAM.StaticIPTags = nil
				if err := w.c.Update(context.Background(), cn); err != nil {
					t.Fatal(err)
				}
				_, _ = l.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "node-1"}})
				nr := &enipamv1alpha1.NodeRouting{}
				if err := w.c.Get(context.Background(), client.ObjectKey{Name: "node-1"}, nr); err != nil || nr.Spec.StaticIP == nil {
					t.Errorf("the record went (%v) although the release's call was cut short", err)
				}
			}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newInterruptWorld(t)
			for range 2 {
				if _, err := w.state.AllocateAddress(ec2sim.AllocateAddressRequest{TagSpecifications: []ec2sim.TagSpecification{{
					ResourceType: "elastic-ip", Tags: []ec2sim.Tag{{Key: "cilium/static", Value: "egress"}},
				}}}); err != nil {
					t.Fatal(err)
				}
			}
			cn := w.node()
			cn.Spec.IPAM.StaticIPTags = egress
			if err := w.c.Update(context.Background(), cn); err != nil {
				t.Fatal(err)
			}
			first := w.start(interruptOptions())
			row.interrupt(w, first)
			first.cancel()
			w.cloud.ResetCalls()
			if row.deleteNode {
				if err := w.c.Delete(context.Background(), w.node()); err != nil {
					t.Fatal(err)
				}
			}

			second := w.start(interruptOptions())
			gone := row.deleteNode || row.want == 0
			if gone {
				// A release that finds the address free believes it only
				// on a describe made from the new process's trust point
				// on (first sync plus the consistency grace, a second
				// here): the first life's association may not show yet.
				released := func() bool {
					nr := &enipamv1alpha1.NodeRouting{}
					return w.c.Get(context.Background(), client.ObjectKey{Name: "node-1"}, nr) == nil && nr.Spec.StaticIP == nil &&
						!controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer)
				}
				var err error
				for range 100 {
					if _, err = second.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "node-1"}}); err == nil && released() {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					t.Fatalf("releasing after the node went: %v", err)
				}
			} else {
				// An address found on the primary address is reported
				// once a describe made from the trust point on vouches
				// for it: the first life may have undone it just before.
				for range 100 {
					if w.node().Status.IPAM.AssignedStaticIP != "" {
						break
					}
					_ = w.reconcile(second)
					time.Sleep(50 * time.Millisecond)
				}
			}

			var onInstance []ec2sim.Address
			for _, a := range w.state.Dump().Addresses {
				if a.AssociationID != "" {
					if a.InstanceID != "i-0a000000000000001" {
						t.Errorf("%s associated with %s", a.PublicIP, a.InstanceID)
					}
					onInstance = append(onInstance, a)
				}
			}
			if len(onInstance) != row.want {
				t.Fatalf("%d Elastic IPs associated at the end, want %d: %+v", len(onInstance), row.want, onInstance)
			}
			nr := &enipamv1alpha1.NodeRouting{}
			if err := w.c.Get(context.Background(), client.ObjectKey{Name: "node-1"}, nr); err != nil {
				t.Fatal(err)
			}
			if gone {
				if nr.Spec.StaticIP != nil || controllerutil.ContainsFinalizer(nr, enipamv1alpha1.NodeStaticIPFinalizer) {
					t.Errorf("NodeRouting of a node gone still records %+v, finalizers %v", nr.Spec.StaticIP, nr.Finalizers)
				}
				return
			}
			a := onInstance[0]
			if got := w.node().Status.IPAM.AssignedStaticIP; got != a.PublicIP {
				t.Errorf("assigned-static-ip %q, EC2 has %s", got, a.PublicIP)
			}
			if nr.Spec.StaticIP == nil || nr.Spec.StaticIP.AssociationID != a.AssociationID {
				t.Errorf("NodeRouting records %+v, EC2 has association %s", nr.Spec.StaticIP, a.AssociationID)
			}
			if n := w.cloud.Calls()[cloudfake.AssociateAddress]; n != row.associates {
				t.Errorf("%d AssociateAddress calls in the second life, want %d", n, row.associates)
			}
		})
	}
}
