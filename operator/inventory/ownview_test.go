package inventory

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
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

func (k *keptCloud) ListENIs(ctx context.Context, vpc string, known func(string) (cloud.ENI, bool)) ([]cloud.ENI, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out, err := k.fakeCloud.ListENIs(ctx, vpc, known)
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

// TestResyncKeepsTheEntriesOfUnchangedENIs: 100 ENIs synced, then one
// gains an address in EC2 and the inventory resyncs. The 99 unchanged
// ENIs keep the entries they had (a resync of a VPC that did not change
// keeps no second copy of its ENIs, and what it described is garbage at
// once instead of the cache's replacement); the changed one shows its new
// address.
func TestResyncKeepsTheEntriesOfUnchangedENIs(t *testing.T) {
	f := &fakeCloud{instances: []cloud.Instance{instance("i-1")}}
	for i := range 100 {
		f.enis = append(f.enis, cloud.ENI{ID: fmt.Sprintf("eni-%d", i), VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", DeviceIndex: i,
			Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i), 1})},
			Tags: map[string]string{cloud.TagInstance: "i-1"}})
	}
	inv := newInventory(f)
	ctx := context.Background()
	if err := inv.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := map[string]*cloud.ENI{}
	inv.mu.RLock()
	maps.Copy(before, inv.enis)
	inv.mu.RUnlock()
	added := netip.MustParseAddr("10.0.200.1")
	f.mu.Lock()
	f.enis[7].IPs = append(slices.Clip(f.enis[7].IPs), added)
	f.mu.Unlock()
	if err := inv.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for id, old := range before {
		e, ok := inv.ENI(id)
		if !ok {
			t.Fatalf("%s gone after the resync", id)
		}
		inv.mu.RLock()
		same := inv.enis[id] == old
		inv.mu.RUnlock()
		if id == "eni-7" {
			if same || !e.HasIP(added) {
				t.Errorf("eni-7 after gaining %v in EC2: %v (entry kept: %v)", added, e.IPs, same)
			}
			continue
		}
		if same {
			kept++
		}
	}
	if kept != 99 {
		t.Errorf("%d of the 99 unchanged ENIs kept their entry across the resync, want 99", kept)
	}
}

// TestResyncKeepsTheEntriesOfUnchangedInstances: 100 instances synced,
// then one is stopping in EC2 and another has left the describe, and the
// inventory resyncs. The 98 unchanged instances keep the entries they had
// (no new long-lived copy of each instance a minute among the describe's
// garbage); the stopping one shows its new state, the one gone is gone.
func TestResyncKeepsTheEntriesOfUnchangedInstances(t *testing.T) {
	f := &fakeCloud{}
	for i := range 100 {
		in := instance(fmt.Sprintf("i-%d", i))
		in.Tags = map[string]string{"Name": in.ID}
		f.instances = append(f.instances, in)
	}
	inv := newInventory(f)
	ctx := context.Background()
	if err := inv.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	before := map[string]*cloud.Instance{}
	inv.mu.RLock()
	maps.Copy(before, inv.instances)
	inv.mu.RUnlock()
	f.mu.Lock()
	f.instances[7].State = "stopping"
	f.instances = slices.Delete(f.instances, 9, 10)
	for i := range f.instances {
		f.instances[i].Tags = maps.Clone(f.instances[i].Tags) // a describe's own copy
	}
	f.mu.Unlock()
	if err := inv.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if _, ok := inv.instances["i-9"]; ok {
		t.Error("i-9, gone from EC2, is still in the inventory")
	}
	if in := inv.instances["i-7"]; in == nil || in.State != "stopping" || in == before["i-7"] {
		t.Errorf("i-7 after stopping in EC2: %+v (entry kept: %v)", in, in == before["i-7"])
	}
	kept := 0
	for id, old := range before {
		if id != "i-7" && id != "i-9" && inv.instances[id] == old {
			kept++
		}
	}
	if kept != 98 {
		t.Errorf("%d of the 98 unchanged instances kept their entry across the resync, want 98", kept)
	}
}
