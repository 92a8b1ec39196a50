package inventory

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// keptCloud is fakeCloud that keeps the last ENI slice it returned.
type keptCloud struct {
	*fakeCloud
	mu   sync.Mutex
	last []cloud.ENI
}

func (k *keptCloud) ListENIs(ctx context.Context, vpc string) ([]cloud.ENI, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out, err := k.fakeCloud.ListENIs(ctx, vpc)
	k.last = out
	return out, err
}

// TestSyncKeepsItsOwnView: one instance with two ENIs, synced once. What
// the inventory keeps is its own copy, not the describe's slice (which
// would keep every entry of it, and its append slack, alive as long as
// one entry stays), so a change to that slice shows nowhere.
func TestSyncKeepsItsOwnView(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.10")
	k := &keptCloud{fakeCloud: &fakeCloud{instances: []cloud.Instance{instance("i-1")}, enis: []cloud.ENI{
		{ID: "eni-1", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached},
		{ID: "eni-2", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", DeviceIndex: 1, Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, IPs: []netip.Addr{ip}},
	}}}
	inv := New(k, Options{VPCIDs: []string{"vpc-1"}, ResyncInterval: time.Hour, ConsistencyGrace: time.Minute, NotFoundRetry: time.Minute},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()

	k.mu.Lock()
	for i := range k.last {
		k.last[i].Status, k.last[i].InstanceID = "mutated", "i-other"
	}
	k.mu.Unlock()
	for _, id := range []string{"eni-1", "eni-2"} {
		e, ok := inv.ENI(id)
		if !ok || e.Status != cloud.ENIInUse || e.InstanceID != "i-1" {
			t.Errorf("%s after its describe's slice changed: %+v (found %v), want in-use on i-1", id, e, ok)
		}
	}
}
