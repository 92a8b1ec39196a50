package inventory

import (
	"github.com/enipam/enipam/operator/cloud"
)

// RecordDetaching marks an ENI this process detached (consolidation):
// detaching until a describe shows it available, then never offered for
// adoption (Snapshot leaves it out of the orphans) until it is deleted.
func (inv *Inventory) RecordDetaching(eniID string) {
	inv.update(eniID, func(e *cloud.ENI) {
		e.Status, e.AttachmentStatus = cloud.ENIDetaching, cloud.AttachmentDetaching
	})
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.detached == nil {
		inv.detached = map[string]struct{}{}
	}
	inv.detached[eniID] = struct{}{}
}

// Detached reports whether this process detached the ENI and has not
// seen it deleted yet.
func (inv *Inventory) Detached(eniID string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	_, ok := inv.detached[eniID]
	return ok
}

// ENI returns a copy of the cached ENI, and whether the cache knows it.
func (inv *Inventory) ENI(eniID string) (cloud.ENI, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	e, ok := inv.enis[eniID]
	if !ok {
		return cloud.ENI{}, false
	}
	return e.Clone(), true
}
