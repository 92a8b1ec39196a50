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

// addressCloud is fakeCloud with Elastic IPs, counting their describes.
type addressCloud struct {
	*fakeCloud
	mu        sync.Mutex
	addrs     []cloud.Address
	describes int
}

func (a *addressCloud) ListAddresses(context.Context) ([]cloud.Address, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.describes++
	return append([]cloud.Address(nil), a.addrs...), nil
}

// TestAddressesVouchedAfterTheTrustPoint: a process's first describes of
// the Elastic IPs, made before its trust point (first sync plus the
// consistency grace), may still show what an earlier process changed
// just before it died: they are not vouched for, and the cache describes
// again once a vouched describe can be had, not at the resync interval
// (an hour here). This process's own change is believed at once.
func TestAddressesVouchedAfterTheTrustPoint(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &addressCloud{fakeCloud: &fakeCloud{}, addrs: []cloud.Address{
		{AllocationID: "eipalloc-1", PublicIP: netip.MustParseAddr("198.51.100.1"), AssociationID: "eipassoc-1", ENIID: "eni-1", PrivateIP: netip.MustParseAddr("10.0.0.4")},
		{AllocationID: "eipalloc-2", PublicIP: netip.MustParseAddr("198.51.100.2")},
	}}
	inv := New(c, Options{VPCIDs: []string{"vpc-1"}, ResyncInterval: time.Hour, ConsistencyGrace: 5 * time.Second, NotFoundRetry: time.Minute,
		Now: func() time.Time { return now }}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	if err := inv.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	book := inv.Addresses()
	if _, err := book.List(ctx); err != nil {
		t.Fatal(err)
	}
	if book.Vouched() || book.Vouches("eipalloc-1") {
		t.Fatal("a describe made at the first sync is vouched for")
	}
	// An earlier process's disassociation reaches describes.
	c.mu.Lock()
	c.addrs[0].AssociationID, c.addrs[0].ENIID, c.addrs[0].PrivateIP = "", "", netip.Addr{}
	c.mu.Unlock()
	now = now.Add(time.Second)
	book.RecordAssociated("eipalloc-2", "eipassoc-2", "eni-2", "i-2", netip.MustParseAddr("10.0.0.5"))
	if !book.Vouches("eipalloc-2") {
		t.Error("this process's own association is not believed")
	}
	addrs, err := book.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.describes != 1 || !addrs[0].Associated() {
		t.Fatalf("before the trust point: %d describes, eipalloc-1 associated %v; want the cache (1 describe, associated)", c.describes, addrs[0].Associated())
	}
	now = now.Add(4 * time.Second) // the trust point
	if addrs, err = book.List(ctx); err != nil {
		t.Fatal(err)
	}
	if c.describes != 2 || addrs[0].Associated() || !book.Vouched() || !book.Vouches("eipalloc-1") {
		t.Fatalf("past the trust point: %d describes, eipalloc-1 associated %v, vouched %v; want 2, false, true", c.describes, addrs[0].Associated(), book.Vouched())
	}
	if addrs[1].AssociationID != "eipassoc-2" {
		t.Errorf("eipalloc-2 lost this process's association within the grace: %+v", addrs[1])
	}
	if _, err := book.List(ctx); err != nil || c.describes != 2 {
		t.Errorf("a vouched cache younger than the resync interval described again: %d describes, %v", c.describes, err)
	}
}
