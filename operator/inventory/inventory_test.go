package inventory

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// fakeCloud serves describes from fixed data and counts lookups; only the
// describe side of cloud.API is used by the inventory.
type fakeCloud struct {
	cloud.API
	mu        sync.Mutex
	instances []cloud.Instance
	enis      []cloud.ENI
	lookups   atomic.Int32
	looked    [][]string
	// block, when set, holds describes of ENIs until closed; entered is
	// signalled as one starts waiting.
	block, entered chan struct{}
}

func (f *fakeCloud) DescribeVPC(context.Context, string) (cloud.VPC, error) {
	return cloud.VPC{ID: "vpc-1", CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}, nil
}
func (f *fakeCloud) ListSubnets(context.Context, string) ([]cloud.Subnet, error) {
	return []cloud.Subnet{{ID: "subnet-1", VPCID: "vpc-1", AZ: "az-a", Available: 100}}, nil
}
func (f *fakeCloud) ListSecurityGroups(context.Context, string) ([]cloud.SecurityGroup, error) {
	return nil, nil
}
func (f *fakeCloud) ListInstances(context.Context, string, func(string) (cloud.Instance, bool)) ([]cloud.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cloud.Instance(nil), f.instances...), nil
}
func (f *fakeCloud) ListENIs(context.Context, string, func(string) (cloud.ENI, bool)) ([]cloud.ENI, error) {
	if f.block != nil {
		f.entered <- struct{}{}
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]cloud.ENI, len(f.enis))
	for i, e := range f.enis {
		out[i] = e.Clone()
	}
	return out, nil
}
func (f *fakeCloud) GetInstances(_ context.Context, ids []string) ([]cloud.Instance, []cloud.ENI, error) {
	f.lookups.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looked = append(f.looked, ids)
	var out []cloud.Instance
	for _, in := range f.instances {
		for _, id := range ids {
			if in.ID == id {
				out = append(out, in)
			}
		}
	}
	return out, nil, nil
}
func (f *fakeCloud) InstanceTypes(context.Context, []string) ([]cloud.InstanceType, error) {
	return []cloud.InstanceType{{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10}}, nil
}

func instance(id string) cloud.Instance {
	return cloud.Instance{ID: id, Type: "m5.large", AZ: "az-a", VPCID: "vpc-1", SubnetID: "subnet-1", State: "running"}
}

