package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
)

// TestPlacementNoteIsThePoolControllersFieldAlone: claim ns/db-0 (its
// spec at generation 2, no address chosen yet) holds the claim
// controller's status (Placing, its Ready condition) and a note an
// earlier term left about an address it no longer records. Node n1's
// pass, in term t2, writes its note on the first placement: the stored
// note is exactly the new one (no field of the old one left behind), the
// claim controller's fields are untouched, and a pass that finds the
// note already there writes nothing; a pass with nothing to say removes
// the note, and nothing else.
func TestPlacementNoteIsThePoolControllersFieldAlone(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "ns", Name: "db-0"}
	stored := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Generation: 2},
		Spec: enipamv1alpha1.StaticIPClaimSpec{NodeName: "n1"}}
	stored.Status = enipamv1alpha1.StaticIPClaimStatus{Phase: enipamv1alpha1.ClaimPlacing, ObservedGeneration: 2,
		Placement: &enipamv1alpha1.PlacementNote{Address: "10.0.1.5", Node: "n0", ObservedGeneration: 1, Term: "t1",
			Reason: enipamv1alpha1.ReasonAddressTaken, Message: "10.0.1.5 on node n0 is in use by pod ns/web-0"}}
	meta.SetStatusCondition(&stored.Status.Conditions, metav1.Condition{Type: enipamv1alpha1.ClaimReady, Status: metav1.ConditionFalse,
		Reason: enipamv1alpha1.ReasonPlacing, Message: "placing the address on node n1"})
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&enipamv1alpha1.StaticIPClaim{}).WithObjects(stored).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				patches++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	read := func() *enipamv1alpha1.StaticIPClaim {
		t.Helper()
		got := &enipamv1alpha1.StaticIPClaim{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	claimControllers := func(st enipamv1alpha1.StaticIPClaimStatus) enipamv1alpha1.StaticIPClaimStatus {
		st.Placement = nil
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return st
	}
	want := claimControllers(read().Status)

	s := testSync(&Reconciler{client: c, opts: Options{Term: "t2"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil,
		deciding{cn: &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}})
	claim := claims.FromObject(read())
	note := s.placementFor(claim, placementNote{Reason: enipamv1alpha1.ReasonPlacing, Message: "waiting for a free address on node n1"})
	s.writeNote(ctx, claim, note)

	got := read()
	wantNote := enipamv1alpha1.PlacementNote{Node: "n1", ObservedGeneration: 2, Term: "t2",
		Reason: enipamv1alpha1.ReasonPlacing, Message: "waiting for a free address on node n1"}
	if got.Status.Placement == nil || *got.Status.Placement != wantNote {
		t.Errorf("stored note %+v, want %+v", got.Status.Placement, wantNote)
	}
	if st := claimControllers(got.Status); !sameJSON(st, want) {
		t.Errorf("the claim controller's status became %+v, want it untouched: %+v", st, want)
	}
	if patches != 1 || s.requeue != 0 {
		t.Errorf("%d patches (requeue %v), want 1 and none", patches, s.requeue)
	}

	// The next pass reads the note it wrote: nothing to write.
	claim = claims.FromObject(got)
	s.writeNote(ctx, claim, s.placementFor(claim, placementNote{Reason: enipamv1alpha1.ReasonPlacing, Message: "waiting for a free address on node n1"}))
	if patches != 1 {
		t.Errorf("an unchanged note was written again (%d patches)", patches)
	}

	// Stamped and bound: the note goes, and nothing else.
	s.writeNote(ctx, claim, nil)
	got = read()
	if got.Status.Placement != nil {
		t.Errorf("stored note %+v, want none", got.Status.Placement)
	}
	if st := claimControllers(got.Status); !sameJSON(st, want) {
		t.Errorf("the claim controller's status became %+v, want it untouched: %+v", st, want)
	}
	if patches != 2 {
		t.Errorf("%d patches, want 2", patches)
	}

	// A claim gone meanwhile: nothing to retry.
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.writeNote(ctx, claim, note)
	if s.requeue != 0 {
		t.Errorf("a note on a claim gone asks to look again in %v", s.requeue)
	}
}

// TestTheControllersOwnNotesWakeNoNode: a claim update that changes only
// status.placement (the pool controller's own note) enqueues no node; one
// that changes anything else does.
func TestTheControllersOwnNotesWakeNoNode(t *testing.T) {
	old := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", ResourceVersion: "5"}}
	old.Spec.NodeName = "n1"
	noted := old.DeepCopy()
	noted.ResourceVersion = "6"
	noted.Status.Placement = &enipamv1alpha1.PlacementNote{Node: "n1", Reason: enipamv1alpha1.ReasonPlacing}
	moved := noted.DeepCopy()
	moved.ResourceVersion = "7"
	moved.Spec.NodeName = "n2"
	recorded := noted.DeepCopy()
	recorded.ResourceVersion = "8"
	recorded.Status.Address = "10.0.1.5"
	for _, tc := range []struct {
		name     string
		old, new *enipamv1alpha1.StaticIPClaim
		want     bool
	}{
		{"note written", old, noted, false},
		{"note removed", noted, old, false},
		{"spec.nodeName changed", noted, moved, true},
		{"status.address recorded", noted, recorded, true},
	} {
		if got := claimChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: enqueued %v, want %v", tc.name, got, tc.want)
		}
	}
}
