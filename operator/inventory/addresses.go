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

	mu       sync.Mutex
	byID     map[string]cloud.Address
	listedAt time.Time
	// touched: allocation ID → last local change.
	touched map[string]time.Time
	// reserved: allocation ID → the node a worker is associating it for,
	// so concurrent workers never pick the same free address.
	reserved map[string]string
	flight   sync.Map
}

func newAddresses(api cloud.API, maxAge, grace time.Duration, now func() time.Time) *Addresses {
	return &Addresses{api: api, maxAge: maxAge, grace: grace, now: now, byID: map[string]cloud.Address{}, touched: map[string]time.Time{}, reserved: map[string]string{}}
}

// Addresses returns the inventory's cache of Elastic IPs.
func (inv *Inventory) Addresses() *Addresses { return inv.addresses }

// List returns every Elastic IP, sorted by allocation ID, describing them
// again when the cache is older than the resync interval.
func (a *Addresses) List(ctx context.Context) ([]cloud.Address, error) {
	a.mu.Lock()
	fresh := !a.listedAt.IsZero() && a.now().Sub(a.listedAt) < a.maxAge
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
		// The describe may predate this process's own change.
		if old, ok := a.byID[id]; ok {
			byID[id] = old
		}
	}
	a.byID, a.listedAt = byID, start
	return nil
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

// Reserve picks, for node, the free Elastic IP (not associated) carrying
// every tag of tags with the lowest allocation ID that no other node has
// reserved, and reserves it; false when there is none. A node's earlier
// reservation is given up.
func (a *Addresses) Reserve(node string, tags map[string]string) (cloud.Address, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreserveLocked(node)
	for _, id := range slices.Sorted(maps.Keys(a.byID)) {
		addr := a.byID[id]
		if addr.Associated() || !cloud.MatchTags(addr.Tags, tags) {
			continue
		}
		if holder, ok := a.reserved[id]; ok && holder != node {
			continue
		}
		a.reserved[id] = node
		return addr, true
	}
	return cloud.Address{}, false
}

// Unreserve gives up node's reservation, if any.
func (a *Addresses) Unreserve(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unreserveLocked(node)
}

func (a *Addresses) unreserveLocked(node string) {
	for id, holder := range a.reserved {
		if holder == node {
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
