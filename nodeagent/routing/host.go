package routing

// Host is the kernel as the Converger needs it: one netlink request per
// method. Implementations must return every IPv4 and IPv6 rule and every
// IPv4 and IPv6 route of every table (ownership is decided here, not by the Host), and must
// treat "already exists" on AddRule and "not found" on a delete as errors
// the Converger can recognise with errors.Is(err, ErrExist) and
// errors.Is(err, ErrNotFound).
type Host interface {
	// Links lists the links with their MTU and state; RPFilter is left -1.
	Links() ([]Link, error)
	// RPFilter reads net.ipv4.conf.<name>.rp_filter of the named links
	// (and of "all" when asked), in
	// one visit to the namespace; a link whose value cannot be read is
	// absent from the map.
	RPFilter(names []string) (map[string]int, error)
	// SetLinkMTU sets the MTU of the link.
	SetLinkMTU(link Link, mtu int) error
	// SetLinkUp brings the link up.
	SetLinkUp(link Link) error
	// SetRPFilter writes net.ipv4.conf.<link>.rp_filter.
	SetRPFilter(link Link, value int) error

	// Rules lists the IPv4 and IPv6 policy rules.
	Rules() ([]Rule, error)
	// AddRule adds a rule; ErrExist if an identical one is there.
	AddRule(Rule) error
	// DelRule deletes one rule matching r; ErrNotFound if none does.
	DelRule(Rule) error

	// Routes lists the IPv4 and IPv6 routes of all tables.
	Routes() ([]Route, error)
	// ReplaceRoute creates the route or replaces the one with its table,
	// destination and metric.
	ReplaceRoute(Route) error
	// DelRoute deletes the route; ErrNotFound if it is not there.
	DelRoute(Route) error

	// Connmark reads enipam's connmark table: nil if there is none, an
	// empty Connmark if it is there but not as SetConnmark writes it.
	Connmark() (*Connmark, error)
	// SetConnmark replaces enipam's connmark table with c in one
	// transaction, or deletes it when c is nil (ErrNotFound if absent).
	SetConnmark(c *Connmark) error
}
