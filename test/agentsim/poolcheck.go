package agentsim

import (
	"fmt"
	"net/netip"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/test/ec2sim"
)

// PoolFindings count breaches of the pool/EC2 invariant (ARCHITECTURE.md,
// invariant 1) seen in one look at the CiliumNodes and EC2's own state,
// for both families: an IPv6 pool address is on the ENI that holds it or
// the /80 containing it.
type PoolFindings struct {
	// InTwoPools: addresses in the pools of two nodes or more.
	InTwoPools int
	// FreeOffENI: free pool addresses (not used, not in the handshake)
	// that EC2 has not had on the entry's ENI, attached to the node's
	// instance, for longer than the grace.
	FreeOffENI int
	// ReleasedInPool: addresses still in a pool although the handshake
	// says released, for longer than the grace.
	ReleasedInPool int
	// StampedOffENI: owner-stamped (static) pool addresses in no
	// handshake that EC2 has not had on the entry's ENI, attached to the
	// node's instance, for longer than the grace: Cilium's agent would
	// hand the pod an address its node does not hold.
	StampedOffENI int
	// OnTwoENIs: addresses EC2 shows on two ENIs (a broken emulator).
	OnTwoENIs int
	// Details name the first breaches.
	Details []string
}

// Total is the number of breaches of every kind.
func (f PoolFindings) Total() int {
	return f.InTwoPools + f.FreeOffENI + f.ReleasedInPool + f.StampedOffENI + f.OnTwoENIs
}

// PoolChecker looks at pools against EC2 again and again (during a
// scenario and at its end): a free address off its ENI, or a released one
// left in a pool, counts only once it has been so for longer than the
// grace, EC2's and the operator's consistency window.
type PoolChecker struct {
	grace time.Duration
	since map[string]time.Time // "node ip kind" → first seen so
}

// NewPoolChecker returns a checker with the given grace.
func NewPoolChecker(grace time.Duration) *PoolChecker {
	return &PoolChecker{grace: grace, since: map[string]time.Time{}}
}

// Check compares the nodes' pools with EC2's state at now.
func (c *PoolChecker) Check(nodes []ciliumv2.CiliumNode, dump ec2sim.Dump, now time.Time) PoolFindings {
	var f PoolFindings
	detail := func(format string, args ...any) {
		if len(f.Details) < 40 {
			f.Details = append(f.Details, fmt.Sprintf(format, args...))
		}
	}
	// Where EC2 has each address: ENI and the instance it is attached to.
	type place struct{ eni, instance string }
	at := map[string]place{}
	// IPv6 /80s are kept whole: an address of the window is looked up by
	// the prefix holding it.
	type span struct {
		p netip.Prefix
		place
	}
	var spans []span
	for _, e := range dump.NetworkInterfaces {
		instance := ""
		if e.Attachment != nil {
			instance = e.Attachment.InstanceID
		}
		add := func(ip string) {
			if p, dup := at[ip]; dup && p.eni != e.NetworkInterfaceID {
				f.OnTwoENIs++
				detail("%s on %s and %s in EC2", ip, p.eni, e.NetworkInterfaceID)
			}
			at[ip] = place{e.NetworkInterfaceID, instance}
		}
		for _, a := range e.PrivateIPAddresses {
			if !a.Primary {
				add(a.PrivateIPAddress)
			}
		}
		for _, p := range e.IPv4Prefixes {
			if pfx, err := netip.ParsePrefix(p.IPv4Prefix); err == nil {
				for ip := pfx.Masked().Addr(); pfx.Contains(ip); ip = ip.Next() {
					add(ip.String())
				}
			}
		}
		for _, a := range e.IPv6Addresses {
			if ip, err := netip.ParseAddr(a.IPv6Address); err == nil {
				add(ip.String())
			}
		}
		for _, p := range e.IPv6Prefixes {
			pfx, err := netip.ParsePrefix(p.IPv6Prefix)
			if err != nil {
				continue
			}
			pfx = pfx.Masked()
			for _, o := range spans {
				if o.p.Overlaps(pfx) && o.eni != e.NetworkInterfaceID {
					f.OnTwoENIs++
					detail("%s on %s overlaps %s on %s in EC2", pfx, e.NetworkInterfaceID, o.p, o.eni)
				}
			}
			spans = append(spans, span{pfx, place{e.NetworkInterfaceID, instance}})
		}
	}
	locate := func(key string) place {
		if p, ok := at[key]; ok {
			return p
		}
		if ip, err := netip.ParseAddr(key); err == nil && ip.Is6() {
			for _, s := range spans {
				if s.p.Contains(ip) {
					return s.place
				}
			}
		}
		return place{}
	}
	seen := map[string]bool{}
	late := func(key string) bool {
		seen[key] = true
		t, ok := c.since[key]
		if !ok {
			c.since[key] = now
			return c.grace <= 0
		}
		return now.Sub(t) > c.grace
	}
	owner := map[string]string{}
	for i := range nodes {
		cn := &nodes[i]
		for ip, entry := range cn.Spec.IPAM.Pool {
			if other, dup := owner[ip]; dup {
				f.InTwoPools++
				detail("%s in the pools of %s and %s", ip, other, cn.Name)
			}
			owner[ip] = cn.Name
			state, inHandshake := cn.Status.IPAM.ReleaseIPs[ip]
			if state == ipamoption.IPAMReleased {
				if late(cn.Name + " " + ip + " released") {
					f.ReleasedInPool++
					detail("%s: %s released but still in the pool", cn.Name, ip)
				}
				continue
			}
			p := locate(ip)
			off := p.eni != entry.Resource || p.instance == "" || p.instance != cn.Spec.InstanceID
			if entry.Owner != "" && !inHandshake {
				if off && late(cn.Name+" "+ip+" stamped off") {
					f.StampedOffENI++
					detail("%s: stamped pool address %s (%s) on %s is on %q of instance %q in EC2", cn.Name, ip, entry.Owner, entry.Resource, p.eni, p.instance)
				}
				continue
			}
			if _, used := cn.Status.IPAM.Used[ip]; used || inHandshake || entry.Owner != "" {
				continue
			}
			if off {
				if late(cn.Name + " " + ip + " off") {
					f.FreeOffENI++
					detail("%s: free pool address %s on %s is on %q of instance %q in EC2", cn.Name, ip, entry.Resource, p.eni, p.instance)
				}
			}
		}
	}
	for key := range c.since {
		if !seen[key] {
			delete(c.since, key)
		}
	}
	return f
}
