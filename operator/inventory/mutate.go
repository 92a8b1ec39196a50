package inventory

import (
	"net/netip"
	"slices"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// The Record* methods apply the operator's own successful changes to the
// cache at once, so the next plan sees them without a describe. Each marks
// what it touched so a resync that started earlier cannot undo it.

// RecordCreated adds a new ENI.
func (inv *Inventory) RecordCreated(eni cloud.ENI) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	e := eni.Clone()
	inv.putENI(&e)
	inv.touch(e.ID)
	inv.created[e.ID] = inv.now()
	inv.vouch(e.IPs, e.Prefixes)
	if inv.now().Before(inv.trustFrom) {
		for _, p := range e.IPv6Prefixes {
			inv.assignedHere6[p.Masked()] = struct{}{}
		}
	}
	inv.adjustSubnet(e.SubnetID, -(1 + len(e.IPs) + len(e.Prefixes)*16))
}

// Young reports whether the operator created the ENI within the
// consistency grace: EC2 may not know it everywhere yet, so a NotFound
// about it means "not yet", never "gone".
func (inv *Inventory) Young(eniID string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	t, ok := inv.created[eniID]
	return ok && inv.now().Sub(t) < inv.opts.ConsistencyGrace
}

// RecordAttached marks an ENI attached (attaching) to an instance.
func (inv *Inventory) RecordAttached(eniID, instanceID string, deviceIndex int, attachmentID string) {
	inv.update(eniID, func(e *cloud.ENI) {
		e.InstanceID, e.DeviceIndex, e.AttachmentID = instanceID, deviceIndex, attachmentID
		e.Status, e.AttachmentStatus = cloud.ENIInUse, cloud.AttachmentAttaching
	})
	inv.mu.Lock()
	inv.touch(instanceID)
	inv.mu.Unlock()
}

// RecordDeleteOnTermination marks an ENI deleted with its instance.
func (inv *Inventory) RecordDeleteOnTermination(eniID string) {
	inv.update(eniID, func(e *cloud.ENI) { e.DeleteOnTermination = true })
}

// RecordAssigned adds addresses and prefixes to an ENI.
func (inv *Inventory) RecordAssigned(eniID string, ips []netip.Addr, prefixes []netip.Prefix) {
	var subnet string
	inv.update(eniID, func(e *cloud.ENI) {
		e.IPs = append(e.IPs, ips...)
		e.Prefixes = append(e.Prefixes, prefixes...)
		subnet = e.SubnetID
	})
	inv.mu.Lock()
	inv.adjustSubnet(subnet, -(len(ips) + 16*len(prefixes)))
	if inv.staleView(eniID) {
		inv.vouchAlways(ips, prefixes)
	} else {
		inv.vouch(ips, prefixes)
	}
	inv.mu.Unlock()
}

// RecordUnassigned removes addresses from an ENI. The instance
// metadata's word that an address landed on it (RecordLanded) goes
// first: kept, it would put the address back on the ENI as the change
// is stored (putENI keeps landed addresses over any view), and the pool
// would list an address EC2 no longer has (seed 60983 of the static-IP
// simulation).
func (inv *Inventory) RecordUnassigned(eniID string, ips []netip.Addr) {
	inv.mu.Lock()
	for _, ip := range ips {
		if inv.landedOn[ip] == eniID {
			delete(inv.landedOn, ip)
		}
		// No longer this process's: a describe that still shows it (one
		// that lags the Unassign) vouches for nothing.
		delete(inv.assignedHere, ip)
	}
	inv.mu.Unlock()
	var subnet string
	removed := 0
	inv.update(eniID, func(e *cloud.ENI) {
		before := len(e.IPs)
		e.IPs = slices.DeleteFunc(e.IPs, func(a netip.Addr) bool { return slices.Contains(ips, a) })
		removed = before - len(e.IPs)
		subnet = e.SubnetID
	})
	inv.mu.Lock()
	inv.adjustSubnet(subnet, removed)
	inv.mu.Unlock()
}

// RecordUnassignedPrefixes removes delegated prefixes from an ENI.
func (inv *Inventory) RecordUnassignedPrefixes(eniID string, prefixes []netip.Prefix) {
	var subnet string
	removed := 0
	inv.update(eniID, func(e *cloud.ENI) {
		before := len(e.Prefixes)
		e.Prefixes = slices.DeleteFunc(e.Prefixes, func(p netip.Prefix) bool { return slices.Contains(prefixes, p) })
		removed = before - len(e.Prefixes)
		subnet = e.SubnetID
	})
	inv.mu.Lock()
	inv.adjustSubnet(subnet, 16*removed)
	inv.mu.Unlock()
}

