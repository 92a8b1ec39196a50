package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
)

// The remap confirmation. A claimed address moving onto this node is
// reassigned in EC2 (AssignPrivateIpAddresses with AllowReassignment),
// which remaps it asynchronously: until the remap lands the address is
// still on the old ENI, and a pod given it here would have no traffic.
// So the address is not trusted on its new ENI (inventory.Trusted), and
// thus neither pooled nor stamped here, until EC2 shows it there. AWS
// documents one confirmation of a remap: "check
// network/interfaces/macs/mac/local-ipv4s in the instance metadata to
// confirm that the remapping is complete". Describes confirm it too, but
// they lag EC2's changes and the operator looks only every few seconds;
// the node's enipam-agent reads its own instance's metadata at once:
//
//  1. After the reassignment call succeeded, the operator lists the
//     address with its new ENI and that ENI's MAC in the NodeRouting's
//     spec.remapQueries, and remembers the generation G its write made
//     (memory.remapsAsked).
//  2. The agent, having read a spec of generation G or later, reads the
//     metadata's local-ipv4s of that MAC and reports the address Landed
//     if listed there, Missing if not (status.remaps, for the generation
//     it read), and looks again soon while any is Missing.
//  3. The operator trusts the address on that ENI (inventory.RecordLanded)
//     only on a report for generation G or later that lists it Landed,
//     for a query this process made, on an ENI EC2 shows on the node's
//     instance. The pool then takes it, stamped, once the agent routed it
//     (it routes the ENI's addresses from status.eni.enis, which lists
//     the address from the reassignment on).
//
// Why it is safe. The metadata of an instance lists what EC2 has remapped
// onto its ENIs; the answer was read after the query, which was written
// after the call, so it is the call's outcome and never an earlier state.
// Nothing but this operator moves a claimed address afterwards, and it
// moves it again only by a new reassignment, which asks anew and voids
// the earlier query's answer: a claim asked back and forth between two
// nodes by kube-scheduler's bind retries has the address reassigned onto
// one node, then onto the other before the first remap was confirmed;
// the first node's agent then still reports it Landed, truly, for a
// moment, and RecordLanded refuses that word while the later remap is
// under way (the address is trusted on no ENI until it lands). Describes
// still lagging the remap do not undo it (RecordLanded counts as a local
// change for the inventory's consistency grace). An operator restarted
// meanwhile has no memory of the query: it takes it out of the spec, and
// waits for describes as before; a stamp its describes do not show on
// the node yet is checked with the agent before anything is reassigned
// (remapUnsure). A report only the node's own agent can
// write (the chart's admission policy) is trusted as its routing report
// is: an agent that lied could as well route nothing.
//
// Where describes remain: an agent that does not answer (stopped, an
// older version, no metadata service), and addresses reassigned by an
// earlier process.

// remapAsk is one address this process listed in spec.remapQueries.
// missing: the agent answered that the metadata does not list it there.
type remapAsk struct {
	eni        string
	generation int64
	missing    bool
}

// confirmRemaps trusts, on their new ENIs, the reassigned addresses the
// node's agent found in the instance metadata (step 3), and reports
// whether it trusted any.
func (s *nodeSync) confirmRemaps() bool {
	if s.routing == nil || s.routing.Status.Remaps == nil {
		return false
	}
	landed := false
	for _, q := range s.routing.Spec.RemapQueries {
		ask, ok := s.mem.remapsAsked[q.Address]
		ip, err := netip.ParseAddr(q.Address)
		if !ok || err != nil || ask.eni != q.ENI {
			continue
		}
		if s.routing.Status.Remaps.RemapMissing(q.Address, ask.generation) {
			ask.missing = true
			s.mem.remapsAsked[q.Address] = ask
			continue
		}
		if !s.routing.Status.Remaps.RemapLanded(q.Address, ask.generation) {
			continue
		}
		if !slices.ContainsFunc(s.snap.ENIs, func(e cloud.ENI) bool { return e.ID == q.ENI && e.InstanceID == s.instanceID }) {
			continue
		}
		if !s.r.inv.RecordLanded(ip, q.ENI) {
			// Reassigned elsewhere since (the claim asked for another
			// node meanwhile): this answer is about an earlier call.
			continue
		}
		s.r.log.Debug("remap confirmed by enipam-agent", "node", s.cn.Name, "eni", q.ENI, "ip", ip, "generation", s.routing.Status.Remaps.ObservedGeneration)
		landed = true
	}
	return landed
}

