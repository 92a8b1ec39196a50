package faultproxy

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"time"
)

// Action is what a rule does to a request it fires on.
type Action int

const (
	// Fail answers Rule.Status (500 by default) with a Kubernetes Status
	// body, without forwarding: the apiserver never sees the request.
	Fail Action = iota
	// Drop forwards the request and lets the apiserver apply it, then
	// keeps the answer from the client: the connection is reset (Status
	// 0) or Rule.Status is answered instead. It reads the whole answer
	// first, so it suits writes, not watches.
	Drop
	// Cut cuts the client off for Rule.Duration, starting with this
	// request, which is not forwarded (see Proxy.Cut).
	Cut
)

func (a Action) String() string {
	switch a {
	case Fail:
		return "fail"
	case Drop:
		return "drop"
	case Cut:
		return "cut"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule picks requests and says what to do with them. Every set matcher
// must match; an empty one matches anything, except Subresource.
type Rule struct {
	// Verbs the rule applies to (get, list, watch, create, update, patch,
	// delete, deletecollection); empty means all.
	Verbs []string
	// Resource, Namespace and Name are path.Match patterns
	// ("ciliumnodes", "node-*").
	Resource, Namespace, Name string
	// Subresource: "" matches requests on the object itself only,
	// "status" its status, "*" both and any other.
	Subresource string
	// BodyContains matches requests whose body holds this text, e.g. a
	// status patch that carries "released".
	BodyContains string

	// After lets that many matching requests through before the rule
	// fires: After 2 and Times 1 fire on the third match only.
	After int
	// Times bounds how often the rule fires; 0 means no bound.
	Times int
	// Rate is the chance that a matching request past After fires the
	// rule, drawn from the proxy's seeded generator; 0 means always.
	Rate float64

	Action Action
	// Status is the HTTP status of Fail (default 500) and of Drop (0
	// resets the connection instead).
	Status int
	// Duration of a Cut.
	Duration time.Duration
}

// Validate rejects rules that cannot fire as meant.
func (r Rule) Validate() error {
	for _, p := range []string{r.Resource, r.Namespace, r.Name} {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("pattern %q, %w", p, err)
		}
	}
	switch {
	case r.After < 0 || r.Times < 0:
		return fmt.Errorf("after and times must not be negative")
	case r.Rate < 0 || r.Rate > 1:
		return fmt.Errorf("rate %v outside [0, 1]", r.Rate)
	case r.Action == Cut && r.Duration <= 0:
		return fmt.Errorf("a cut needs a positive duration")
	case r.Status != 0 && (r.Status < 400 || r.Status > 599):
		return fmt.Errorf("status %d is not an error", r.Status)
	case r.Action < Fail || r.Action > Cut:
		return fmt.Errorf("unknown action %v", r.Action)
	}
	return nil
}

// matches reports whether req is one of the rule's requests.
func (r Rule) matches(req Request, body []byte) bool {
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, req.Verb) {
		return false
	}
	for _, m := range [][2]string{{r.Resource, req.Resource}, {r.Namespace, req.Namespace}, {r.Name, req.Name}} {
		if m[0] == "" {
			continue
		}
		if ok, _ := path.Match(m[0], m[1]); !ok {
			return false
		}
	}
	if r.Subresource != "*" && r.Subresource != req.Subresource {
		return false
	}
	return r.BodyContains == "" || bytes.Contains(body, []byte(r.BodyContains))
}

// rule is a Rule in force, with its counts.
type rule struct {
	Rule
	matched, fired int
	removed        bool
}

// Handle is a rule in force: its counts, and the way to end it.
type Handle struct {
	p *Proxy
	r *rule
}

// Matched is how many requests matched the rule so far.
func (h *Handle) Matched() int {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.r.matched
}

// Fired is how many requests the rule acted on so far.
func (h *Handle) Fired() int {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.r.fired
}

// Remove ends the rule; requests under way are not affected.
func (h *Handle) Remove() {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	h.r.removed = true
	h.p.rules = slices.DeleteFunc(h.p.rules, func(r *rule) bool { return r == h.r })
}