// RecordAssignedIPv6Prefixes adds delegated IPv6 /80 prefixes to an ENI.
// They take nothing of the subnet's IPv4 room.
func (inv *Inventory) RecordAssignedIPv6Prefixes(eniID string, prefixes []netip.Prefix) {
	inv.update(eniID, func(e *cloud.ENI) {
		for _, p := range prefixes {
			if !slices.Contains(e.IPv6Prefixes, p) {
				e.IPv6Prefixes = append(e.IPv6Prefixes, p)
			}
		}
	})
	inv.mu.Lock()
	if inv.now().Before(inv.trustFrom) {
		for _, p := range prefixes {
			inv.assignedHere6[p.Masked()] = struct{}{}
		}
	}
	inv.mu.Unlock()
}

// RecordUnassignedIPv6Prefixes removes delegated IPv6 prefixes from an
// ENI.
func (inv *Inventory) RecordUnassignedIPv6Prefixes(eniID string, prefixes []netip.Prefix) {
	inv.update(eniID, func(e *cloud.ENI) {
		e.IPv6Prefixes = slices.DeleteFunc(e.IPv6Prefixes, func(p netip.Prefix) bool { return slices.Contains(prefixes, p) })
	})
	inv.mu.Lock()
	for _, p := range prefixes {
		delete(inv.assignedHere6, p.Masked())
	}
	inv.mu.Unlock()
}

// RecordDeleted forgets an ENI.
func (inv *Inventory) RecordDeleted(eniID string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if e, ok := inv.enis[eniID]; ok {
		inv.adjustSubnet(e.SubnetID, e.Slots()+15*len(e.Prefixes))
	}
	inv.dropENI(eniID)
	inv.touch(eniID)
	inv.deleted[eniID] = inv.now()
}

// Deleted reports whether this process deleted the ENI within the
// consistency grace.
func (inv *Inventory) Deleted(eniID string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	t, ok := inv.deleted[eniID]
	return ok && inv.now().Sub(t) < inv.opts.ConsistencyGrace
}

// RecordSubnetFull notes that EC2 found a subnet without room, so no plan
// picks it again before the next resync.
func (inv *Inventory) RecordSubnetFull(subnetID string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, d := range inv.vpcs {
		if s, ok := d.subnets[subnetID]; ok {
			s.Available = 0
		}
	}
}

// RecordGone forgets an ENI EC2 says does not exist.
func (inv *Inventory) RecordGone(eniID string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.dropENI(eniID)
}

// update changes a cached ENI in place (copy on write, so snapshots
// handed out stay unchanged).
func (inv *Inventory) update(eniID string, change func(*cloud.ENI)) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	old, ok := inv.enis[eniID]
	if !ok {
		return
	}
	e := old.Clone()
	change(&e)
	inv.putENI(&e)
	inv.touch(eniID)
	if e.InstanceID != "" {
		inv.touch(e.InstanceID)
	}
}

// vouch records addresses this process assigned while describes are not
// trusted yet (see Trusted); the caller holds mu.
func (inv *Inventory) vouch(ips []netip.Addr, prefixes []netip.Prefix) {
	if !inv.now().Before(inv.trustFrom) {
		return
	}
	inv.vouchAlways(ips, prefixes)
}

// staleView reports whether the ENI's cached view was last installed
// from a describe that started before trustFrom: what it shows is not
// believed (Trusted) but for this process's own assigns, also those
// made after trustFrom, until a later describe installs the ENI again
// (described) or confirms what it shows. The caller holds mu.
//
// Such an ENI is one a resync could not install since the grace, its
// local changes being newer than each describe: a node whose pool moves
// every few seconds, as in a burst. Without its own assigns vouched for,
// each address assigned onto it waited for a describe by ID to confirm
// it, and with describes lagging EC2, for unverifiedRecheck after it.
func (inv *Inventory) staleView(eniID string) bool {
	t, ok := inv.describedAt[eniID]
	return ok && t.Before(inv.trustFrom)
}

