package inventory

import (
	"slices"
	"time"

	"github.com/enipam/enipam/operator/cloud"
)

// EC2 remaps an address moved by AssignPrivateIpAddresses with
// AllowReassignment asynchronously ("check local-ipv4s in the instance
// metadata to confirm that the remapping is complete"). RecordMoved
// notes each move this process asked for; until a describe of the new
// ENI started after it shows the address there, Trusted says no for the
// address on that ENI, so it is neither pooled nor stamped there.

// move is an address reassigned onto eni at at.
type move struct {
	eni string
	at  time.Time
}

// landed ends the moves onto e that a describe of it started at start
// shows complete; the caller holds mu.
func (inv *Inventory) landed(e *cloud.ENI, start time.Time) {
	for ip, m := range inv.moving {
		if m.eni == e.ID && !start.Before(m.at) && slices.Contains(e.IPs, ip) {
			delete(inv.moving, ip)
		}
	}
}