// remapUnsure reports whether a stamped address the node's ENIs do not
// hold in the inventory's view may still be on the ENI its entry names:
// describes are not trusted yet (an operator restarted moments after a
// stamp made on the agent's word sees describes that lag the remap), and
// the node's agent has not answered that the metadata does not list it
// there. Such an address is asked about rather than placed again.
func (in *staticInputs) remapUnsure(ip netip.Addr, eniID string) bool {
	if eniID == "" || in.describesTrusted {
		return false
	}
	missingOn, ok := in.remapsMissing[ip.String()]
	return !ok || missingOn != eniID
}

// askRemaps makes the desired NodeRouting's spec.remapQueries (written by
// writeRouting) the addresses this
// process reassigned onto the node's ENIs that are not confirmed there
// yet (step 1), and the stamped addresses to verify (remapUnsure). A
// query the spec lists that this process did not make (an earlier
// process did, or its write was lost) is taken out.
func (s *deciding) askRemaps(verify []placement) {
	if s.routing == nil {
		return
	}
	macs := map[string]string{}
	for _, e := range s.snap.ENIs {
		macs[e.ID] = e.MAC
	}
	moving := maps.Clone(s.moving)
	for _, p := range verify {
		if _, ok := moving[p.ip]; !ok {
			if moving == nil {
				moving = map[netip.Addr]string{}
			}
			moving[p.ip] = p.eniID
		}
	}
	for ip, ask := range s.mem.remapsAsked {
		if a, err := netip.ParseAddr(ip); err != nil || moving[a] != ask.eni {
			delete(s.mem.remapsAsked, ip)
		}
	}
	want := make([]enipamv1alpha1.RemapQuery, 0, len(moving))
	for ip, eni := range moving {
		if macs[eni] != "" {
			want = append(want, enipamv1alpha1.RemapQuery{Address: ip.String(), ENI: eni, MAC: macs[eni]})
		}
	}
	slices.SortFunc(want, func(a, b enipamv1alpha1.RemapQuery) int { return strings.Compare(a.Address, b.Address) })
	have := s.routing.Spec.RemapQueries
	var next []enipamv1alpha1.RemapQuery
	again := false
	for _, q := range want {
		a, mine := s.mem.remapsAsked[q.Address]
		if slices.Contains(have, q) && (!mine || a.eni != q.ENI) {
			// Listed by an earlier process (or a write of this one that
			// was lost): its answers may predate this process's call.
			// Taken out now, asked again at the next look.
			again = true
			continue
		}
		next = append(next, q)
	}
	if slices.Equal(next, have) {
		return
	}
	s.routing.Spec.RemapQueries = next
	if again || len(next) > 0 {
		s.requeueWithin(staticRecheck)
	}
	s.r.log.Debug("remap queries", "node", s.cn.Name, "queries", len(next))
}

// askedRemaps remembers, once the NodeRouting's spec listing the queries
// want was written with generation g, what this process asked: a query
// have listed already keeps the generation it was first asked at.
func (s *nodeSync) askedRemaps(have, want []enipamv1alpha1.RemapQuery, g int64) {
	asked := map[string]remapAsk{}
	for _, q := range want {
		if a, ok := s.mem.remapsAsked[q.Address]; ok && a.eni == q.ENI && slices.Contains(have, q) {
			asked[q.Address] = a
		} else {
			asked[q.Address] = remapAsk{eni: q.ENI, generation: g}
			s.mem.remapsLooked = s.r.now()
		}
	}
	s.mem.remapsAsked = asked
}
