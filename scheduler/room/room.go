// Package room decides whether a node has room for one more pod's address:
// pure functions over what enipam-scheduler knows of the node, its
// CiliumNode pool digested (Digest), the operator's word on how far that
// pool can grow (NodeRouting spec.capacity), and the pods already
// promised an address there. No I/O: the tracker gathers the facts, the
// extender asks Assess.
package room

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// Pool is what placement needs of one CiliumNode, counted the way
// Cilium's agent hands addresses out in ipam: crd mode (pkg/ipam/crd.go,
// allocateNext).
type Pool struct {
	// Size counts spec.ipam.pool's IPv4 entries: each takes an address
	// slot of the instance, whatever its state (the IPv6 window's
	// addresses take none: they are one /80).
	Size int
	// Free counts what the agent may give any pod: entries with no
	// owner, not in status.ipam.used, not in the release handshake, of
	// the family the pool lists (IPv4, or IPv6 on an IPv6-only node); on
	// a dual-stack node, whose pods each take one of both, the fewer of
	// the two families' (Free4, Free6).
	Free         int
	Free4, Free6 int
	// Leaving counts IPv4 entries the agent will not hand out because
	// they are being released (marked-for-release, ready-for-release,
	// released).
	Leaving int
	// Marked counts the part of Leaving enipam-operator may have marked
	// for a static-IP claim's first placement: IPv4 entries with no
	// owner, not in use, marked-for-release or ready-for-release (it
	// marks an ordinary free entry, and stamps it once the agent
	// answers). Which claim a mark is for, the pool does not say.
	Marked int
	// Stamped maps the owner ("namespace/pod") of each owner-stamped entry
	// not in use to its address: the agent gives that entry to that pod
	// only.
	Stamped map[string]string
	// Answered maps the owner of each owner-stamped IPv4 entry not in
	// use, marked-for-release or ready-for-release, to its address: the
	// agent hands it to that pod whatever the handshake. For a claim with
	// no address yet it is the operator's first placement stamped on the
	// agent's answer, the answer not withdrawn yet.
	Answered map[string]string
	// UsedBy holds the owners of status.ipam.used: pods that already have
	// their address, whatever their status says yet. Cilium's agent
	// names the owner "namespace/name", without the pod's UID
	// (plugins/cilium-cni's IPAMAllocate), so an earlier pod of the same
	// name is listed so until the agent's next write after its CNI DEL.
	// Each owner maps to when the tracker last saw an address of it
	// appear in the list (its own count of events; Digest leaves 0): a
	// pod the tracker first saw later than that is not the one listed.
	UsedBy map[string]uint64
	// Settled maps the owner of each stamped entry in no release
	// handshake at all, whose address its ENI holds (the node's ENIs, see
	// Digest), to its address: enipam-operator's placement of a
	// static address is done, and its pod may be bound.
	Settled map[string]string
	// Prefixes are the /28 prefixes delegated to the node's ENIs (see
	// Digest): a member leaves the node only with its whole prefix, so a
	// static address that is one cannot move.
	Prefixes []netip.Prefix
}

// InPrefix reports whether ip is a member of a prefix delegated to the
// node.
func (p *Pool) InPrefix(ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, pfx := range p.Prefixes {
		if pfx.Contains(addr) {
			return true
		}
	}
	return false
}

