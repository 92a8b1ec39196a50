package pool

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// IPsPerPrefix is the number of addresses in a delegated /28.
const IPsPerPrefix = 16

// Reasons a plan cannot cover a node's need. The controller turns them into
// events and the node's operator-status.
var (
	// ErrAtCapacity: every ENI slot is taken and every usable ENI is full.
	ErrAtCapacity = errors.New("instance at capacity")
	// ErrSubnetExhausted: the subnets a new ENI may use have no room.
	ErrSubnetExhausted = errors.New("subnets exhausted")
	// ErrNoSecurityGroup: security group tags are configured but match none.
	ErrNoSecurityGroup = errors.New("no security group matches")
)

// Config is the resolved policy of one node, as planning needs it.
type Config struct {
	Knobs
	// FirstInterfaceIndex is the lowest device index whose ENI carries pod
	// IPs.
	FirstInterfaceIndex int
	// ExcludeTags exclude ENIs carrying all of them.
	ExcludeTags       map[string]string
	SubnetIDs         []string
	SubnetTags        map[string]string
	SecurityGroupIDs  []string
	SecurityGroupTags map[string]string
	// PrefixDelegation asks for /28 prefixes instead of single addresses
	// (nitro and bare metal instances only).
	PrefixDelegation bool
	// Adaptive sizes the headroom from the node's arrivals (Headroom,
	// AdaptiveKnobs) instead of keeping PreAllocate.
	Adaptive bool
}

// Assign adds addresses (or prefixes) to an attached ENI.
type Assign struct {
	ENIID    string
	IPs      int
	Prefixes int
	// FallbackIPs is how many single addresses to ask for instead when
	// the subnet has no free aligned /28 for the prefixes.
	FallbackIPs int
}

// Create makes a new ENI carrying its addresses and attaches it.
type Create struct {
	SubnetID       string
	SecurityGroups []string
	DeviceIndex    int
	IPs            int
	Prefixes       int
	// FallbackIPs is how many single addresses the ENI is created with
	// instead when the subnet has no free aligned /28 for the prefixes.
	FallbackIPs int
}

// Adopt attaches an orphan ENI created earlier for this instance.
type Adopt struct {
	ENIID       string
	DeviceIndex int
}

// Plan is what to ask the cloud for to cover a node's need.
type Plan struct {
	// Needed is what the pool lacks; ToAllocate what the plan aims for.
	Needed, ToAllocate int
	Assign             []Assign
	Adopt              *Adopt
	Create             *Create
	// More are the new ENIs after Create that a node's whole need takes
	// (ComputeWhole), created in the same pass, so that the
	// node's status lists them together and its pool takes them in one
	// write. Never set without Create.
	More []Create
	// Blocked says why the plan covers less than Needed (wrapping one of
	// the Err* reasons), nil otherwise.
	Blocked error
	// Deferred: the plan covers less than Needed, and the rest waits for
	// the slots of addresses being released rather than a new ENI.
	Deferred bool
}

// Empty reports whether the plan asks the cloud for nothing.
func (p *Plan) Empty() bool {
	return len(p.Assign) == 0 && p.Adopt == nil && p.Create == nil && len(p.More) == 0
}

// DropNewENIs keeps of the plan only what the node's ENIs can hold.
func (p *Plan) DropNewENIs() { p.Create, p.Adopt, p.More = nil, nil, nil }

// Usable reports whether eni may carry pod IPs under cfg: an ordinary ENI
// on network card 0 (never EFA, trunk or branch), not the property of an
// AWS service, at or above the first interface index, not detaching, not
// excluded by tags.
func Usable(eni *cloud.ENI, cfg *Config) bool {
	if !eni.Ordinary() || eni.RequesterManaged || eni.DeviceIndex < cfg.FirstInterfaceIndex || eni.AttachmentStatus == cloud.AttachmentDetaching {
		return false
	}
	return !cloud.MatchTags(eni.Tags, cfg.ExcludeTags)
}

