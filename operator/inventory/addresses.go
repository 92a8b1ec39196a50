package inventory

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// Addresses is the cache of the account's Elastic IPs. It describes them
// only when asked and the last describe is older than the resync interval
// (a cluster that uses none never pays for the call), concurrent askers
// share one describe, and the operator's own associations outweigh a
// describe for the consistency grace, as the ENI cache does.
type Addresses struct {
	api    cloud.API
	maxAge time.Duration
	grace  time.Duration
	now    func() time.Time
	// trustFrom is the inventory's: a describe that began before it may
	// not show yet what an earlier operator process changed just before
	// it died.
	trustFrom func() time.Time

	mu       sync.Mutex
	byID     map[string]cloud.Address
	listedAt time.Time
	// touched: allocation ID → last local change.
	touched map[string]time.Time
	// reserved: allocation ID → the node or claim a worker is
	// associating it for, so concurrent workers never pick the same free
	// address.
	reserved map[string]string
	flight   sync.Map
}

func newAddresses(api cloud.API, maxAge, grace time.Duration, now, trustFrom func() time.Time) *Addresses {
	return &Addresses{api: api, maxAge: maxAge, grace: grace, now: now, trustFrom: trustFrom, byID: map[string]cloud.Address{}, touched: map[string]time.Time{}, reserved: map[string]string{}}
}

// Addresses returns the inventory's cache of Elastic IPs.
func (inv *Inventory) Addresses() *Addresses { return inv.addresses }

// List returns every Elastic IP, sorted by allocation ID, describing them
// again when the cache is older than the resync interval, or when its
// describe is not vouched for (Vouched) and one that is can be made now.
func (a *Addresses) List(ctx context.Context) ([]cloud.Address, error) {
	from := a.trustFrom()
	a.mu.Lock()
	now := a.now()
	fresh := !a.listedAt.IsZero() && now.Sub(a.listedAt) < a.maxAge &&
		(from.IsZero() || !a.listedAt.Before(from) || now.Before(from))
	a.mu.Unlock()
	if !fresh {
		if err := shared(&a.flight, "list", ctx, a.refresh); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]cloud.Address, 0, len(a.byID))
	for _, id := range slices.Sorted(maps.Keys(a.byID)) {
		out = append(out, a.byID[id])
	}
	return out, nil
}

// Refresh describes the Elastic IPs now, whatever the cache's age.
func (a *Addresses) Refresh(ctx context.Context) error {
	return shared(&a.flight, "list", ctx, a.refresh)
}

func (a *Addresses) refresh(ctx context.Context) error {
	start := a.now()
	list, err := a.api.ListAddresses(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	byID := make(map[string]cloud.Address, len(list))
	for _, addr := range list {
		byID[addr.AllocationID] = addr
	}
	for id, at := range a.touched {
		if !at.After(start.Add(-a.grace)) {
			delete(a.touched, id)
			continue
		}
		// The describe may predate this process's own change (a release
		// included: the address must not come back).
		if old, ok := a.byID[id]; ok {
			byID[id] = old
		} else {
			delete(byID, id)
		}
	}
	a.byID, a.listedAt = byID, start
	return nil
}

// Vouched reports whether the last describe began late enough to show
// every association an earlier operator process made (the inventory's
// trust point: its first sync plus the consistency grace). Before that,
// an address it shows free may be one a process associated just before
// it died; this process's own associations it shows anyway.
func (a *Addresses) Vouched() bool {
	from := a.trustFrom()
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.listedAt.IsZero() && !from.IsZero() && !a.listedAt.Before(from)
}

// Vouches reports whether the cache's view of one Elastic IP can be
// believed over what an earlier operator process did: the last describe
// is vouched for (Vouched), or this process changed the address itself
// since (its own change outweighs the describe).
func (a *Addresses) Vouches(allocationID string) bool {
	if a.Vouched() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, own := a.touched[allocationID]
	return own
}

// RecordAssociated records an association this process made.
func (a *Addresses) RecordAssociated(allocationID, associationID, eniID, instanceID string, privateIP netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	addr := a.byID[allocationID]
	addr.AllocationID, addr.AssociationID, addr.ENIID, addr.InstanceID, addr.PrivateIP = allocationID, associationID, eniID, instanceID, privateIP
	a.byID[allocationID] = addr
	a.touched[allocationID] = a.now()
}

// RecordDisassociated records that this process broke the address's
// association.
func (a *Addresses) RecordDisassociated(allocationID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if addr, ok := a.byID[allocationID]; ok {
		addr.AssociationID, addr.ENIID, addr.InstanceID, addr.PrivateIP = "", "", "", netip.Addr{}
		a.byID[allocationID] = addr
	}
	a.touched[allocationID] = a.now()
}

// RecordAllocated records an Elastic IP this process allocated.
func (a *Addresses) RecordAllocated(addr cloud.Address) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.byID[addr.AllocationID] = addr
	a.touched[addr.AllocationID] = a.now()
}