// Digest counts cn's pool, enis being the node's NodeRouting's
// spec.enis (nil if none). The node's ENIs are those of enis and of cn's
// status.eni.enis, an ENI in both as enis has it: enipam-operator lists
// them in spec.enis, which the node's agent routes, and copies them into
// status.eni.enis only where something reads that copy (an earlier
// release lists them there alone). It reads cn and enis and keeps none
// of them.
func Digest(cn *ciliumv2.CiliumNode, enis []enipamv1alpha1.NodeENI) Pool {
	used := cn.Status.IPAM.Used
	p := Pool{UsedBy: make(map[string]uint64, len(used)), Prefixes: prefixes(cn, enis)}
	var size6 int
	for _, e := range used {
		if e.Owner != "" {
			p.UsedBy[e.Owner] = 0
		}
	}
	for ip, e := range cn.Spec.IPAM.Pool {
		_, inUse := used[ip]
		leaving := Leaving(cn, ip)
		v6 := isIPv6(ip)
		switch {
		case v6:
			size6++
		case leaving:
			p.Size++
			p.Leaving++
			switch {
			case inUse || cn.Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReleased:
			case e.Owner == "":
				p.Marked++
			default:
				if p.Answered == nil {
					p.Answered = map[string]string{}
				}
				p.Answered[e.Owner] = ip
			}
		default:
			p.Size++
		}
		if _, hs := cn.Status.IPAM.ReleaseIPs[ip]; e.Owner != "" && !hs && (!inUse || used[ip].Owner == e.Owner) && onENI(cn, enis, e.Resource, ip) {
			if p.Settled == nil {
				p.Settled = map[string]string{}
			}
			p.Settled[e.Owner] = ip
		}
		switch {
		case e.Owner != "":
			if !inUse && !leaving {
				if p.Stamped == nil {
					p.Stamped = map[string]string{}
				}
				p.Stamped[e.Owner] = ip
			}
		case !inUse && !leaving && v6:
			p.Free6++
		case !inUse && !leaving:
			p.Free4++
		}
	}
	switch {
	case size6 == 0:
		p.Free = p.Free4
	case p.Size == 0:
		p.Free = p.Free6
	default:
		p.Free = min(p.Free4, p.Free6)
	}
	return p
}

// isIPv6 reports whether a pool key is of the IPv6 family: only IPv6
// text has a colon (Digest runs on every CiliumNode event; it parses
// nothing).
func isIPv6(ip string) bool { return strings.IndexByte(ip, ':') >= 0 }

// onENI reports whether the entry's ENI holds ip, as the operator last
// wrote it (secondary addresses and /28 prefixes; spec.enis's ENI if it
// lists it, else status.eni.enis's): a stamp the operator has not placed
// back in EC2, or whose entry does not name the ENI holding it yet
// (Cilium's agent routes the pod by that ENI), is not settled.
func onENI(cn *ciliumv2.CiliumNode, enis []enipamv1alpha1.NodeENI, eniID, ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	if e := specENI(enis, eniID); e != nil {
		return slices.ContainsFunc(e.Addresses, func(a string) bool { return parsed(a) == addr }) ||
			slices.ContainsFunc(e.Prefixes, func(p string) bool { return parsedPrefix(p).Contains(addr) })
	}
	if e, ok := cn.Status.ENI.ENIs[eniID]; ok {
		for _, a := range e.Addresses {
			if a.Addr == addr {
				return true
			}
		}
		for _, p := range e.Prefixes {
			if p.Contains(addr) {
				return true
			}
		}
	}
	return false
}

// prefixes returns the /28 prefixes delegated to the node's ENIs: those
// of enis, and of each ENI of cn's status.eni.enis that enis does not
// list.
func prefixes(cn *ciliumv2.CiliumNode, enis []enipamv1alpha1.NodeENI) []netip.Prefix {
	var out []netip.Prefix
	for _, e := range enis {
		for _, s := range e.Prefixes {
			if p := parsedPrefix(s); p.IsValid() {
				out = append(out, p)
			}
		}
	}
	for id, e := range cn.Status.ENI.ENIs {
		if specENI(enis, id) != nil {
			continue
		}
		for _, pfx := range e.Prefixes {
			out = append(out, pfx.Prefix)
		}
	}
	return out
}

// specENI returns the ENI of enis whose ID is id, nil if none: a node
// has a few ENIs, so a scan costs less than a map.
func specENI(enis []enipamv1alpha1.NodeENI, id string) *enipamv1alpha1.NodeENI {
	for i := range enis {
		if enis[i].ID == id {
			return &enis[i]
		}
	}
	return nil
}

// parsed and parsedPrefix read spec.enis's text; what does not parse is
// the zero value, which holds nothing.
func parsed(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}

func parsedPrefix(s string) netip.Prefix {
	p, _ := netip.ParsePrefix(s)
	return p
}

// Leaving reports whether Cilium's agent refuses to hand ip out because
// of the release handshake (do-not-release does not stop it).
func Leaving(cn *ciliumv2.CiliumNode, ip string) bool {
	switch cn.Status.IPAM.ReleaseIPs[ip] {
	case ipamoption.IPAMMarkForRelease, ipamoption.IPAMReadyForRelease, ipamoption.IPAMReleased:
		return true
	}
	return false
}

