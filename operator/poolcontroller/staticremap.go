package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
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
//  3. The operator trusts the address on that ENI (decideLandings, then
//     inventory.RecordLanded) only on a report for generation G or later that lists it Landed,
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

// landing is a remap the node's agent confirmed that the decision
// trusts: ip on the node's ENI eni alone.
type landing struct {
	ip  netip.Addr
	eni string
}

// readRemapMoves reads where the inventory has each address the
// NodeRouting's spec.remapQueries lists moving ("": no move under way),
// when the agent has answered: what its answers are decided on besides
// the NodeRouting and the memory (decideLandings). Nil: no answer.
func (s *nodeSync) readRemapMoves() map[netip.Addr]string {
	if s.routing == nil || s.routing.Status.Remaps == nil || len(s.routing.Spec.RemapQueries) == 0 {
		return nil
	}
	moves := make(map[netip.Addr]string, len(s.routing.Spec.RemapQueries))
	for _, q := range s.routing.Spec.RemapQueries {
		if ip, err := netip.ParseAddr(q.Address); err == nil {
			moves[ip] = s.r.inv.MovingTo(ip)
		}
	}
	return moves
}

// decideLandings decides what the node's agent answered this process's
// remap queries (step 3), from the facts alone: an address answered
// Missing is remembered so (memory.remapsAsked); one answered Landed,
// for a query this process made, at the generation it made it or later,
// on an ENI EC2 shows on the node's instance, and not reassigned
// elsewhere since (remapMoves: the answer would be about an earlier
// call), is trusted on that ENI. The facts then show it so, as the
// inventory will once the reconcile records the landings (take): the
// snapshots have it on that ENI alone, and it is neither moving nor
// untrusted any more (applyLandings). It returns the landings trusted.
func decideLandings(f *facts) []landing {
	if f.routing == nil || f.routing.Status.Remaps == nil {
		return nil
	}
	report := f.routing.Status.Remaps
	var landed []landing
	for _, q := range f.routing.Spec.RemapQueries {
		ask, ok := f.mem.remapsAsked[q.Address]
		ip, err := netip.ParseAddr(q.Address)
		if !ok || err != nil || ask.eni != q.ENI {
			continue
		}
		if report.RemapMissing(q.Address, ask.generation) {
			ask.missing = true
			f.mem.remapsAsked[q.Address] = ask
			continue
		}
		if !report.RemapLanded(q.Address, ask.generation) || !onInstance(&f.snap, q.ENI, f.instanceID) {
			continue
		}
		if to := f.remapMoves[ip]; to != "" && to != q.ENI {
			continue
		}
		landed = append(landed, landing{ip: ip, eni: q.ENI})
	}
	if len(landed) > 0 {
		applyLandings(f, landed)
	}
	return landed
}

// onInstance reports whether the snapshot shows the ENI on the instance.
func onInstance(snap *snapshot.Node, eniID, instanceID string) bool {
	return slices.ContainsFunc(snap.ENIs, func(e cloud.ENI) bool { return e.ID == eniID && e.InstanceID == instanceID })
}

// applyLandings makes the facts show the landings as the inventory does
// once it recorded them (inventory.RecordLanded): each address on its
// ENI alone in the snapshots (decide's own), and out of the moves and
// the untrusted addresses (new maps: the read's are left as they were).
func applyLandings(f *facts, landed []landing) {
	moving := maps.Clone(f.moving)
	var untrusted map[netip.Addr]bool
	if f.poolIn != nil {
		untrusted = maps.Clone(f.poolIn.untrusted)
	}
	for _, l := range landed {
		landOn(&f.snap, l)
		if c := &f.consolidationSnap; c.taken && c.err == nil {
			landOn(&c.snap, l)
		}
		delete(moving, l.ip)
		delete(untrusted, l.ip)
	}
	f.moving = moving
	if f.poolIn != nil {
		in := *f.poolIn
		in.untrusted = untrusted
		f.poolIn = &in
	}
}

// landOn puts l's address on its ENI in snap, and takes it off the
// others.
func landOn(snap *snapshot.Node, l landing) {
	for i := range snap.ENIs {
		e := &snap.ENIs[i]
		has := slices.Contains(e.IPs, l.ip)
		switch {
		case e.ID == l.eni && !has:
			e.IPs = append(e.IPs, l.ip)
		case e.ID != l.eni && has:
			e.IPs = slices.DeleteFunc(e.IPs, func(a netip.Addr) bool { return a == l.ip })
		}
	}
}

// recordLanded records in the inventory the landings the decision
// trusted (decideLandings); it reports whether the inventory refused
// one: the address was reassigned elsewhere since the read.
func (x *executor) recordLanded(landed []landing) (refused bool) {
	for _, l := range landed {
		if !x.r.inv.RecordLanded(l.ip, l.eni) {
			refused = true
		}
	}
	return refused
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
	ask, ok := in.remapsAsked[ip.String()]
	return !ok || !ask.missing || ask.eni != eniID
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
