package routing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Names of the kernel operations, as counted in Ops and named in OpError.
const (
	OpListLinks    = "list_links"
	OpListRules    = "list_rules"
	OpListRoutes   = "list_routes"
	OpGetConnmark  = "get_connmark"
	OpGetRPFilter  = "get_rp_filter"
	OpSetMTU       = "set_mtu"
	OpSetUp        = "set_up"
	OpSetRPFilter  = "set_rp_filter"
	OpReplaceRoute = "replace_route"
	OpDelRoute     = "del_route"
	OpAddRule      = "add_rule"
	OpDelRule      = "del_rule"
	OpSetConnmark  = "set_connmark"
)

// Ops counts the kernel operations of one converge, by Op* name.
type Ops map[string]int

// Total is the number of kernel operations, reads included.
func (o Ops) Total() int {
	n := 0
	for _, v := range o {
		n += v
	}
	return n
}

// Netlink is the number of netlink operations: everything but the
// rp_filter sysctls. Reading the connmark table is two requests (the
// table, its rules) and counts as one operation.
func (o Ops) Netlink() int {
	return o.Total() - o[OpGetRPFilter] - o[OpSetRPFilter]
}

// Writes is the number of kernel changes attempted.
func (o Ops) Writes() int {
	return o.Total() - o[OpListLinks] - o[OpListRules] - o[OpListRoutes] - o[OpGetConnmark] - o[OpGetRPFilter]
}

// Result is what one converge found and did.
type Result struct {
	// Read is true when every read succeeded; otherwise nothing was
	// changed and the rest of the Result says nothing about the node.
	Read bool
	// ENIs is the number of managed ENIs (draining ones included) whose
	// link was found.
	ENIs int
	// Rules and Routes are how many enipam-owned rules and routes the node
	// should now hold, retained rules aside.
	Rules, Routes int
	// Retained is how many rules of retained addresses were left as they
	// were.
	Retained int
	// Routed are the ENIs whose link, table routes and rules are in place
	// after this converge, each with the addresses and prefixes whose rules
	// are: what the node reports as routed.
	Routed []RoutedENI
	// Missing are the managed ENIs whose link the kernel does not show.
	Missing []ENI
	// Problems are ENIs that cannot be routed (*ENIError), and
	// ErrNoPrimaryLink.
	Problems []error
	// Plan is what was applied.
	Plan Plan
	// Ops counts every kernel operation, reads included.
	Ops Ops
}

// RoutedENI is an ENI whose routing is in place.
type RoutedENI struct {
	ID       string
	MAC      net.HardwareAddr
	Number   int
	Table    int
	IPs      []netip.Addr
	Prefixes []netip.Prefix
}

// Converger brings the kernel in line with a Node. It is not safe for
// concurrent use: one agent runs one converge at a time.
type Converger struct {
	host Host
	cfg  Config
}

// NewConverger returns a Converger acting on host; cfg must be valid.
func NewConverger(host Host, cfg Config) *Converger {
	return &Converger{host: host, cfg: cfg}
}

// Converge reads links, rules, routes and the connmark table (four netlink
// operations) and the managed links' rp_filter (one sysctl visit), computes
// the desired state of node, and applies the difference. A node already in
// shape costs those five reads and nothing else; one new address costs one
// more write per rule it needs. Failing writes do not stop the others: the
// error joins an *OpError per failure, the Result still says what was
// attempted, and Routed leaves out whatever a failure touched. Reading
// errors stop the converge before any change.
func (c *Converger) Converge(ctx context.Context, node Node) (Result, error) {
	res := Result{Ops: Ops{}}
	links, err := c.host.Links()
	res.Ops[OpListLinks]++
	if err != nil {
		return res, fmt.Errorf("listing links, %w", err)
	}
	rules, err := c.host.Rules()
	res.Ops[OpListRules]++
	if err != nil {
		return res, fmt.Errorf("listing rules, %w", err)
	}
	routes, err := c.host.Routes()
	res.Ops[OpListRoutes]++
	if err != nil {
		return res, fmt.Errorf("listing routes, %w", err)
	}
	connmark, err := c.host.Connmark()
	res.Ops[OpGetConnmark]++
	// With connmark off the table is read only to remove a leftover; a
	// kernel without nf_tables cannot have one, and must not fail routing.
	connmarkUnknown := err != nil && !c.cfg.Connmark
	if err != nil && !connmarkUnknown {
		return res, fmt.Errorf("reading the connmark table, %w", err)
	}

	d := ComputeDesired(node, links, c.cfg)
	d.KeepConnmark = d.KeepConnmark || connmarkUnknown
	if len(d.Links) > 0 {
		names := make([]string, len(d.Links), len(d.Links)+1)
		for i, w := range d.Links {
			names[i] = w.Link.Name
			if w.LoosenOnly {
				names = append(names, "all")
			}
		}
		rp, err := c.host.RPFilter(names)
		res.Ops[OpGetRPFilter]++
		if err != nil {
			return res, fmt.Errorf("reading rp_filter, %w", err)
		}
		for i := range d.Links {
			if v, ok := rp[d.Links[i].Link.Name]; ok {
				d.Links[i].Link.RPFilter = v
			}
		}
		if v, ok := rp["all"]; ok {
			d.RPFilterAll = v
		}
	}
	res.Read = true
	res.ENIs, res.Rules, res.Routes = len(d.ENIs), len(d.Rules), len(d.Routes)
	res.Missing, res.Problems = d.Missing, d.Problems
	res.Plan = Diff(d, rules, routes, connmark, c.cfg)
	res.Retained = len(retained(d.Retain, rules, c.cfg))
	f := newFailures()
	err = c.apply(ctx, res.Plan, res.Ops, &f)
	res.Routed = routed(d, f)
	return res, err
}