// Node is everything known of one node when a pod is placed.
type Node struct {
	Name string
	// Pool is nil when the node has no CiliumNode.
	Pool *Pool
	// Capacity is nil until the operator has written the node's
	// NodeRouting spec.capacity.
	Capacity *enipamv1alpha1.NodeCapacity
	// Promised counts the pods that will take a free address of this node
	// before the pod being placed: bound or nominated here and not
	// started, started but not yet in status.ipam.used, and held (Held).
	Promised int
	// Held is the part of Promised the scheduler may just have placed
	// here without the placement being seen yet (see tracker.Hold), and
	// Young the part of Held recent enough to be worth waiting for.
	Held, Young int
}

// Kind is how a node has room for the pod, or why not, from the best to
// the worst.
type Kind int

const (
	// Own: the pool holds an entry stamped with this pod as owner.
	Own Kind = iota
	// Free: an unowned free entry is there now.
	Free
	// Coming: addresses EC2 already holds for the node join the pool once
	// routed.
	Coming
	// Growth: the operator must add addresses (or an ENI) first.
	Growth

	// NoCiliumNode, NoCapacity and NoIP are refusals: the node is not
	// managed by Cilium; it has no free address and the operator has not
	// said it can grow; it has none and cannot grow.
	NoCiliumNode
	NoCapacity
	NoIP
	// NoZone and NoSlot refuse a static-IP pod: the node is in another
	// zone than its address's subnet; it has no room for one more address
	// of that subnet (no free slot on an ENI in it, no free ENI slot).
	NoZone
	NoSlot
)

// Fits reports whether the kind admits the pod.
func (k Kind) Fits() bool { return k < NoCiliumNode }

// String names the kind in metrics and logs.
func (k Kind) String() string {
	return [...]string{"own", "free", "coming", "growth", "no_ciliumnode", "no_capacity", "no_ip", "no_zone", "no_slot"}[k]
}

// Scores of each kind that fits, on the extender scale (0 to
// MaxExtenderPriority, 10). An address there now beats one on its way,
// which beats one the operator must first ask EC2 for.
var scores = [...]int64{Own: 10, Free: 10, Coming: 6, Growth: 3}

// Verdict is Assess's answer for one node.
type Verdict struct {
	Kind Kind
	// Score is the prioritize score, 0 for refusals.
	Score int64
	// Reason says, for a refusal, why, in words a user reads in the pod's
	// FailedScheduling event. Nodes that share a reason share the words,
	// so the event groups them.
	Reason string
	// Now, Coming and Growth are the addresses left for this pod: free now
	// (after the promises; may be negative), on their way, and still to
	// allocate within the node's maximum.
	Now, Coming, Growth int
}

// Reasons of refusals, beginning the Reason of their kind.
const (
	ReasonNoCiliumNode = "no CiliumNode: the node is not managed by Cilium, or its agent has not started"
	ReasonNoIP         = "no free IP"
)

// Assess says whether n has an address for the pod whose Cilium owner is
// owner ("namespace/name"), and how good a place it is.
func Assess(n *Node, owner string) Verdict {
	if n.Pool == nil {
		return Verdict{Kind: NoCiliumNode, Reason: ReasonNoCiliumNode}
	}
	p := n.Pool
	v := Verdict{Now: p.Free - n.Promised}
	if _, ok := p.Stamped[owner]; ok && owner != "" {
		v.Kind, v.Score = Own, scores[Own]
		return v
	}
	if v.Now >= 1 {
		v.Kind, v.Score = Free, scores[Free]
		return v
	}
	c := n.Capacity
	if c == nil {
		v.Kind, v.Reason = NoCapacity, ReasonNoIP+"; enipam-operator has not reported the node's capacity yet"
		return v
	}
	// The operator's counts may lag the pool by one write: addresses it
	// reported awaiting may have joined the pool since (they are then in
	// Free), or the pool may have shrunk. Count as coming only what the
	// pool does not hold yet.
	v.Coming = min(int(c.Awaiting), max(0, int(c.PoolIPs+c.Awaiting)-(p.Size-p.Leaving)))
	if c.CanGrow {
		v.Growth = max(0, int(c.MaxIPs)-p.Size-v.Coming)
	}
	switch {
	case v.Now+v.Coming >= 1:
		v.Kind, v.Score = Coming, scores[Coming]
	case v.Now+v.Coming+v.Growth >= 1:
		v.Kind, v.Score = Growth, scores[Growth]
	case !c.CanGrow && c.Reason != "":
		v.Kind, v.Reason = NoIP, ReasonNoIP+"; "+c.Reason
	case !c.CanGrow:
		v.Kind, v.Reason = NoIP, ReasonNoIP+"; the pool cannot grow"
	default:
		v.Kind, v.Reason = NoIP, fmt.Sprintf("%s; the pool is at its maximum of %d addresses, counting the pods already bound there", ReasonNoIP, c.MaxIPs)
	}
	return v
}

