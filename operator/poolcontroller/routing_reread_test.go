package poolcontroller

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestReportArrivingDuringTheCallsIsTakenAfterThem: in a burst, a node's
// first batch of addresses is reported routed by its agent while the
// reconcile that follows makes its own EC2 calls. The reconcile writes
// the CiliumNode before its calls, so the report cannot enter that
// write; a reconcile whose calls changed what EC2 holds for the node is
// looked at again at once (actedRequeue), not on a resync, and that
// reconcile reads the report as it begins: the batch is pooled a
// reconcile later, not a resync later.
func TestReportArrivingDuringTheCallsIsTakenAfterThem(t *testing.T) {
	batch := netip.MustParseAddr("10.0.1.20")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &Reconciler{log: log, nodes: map[string]*memory{}, now: time.Now}
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	s := newReadSync(r, nr) // as the reconcile began: nothing routed yet
	if s.routed != nil && s.routed("eni-0", batch) {
		t.Fatal("scenario: the batch is routed before the report arrived")
	}
	// The reconcile's calls: an acknowledged address EC2 no longer
	// holds on its ENI completes its handshake (what the calls change
	// for the pool), with no call to make.
	s.acts.release = []releaseStep{{eniID: "eni-0", ips: []netip.Addr{netip.MustParseAddr("10.0.1.30")}}}
	s.act(context.Background())
	if s.requeue <= 0 || s.requeue > actedRequeue {
		t.Fatalf("a reconcile whose calls changed what EC2 holds is requeued after %v, not at once: the report that arrived during them waits for that", s.requeue)
	}

	// The agent reported the batch during the calls; the next reconcile
	// reads the NodeRouting as it begins.
	arrived := nr.DeepCopy()
	arrived.Status.ENIs = []enipamv1alpha1.RoutedENI{{ID: "eni-0", Number: 0, IPs: []string{batch.String()}}}
	next := newReadSync(r, arrived)
	if next.routed == nil || !next.routed("eni-0", batch) {
		t.Error("the reconcile after the calls does not take the report that arrived during them")
	}
}

// newReadSync is a reconcile of node n1 on instance i-1 (its primary ENI
// eni-0) that read nr as it began.
func newReadSync(r *Reconciler, nr *enipamv1alpha1.NodeRouting) *nodeSync {
	s := testSync(r, nil, deciding{mem: r.memory("n1"), nodeState: nodeState{instanceID: "i-1", haveSnap: true,
		snap: snapshot.Node{ENIs: []cloud.ENI{{ID: "eni-0", InstanceID: "i-1", DeviceIndex: 0}}}}})
	s.cn = &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	s.routing = nr.DeepCopy()
	s.routed = s.ownReport(s.routing)
	return s
}