// Compute plans the allocation for one node: fill the usable ENIs with
// room (lowest device index first), then adopt an orphan or create one
// new ENI for what is still needed, unless the slots of addresses being
// released cover it (Deferred). The MaxAboveWatermark extra is taken
// where there is room but never causes a new ENI on its own.
func Compute(n *snapshot.Node, cfg *Config) Plan {
	p := Plan{Needed: Needed(n.Available, n.Used, cfg.Knobs)}
	if p.Needed == 0 {
		return p
	}
	p.ToAllocate = ToAllocate(n.Available, n.Used, p.Needed, cfg.Knobs)
	prefixes := cfg.PrefixDelegation && n.Type.PrefixDelegation()
	subnetFree := make(map[string]int, len(n.Subnets))
	for _, s := range n.Subnets {
		subnetFree[s.ID] = s.Available
	}

	remaining := p.ToAllocate
	enis := slices.Clone(n.ENIs)
	slices.SortFunc(enis, func(a, b cloud.ENI) int { return cmp.Compare(a.DeviceIndex, b.DeviceIndex) })
	for i := range enis {
		eni := &enis[i]
		if remaining <= 0 {
			break
		}
		if !Usable(eni, cfg) || eni.ID == n.Draining {
			continue
		}
		room := n.Type.IPv4PerENI - eni.Slots()
		if a, ok := fill(eni.ID, room, remaining, subnetFree[eni.SubnetID], prefixes); ok {
			p.Assign = append(p.Assign, a)
			got := a.IPs + a.Prefixes*IPsPerPrefix
			remaining -= got
			subnetFree[eni.SubnetID] -= a.IPs + a.Prefixes*IPsPerPrefix
		}
	}
	covered := p.ToAllocate - remaining
	if covered >= p.Needed {
		return p
	}
	if covered+n.Releasing >= p.Needed {
		// The slots of the addresses being released cover the rest once
		// their Unassign is done: a new ENI now would outlive the need.
		p.Deferred = true
		return p
	}

	index, ok := FreeDeviceIndex(n, cfg)
	if !ok {
		p.Blocked = atCapacity(n)
		return p
	}
	if orphan := adoptable(n); orphan != nil {
		p.Adopt = &Adopt{ENIID: orphan.ID, DeviceIndex: index}
		return p
	}
	subnet, err := chooseSubnet(n, cfg)
	if err != nil {
		p.Blocked = err
		return p
	}
	groups, err := SecurityGroups(n, cfg)
	if err != nil {
		p.Blocked = err
		return p
	}
	c := &Create{SubnetID: subnet.ID, SecurityGroups: groups, DeviceIndex: index}
	// The new ENI's own primary address takes one slot and one subnet
	// address. A subnet too small for a /28 gets single addresses.
	prefixes = prefixes && subnet.Available-1 >= IPsPerPrefix
	if a, ok := fill("", n.Type.IPv4PerENI-1, remaining, subnet.Available-1, prefixes); ok {
		c.IPs, c.Prefixes, c.FallbackIPs = a.IPs, a.Prefixes, a.FallbackIPs
	}
	p.Create = c
	return p
}

// ComputeWhole is Compute for a node whose whole need is taken at once (a
// joining node: pre-allocate or min-allocate plus the pods bound to it;
// or a grown node short of more than one new ENI holds): when Compute's new ENI does not cover what is needed, as many more new
// ENIs as it takes are planned after it (More), each at the next free
// device index, in the subnet Compute's rules pick once the ENIs planned
// before it have taken their addresses. Planning stops at the first that
// cannot be placed: the node then gets what could be planned, and its
// next reconcile plans (and reports) the rest.
func ComputeWhole(n *snapshot.Node, cfg *Config) Plan {
	p := Compute(n, cfg)
	if p.Create == nil || p.Blocked != nil || p.Deferred {
		return p
	}
	covered := 0
	for _, a := range p.Assign {
		covered += a.IPs + a.Prefixes*IPsPerPrefix
	}
	// What the ENIs planned so far take: a device index each, and their
	// primary and secondary addresses from their subnet.
	planned := *n
	planned.ENIs = slices.Clone(n.ENIs)
	planned.Subnets = slices.Clone(n.Subnets)
	take := func(c Create) {
		got := c.IPs + c.Prefixes*IPsPerPrefix
		covered += got
		planned.ENIs = append(planned.ENIs, cloud.ENI{DeviceIndex: c.DeviceIndex, SubnetID: c.SubnetID, Status: cloud.ENIInUse})
		for i := range planned.Subnets {
			if planned.Subnets[i].ID == c.SubnetID {
				planned.Subnets[i].Available -= 1 + got
			}
		}
	}
	// The whole need: what Compute's Needed counts, plus the addresses
	// Cilium's agent takes for itself as a fresh node starts (they are
	// a need, not a surplus: without them the node falls short of
	// pre-allocate as soon as the agent starts). MaxAboveWatermark's
	// extra never causes a new ENI, here as in Compute.
	want := p.Needed
	if n.Available == 0 && n.Used == 0 {
		want += cfg.AgentEndpoints
	}
	if cfg.MaxAllocate > 0 {
		want = min(want, cfg.MaxAllocate-n.Available)
	}
	want = max(want, p.Needed)
	take(*p.Create)
	for covered < want {
		index, ok := FreeDeviceIndex(&planned, cfg)
		if !ok {
			break
		}
		subnet, err := chooseSubnet(&planned, cfg)
		if err != nil {
			break
		}
		c := Create{SubnetID: subnet.ID, SecurityGroups: p.Create.SecurityGroups, DeviceIndex: index}
		prefixes := cfg.PrefixDelegation && n.Type.PrefixDelegation() && subnet.Available-1 >= IPsPerPrefix
		a, ok := fill("", n.Type.IPv4PerENI-1, p.ToAllocate-covered, subnet.Available-1, prefixes)
		if !ok {
			break
		}
		c.IPs, c.Prefixes, c.FallbackIPs = a.IPs, a.Prefixes, a.FallbackIPs
		p.More = append(p.More, c)
		take(c)
	}
	return p
}