// firstPlacement judges n for a claim with no address yet, v being
// Assess's verdict, against the claim's target (spec.nodeName, the node
// the last bind asked for): the operator's first placement is under way
// there (an entry of its pool marked for release, which no longer counts
// as free, and kept for the claim once the agent answers), and starts
// over anywhere else. So the target holding a marked entry (Marked), or
// the entry the operator stamped for the pod on the agent's answer before
// it withdraws the answer in a later pass (Answered: the pod's address is
// there, not settled yet, and the claim records it next), fits as the
// pod's own entry would, even with no free address for any other pod; a
// target that fits otherwise scores as the pod's own entry too; every
// other node scores below it, save one whose pool holds an entry stamped
// for the pod. Filter and prioritize both judge so (AssessStatic).
//
// Marked cannot tell the operator's mark for this claim from any other
// mark of an unowned free entry (an excess release, an address EC2 no
// longer shows on its ENI), so such a mark lets the target pass too. No
// object says whose mark it is: Cilium's pool entry holds only owner and
// resource, and the owner cannot be written before the agent answers (it
// would hand that entry to that pod whatever its handshake, see
// operator/poolcontroller/static.go); release-ips holds only a state;
// the agent rewrites the CiliumNode's labels and annotations; the
// claim's placement note has no address for a first placement (the
// marked one is only in its words, copied into the Ready condition), and
// its reason, Placing, is also said while no entry is marked (waiting
// for a free address, assigning a secondary one); the note is written
// after the CiliumNode, so requiring it would refuse the target between
// the two writes. A target passed on another's mark costs binds that
// wait for the stamp, each up to the bind timeout, until the operator
// finds the node an address or the other handshake ends; nothing is
// stamped before the agent's answer, whichever node passes. Counted as
// the pod's own entry it would also make the target look one address
// roomier than it is, so the tracker charges all but Marked of the pods
// a target takes so (OwnEntry's OwnMark).
func firstPlacement(v Verdict, n *Node, owner, target string) Verdict {
	switch {
	case target == "" || v.Kind == Own:
	case n.Name == target && n.Pool != nil && n.Pool.firstPlacing(owner):
		v = Verdict{Kind: Own, Score: scores[Own], Now: v.Now, Coming: v.Coming, Growth: v.Growth}
	case n.Name == target && v.Kind.Fits():
		v.Score = scores[Own]
	case v.Kind.Fits():
		v.Score = min(v.Score, scores[Own]-1)
	}
	return v
}

// firstPlacing reports whether the pool, of the node a claim with no
// address yet asks for, holds an entry the operator's first placement may
// keep for owner's pod (see firstPlacement): marked for release (Marked),
// or stamped for it on the agent's answer (Answered).
func (p *Pool) firstPlacing(owner string) bool {
	return p.Marked > 0 || (owner != "" && p.Answered[owner] != "")
}

// Entry is how a pod takes its address on a node (OwnEntry).
type Entry int

const (
	// FreeEntry: the pod takes one of the free addresses Free counts.
	FreeEntry Entry = iota
	// OwnStamp: an entry stamped for the pod (Stamped), or stamped for
	// it on the agent's answer (Answered), which Free does not count.
	OwnStamp
	// OwnMark: the pod's claim has no address yet and asks for the node,
	// whose pool holds marked entries (Marked): the operator's first
	// placement for it may have marked one of them, which Free no longer
	// counts, or may still have to mark a free one for it. Which, the
	// pool does not say (see firstPlacement): of the pods of a node taken
	// so, at most Marked take no free address.
	OwnMark
)