func newInventory(f *fakeCloud) *Inventory {
	return New(f, Options{VPCIDs: []string{"vpc-1"}, ResyncInterval: time.Hour, ConsistencyGrace: time.Minute, NotFoundRetry: time.Minute},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestJoiningWaveIsLookedUpInBatches: fifty unknown instances asked for at
// once cost one or two lookups, not fifty; an instance EC2 does not know
// is ErrNotFound and is not looked up again right away.
func TestJoiningWaveIsLookedUpInBatches(t *testing.T) {
	f := &fakeCloud{}
	for i := range 50 {
		f.instances = append(f.instances, instance(string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	inv := newInventory(f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	f.mu.Lock()
	f.instances = append(f.instances, func() []cloud.Instance {
		var late []cloud.Instance
		for i := range 50 {
			late = append(late, instance("i-late-"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		}
		return late
	}()...)
	f.mu.Unlock()

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := inv.Snapshot(ctx, "i-late-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "c")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.lookups.Load(); n > 2 {
		t.Errorf("%d lookups for 50 joining instances, want at most 2", n)
	}
	if _, err := inv.Snapshot(ctx, "i-ghost", "c"); !errors.Is(err, cloud.ErrNotFound) {
		t.Fatalf("unknown instance: %v, want ErrNotFound", err)
	}
	before := f.lookups.Load()
	if _, err := inv.Snapshot(ctx, "i-ghost", "c"); !errors.Is(err, cloud.ErrNotFound) || f.lookups.Load() != before {
		t.Errorf("second ask for the unknown instance: %v after %d more lookups, want ErrNotFound from memory", err, f.lookups.Load()-before)
	}
}

// TestLocalChangeOutlivesOlderDescribe: an ENI created and an address
// assigned while a resync's describe was under way survive that resync,
// which knows neither; a later resync that sees them keeps them.
func TestLocalChangeOutlivesOlderDescribe(t *testing.T) {
	f := &fakeCloud{instances: []cloud.Instance{instance("i-1")}}
	f.enis = []cloud.ENI{{ID: "eni-0", InstanceID: "i-1", VPCID: "vpc-1", SubnetID: "subnet-1", Status: cloud.ENIInUse}}
	inv := newInventory(f)
	ctx := context.Background()
	if err := inv.syncVPC(ctx, "vpc-1"); err != nil {
		t.Fatal(err)
	}

	f.block, f.entered = make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() { done <- inv.syncVPC(ctx, "vpc-1") }()
	<-f.entered // the describe is under way
	ip := netip.MustParseAddr("10.0.0.9")
	inv.RecordCreated(cloud.ENI{ID: "eni-new", VPCID: "vpc-1", SubnetID: "subnet-1", Status: cloud.ENIAvailable, IPs: []netip.Addr{ip}})
	inv.RecordAttached("eni-new", "i-1", 1, "attach-1")
	inv.RecordAssigned("eni-0", []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil)
	close(f.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	snap, err := inv.Snapshot(ctx, "i-1", "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.ENIs) != 2 || len(snap.ENIs[0].IPs) != 1 || snap.ENIs[1].ID != "eni-new" {
		t.Fatalf("after an older describe: %+v, want both local changes", snap.ENIs)
	}
	if free := snap.Subnets[0].Available; free != 100-2-1 {
		t.Errorf("subnet free %d, want 97 after the local changes", free)
	}
}

func (f *fakeCloud) GetENIs(_ context.Context, ids []string) ([]cloud.ENI, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cloud.ENI
	for _, e := range f.enis {
		for _, id := range ids {
			if e.ID == id {
				out = append(out, e.Clone())
			}
		}
	}
	return out, nil
}

// startOneENI starts an inventory on one instance whose device-1 ENI,
// eni-1, holds ips, with a clock of its own (advance moves it), and
// waits for its first sync.
func startOneENI(t *testing.T, ips ...netip.Addr) (f *fakeCloud, inv *Inventory, advance func(time.Duration), ctx context.Context) {
	t.Helper()
	f = &fakeCloud{instances: []cloud.Instance{instance("i-1")}, enis: []cloud.ENI{{
		ID: "eni-1", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", DeviceIndex: 1,
		Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, IPs: ips,
	}}}
	inv = newInventory(f)
	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	inv.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance = func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	return f, inv, advance, ctx
}

// TestEarlyDescribesVouchOnlyForOwnAssigns: until a grace after Start, a
// describe may still show what an earlier operator process unassigned, so
// only this process's own assigns are trusted; a describe by ID after the
// grace vouches for what it shows, even where it cannot replace a newer
// local view.
func TestEarlyDescribesVouchOnlyForOwnAssigns(t *testing.T) {
	a, b, mine := netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.12")
	f, inv, advance, ctx := startOneENI(t, a, b)

	if inv.Trusted("eni-1", a) || inv.Trusted("eni-1", b) {
		t.Fatal("the first describe, within the grace, is trusted")
	}
	inv.RecordAssigned("eni-1", []netip.Addr{mine}, nil)
	if !inv.Trusted("eni-1", mine) {
		t.Error("an address this process assigned is not trusted")
	}

	// After the grace, with a local change still newer than the describe:
	// EC2 now shows only a (b was unassigned before the start).
	advance(time.Minute)
	inv.RecordAssigned("eni-1", nil, nil) // touches the ENI
	f.mu.Lock()
	f.enis[0].IPs = []netip.Addr{a, mine}
	f.mu.Unlock()
	if err := inv.RefreshENIs(ctx, []string{"eni-1"}); err != nil {
		t.Fatal(err)
	}
	if !inv.Trusted("eni-1", a) {
		t.Error("a describe by ID after the grace did not vouch for what it shows")
	}
	if inv.Trusted("eni-1", b) {
		t.Error("an address no later describe shows is trusted")
	}

	// Once the local change is old, the describe replaces the view.
	advance(2 * time.Minute)
	if err := inv.RefreshENIs(ctx, []string{"eni-1"}); err != nil {
		t.Fatal(err)
	}
	snap, err := inv.Snapshot(ctx, "i-1", "test")
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.ENIs[0].IPs; len(got) != 2 || !inv.Trusted("eni-1", a) {
		t.Errorf("after a fresh describe: IPs %v, a trusted %v", got, inv.Trusted("eni-1", a))
	}
}

// TestInFlightHoldsAcrossFailedAttaches: an ENI being attached stays in
// flight through refused attaches (each renewing the mark and counted),
// until ClearInFlight; a mark no attempt renewed for InFlightLease lapses.
func TestInFlightHoldsAcrossFailedAttaches(t *testing.T) {
	inv := newInventory(&fakeCloud{})
	clock := time.Unix(1_000_000, 0)
	inv.now = func() time.Time { return clock }

	inv.MarkInFlight("eni-1")
	for want := 1; want <= 3; want++ {
		clock = clock.Add(InFlightLease - time.Second)
		if got := inv.AttachFailed("eni-1"); got != want {
			t.Fatalf("attach failure %d counted as %d", want, got)
		}
		if !inv.InFlight("eni-1") {
			t.Fatalf("not in flight after failure %d", want)
		}
	}
	inv.MarkInFlight("eni-1") // another attempt keeps the count
	if got := inv.AttachFailed("eni-1"); got != 4 {
		t.Errorf("failures after a new attempt: %d, want 4", got)
	}
	inv.ClearInFlight("eni-1")
	if inv.InFlight("eni-1") {
		t.Error("in flight after ClearInFlight")
	}
	if got := inv.AttachFailed("eni-1"); got != 1 {
		t.Errorf("failures after ClearInFlight start again at %d, want 1", got)
	}

	inv.MarkInFlight("eni-2")
	clock = clock.Add(InFlightLease)
	if inv.InFlight("eni-2") {
		t.Error("a mark no attempt renewed for InFlightLease still holds")
	}
}

// TestCompletedAttachmentIsTold: the attachment poll tells of each ENI
// whose attachment EC2 now shows complete, once, and of no ENI still
// attaching, so its node is served without waiting for a resync.
func TestCompletedAttachmentIsTold(t *testing.T) {
	eni := func(id string) cloud.ENI {
		return cloud.ENI{ID: id, VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", DeviceIndex: 1,
			Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttaching}
	}
	f := &fakeCloud{instances: []cloud.Instance{instance("i-1")}, enis: []cloud.ENI{eni("eni-1"), eni("eni-2")}}
	inv := newInventory(f)
	var mu sync.Mutex
	var told []string
	inv.OnAttached(func(e cloud.ENI) { mu.Lock(); told = append(told, e.ID); mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inv.Start(ctx) }()
	<-inv.Synced()
	if !inv.Attaching("eni-1") || !inv.Attaching("eni-2") {
		t.Fatal("the first describe's attaching ENIs are not polled")
	}
	mu.Lock()
	told = nil // the background poll may have run once already, both still attaching
	mu.Unlock()

	f.mu.Lock()
	f.enis[0].AttachmentStatus = cloud.AttachmentAttached
	f.mu.Unlock()
	inv.pollAttachments(ctx)
	inv.pollAttachments(ctx)
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || told[0] != "eni-1" {
		t.Fatalf("told %v after eni-1's attachment completed, want [eni-1] once", told)
	}
	if inv.Attaching("eni-1") || !inv.Attaching("eni-2") {
		t.Errorf("attaching after the poll: eni-1 %v, eni-2 %v; want false, true", inv.Attaching("eni-1"), inv.Attaching("eni-2"))
	}
}

// TestLaggingDescribeKeepsOwnAttachment: an ENI this process just
// attached, whose describes still show it as created (no attachment, as
// EC2's eventual consistency allows), stays attaching and polled; it is
// told attached once a describe shows so. The poll used to take the
// lagging describe's word: the ENI left the poll, neither attaching nor
// attached, and its addresses waited minutes for a resync past the grace.
func TestLaggingDescribeKeepsOwnAttachment(t *testing.T) {
	f := &fakeCloud{instances: []cloud.Instance{instance("i-1")}}
	inv := newInventory(f)
	var mu sync.Mutex
	var told []string
	inv.OnAttached(func(e cloud.ENI) { mu.Lock(); told = append(told, e.ID); mu.Unlock() })
	ctx := context.Background()
	if err := inv.syncVPC(ctx, "vpc-1"); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.0.0.9")
	created := cloud.ENI{ID: "eni-new", VPCID: "vpc-1", SubnetID: "subnet-1", Status: cloud.ENIAvailable, IPs: []netip.Addr{ip}}
	inv.RecordCreated(created)
	inv.RecordAttached("eni-new", "i-1", 1, "attach-1")
	f.mu.Lock()
	f.enis = []cloud.ENI{created.Clone()} // the describe lags: as created
	f.mu.Unlock()

	for range 3 {
		inv.pollAttachments(ctx)
	}
	if !inv.Attaching("eni-new") {
		t.Fatal("a lagging describe took the ENI out of the attachment poll")
	}
	snap, err := inv.Snapshot(ctx, "i-1", "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.ENIs) != 1 || snap.ENIs[0].AttachmentStatus != cloud.AttachmentAttaching || snap.ENIs[0].InstanceID != "i-1" {
		t.Fatalf("after lagging describes: %+v, want eni-new attaching to i-1", snap.ENIs)
	}

	f.mu.Lock()
	f.enis[0].InstanceID, f.enis[0].DeviceIndex, f.enis[0].Status, f.enis[0].AttachmentStatus = "i-1", 1, cloud.ENIInUse, cloud.AttachmentAttached
	f.mu.Unlock()
	inv.pollAttachments(ctx)
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || told[0] != "eni-new" || inv.Attaching("eni-new") {
		t.Fatalf("told %v, attaching %v once a describe shows the attachment; want [eni-new], false", told, inv.Attaching("eni-new"))
	}
	snap, _ = inv.Snapshot(ctx, "i-1", "c")
	if len(snap.ENIs) != 1 || snap.ENIs[0].AttachmentStatus != cloud.AttachmentAttached {
		t.Errorf("snapshot %+v, want eni-new attached", snap.ENIs)
	}
}

// TestDetachShownCompleteIsTaken: an ENI this process detached
// (consolidation) is shown available as soon as a describe by ID shows
// its detach complete, within the consistency grace, so consolidation
// deletes it then; a describe that still shows it attached leaves it
// detaching. The grace used to hide the completed detach for its whole
// length: the emptied ENI, and its primary address, stayed two minutes
// longer, and the pools bench found it unattached at the end.
func TestDetachShownCompleteIsTaken(t *testing.T) {
	attached := cloud.ENI{ID: "eni-1", VPCID: "vpc-1", SubnetID: "subnet-1", InstanceID: "i-1", DeviceIndex: 1,
		Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, AttachmentID: "attach-1"}
	f := &fakeCloud{instances: []cloud.Instance{instance("i-1")}, enis: []cloud.ENI{attached.Clone()}}
	inv := newInventory(f)
	ctx := context.Background()
	if err := inv.syncVPC(ctx, "vpc-1"); err != nil {
		t.Fatal(err)
	}
	inv.RecordDetaching("eni-1")
	if err := inv.RefreshENIs(ctx, []string{"eni-1"}); err != nil { // the describe lags: still attached
		t.Fatal(err)
	}
	if e, _ := inv.ENI("eni-1"); e.Status != cloud.ENIDetaching {
		t.Fatalf("after a lagging describe: status %q, want %q", e.Status, cloud.ENIDetaching)
	}
	f.mu.Lock()
	f.enis[0] = cloud.ENI{ID: "eni-1", VPCID: "vpc-1", SubnetID: "subnet-1", Status: cloud.ENIAvailable}
	f.mu.Unlock()
	if err := inv.RefreshENIs(ctx, []string{"eni-1"}); err != nil {
		t.Fatal(err)
	}
	if e, ok := inv.ENI("eni-1"); !ok || e.Status != cloud.ENIAvailable {
		t.Errorf("after a describe showing the detach complete: status %q (known %v), want %q", e.Status, ok, cloud.ENIAvailable)
	}
}

// TestOwnAssignsAreTrustedOnAnENIDescribedOnlyBeforeTheGrace: an ENI
// whose view no describe has installed since the grace (its local
// changes newer than every resync, as on a node whose pool moves every
// few seconds) still believes this process's own assigns: an address
// assigned onto it after the grace is trusted at once, not only once a
// describe by ID confirms it. Unassigned, it no longer is; and once a
// describe after the grace installs the ENI, this process's word for
// its addresses is dropped, the view believed instead.
func TestOwnAssignsAreTrustedOnAnENIDescribedOnlyBeforeTheGrace(t *testing.T) {
	a, late := netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.12")
	f, inv, advance, ctx := startOneENI(t, a)

	advance(time.Minute) // past the grace; eni-1 was last described before it
	f.mu.Lock()
	f.enis[0].IPs = []netip.Addr{a, late}
	f.mu.Unlock()
	inv.RecordAssigned("eni-1", []netip.Addr{late}, nil)
	if !inv.Trusted("eni-1", late) {
		t.Fatal("an address this process assigned after the grace, onto an ENI last described before it, is not trusted")
	}
	if inv.Trusted("eni-1", a) {
		t.Fatal("an address only a describe from before the grace shows is trusted")
	}

	inv.RecordUnassigned("eni-1", []netip.Addr{late})
	if inv.Trusted("eni-1", late) {
		t.Error("an address this process unassigned is still trusted on its word")
	}
	inv.RecordAssigned("eni-1", []netip.Addr{late}, nil)

	// Once the local change is old, a describe replaces the view, and
	// this process's word is forgotten.
	advance(2 * time.Minute)
	if err := inv.RefreshENIs(ctx, []string{"eni-1"}); err != nil {
		t.Fatal(err)
	}
	if !inv.Trusted("eni-1", late) || !inv.Trusted("eni-1", a) {
		t.Errorf("after a describe past the grace: late trusted %v, a trusted %v", inv.Trusted("eni-1", late), inv.Trusted("eni-1", a))
	}
	inv.mu.RLock()
	kept := len(inv.assignedHere)
	inv.mu.RUnlock()
	if kept != 0 {
		t.Errorf("%d addresses still vouched for by this process once a describe past the grace installed their ENI, want 0", kept)
	}
}