// fill sizes one allocation on an ENI with room slots, in a subnet with
// free addresses, for want IPs.
func fill(eniID string, room, want, free int, prefixes bool) (Assign, bool) {
	if room <= 0 || want <= 0 || free <= 0 {
		return Assign{}, false
	}
	if prefixes {
		n := min(room, (want+IPsPerPrefix-1)/IPsPerPrefix, free/IPsPerPrefix)
		return Assign{ENIID: eniID, Prefixes: n, FallbackIPs: min(room, want, free)}, n > 0
	}
	n := min(room, want, free)
	return Assign{ENIID: eniID, IPs: n}, true
}

// FreeDeviceIndex returns the lowest device index a new ENI can take on
// network card 0 (each card has its own indexes and limit).
func FreeDeviceIndex(n *snapshot.Node, cfg *Config) (int, bool) {
	taken := make(map[int]bool, len(n.ENIs))
	for _, e := range n.ENIs {
		if e.NetworkCard == 0 {
			taken[e.DeviceIndex] = true
		}
	}
	if len(taken) >= n.Type.MaxENIs {
		return 0, false
	}
	for i := max(1, cfg.FirstInterfaceIndex); i < n.Type.MaxENIs; i++ {
		if !taken[i] {
			return i, true
		}
	}
	return 0, false
}

// atCapacity says the node's card 0 has no free slot and its usable ENIs
// no free address slot; ENIs of other cards are not counted.
func atCapacity(n *snapshot.Node) error {
	onCard0 := 0
	for _, e := range n.ENIs {
		if e.NetworkCard == 0 {
			onCard0++
		}
	}
	return fmt.Errorf("%w: %d/%d ENIs attached, usable ENIs full (%d addresses each)",
		ErrAtCapacity, onCard0, n.Type.MaxENIs, n.Type.IPv4PerENI)
}

// adoptable returns an orphan in the instance's availability zone.
func adoptable(n *snapshot.Node) *cloud.ENI {
	for i := range n.Orphans {
		if o := &n.Orphans[i]; o.Status == cloud.ENIAvailable && o.AZ == n.Instance.AZ {
			return o
		}
	}
	return nil
}

// chooseSubnet picks the subnet for a new ENI: among the listed subnet IDs
// in the node's zone, else among those matching the subnet tags, else the
// node's own subnet — the one with the most free addresses. A tier that
// names subnets in the zone decides, even if they are all full.
func chooseSubnet(n *snapshot.Node, cfg *Config) (cloud.Subnet, error) {
	inZone := func(s *cloud.Subnet) bool {
		return s.AZ == n.Instance.AZ && s.VPCID == n.Instance.VPCID
	}
	tiers := []struct {
		name  string
		match func(*cloud.Subnet) bool
	}{
		{"subnet IDs " + strings.Join(cfg.SubnetIDs, ","), func(s *cloud.Subnet) bool { return slices.Contains(cfg.SubnetIDs, s.ID) }},
		{fmt.Sprintf("subnet tags %v", cfg.SubnetTags), func(s *cloud.Subnet) bool { return cloud.MatchTags(s.Tags, cfg.SubnetTags) }},
		{"the node's subnet " + n.Instance.SubnetID, func(s *cloud.Subnet) bool { return s.ID == n.Instance.SubnetID }},
	}
	const need = 2 // the ENI's primary address and one pod address
	for _, tier := range tiers {
		var candidates []cloud.Subnet
		for i := range n.Subnets {
			if s := &n.Subnets[i]; inZone(s) && tier.match(s) {
				candidates = append(candidates, *s)
			}
		}
		if len(candidates) == 0 {
			continue
		}
		best := slices.MaxFunc(candidates, func(a, b cloud.Subnet) int {
			return cmp.Or(cmp.Compare(a.Available, b.Available), strings.Compare(b.ID, a.ID))
		})
		if best.Available < need {
			return cloud.Subnet{}, fmt.Errorf("%w: %s in %s: most free is %s with %d addresses",
				ErrSubnetExhausted, tier.name, n.Instance.AZ, best.ID, best.Available)
		}
		return best, nil
	}
	return cloud.Subnet{}, fmt.Errorf("%w: no subnet in %s (node subnet %s unknown)",
		ErrSubnetExhausted, n.Instance.AZ, n.Instance.SubnetID)
}

