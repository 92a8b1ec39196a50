package poolcontroller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestNodeRoutingApplyWithoutSpecENIsUnderAnEarlierCRD: under a stored
// NodeRouting CRD that lacks spec.enis (a chart upgraded without its
// CRDs), the apiserver refuses an apply carrying it, naming the field,
// as the fake here does with the apiserver's words. The operator applies
// again without spec.enis, so the rest of its word (the first interface
// index) lands; the next reconcile leaves spec.enis as read and copies
// the node's ENIs into status.eni.enis at once (eniCopyWanted), as for an
// agent that routes that status only, and sends no spec.enis. A refusal
// naming another field is no such CRD: the write fails.
func TestNodeRoutingApplyWithoutSpecENIsUnderAnEarlierCRD(t *testing.T) {
	w := newRoutingWorld(t, &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 3},
		Spec: enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-1"}})
	refused := ".spec.enis"
	var applies, refusals int
	upgraded := false // the CRDs upgraded: spec.enis accepted
	w.intercept(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			applies++
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			if strings.Contains(string(data), `"enis"`) && !upgraded {
				refusals++
				return apierrors.NewInternalError(errors.New("failed to create typed patch object (/n1; enipam.io/v1alpha1, Kind=NodeRouting): " +
					refused + ": field not declared in schema"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	eni := enipamv1alpha1.NodeENI{ID: "eni-1", MAC: "02:00:00:00:00:01", Number: 1, Addresses: []string{"10.0.1.10"}}
	reconcile := func() *nodeSync { return w.read(w.cn, 1) }

	s := reconcile()
	if s.noSpecENIs || s.eniCopyWanted() {
		t.Fatal("before any refusal the ENIs' copy is wanted beside spec.enis")
	}
	s.routing.Spec.ENIs = []enipamv1alpha1.NodeENI{eni} // as decided (write)
	if err := s.writeRouting(context.Background()); err != nil {
		t.Fatalf("the apply refused for spec.enis failed the write: %v", err)
	}
	if refusals != 1 || applies != 2 {
		t.Errorf("%d applies, %d refused; want 2, the first refused", applies, refusals)
	}
	if got := w.stored(); got.Spec.FirstInterfaceIndex != 1 || len(got.Spec.ENIs) != 0 {
		t.Errorf("stored spec %+v, want first interface index 1 and no ENIs", got.Spec)
	}
	if !w.r.withoutSpecENIs() {
		t.Error("the refusal is not remembered")
	}

	s = reconcile()
	if !s.noSpecENIs || !s.eniCopyWanted() {
		t.Errorf("after the refusal: noSpecENIs %v, the ENIs' copy wanted %v; want true, true", s.noSpecENIs, s.eniCopyWanted())
	}
	if e := s.wantRoutingENIs(nil, nil); e.set {
		t.Errorf("spec.enis decided %+v after the refusal, want it left as read", e)
	}
	s.routing.Spec.ENIs = []enipamv1alpha1.NodeENI{eni} // even so, an apply sends none
	if err := s.writeRouting(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refusals != 1 {
		t.Errorf("%d refusals, want still 1: the applies go without spec.enis", refusals)
	}

	// The CRDs upgraded within the retry's ten minutes: the applies still
	// go without spec.enis; past them, the next apply sends it again.
	upgraded = true
	start := time.Now()
	w.r.now = func() time.Time { return start.Add(9 * time.Minute) }
	s = reconcile()
	if !s.noSpecENIs {
		t.Error("spec.enis tried again within the retry")
	}
	w.r.now = func() time.Time { return start.Add(11 * time.Minute) }
	s = reconcile()
	if s.noSpecENIs || s.eniCopyWanted() {
		t.Errorf("past the retry: noSpecENIs %v, the ENIs' copy wanted %v; want false, false", s.noSpecENIs, s.eniCopyWanted())
	}
	s.routing.Spec.ENIs = []enipamv1alpha1.NodeENI{eni}
	if err := s.writeRouting(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.stored(); len(got.Spec.ENIs) != 1 || got.Spec.ENIs[0].ID != eni.ID {
		t.Errorf("stored spec.enis %+v past the retry, want %s", got.Spec.ENIs, eni.ID)
	}
	upgraded = false

	// Another field refused: not the CRD's lack of spec.enis.
	w.r, refused = routingReconciler(w.r.client), ".spec.other"
	s = reconcile()
	s.routing.Spec.ENIs = []enipamv1alpha1.NodeENI{eni, {ID: "eni-2", MAC: "02:00:00:00:00:02", Number: 2}}
	if err := s.writeRouting(context.Background()); err == nil {
		t.Error("an apply refused for another field went through")
	}
	if w.r.withoutSpecENIs() {
		t.Error("a refusal of another field is taken for the CRD's lack of spec.enis")
	}
}
