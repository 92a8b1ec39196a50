package inventory

import (
	"net/netip"
	"slices"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// EC2 remaps an address moved by AssignPrivateIpAddresses with
// AllowReassignment asynchronously ("check local-ipv4s in the instance
// metadata to confirm that the remapping is complete"). RecordMoved
// notes each move this process asked for; until a describe of the new
// ENI started a grace after it shows the address there, or the node's
// agent reports the instance metadata listing it there (RecordLanded),
// Trusted says no for the address on that ENI, so it is neither pooled
// nor stamped there.

// move is an address reassigned onto eni at at.
type move struct {
	eni string
	at  time.Time
}

// landed ends the moves onto e that a describe of it started at start
// shows complete: one that started a grace after the move, as describes
// lag EC2's changes. A describe made sooner may show the ENI as it was
// before the address last left it (the address reassigned away and now
// back): the remap under way would be taken for done. The caller holds
// mu.
func (inv *Inventory) landed(e *cloud.ENI, start time.Time) {
	for ip, m := range inv.moving {
		if m.eni == e.ID && !start.Before(m.at.Add(inv.opts.ConsistencyGrace)) && slices.Contains(e.IPs, ip) {
			delete(inv.moving, ip)
		}
	}
	for ip, id := range inv.landedOn {
		if id == e.ID && slices.Contains(e.IPs, ip) {
			delete(inv.landedOn, ip) // describes caught up
		}
	}
}

// MovingOnto returns, for the addresses this process reassigned onto one
// of the ENIs eniIDs whose remap neither a describe nor the instance
// metadata has shown complete yet, the ENI each moves onto.
func (inv *Inventory) MovingOnto(eniIDs []string) map[netip.Addr]string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	var out map[netip.Addr]string
	for ip, m := range inv.moving {
		if slices.Contains(eniIDs, m.eni) {
			if out == nil {
				out = map[netip.Addr]string{}
			}
			out[ip] = m.eni
		}
	}
	return out
}

// MovingTo returns the ENI this process reassigned ip onto whose remap
// neither a describe nor the instance metadata has shown complete yet,
// "" when there is none: RecordLanded refuses a landing on any other.
func (inv *Inventory) MovingTo(ip netip.Addr) string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.moving[ip].eni
}

// RecordLanded records that the instance metadata of the instance the
// ENI eniID is attached to lists ip on it (AWS's documented confirmation
// that a remap is complete), as the node's own agent read it after the
// reassignment call: the address is on that ENI alone, and the cache is
// believed there at once, without waiting for a describe. Describes lag
// EC2's changes; one that still shows the address on the ENI it left,
// or not on this one, does not undo this for the consistency grace (the
// ENIs count as changed locally now, see install and RefreshENIs).
//
// It reports false, and records nothing, when this process has since
// reassigned ip onto another ENI (RecordMoved) and that remap has not
// landed: the agent's answer confirms an earlier call, and the later
// one, still under way, will take the address off eniID. Trusting the
// answer would let eniID's node pool the address and give it to a pod
// moments before EC2 moves it away.
func (inv *Inventory) RecordLanded(ip netip.Addr, eniID string) bool {
	inv.mu.Lock()
	if m, ok := inv.moving[ip]; ok {
		if m.eni != eniID {
			inv.mu.Unlock()
			return false
		}
		delete(inv.moving, ip)
	}
	var from []string
	for id, e := range inv.enis {
		if id != eniID && slices.Contains(e.IPs, ip) {
			from = append(from, id)
		}
	}
	known := inv.enis[eniID] != nil
	if known {
		inv.landedOn[ip] = eniID
	}
	inv.mu.Unlock()
	if !known {
		return false
	}
	for _, id := range from {
		inv.update(id, func(e *cloud.ENI) {
			e.IPs = slices.DeleteFunc(e.IPs, func(a netip.Addr) bool { return a == ip })
		})
	}
	inv.update(eniID, func(e *cloud.ENI) {
		if !slices.Contains(e.IPs, ip) {
			e.IPs = append(e.IPs, ip)
		}
	})
	inv.mu.Lock()
	inv.vouch([]netip.Addr{ip}, nil)
	instance := inv.enis[eniID].InstanceID
	inv.mu.Unlock()
	// An Elastic IP associated with the address moved with it.
	inv.addresses.recordMoved(ip, eniID, instance)
	return true
}

// overrideLanded returns e, or a copy of it that keeps the addresses
// RecordLanded confirmed on this ENI and drops those it confirmed on
// another: a describe may lag the remap. e itself is left as the describe
// showed it, for landed. The caller holds mu.
func (inv *Inventory) overrideLanded(e *cloud.ENI) *cloud.ENI {
	out := e
	for ip, id := range inv.landedOn {
		has := slices.Contains(out.IPs, ip)
		if (id == e.ID) == has {
			continue
		}
		if out == e {
			c := e.Clone()
			out = &c
		}
		if has {
			out.IPs = slices.DeleteFunc(out.IPs, func(a netip.Addr) bool { return a == ip })
		} else {
			out.IPs = append(out.IPs, ip)
		}
	}
	return out
}
