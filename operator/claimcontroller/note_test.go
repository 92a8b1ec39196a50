package claimcontroller

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// noteScenario: one VPC whose pod subnet holds the claim's address, and
// one m5.large instance (node n1) in that zone.
const noteScenario = `
account: "123456789012"
region: us-east-1
seed: 7
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  - {id: subnet-0a000000000000002, name: pods-a, cidr: 10.0.16.0/20, zone: us-east-1a}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`

// noteTerm is the term of the controller under test; an earlier
// process's term is "before-restart".
const noteTerm = "after-restart"

// TestPlacementNoteIsActedOnOnlyWhenCurrent: claim ns/db-0 asked for no
// address; the operator picked 10.0.16.20 (status.address), which pod
// ns/web-0 now holds in node n1's pool, unstamped; the claim is to go on
// n1 (spec.nodeName). The pool controller's note in status.placement
// says the address is taken. The claim controller drops the address (so
// another is picked) only when the note is about the claim as it is and
// of its own term (a note with no address is about the first placement,
// whose address the claim records since): a note left by the process
// before a restart, about an earlier generation of the spec, or about
// another address is not acted on, and the address stays the claim's. A placing note is shown in the
// Ready condition under the same rule.
func TestPlacementNoteIsActedOnOnlyWhenCurrent(t *testing.T) {
	const addr = "10.0.16.20"
	note := func(reason, address string, gen int64, term string) *enipamv1alpha1.PlacementNote {
		return &enipamv1alpha1.PlacementNote{Address: address, Node: "n1", ObservedGeneration: gen, Term: term,
			Reason: reason, Message: "the pool controller's word: " + reason}
	}
	taken, routing := enipamv1alpha1.ReasonAddressTaken, enipamv1alpha1.ReasonAwaitingRouting
	for _, tc := range []struct {
		name       string
		note       *enipamv1alpha1.PlacementNote
		wantAddr   string
		wantReason string
	}{
		{"taken, current", note(taken, addr, 2, noteTerm), "", taken},
		{"taken, left before a restart", note(taken, addr, 2, "before-restart"), addr, enipamv1alpha1.ReasonPlacing},
		{"taken, about an earlier generation", note(taken, addr, 1, noteTerm), addr, enipamv1alpha1.ReasonPlacing},
		{"taken, about another address", note(taken, "10.0.16.21", 2, noteTerm), addr, enipamv1alpha1.ReasonPlacing},
		// The first placement's stamp, since recorded, found in use.
		{"taken, about the first placement", note(taken, "", 2, noteTerm), "", taken},
		{"taken, about the first placement, left before a restart", note(taken, "", 2, "before-restart"), addr, enipamv1alpha1.ReasonPlacing},
		{"awaiting routing, current", note(routing, addr, 2, noteTerm), addr, routing},
		{"awaiting routing, left before a restart", note(routing, addr, 2, "before-restart"), addr, enipamv1alpha1.ReasonPlacing},
		{"no note", nil, addr, enipamv1alpha1.ReasonPlacing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r := newNoteWorld(t)
			ctx := context.Background()
			key := client.ObjectKey{Namespace: "ns", Name: "db-0"}
			claim := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Generation: 2,
				Finalizers: []string{enipamv1alpha1.StaticIPClaimFinalizer}},
				Spec: enipamv1alpha1.StaticIPClaimSpec{NodeName: "n1", ReclaimPolicy: enipamv1alpha1.ReclaimRetain}}
			if err := c.Create(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, key, claim); err != nil {
				t.Fatal(err)
			}
			if claim.Generation != 2 {
				t.Fatalf("the claim's generation is %d, the test wants 2", claim.Generation)
			}
			orig := claim.DeepCopy()
			claim.Status.Address, claim.Status.Phase, claim.Status.ObservedGeneration = addr, enipamv1alpha1.ClaimPlacing, 2
			claim.Status.Placement = tc.note
			if err := c.Status().Patch(ctx, claim, client.MergeFrom(orig)); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			got := &enipamv1alpha1.StaticIPClaim{}
			if err := c.Get(ctx, key, got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Address != tc.wantAddr {
				t.Errorf("status.address = %q, want %q", got.Status.Address, tc.wantAddr)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, enipamv1alpha1.ClaimReady)
			switch {
			case ready == nil:
				t.Errorf("no Ready condition")
			case ready.Reason != tc.wantReason:
				t.Errorf("Ready reason %q (%s), want %q", ready.Reason, ready.Message, tc.wantReason)
			case tc.note != nil && ready.Reason == tc.note.Reason && ready.Message != tc.note.Message:
				t.Errorf("Ready message %q, want the note's %q", ready.Message, tc.note.Message)
			}
			// The claim controller never writes the pool controller's field.
			if !equalNotes(got.Status.Placement, tc.note) {
				t.Errorf("status.placement = %+v, want it untouched: %+v", got.Status.Placement, tc.note)
			}
		})
	}
}

func equalNotes(a, b *enipamv1alpha1.PlacementNote) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// newNoteWorld is EC2 (noteScenario, synced into an inventory), an
// in-memory apiserver holding node n1's CiliumNode, whose pool lists
// 10.0.16.20 held by pod ns/web-0, and a claim controller of noteTerm.
func newNoteWorld(t *testing.T) (client.WithWatch, *Reconciler) {
	t.Helper()
	sc, err := ec2sim.ParseScenario([]byte(noteScenario))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ec2sim.NewState(sc, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	api := cloudfake.New(st)
	inv := inventory.New(api, inventory.Options{VPCIDs: []string{"vpc-0a000000000000001"}, ResyncInterval: time.Hour,
		ConsistencyGrace: time.Second, NotFoundRetry: time.Second}, log)
	if err := inv.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ciliumv2.AddToScheme, enipamv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cn.Spec.InstanceID = "i-0a000000000000001"
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.16.20": {Resource: "eni-1"}}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.16.20": {Owner: "ns/web-0", Resource: "eni-1"}}
	b := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&ciliumv2.CiliumNode{}, &enipamv1alpha1.StaticIPClaim{}).WithObjects(cn)
	for _, idx := range claims.Indexes() {
		b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
	}
	c := b.Build()
	return c, New(c, api, inv, events.NewFakeRecorder(100), Options{Cluster: "test", Term: noteTerm}, log)
}
