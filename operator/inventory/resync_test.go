package inventory

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// keptCloud is fakeCloud that keeps the last ENI slice it returned and can
// fail its describes.
type keptCloud struct {
	*fakeCloud
	mu   sync.Mutex
	last []cloud.ENI
	fail bool
}

func (k *keptCloud) ListENIs(ctx context.Context, vpc string) ([]cloud.ENI, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail {
		return nil, errors.New("throttled")
	}
	out, err := k.fakeCloud.ListENIs(ctx, vpc)
	k.last = out
	return out, err
}

// TestResyncHookAndOwnView: one instance with two ENIs, resynced every
// 10 ms. OnResynced runs after the first sync and after each resync that
// succeeded, never after one that failed; what the inventory keeps is its
// own copy, not the describe's slice (which would keep every entry of it
// alive as long as one stays), so a change to that slice shows nowhere.
func TestResyncHookAndOwnView(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.10")
	k := &keptCloud{fakeCloud: &fakeCloud{instances: []cloud.Instance{instance("i-1")}, enis: []cloud.ENI{
		{ID: "eni-1", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached},
		{ID: "eni-2", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", DeviceIndex: 1, Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, IPs: []netip.Addr{ip}},
	}}}
	var mu sync.Mutex
	calls := 0
	resynced := make(chan struct{}, 100)
	inv := New(k, Options{VPCIDs: []string{"vpc-1"}, ResyncInterval: 10 * time.Millisecond, ConsistencyGrace: time.Millisecond, NotFoundRetry: time.Minute,
		OnResynced: func() {
			mu.Lock()
			calls++
			mu.Unlock()
			resynced <- struct{}{}
		}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	for range 3 {
		select {
		case <-resynced:
		case <-time.After(10 * time.Second):
			t.Fatal("OnResynced did not run after the syncs")
		}
	}

	k.mu.Lock()
	for i := range k.last {
		k.last[i].Status, k.last[i].InstanceID = "mutated", "i-other"
	}
	k.fail = true
	k.mu.Unlock()
	for _, id := range []string{"eni-1", "eni-2"} {
		e, ok := inv.ENI(id)
		if !ok || e.Status != cloud.ENIInUse || e.InstanceID != "i-1" {
			t.Errorf("%s after its describe's slice changed: %+v (found %v), want in-use on i-1", id, e, ok)
		}
	}

	// Resyncs fail from here on: the hook runs no more (one may have
	// been under way when the describes started failing).
	time.Sleep(50 * time.Millisecond)
	for len(resynced) > 0 {
		<-resynced
	}
	mu.Lock()
	before := calls
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	after := calls
	mu.Unlock()
	if after != before {
		t.Errorf("OnResynced ran %d times while every resync failed", after-before)
	}
}
