// Package routingtest provides an in-memory kernel for tests of code that
// drives a routing.Host.
package routingtest

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/enipam/enipam/nodeagent/routing"
)

// Host is an in-memory routing.Host with the kernel's semantics for what
// enipam uses: an identical rule cannot be added twice, a route is
// replaced by table, destination and metric, and a delete of something
// absent fails with routing.ErrNotFound. It is safe for concurrent use.
type Host struct {
	mu     sync.Mutex
	links  []routing.Link
	rules  []routing.Rule
	routes []routing.Route
	// connmark is the connmark table, nil when there is none.
	connmark *routing.Connmark
	// rpFilterAll is net.ipv4.conf.all.rp_filter.
	rpFilterAll int
	// rpFilterWas records, per link index, the rp_filter a link had
	// before its first SetRPFilter, as kernel.Kernel does in its state
	// directory.
	rpFilterWas map[int]rpFilterRecord
	// Fail, when set, is consulted before each write; a non-nil error is
	// returned instead of applying it. op is a routing.Op* name.
	Fail func(op string, object any) error
}

var (
	_ routing.Host             = (*Host)(nil)
	_ routing.RPFilterRestorer = (*Host)(nil)
)

type rpFilterRecord struct {
	name     string
	old, set int
}

// AddLink adds a link as the kernel would show it.
func (h *Host) AddLink(l routing.Link) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.links = append(h.links, l)
}

// RemoveLink deletes the link and, like the kernel, every route through it.
func (h *Host) RemoveLink(index int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.links = slices.DeleteFunc(h.links, func(l routing.Link) bool { return l.Index == index })
	h.routes = slices.DeleteFunc(h.routes, func(r routing.Route) bool { return r.LinkIndex == index })
}

// SetRules replaces every rule, for planting foreign or stale ones.
func (h *Host) SetRules(rs ...routing.Rule) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rules = slices.Clone(rs)
}

// SetRoutes replaces every route.
func (h *Host) SetRoutes(rs ...routing.Route) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.routes = slices.Clone(rs)
}

// Links implements routing.Host; like the kernel's, its links carry no
// rp_filter (-1).
func (h *Host) Links() ([]routing.Link, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.links)
	for i := range out {
		out[i].RPFilter = -1
	}
	return out, nil
}

// Link returns the link with the index as the fake holds it, rp_filter
// included.
func (h *Host) Link(index int) (routing.Link, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.links {
		if l.Index == index {
			return l, true
		}
	}
	return routing.Link{}, false
}

// ChangeRPFilter sets a link's rp_filter as an administrator would:
// behind enipam's back, unrecorded.
func (h *Host) ChangeRPFilter(index, v int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, err := h.link(routing.Link{Index: index}); err == nil {
		p.RPFilter = v
	}
}

// SetRPFilterAll sets net.ipv4.conf.all.rp_filter (0 until set).
func (h *Host) SetRPFilterAll(v int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rpFilterAll = v
}

// RPFilter implements routing.Host.
func (h *Host) RPFilter(names []string) (map[string]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]int{"all": h.rpFilterAll}
	for _, l := range h.links {
		m[l.Name] = l.RPFilter
	}
	return m, nil
}

// Rules implements routing.Host.
func (h *Host) Rules() ([]routing.Rule, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.rules), nil
}

// Routes implements routing.Host.
func (h *Host) Routes() ([]routing.Route, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.routes), nil
}

func (h *Host) fail(op string, obj any) error {
	if h.Fail == nil {
		return nil
	}
	return h.Fail(op, obj)
}

func (h *Host) link(l routing.Link) (*routing.Link, error) {
	for i := range h.links {
		if h.links[i].Index == l.Index {
			return &h.links[i], nil
		}
	}
	return nil, fmt.Errorf("link %d, %w", l.Index, routing.ErrNotFound)
}

// SetLinkMTU implements routing.Host.
func (h *Host) SetLinkMTU(l routing.Link, mtu int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpSetMTU, l); err != nil {
		return err
	}
	p, err := h.link(l)
	if err != nil {
		return err
	}
	p.MTU = mtu
	return nil
}