// RecordReleased records that this process released an Elastic IP.
func (a *Addresses) RecordReleased(allocationID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byID, allocationID)
	delete(a.reserved, allocationID)
	a.touched[allocationID] = a.now()
}

// recordMoved moves the association of the Elastic IP mapped to ip, if
// any, onto eniID: EC2 does so when it reassigns the address.
func (a *Addresses) recordMoved(ip netip.Addr, eniID, instanceID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, addr := range a.byID {
		if addr.Associated() && addr.PrivateIP == ip && addr.ENIID != eniID {
			addr.ENIID, addr.InstanceID = eniID, instanceID
			a.byID[id] = addr
			a.touched[id] = a.now()
		}
	}
}

// Tagged returns the Elastic IPs of the last describe (and this
// process's changes since) carrying every tag of tags, sorted by
// allocation ID.
func (a *Addresses) Tagged(tags map[string]string) []cloud.Address {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []cloud.Address
	for _, id := range slices.Sorted(maps.Keys(a.byID)) {
		if cloud.MatchTags(a.byID[id].Tags, tags) {
			out = append(out, a.byID[id])
		}
	}
	return out
}

// Reserve picks, for holder (a node's name, or a claim's "claim
// <namespace>/<name>"), the free Elastic IP (not associated) carrying
// every tag of tags with the lowest allocation ID that no other holder has
// reserved, and reserves it; false when there is none. A holder's earlier
// reservation is given up.
func (a *Addresses) Reserve(holder string, tags map[string]string) (cloud.Address, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreserveLocked(holder)
	addr, ok := a.reservableLocked(holder, tags)
	if ok {
		a.reserved[addr.AllocationID] = holder
	}
	return addr, ok
}

// Reservable returns the Elastic IP Reserve(holder, tags) would reserve
// now, without reserving it; false when there is none.
func (a *Addresses) Reservable(holder string, tags map[string]string) (cloud.Address, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reservableLocked(holder, tags)
}

func (a *Addresses) reservableLocked(holder string, tags map[string]string) (cloud.Address, bool) {
	for _, id := range slices.Sorted(maps.Keys(a.byID)) {
		addr := a.byID[id]
		if addr.Associated() || !cloud.MatchTags(addr.Tags, tags) {
			continue
		}
		if other, ok := a.reserved[id]; ok && other != holder {
			continue
		}
		return addr, true
	}
	return cloud.Address{}, false
}

// ReserveID reserves the Elastic IP id for holder, giving up holder's
// earlier reservation, when it is still free (known, not associated,
// reserved by no other holder); false, reserving nothing, otherwise.
func (a *Addresses) ReserveID(holder, id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreserveLocked(holder)
	addr, ok := a.byID[id]
	if !ok || addr.Associated() {
		return false
	}
	if other, ok := a.reserved[id]; ok && other != holder {
		return false
	}
	a.reserved[id] = holder
	return true
}

// Unreserve gives up holder's reservation, if any.
func (a *Addresses) Unreserve(holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreserveLocked(holder)
}

func (a *Addresses) unreserveLocked(holder string) {
	for id, h := range a.reserved {
		if h == holder {
			delete(a.reserved, id)
		}
	}
}

// TagsString renders tags as k=v pairs sorted by key, for messages.
func TagsString(tags map[string]string) string {
	parts := make([]string, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		parts = append(parts, k+"="+tags[k])
	}
	return strings.Join(parts, ",")
}