// OwnEntry says how owner's pod, of claim c (nil for a pod with none),
// takes its address on node, whose pool is p: an entry stamped for it,
// or, while c has no address yet and asks for node, the entry its first
// placement keeps there (the node firstPlacement judges Own), which is
// either stamped for it on the agent's answer or one of the pool's marks.
// A pod of OwnStamp, held, bound or nominated there, promises no free
// address there; of the pods of OwnMark, all but Marked do.
func OwnEntry(p *Pool, node, owner string, c *Claim) Entry {
	switch {
	case p == nil || owner == "":
		return FreeEntry
	case p.Stamped[owner] != "":
		return OwnStamp
	case c == nil || c.Address != "" || c.Target != node || c.Deleting || c.Invalid != "":
		return FreeEntry
	case p.Answered[owner] != "":
		return OwnStamp
	case p.Marked > 0:
		return OwnMark
	}
	return FreeEntry
}

// Claim is what placement needs of a static-IP pod's StaticIPClaim.
type Claim struct {
	// Address, Subnet and Zone are the claim's address (spec, else what
	// the operator picked), its subnet and that subnet's zone; Address is
	// empty before the first placement.
	Address, Subnet, Zone string
	// Holder is the node whose ENI has the address (status.nodeName).
	Holder string
	// Target is spec.nodeName, the node the last bind asked for.
	Target string
	// Checked: enipam-operator has looked at the claim's current spec.
	Checked bool
	// Invalid holds why the operator refuses the claim; "" when it does
	// not.
	Invalid string
	// Deleting: the claim is being released.
	Deleting bool
	// Pinned: the address is a member of a /28 prefix delegated to the
	// holder's ENIs (a first placement of an earlier release): it cannot
	// move, so only the holder can take the pod.
	Pinned bool
	// Status is the Ready condition's reason and message, in words.
	Status string
}

// AssessStatic says whether n can take the pod whose static address the
// claim c holds: the node already holding it, or one in the address's
// zone with room for one more address of its subnet (a free slot on an
// ENI in it, or a free ENI slot for a new one). Before the first
// placement (no address yet) any node with an address for the pod fits,
// in the requested subnet's zone if one was asked, and so does the claim's
// target while it holds an entry the operator may have marked for the
// claim, or stamped for it on the agent's answer; the target scores above
// the others (firstPlacement). A node known to be outside the claim's zone
// is refused for the zone before anything else, with an address or not.
func AssessStatic(n *Node, owner string, c *Claim) Verdict {
	// The zone is the claim's: a node known to be outside it is refused
	// for it first, whatever its pool (full, or no CiliumNode at all), so
	// that the pod's event does not send its reader to another cause.
	if cp := n.Capacity; c.Zone != "" && cp != nil && cp.AvailabilityZone != "" && cp.AvailabilityZone != c.Zone {
		if c.Address == "" {
			return Verdict{Kind: NoZone, Reason: fmt.Sprintf("static IP of subnet %s must be in %s", c.Subnet, c.Zone)}
		}
		return Verdict{Kind: NoZone, Reason: staticWhere(c)}
	}
	if c.Address == "" {
		return firstPlacement(Assess(n, owner), n, owner, c.Target)
	}
	if n.Pool == nil {
		return Verdict{Kind: NoCiliumNode, Reason: ReasonNoCiliumNode}
	}
	if n.Pool.Stamped[owner] == c.Address || n.Pool.Settled[owner] == c.Address || c.Holder == n.Name {
		return Verdict{Kind: Own, Score: scores[Own]}
	}
	if c.Pinned {
		return Verdict{Kind: NoSlot, Reason: fmt.Sprintf("static IP %s lies in a /28 prefix delegated to node %s and cannot move", c.Address, c.Holder)}
	}
	cp := n.Capacity
	if cp == nil {
		return Verdict{Kind: NoCapacity, Reason: "static IP: enipam-operator has not reported the node's capacity yet"}
	}
	for _, s := range cp.SubnetSlots {
		if s.SubnetID == c.Subnet && s.Free > 0 {
			return Verdict{Kind: Coming, Score: scores[Coming]}
		}
	}
	if cp.FreeENISlots > 0 {
		return Verdict{Kind: Growth, Score: scores[Growth]}
	}
	return Verdict{Kind: NoSlot, Reason: staticWhere(c) + "; no free address slot on an ENI in that subnet and no free ENI slot"}
}

// staticWhere says where a claim's address lives, beginning a refusal.
func staticWhere(c *Claim) string {
	return fmt.Sprintf("static IP %s lives in %s, %s", c.Address, c.Subnet, c.Zone)
}
