package pool

import (
	"slices"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// Short returns the part of needed (Needed's answer for the node) that
// the instance has room for: the free address slots of its usable ENIs
// and of the ENIs its free device indexes of card 0 can still take (16
// addresses a slot under prefix delegation). It is what alerting reads
// as a pool short of addresses: zero on a node at capacity (its pods or
// its ENIs full), however much the knobs ask for. Free addresses in the
// subnets and security groups are not considered: a node they block
// lacks what its instance could hold, and only a change of theirs helps.
func Short(n *snapshot.Node, cfg *Config, needed int) int {
	if needed <= 0 {
		return 0
	}
	perSlot := 1
	if cfg.PrefixDelegation && n.Type.PrefixDelegation() {
		perSlot = IPsPerPrefix
	}
	room := 0
	for i := range n.ENIs {
		if e := &n.ENIs[i]; Usable(e, cfg) {
			room += max(n.Type.IPv4PerENI-e.Slots(), 0) * perSlot
		}
	}
	room += freeENISlots(n, cfg) * max(n.Type.IPv4PerENI-1, 0) * perSlot
	return min(needed, room)
}

// freeENISlots counts the device indexes of card 0 a new usable ENI can
// take: those at or above the first interface index (never 0) that no
// ENI holds, within the instance's limit on ENIs.
func freeENISlots(n *snapshot.Node, cfg *Config) int {
	taken := 0
	for _, e := range n.ENIs {
		if e.NetworkCard == 0 {
			taken++
		}
	}
	free := 0
	for i := max(1, cfg.FirstInterfaceIndex); i < n.Type.MaxENIs && free < n.Type.MaxENIs-taken; i++ {
		if !slices.ContainsFunc(n.ENIs, func(e cloud.ENI) bool { return e.NetworkCard == 0 && e.DeviceIndex == i }) {
			free++
		}
	}
	return free
}
