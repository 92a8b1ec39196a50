package state

import (
	"net/netip"
	"sort"
	"time"
)

// meta is what every resource has: its ID, its creation order (pagination
// walks resources in that order, so pages stay stable while others are
// created or deleted), a tombstone flag and its tags.
type meta struct {
	id      string
	seq     uint64
	removed bool
	tags    []Tag
}

func (m *meta) base() *meta { return m }

// resource is implemented by every model type through its embedded meta.
type resource interface {
	comparable
	base() *meta
}

// registry indexes one kind of resource by ID and keeps them in creation
// order. Removal leaves a tombstone that later compaction drops.
type registry[T resource] struct {
	byID map[string]T
	list []T
	dead int
}

func newRegistry[T resource]() registry[T] { return registry[T]{byID: map[string]T{}} }

func (r *registry[T]) add(v T) {
	r.byID[v.base().id] = v
	r.list = append(r.list, v)
}

func (r *registry[T]) get(id string) (T, bool) {
	v, ok := r.byID[id]
	return v, ok
}

func (r *registry[T]) remove(v T) {
	m := v.base()
	if m.removed {
		return
	}
	m.removed = true
	delete(r.byID, m.id)
	r.dead++
	if r.dead > 64 && r.dead > len(r.list)/2 {
		live := r.list[:0]
		for _, x := range r.list {
			if !x.base().removed {
				live = append(live, x)
			}
		}
		clear(r.list[len(live):])
		r.list = live
		r.dead = 0
	}
}

func (r *registry[T]) len() int { return len(r.byID) }

// page returns up to limit live items of list (sorted by seq) that come after
// seq `after` and satisfy match, and the seq to continue from, zero when no
// further match exists. limit <= 0 means all.
func page[T resource](list []T, after uint64, limit int, match func(T) bool) ([]T, uint64) {
	var out []T
	for i := searchAfter(list, after); i < len(list); i++ {
		v := list[i]
		if v.base().removed || !match(v) {
			continue
		}
		if limit > 0 && len(out) == limit {
			return out, out[len(out)-1].base().seq
		}
		out = append(out, v)
	}
	return out, 0
}

// searchAfter is the index of the first item of list (sorted by seq)
// after seq after.
func searchAfter[T resource](list []T, after uint64) int {
	return sort.Search(len(list), func(i int) bool { return list[i].base().seq > after })
}

// bySeq sorts a candidate set into creation order for page.
func bySeq[T resource](list []T) []T {
	sort.Slice(list, func(i, j int) bool { return list[i].base().seq < list[j].base().seq })
	return list
}

type zone struct {
	name string
	id   string
}

type vpc struct {
	meta
	cidrs     []netip.Prefix
	cidrAssoc []string
	// ipv6CIDR is the VPC's Amazon-provided /56, invalid when it has none.
	ipv6CIDR   netip.Prefix
	ipv6Assoc  string
	dhcpID     string
	subnets    []*subnet
	defaultSG  *securityGroup
	routeTable *routeTable
}

type subnet struct {
	meta
	vpc   *vpc
	cidr  netip.Prefix
	zone  zone
	space *addrSpace
	// ipv6 is the subnet's /64 and who holds what of it; nil when the
	// subnet has no IPv6 CIDR.
	ipv6 *ipv6Space
	enis map[*eni]struct{}
}

type securityGroup struct {
	meta
	vpc         *vpc
	name        string
	description string
}

type routeTable struct {
	meta
	vpc     *vpc
	assocID string
}

// Instance states with EC2's codes.
const (
	instanceRunning    = "running"
	instanceTerminated = "terminated"
)

type instance struct {
	meta
	typ           *InstanceType
	subnet        *subnet
	groups        []*securityGroup
	state         string
	launched      time.Time
	imageID       string
	reservationID string
	primaryIP     netip.Addr
	// slots holds the ENIs attaching, attached or detaching, by network
	// card and device index.
	slots map[slot]*eni
}

// slot is where an ENI is attached: device indexes are per network card,
// so card 1 has a device 0 of its own.
type slot struct{ card, device int }

// primarySlot is the instance's primary ENI: card 0, device 0.
var primarySlot = slot{}

// onCard counts the ENIs attached (or attaching, or detaching) to a card.
func (in *instance) onCard(card int) int {
	n := 0
	for sl := range in.slots {
		if sl.card == card {
			n++
		}
	}
	return n
}

// efas counts the instance's EFA interfaces, with ENA or EFA-only.
func (in *instance) efas() int {
	n := 0
	for _, e := range in.slots {
		if e.efa() {
			n++
		}
	}
	return n
}

// ENI and attachment states as EC2 spells them.
const (
	eniAvailable = "available"
	eniInUse     = "in-use"

	attaching = "attaching"
	attached  = "attached"
	detaching = "detaching"
)

type eni struct {
	meta
	subnet        *subnet
	mac           string
	description   string
	interfaceType string
	groups        []*securityGroup
	ips           []netip.Addr // primary first
	prefixes      []netip.Prefix
	ipv6s         []netip.Addr
	ipv6Prefixes  []netip.Prefix // /80s
	attachment    *attachment
	created       time.Time
	// lags marks an ENI made by CreateNetworkInterface that the
	// eventual-consistency windows apply to.
	lags            bool
	sourceDestCheck bool
	// eips are the Elastic IPs associated with addresses of this ENI.
	eips []*address
	// incoming counts the addresses moving onto this ENI (see move).
	incoming int
	// hist holds what describes show while changes are on their way
	// (lag.go); nil when they show the ENI as it is.
	hist *history[*eni]
}

type attachment struct {
	id                  string
	eni                 *eni
	instance            *instance
	networkCard         int
	deviceIndex         int
	status              string
	since               time.Time
	due                 time.Time // when attaching/detaching completes
	deleteOnTermination bool
}

type address struct {
	meta
	publicIP      netip.Addr
	associationID string
	eni           *eni
	privateIP     netip.Addr
	// hist is as eni.hist.
	hist *history[*address]
}

// slotsUsed is the number of IPv4 slots an ENI occupies: one per address,
// one per delegated prefix, and one per address moving onto it.
func (e *eni) slotsUsed() int { return len(e.ips) + len(e.prefixes) + e.incoming }

// ipLimit is the IPv4 slot limit that applies to e now: its instance type's
// when attached, else the largest any type allows.
func (s *State) ipLimit(e *eni) int {
	if e.attachment != nil {
		return e.attachment.instance.typ.IPv4PerENI
	}
	return s.maxIPv4PerENI
}

// Interface types EC2 spells; an ENI made without one is "interface".
const (
	typeInterface = "interface"
	typeEFA       = "efa"
	typeEFAOnly   = "efa-only"
)

// efa reports whether the ENI is an Elastic Fabric Adapter, with ENA
// (efa) or without (efa-only).
func (e *eni) efa() bool { return e.interfaceType == typeEFA || e.interfaceType == typeEFAOnly }

// slot is where the attachment puts its ENI.
func (a *attachment) slot() slot { return slot{card: a.networkCard, device: a.deviceIndex} }

func (e *eni) status() string {
	if e.attachment != nil {
		return eniInUse
	}
	return eniAvailable
}