// failures are what the failed writes of one converge touched: ENIs'
// links, tables (tables6: their IPv6 routes alone), addresses' rules.
type failures struct {
	enis    map[string]bool
	tables  map[int]bool
	tables6 map[int]bool
	addrs   map[netip.Prefix]bool
}

func newFailures() failures {
	return failures{enis: map[string]bool{}, tables: map[int]bool{}, tables6: map[int]bool{}, addrs: map[netip.Prefix]bool{}}
}

// route records a failed write of r: an IPv6 route fails the table for
// IPv6 addresses only, an IPv4 route for the whole ENI.
func (f *failures) route(r Route) {
	if r.Dst.Addr().Is6() {
		f.tables6[r.Table] = true
	} else {
		f.tables[r.Table] = true
	}
}

func (f *failures) rule(r Rule) {
	for _, p := range []netip.Prefix{r.Src, r.Dst} {
		if p.IsValid() && p.Bits() > 0 {
			f.addrs[p] = true
		}
	}
}

// routed lists what the converge put in place: every ENI of d whose link
// and IPv4 table writes all succeeded, with the addresses none of whose
// rule writes (added or deleted, on any ENI) failed, and its IPv6
// addresses only if the table's IPv6 routes were written too.
func routed(d Desired, f failures) []RoutedENI {
	out := make([]RoutedENI, 0, len(d.ENIs))
	for _, w := range d.ENIs {
		if f.enis[w.ENI.ID] || f.tables[w.Table] {
			continue
		}
		r := RoutedENI{ID: w.ENI.ID, MAC: w.ENI.MAC, Number: w.ENI.Number, Table: w.Table}
		for _, ip := range w.IPs {
			if !f.addrs[netip.PrefixFrom(ip, ip.BitLen())] && !(ip.Is6() && f.tables6[w.Table]) {
				r.IPs = append(r.IPs, ip)
			}
		}
		for _, p := range w.Prefixes {
			if !f.addrs[p] && !(p.Addr().Is6() && f.tables6[w.Table]) {
				r.Prefixes = append(r.Prefixes, p)
			}
		}
		out = append(out, r)
	}
	return out
}

// apply runs the plan in its order, counting each write in ops and
// recording in f what the failed ones touched.
func (c *Converger) apply(ctx context.Context, p Plan, ops Ops, f *failures) error {
	var errs []error
	do := func(op, object string, tolerated error, fn func() error) bool {
		if ctx.Err() != nil {
			return false
		}
		ops[op]++
		if err := fn(); err != nil && (tolerated == nil || !errors.Is(err, tolerated)) {
			errs = append(errs, &OpError{Op: op, Object: object, Err: err})
			return false
		}
		return true
	}
	for _, l := range p.Links {
		obj := fmt.Sprintf("link %s (ENI %s)", l.Link.Name, l.ENI)
		ok := true
		if l.MTU != 0 {
			ok = do(OpSetMTU, obj, nil, func() error { return c.host.SetLinkMTU(l.Link, l.MTU) }) && ok
		}
		if l.Up {
			ok = do(OpSetUp, obj, nil, func() error { return c.host.SetLinkUp(l.Link) }) && ok
		}
		if l.RPFilter >= 0 {
			ok = do(OpSetRPFilter, obj, nil, func() error { return c.host.SetRPFilter(l.Link, l.RPFilter) }) && ok
		}
		if !ok {
			f.enis[l.ENI] = true
		}
	}
	for _, r := range p.ReplaceRoutes {
		if !do(OpReplaceRoute, r.String(), nil, func() error { return c.host.ReplaceRoute(r) }) {
			f.route(r)
		}
	}
	for _, r := range p.AddRules {
		if !do(OpAddRule, r.String(), ErrExist, func() error { return c.host.AddRule(r) }) {
			f.rule(r)
		}
	}
	if p.Connmark != nil {
		do(OpSetConnmark, p.Connmark.Want.String(), ErrNotFound, func() error { return c.host.SetConnmark(p.Connmark.Want) })
	}
	for _, r := range p.DelRules {
		if !do(OpDelRule, r.String(), ErrNotFound, func() error { return c.host.DelRule(r) }) {
			f.rule(r)
		}
	}
	for _, r := range p.DelRoutes {
		if !do(OpDelRoute, r.String(), ErrNotFound, func() error { return c.host.DelRoute(r) }) {
			f.route(r)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
