package poolcontroller

import (
	"io"
	"log/slog"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestJoiningPoolWaits: a joining node (nothing in its written pool)
// whose first ENI's addresses are ready while its second ENI's still wait
// for the agent's routes holds its first pool write, for joinHold at most
// from the first write it held; a node with a pool, a pool with a stamped
// address, nothing awaiting, or another change of spec.ipam never waits.
func TestJoiningPoolWaits(t *testing.T) {
	ready := ipamtypes.AllocationMap{"10.0.1.10": {Resource: "eni-1"}, "10.0.1.11": {Resource: "eni-1"}}
	tests := []struct {
		name string
		// orig is the written pool, want the desired one; awaiting the
		// addresses not ready yet; heldFor how long ago the first write
		// was held (0: never).
		orig, want ipamtypes.AllocationMap
		awaiting   int
		heldFor    time.Duration
		preAlloc   int
		waits      bool
	}{
		{name: "first ENI ready, second awaiting", want: ready, awaiting: 9, waits: true},
		{name: "held 9 s ago: still waits", want: ready, awaiting: 9, heldFor: 9 * time.Second, waits: true},
		{name: "held 10 s ago: written", want: ready, awaiting: 9, heldFor: joinHold},
		{name: "nothing awaiting: written", want: ready},
		{name: "a pool already written: never waits", orig: ipamtypes.AllocationMap{"10.0.1.12": {Resource: "eni-1"}}, want: ready, awaiting: 9},
		{name: "a stamped address: never waits", want: ipamtypes.AllocationMap{"10.0.1.10": {Resource: "eni-1", Owner: "default/db-0"}}, awaiting: 9},
		{name: "spec.ipam changed besides the pool: never waits", want: ready, awaiting: 9, preAlloc: 4},
		{name: "nothing to write: no wait", awaiting: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC)
			r := &Reconciler{now: func() time.Time { return now }, log: slog.New(slog.NewTextHandler(io.Discard, nil)), nodes: map[string]*memory{}}
			orig := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			orig.Spec.InstanceID = "i-1"
			orig.Spec.IPAM.Pool = tt.orig
			cn := orig.DeepCopy()
			cn.Spec.IPAM.Pool = tt.want
			cn.Spec.IPAM.PreAllocate = tt.preAlloc
			s := testSync(r, orig, deciding{mem: r.memory("n1"), cn: cn, pool: &poolView{cn: cn, awaiting: tt.awaiting}})
			if tt.heldFor > 0 {
				s.mem.joinHeldSince = now.Add(-tt.heldFor)
			}
			if got := s.joiningPoolWaits(); got != tt.waits {
				t.Fatalf("joiningPoolWaits() = %v, want %v", got, tt.waits)
			}
			if tt.waits {
				left := joinHold - tt.heldFor
				if s.requeue <= 0 || s.requeue > left {
					t.Errorf("requeue in %v, want within %v (the hold's end)", s.requeue, left)
				}
			}
		})
	}
}