// SecurityGroups picks the groups of a new ENI: the listed IDs, else
// those matching the tags, else the primary ENI's.
func SecurityGroups(n *snapshot.Node, cfg *Config) ([]string, error) {
	if len(cfg.SecurityGroupIDs) > 0 {
		return slices.Clone(cfg.SecurityGroupIDs), nil
	}
	if len(cfg.SecurityGroupTags) > 0 {
		var ids []string
		for _, g := range n.SecurityGroups {
			if g.VPCID == n.Instance.VPCID && cloud.MatchTags(g.Tags, cfg.SecurityGroupTags) {
				ids = append(ids, g.ID)
			}
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("%w tags %v in %s", ErrNoSecurityGroup, cfg.SecurityGroupTags, n.Instance.VPCID)
		}
		slices.Sort(ids)
		return ids, nil
	}
	for _, e := range n.ENIs {
		if e.DeviceIndex == 0 {
			return slices.Clone(e.SecurityGroups), nil
		}
	}
	return nil, nil
}

// Room is how far a node's pool can grow under cfg.
type Room struct {
	// MaxIPs is the largest pool the node can reach: the address slots of
	// its usable ENIs, present and to come, less their primary addresses
	// (16 per slot under prefix delegation), within MaxAllocate.
	MaxIPs int
	// CanGrow is false when no address can be added now; Blocked then
	// says why (wrapping one of the Err* reasons).
	CanGrow bool
	Blocked error
	// Subnets are those of the usable ENIs and the one a new ENI would use.
	Subnets []string
	// FreeENISlots counts the device indexes a new usable ENI can take.
	FreeENISlots int
	// SubnetSlots are the address slots free on the usable ENIs, per
	// subnet: where a single address of that subnet (a static address
	// moving in) fits without a new ENI.
	SubnetSlots map[string]int
}

// MaxPoolIPs is the largest pool a node of type t reaches under cfg when
// reserved of its card-0 slots at or above the first interface index hold
// ENIs that carry no pods (EFA-only, trunk, excluded by tags): each
// usable slot's ENI gives its address slots less its primary address, 16
// addresses a slot under prefix delegation, within MaxAllocate. Capacity
// and enipam max-pods both use it.
func MaxPoolIPs(t cloud.InstanceType, cfg *Config, reserved int) int {
	perSlot := 1
	if cfg.PrefixDelegation && t.PrefixDelegation() {
		perSlot = IPsPerPrefix
	}
	slots := max(t.MaxENIs-cfg.FirstInterfaceIndex-reserved, 0)
	n := slots * max(t.IPv4PerENI-1, 0) * perSlot
	if cfg.MaxAllocate > 0 {
		n = min(n, cfg.MaxAllocate)
	}
	return n
}

// Capacity computes a node's Room. It is pure, like Compute, and agrees
// with it: CanGrow is true exactly when Compute could add an address.
func Capacity(n *snapshot.Node, cfg *Config) Room {
	var r Room
	subnetFree := map[string]int{}
	for _, s := range n.Subnets {
		subnetFree[s.ID] = s.Available
	}
	reserved := 0
	for i := range n.ENIs {
		e := &n.ENIs[i]
		if !Usable(e, cfg) {
			if e.NetworkCard == 0 && e.DeviceIndex >= cfg.FirstInterfaceIndex {
				reserved++ // a slot taken by an excluded or foreign ENI
			}
			continue
		}
		if !slices.Contains(r.Subnets, e.SubnetID) {
			r.Subnets = append(r.Subnets, e.SubnetID)
		}
		if free := n.Type.IPv4PerENI - e.Slots(); free > 0 {
			if r.SubnetSlots == nil {
				r.SubnetSlots = map[string]int{}
			}
			r.SubnetSlots[e.SubnetID] += free
		}
		if n.Type.IPv4PerENI-e.Slots() > 0 && subnetFree[e.SubnetID] > 0 {
			r.CanGrow = true
		}
	}
	r.MaxIPs = MaxPoolIPs(n.Type, cfg, reserved)
	r.FreeENISlots = freeENISlots(n, cfg)
	if _, ok := FreeDeviceIndex(n, cfg); ok {
		subnet, err := chooseSubnet(n, cfg)
		switch {
		case err != nil:
			r.Blocked = err
		default:
			if !slices.Contains(r.Subnets, subnet.ID) {
				r.Subnets = append(r.Subnets, subnet.ID)
			}
			if _, err := SecurityGroups(n, cfg); err != nil {
				r.Blocked = err
			} else {
				r.CanGrow = true
			}
		}
	} else {
		r.Blocked = atCapacity(n)
	}
	if r.CanGrow {
		r.Blocked = nil
	}
	slices.Sort(r.Subnets)
	return r
}
