package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestReportArrivingDuringTheCallsIsTakenAfterThem: in a burst, a node's
// first batch of addresses is reported routed by its agent while the
// reconcile that follows makes its own Assign. The report read as the
// reconcile began showed none of them; read again after the calls, it
// shows the batch routed, so this reconcile's write pools it. A
// NodeRouting replaced meanwhile (another UID) is not taken.
func TestReportArrivingDuringTheCallsIsTakenAfterThem(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := enipamv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	batch := netip.MustParseAddr("10.0.1.20")
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	nr.Status.ENIs = []enipamv1alpha1.RoutedENI{{ID: "eni-0", Number: 0, IPs: []string{batch.String()}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nr).WithStatusSubresource(nr).Build()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &Reconciler{client: c, log: log, nodes: map[string]*memory{}}
	read := nr.DeepCopy()
	read.Status.ENIs = nil // as the reconcile began: nothing routed yet
	s := newReadSync(r, read)
	if s.routed != nil && s.routed("eni-0", batch) {
		t.Fatal("scenario: the batch is routed before the report arrived")
	}

	s.rereadReport(context.Background())
	if s.routed == nil || !s.routed("eni-0", batch) {
		t.Error("the report that arrived during the calls is not taken: the batch waits for another reconcile")
	}

	replaced := newReadSync(r, read)
	replaced.routing.UID = "uid-old"
	replaced.rereadReport(context.Background())
	if replaced.routed != nil && replaced.routed("eni-0", batch) {
		t.Error("the report of a NodeRouting replaced meanwhile is taken")
	}
}

// newReadSync is a reconcile of node n1 on instance i-1 (its primary ENI
// eni-0) that read nr as it began.
func newReadSync(r *Reconciler, nr *enipamv1alpha1.NodeRouting) *nodeSync {
	s := &nodeSync{r: r, mem: r.memory("n1"), nodeState: nodeState{instanceID: "i-1", haveSnap: true,
		snap: snapshot.Node{ENIs: []cloud.ENI{{ID: "eni-0", InstanceID: "i-1", DeviceIndex: 0}}}}}
	s.cn = &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	s.routing = nr.DeepCopy()
	s.routed = s.ownReport(s.routing)
	return s
}