// SetLinkUp implements routing.Host.
func (h *Host) SetLinkUp(l routing.Link) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpSetUp, l); err != nil {
		return err
	}
	p, err := h.link(l)
	if err != nil {
		return err
	}
	p.Up = true
	return nil
}

// SetRPFilter implements routing.Host.
func (h *Host) SetRPFilter(l routing.Link, v int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpSetRPFilter, l); err != nil {
		return err
	}
	p, err := h.link(l)
	if err != nil {
		return err
	}
	if h.rpFilterWas == nil {
		h.rpFilterWas = map[int]rpFilterRecord{}
	}
	rec, ok := h.rpFilterWas[p.Index]
	if !ok || rec.name != p.Name {
		rec = rpFilterRecord{name: p.Name, old: p.RPFilter}
	}
	rec.set = v
	h.rpFilterWas[p.Index] = rec
	p.RPFilter = v
	return nil
}

// RestoreRPFilter implements routing.RPFilterRestorer: every link still
// holding the value SetRPFilter last wrote gets its value from before the
// first write back; every record is forgotten.
func (h *Host) RestoreRPFilter() ([]routing.RPFilterRestore, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []routing.RPFilterRestore
	for index, rec := range h.rpFilterWas {
		p, err := h.link(routing.Link{Index: index})
		if err != nil || p.Name != rec.name || p.RPFilter != rec.set {
			continue
		}
		if err := h.fail(routing.OpSetRPFilter, *p); err != nil {
			return out, err
		}
		p.RPFilter = rec.old
		out = append(out, routing.RPFilterRestore{Link: rec.name, From: rec.set, To: rec.old})
	}
	h.rpFilterWas = nil
	slices.SortFunc(out, func(a, b routing.RPFilterRestore) int { return strings.Compare(a.Link, b.Link) })
	return out, nil
}

// AddRule implements routing.Host.
func (h *Host) AddRule(r routing.Rule) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpAddRule, r); err != nil {
		return err
	}
	if slices.Contains(h.rules, r) {
		return fmt.Errorf("rule %v, %w", r, routing.ErrExist)
	}
	h.rules = append(h.rules, r)
	return nil
}

// DelRule implements routing.Host.
func (h *Host) DelRule(r routing.Rule) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpDelRule, r); err != nil {
		return err
	}
	i := slices.Index(h.rules, r)
	if i < 0 {
		return fmt.Errorf("rule %v, %w", r, routing.ErrNotFound)
	}
	h.rules = slices.Delete(h.rules, i, i+1)
	return nil
}

// ReplaceRoute implements routing.Host.
func (h *Host) ReplaceRoute(r routing.Route) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpReplaceRoute, r); err != nil {
		return err
	}
	for i, have := range h.routes {
		if have.Table == r.Table && have.Dst == r.Dst && have.Metric == r.Metric {
			h.routes[i] = r
			return nil
		}
	}
	h.routes = append(h.routes, r)
	return nil
}

// DelRoute implements routing.Host.
func (h *Host) DelRoute(r routing.Route) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpDelRoute, r); err != nil {
		return err
	}
	i := slices.Index(h.routes, r)
	if i < 0 {
		return fmt.Errorf("route %v, %w", r, routing.ErrNotFound)
	}
	h.routes = slices.Delete(h.routes, i, i+1)
	return nil
}

// Connmark implements routing.Host.
func (h *Host) Connmark() (*routing.Connmark, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.connmark == nil {
		return nil, nil
	}
	c := *h.connmark
	return &c, nil
}

// SetConnmark implements routing.Host.
func (h *Host) SetConnmark(c *routing.Connmark) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fail(routing.OpSetConnmark, c); err != nil {
		return err
	}
	if c == nil {
		if h.connmark == nil {
			return fmt.Errorf("connmark table, %w", routing.ErrNotFound)
		}
		h.connmark = nil
		return nil
	}
	cp := *c
	h.connmark = &cp
	return nil
}
