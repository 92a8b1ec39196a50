package kernel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/enipam/enipam/nodeagent/routing"
)

// dumpRetries bounds how often a dump interrupted by a concurrent change
// (netlink.ErrDumpInterrupted) is repeated before giving up.
const dumpRetries = 5

// Kernel implements routing.Host on one network namespace.
type Kernel struct {
	h          *netlink.Handle
	ns         netns.NsHandle
	procSysNet string
	// stateDir is where rp_filter values are recorded before a change;
	// empty: nowhere.
	stateDir string
}

var _ routing.Host = (*Kernel)(nil)

// New returns a Kernel that talks netlink through h and reaches sysctls
// inside ns. h and ns must refer to the same namespace; pass netns.None()
// as ns when h is the process's own namespace (netlink.NewHandle()). The
// caller keeps ownership of both and closes them after the Kernel's last use.
// Sysctls are under DefaultProcSysNet unless an option says otherwise.
func New(h *netlink.Handle, ns netns.NsHandle, opts ...Option) *Kernel {
	k := &Kernel{h: h, ns: ns, procSysNet: DefaultProcSysNet}
	for _, o := range opts {
		o(k)
	}
	return k
}

// Links implements routing.Host.
func (k *Kernel) Links() ([]routing.Link, error) {
	var links []netlink.Link
	err := retryDump(func() (err error) {
		links, err = k.h.LinkList()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]routing.Link, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		out = append(out, routing.Link{
			Index:    a.Index,
			Name:     a.Name,
			MAC:      a.HardwareAddr,
			MTU:      a.MTU,
			Up:       a.Flags&net.FlagUp != 0,
			RPFilter: -1,
		})
	}
	return out, nil
}

// byIndex names a link for netlink's link calls, which use only its index.
func byIndex(l routing.Link) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: l.Index, Name: l.Name}}
}

// SetLinkMTU implements routing.Host.
func (k *Kernel) SetLinkMTU(l routing.Link, mtu int) error {
	return classify(k.h.LinkSetMTU(byIndex(l), mtu))
}

// SetLinkUp implements routing.Host.
func (k *Kernel) SetLinkUp(l routing.Link) error {
	return classify(k.h.LinkSetUp(byIndex(l)))
}

// Rules implements routing.Host.
func (k *Kernel) Rules() ([]routing.Rule, error) {
	var rules []netlink.Rule
	err := retryDump(func() (err error) {
		// One dump of every family; the kernel adds its multicast
		// routing rules (RTNL_FAMILY_IPMR, IP6MR), which are skipped.
		rules, err = k.h.RuleListFiltered(netlink.FAMILY_ALL, nil, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]routing.Rule, 0, len(rules))
	for _, r := range rules {
		if r.Family != netlink.FAMILY_V4 && r.Family != netlink.FAMILY_V6 {
			continue
		}
		rule := routing.Rule{
			IPv6:     r.Family == netlink.FAMILY_V6,
			Priority: r.Priority,
			Src:      prefixOf(r.Src),
			Dst:      prefixOf(r.Dst),
			Mark:     r.Mark,
			Table:    r.Table,
			Protocol: int(r.Protocol),
		}
		if r.Mask != nil {
			rule.Mask = *r.Mask
		} else if r.Mark != 0 {
			rule.Mask = ^uint32(0) // the kernel's default mask
		}
		out = append(out, rule)
	}
	return out, nil
}

func toNetlinkRule(r routing.Rule) *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family = netlink.FAMILY_V4
	if r.IPv6 {
		nr.Family = netlink.FAMILY_V6
	}
	nr.Priority = r.Priority
	nr.Table = r.Table
	nr.Protocol = uint8(r.Protocol)
	nr.Src = ipNetOf(r.Src)
	nr.Dst = ipNetOf(r.Dst)
	if r.Mask != 0 {
		nr.Mark = r.Mark
		mask := r.Mask
		nr.Mask = &mask
	}
	return nr
}

// AddRule implements routing.Host.
func (k *Kernel) AddRule(r routing.Rule) error {
	return classify(k.h.RuleAdd(toNetlinkRule(r)))
}

// DelRule implements routing.Host.
func (k *Kernel) DelRule(r routing.Rule) error {
	return classify(k.h.RuleDel(toNetlinkRule(r)))
}

// Routes implements routing.Host.
func (k *Kernel) Routes() ([]routing.Route, error) {
	var routes []netlink.Route
	err := retryDump(func() (err error) {
		// Table filter "unspec" is how netlink asks for every table.
		// One dump of every family (multicast routing's are skipped).
		routes, err = k.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]routing.Route, 0, len(routes))
	for _, r := range routes {
		dst := prefixOf(r.Dst)
		switch {
		case r.Family != netlink.FAMILY_V4 && r.Family != netlink.FAMILY_V6:
			continue
		case !dst.IsValid() && r.Family == netlink.FAMILY_V6:
			dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		case !dst.IsValid():
			dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		gw, _ := netip.AddrFromSlice(r.Gw)
		out = append(out, routing.Route{
			Table:     r.Table,
			Dst:       dst,
			Gateway:   gw.Unmap(),
			LinkIndex: r.LinkIndex,
			Scope:     int(r.Scope),
			Protocol:  int(r.Protocol),
			Metric:    r.Priority,
		})
	}
	return out, nil
}

func toNetlinkRoute(r routing.Route) *netlink.Route {
	family := netlink.FAMILY_V4
	if r.Dst.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	nr := &netlink.Route{
		Family:    family,
		Table:     r.Table,
		Dst:       ipNetOf(r.Dst),
		LinkIndex: r.LinkIndex,
		Scope:     netlink.Scope(r.Scope),
		Protocol:  netlink.RouteProtocol(r.Protocol),
		Priority:  r.Metric,
	}
	if r.Gateway.IsValid() {
		nr.Gw = r.Gateway.AsSlice()
	}
	return nr
}

// ReplaceRoute implements routing.Host.
func (k *Kernel) ReplaceRoute(r routing.Route) error {
	return classify(k.h.RouteReplace(toNetlinkRoute(r)))
}

// DelRoute implements routing.Host.
func (k *Kernel) DelRoute(r routing.Route) error {
	return classify(k.h.RouteDel(toNetlinkRoute(r)))
}

// classify maps the kernel's errno to routing's sentinels, keeping the
// original error in the chain.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%w (%w)", routing.ErrExist, err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENODEV):
		return fmt.Errorf("%w (%w)", routing.ErrNotFound, err)
	}
	return err
}

// retryDump repeats a dump the kernel interrupted because the table
// changed under it; a partial dump would make the diff delete or re-add
// things that are fine.
func retryDump(dump func() error) error {
	var err error
	for range dumpRetries {
		if err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
	}
	return fmt.Errorf("dump interrupted %d times, %w", dumpRetries, err)
}

func prefixOf(n *net.IPNet) netip.Prefix {
	if n == nil || n.IP == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	a = a.Unmap()
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a, ones)
}

func ipNetOf(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	bits := p.Addr().BitLen()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}