// vouchAlways records addresses this process assigned (assignedHere);
// the caller holds mu.
func (inv *Inventory) vouchAlways(ips []netip.Addr, prefixes []netip.Prefix) {
	for _, ip := range ips {
		inv.assignedHere[ip] = struct{}{}
	}
	for _, p := range prefixes {
		for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
			inv.assignedHere[ip] = struct{}{}
		}
	}
}

// touch marks an ID changed locally now; the caller holds mu.
func (inv *Inventory) touch(id string) { inv.touched[id] = inv.now() }

// adjustSubnet changes a subnet's free count; the caller holds mu.
func (inv *Inventory) adjustSubnet(subnetID string, delta int) {
	if delta == 0 {
		return
	}
	inv.subnetChanges = append(inv.subnetChanges, subnetChange{at: inv.now(), subnet: subnetID, delta: delta})
	for _, d := range inv.vpcs {
		if s, ok := d.subnets[subnetID]; ok {
			c := *s
			c.Available = max(0, c.Available+delta)
			d.subnets[subnetID] = &c
		}
	}
}

// InFlightLease is how long an in-flight mark holds without a new attach
// attempt: far longer than the pool controller ever waits between two
// attempts (its backoff stops at minutes), so a mark that outlives it
// belongs to an attach nobody retries any more (its node went away, or no
// longer needs the ENI), and the collector's own rules apply again.
const InFlightLease = 10 * time.Minute

// inFlight is the pool controller's attach of one ENI, from the ENI's
// creation (or the first attempt to adopt it) until it is attached or
// given up.
type inFlight struct {
	// failures counts the attempts EC2 refused.
	failures int
	// last is when the last attempt began or failed.
	last time.Time
}

// MarkInFlight tells the collector an unattached ENI is being attached
// and must not be taken for a leak: the mark holds across failed attempts,
// until ClearInFlight (attached, gone, or given up and deleted by the pool
// controller), or until InFlightLease passes without another attempt.
func (inv *Inventory) MarkInFlight(eniID string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	f := inv.inFlight[eniID]
	f.last = inv.now()
	inv.inFlight[eniID] = f
}

// AttachFailed records that EC2 refused an attach of an in-flight ENI,
// renewing its mark, and returns how many of its attempts failed so far.
func (inv *Inventory) AttachFailed(eniID string) int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	f := inv.inFlight[eniID]
	f.failures++
	f.last = inv.now()
	inv.inFlight[eniID] = f
	return f.failures
}

// ClearInFlight ends MarkInFlight.
func (inv *Inventory) ClearInFlight(eniID string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	delete(inv.inFlight, eniID)
}

// InFlight reports whether an ENI is being attached, or its attach
// retried, within InFlightLease.
func (inv *Inventory) InFlight(eniID string) bool {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	f, ok := inv.inFlight[eniID]
	return ok && inv.now().Sub(f.last) < InFlightLease
}

// RecordMoved records that EC2 moves ip onto the ENI toENI (an Assign
// with AllowReassignment): it leaves whichever cached ENI held it, and an
// Elastic IP associated with it follows it, as in EC2. The subnet's free
// count is unchanged. EC2 remaps the address asynchronously: until a
// describe of toENI started a grace after now shows it there (or the
// node's agent saw it there, RecordLanded), Trusted says no
// for it on toENI, so it is not pooled there on this process's word.
func (inv *Inventory) RecordMoved(ip netip.Addr, toENI string) {
	inv.mu.Lock()
	inv.moving[ip] = move{eni: toENI, at: inv.now()}
	delete(inv.landedOn, ip)
	var from []string
	for id, e := range inv.enis {
		if id != toENI && slices.Contains(e.IPs, ip) {
			from = append(from, id)
		}
	}
	inv.mu.Unlock()
	for _, id := range from {
		inv.update(id, func(e *cloud.ENI) {
			e.IPs = slices.DeleteFunc(e.IPs, func(a netip.Addr) bool { return a == ip })
		})
	}
	inv.update(toENI, func(e *cloud.ENI) {
		if !slices.Contains(e.IPs, ip) {
			e.IPs = append(e.IPs, ip)
		}
	})
	inv.mu.Lock()
	inv.vouch([]netip.Addr{ip}, nil)
	instance := ""
	if e := inv.enis[toENI]; e != nil {
		instance = e.InstanceID
	}
	inv.mu.Unlock()
	// EC2 moves an Elastic IP associated with the address along with it.
	inv.addresses.recordMoved(ip, toENI, instance)
}
