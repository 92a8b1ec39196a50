package state

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// The operations below are the building blocks of the ENI actions, shared
// with scenario building and the admin API. They run under the State's lock
// and either succeed whole or change nothing.

// eniSpec is a new ENI: where, with which groups, description and tags,
// and its addresses (see fillENI).
type eniSpec struct {
	subnet      *subnet
	groupIDs    []string
	description string
	tags        []Tag
	// ips are explicit addresses, the primary first; without any, the
	// primary is a fresh address.
	ips         []netip.Addr
	secondaries int
	prefixes    []netip.Prefix
	prefixCount int
	// ipv6 are the IPv6 addresses and /80 prefixes.
	ipv6 ipv6Request
	// interfaceType is EC2's interfaceType; empty means "interface". An
	// efa-only ENI has no address at all.
	interfaceType string
}

// createENI makes an ENI with its addresses, all or nothing. The ENI gets
// its ID and MAC only once its addresses are in, so a refused create
// consumes no ID and names none in its error.
func (s *State) createENI(sp eniSpec) (*eni, error) {
	groups, err := s.groupsByID(sp.subnet.vpc, sp.groupIDs)
	if err != nil {
		return nil, err
	}
	e := &eni{
		subnet: sp.subnet, description: sp.description, interfaceType: cmp.Or(sp.interfaceType, typeInterface),
		groups: groups, created: s.now(), sourceDestCheck: true,
	}
	if e.interfaceType == typeEFAOnly {
		if len(sp.ips)+sp.secondaries+len(sp.prefixes)+sp.prefixCount > 0 || !sp.ipv6.empty() {
			return nil, errEFAOnlyAddresses("the new network interface")
		}
	} else {
		// IPv6 first: taking it back from a refused create leaves no
		// cooldown behind, as the IPv4 addresses' release would.
		if _, _, err := s.addIPv6(e, sp.ipv6); err != nil {
			return nil, err
		}
		if err := s.fillENI(e, sp.ips, sp.secondaries, sp.prefixes, sp.prefixCount); err != nil {
			s.releaseIPv6(e)
			return nil, err
		}
	}
	e.meta = s.newMeta("eni", "")
	e.tags = sp.tags
	e.mac = s.ids.newMAC()
	s.enis.add(e)
	sp.subnet.enis[e] = struct{}{}
	return e, nil
}

// addressRequest is what to add to an ENI: explicit addresses, a number of
// fresh ones, explicit /28 prefixes and a number of fresh prefixes.
type addressRequest struct {
	ips           []netip.Addr
	count         int
	prefixes      []netip.Prefix
	prefixCount   int
	allowReassign bool
	// reassignDelay is how long the addresses taken over from other
	// ENIs take to land on this one (see move); zero moves them at once.
	reassignDelay Range
	// inUseCode is the code for an explicit address held elsewhere.
	inUseCode string
}

// addAddresses adds what r asks for to e, all or nothing, and returns the
// addresses and prefixes added (moves still on their way included). An ENI without addresses gets its primary
// address first: the first explicit one, else the first fresh one.
func (s *State) addAddresses(e *eni, r addressRequest) ([]netip.Addr, []netip.Prefix, error) {
	if e.interfaceType == typeEFAOnly {
		return nil, nil, errEFAOnlyAddresses(cmp.Or(e.id, "the new network interface"))
	}
	sp := e.subnet.space
	want := len(r.ips) + r.count + len(r.prefixes) + r.prefixCount
	for _, ip := range r.ips {
		if off, ok := sp.offset(ip); ok {
			if m := s.moves[addrKey{space: sp, off: off}]; m != nil && m.to == e {
				want-- // on its way here already: its slot is taken
			}
		}
	}
	if e.slotsUsed()+want > s.ipLimit(e) {
		return nil, nil, Errorf(CodePrivateIPLimitExceeded, "Number of private addresses will exceed limit.")
	}
	var undo []func()
	rollback := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	var moved []uint32 // explicit addresses to take over from other ENIs
	var fresh, queued []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, ip := range r.ips {
		off, ok := sp.offset(ip)
		switch {
		case !ok:
			rollback()
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s does not fall within the subnet's address range (%s)", ip, e.subnet.cidr)
		case sp.reserved(off):
			rollback()
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s is in subnet's reserved address range", ip)
		case seen[ip]:
			rollback()
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s is specified more than once", ip)
		}
		seen[ip] = true
		if !sp.taken(off) {
			sp.take(off, e)
			undo = append(undo, func() { sp.release(off) })
			fresh = append(fresh, ip)
			continue
		}
		owner := sp.owner(off)
		switch {
		case owner == e:
			rollback()
			return nil, nil, Errorf(CodeInvalidParameterValue, "Address %s is already assigned to %s", ip, e.id)
		case owner == nil || !r.allowReassign || owner.ips[0] == ip || !slices.Contains(owner.ips, ip):
			// Held by a prefix, by another ENI's primary address, or
			// reassignment was not allowed.
			rollback()
			return nil, nil, Errorf(r.inUseCode, "Address %s is in use.", ip)
		}
		moved = append(moved, off)
	}
	var newPrefixes []netip.Prefix
	for _, p := range r.prefixes {
		off, ok := sp.offset(p.Addr())
		if !ok || p.Bits() != prefixLen || !sp.prefixFree(off) {
			rollback()
			if !ok || p.Bits() != prefixLen || off%prefixSize != 0 {
				return nil, nil, Errorf(CodeInvalidParameterValue, "Prefix %s is not an aligned /28 of subnet %s", p, e.subnet.cidr)
			}
			return nil, nil, Errorf(CodeInvalidParameterValue, "Prefix %s overlaps addresses in use", p)
		}
		sp.takePrefix(off, e)
		undo = append(undo, func() { sp.releasePrefix(off) })
		newPrefixes = append(newPrefixes, p)
	}
	if r.count > 0 {
		offs, ok := sp.allocate(r.count, e)
		if !ok {
			rollback()
			return nil, nil, s.subnetFullErr(noAddresses)
		}
		undo = append(undo, func() {
			for _, off := range offs {
				sp.release(off)
			}
		})
		for _, off := range offs {
			fresh = append(fresh, sp.addr(off))
		}
	}
	for i := range r.prefixCount {
		off, ok := sp.allocatePrefix(e)
		if !ok {
			// Short of addresses, or they are there but scattered.
			cause := fragmented
			if sp.available() < (r.prefixCount-i)*prefixSize {
				cause = noRoomForPrefixes
			}
			rollback()
			return nil, nil, s.subnetFullErr(cause)
		}
		undo = append(undo, func() { sp.releasePrefix(off) })
		newPrefixes = append(newPrefixes, netip.PrefixFrom(sp.addr(off), prefixLen))
	}
	// One delay per call: EC2 remaps the addresses of one request
	// together. Drawn only for a move, so that calls without one leave
	// the other delays' draws alone.
	var delay time.Duration
	if len(moved) > 0 {
		delay = r.reassignDelay.Sample(s.rng)
	}
	for _, off := range moved {
		ip := sp.addr(off)
		if delay > 0 {
			s.startMove(addrKey{space: sp, off: off}, e, delay)
			queued = append(queued, ip)
			continue
		}
		s.takeOver(sp.owner(off), e, off)
		fresh = append(fresh, ip)
	}
	// Explicit addresses keep the order they were asked in, ahead of fresh
	// ones, so the primary is the first explicit address.
	e.ips = append(e.ips, fresh...)
	e.prefixes = append(e.prefixes, newPrefixes...)
	return append(fresh, queued...), newPrefixes, nil
}

// errEFAOnlyAddresses refuses addresses on an EFA-only interface, which
// EC2 documents as holding none; the code is not documented (see doc.go).
func errEFAOnlyAddresses(what string) *APIError {
	return Errorf(CodeInvalidParameterCombo, "An EFA-only network interface (%s) cannot have IP addresses.", what)
}

// removeAddresses takes secondary addresses and prefixes off e, all or
// nothing, returning them to the subnet (after a cooldown, see
// releaseAddr). Elastic IPs associated with them are disassociated.
func (s *State) removeAddresses(e *eni, ips []netip.Addr, prefixes []netip.Prefix) error {
	for _, ip := range ips {
		i := slices.Index(e.ips, ip)
		if i < 0 {
			return Errorf(CodeInvalidParameterValue, "Some of the specified addresses are not assigned to interface %s", e.id)
		}
		if i == 0 {
			return Errorf(CodeInvalidParameterValue, "The primary IP address %s of interface %s cannot be unassigned", ip, e.id)
		}
	}
	for _, p := range prefixes {
		if !slices.Contains(e.prefixes, p) {
			return Errorf(CodeInvalidParameterValue, "Some of the specified prefixes are not assigned to interface %s", e.id)
		}
	}
	sp := e.subnet.space
	for _, ip := range ips {
		off, _ := sp.offset(ip)
		s.releaseAddr(sp, off)
		for _, eip := range e.eips {
			if eip.privateIP == ip {
				s.disassociate(eip)
			}
		}
	}
	for _, p := range prefixes {
		off, _ := sp.offset(p.Addr())
		s.releasePrefix(sp, off)
	}
	e.ips = slices.DeleteFunc(e.ips, func(a netip.Addr) bool { return slices.Contains(ips, a) })
	e.prefixes = slices.DeleteFunc(e.prefixes, func(p netip.Prefix) bool { return slices.Contains(prefixes, p) })
	return nil
}

// fillENI gives a new ENI its addresses: explicit ones (the first is the
// primary), then count secondaries, plus prefixes. Without an explicit
// address the primary is a fresh one.
func (s *State) fillENI(e *eni, ips []netip.Addr, count int, prefixes []netip.Prefix, prefixCount int) error {
	if len(ips) == 0 {
		count++
	}
	_, _, err := s.addAddresses(e, addressRequest{ips: ips, count: count, prefixes: prefixes, prefixCount: prefixCount, inUseCode: "InvalidIPAddress.InUse"})
	return err
}

// deleteENI releases everything e holds and forgets it.
func (s *State) deleteENI(e *eni) {
	sp := e.subnet.space
	for _, ip := range e.ips {
		if off, ok := sp.offset(ip); ok {
			s.releaseAddr(sp, off)
		}
	}
	for _, p := range e.prefixes {
		off, _ := sp.offset(p.Addr())
		s.releasePrefix(sp, off)
	}
	s.releaseIPv6(e)
	for len(e.eips) > 0 {
		s.disassociate(e.eips[0])
	}
	if a := e.attachment; a != nil {
		if a.instance.slots[a.slot()] == e {
			delete(a.instance.slots, a.slot())
		}
		delete(s.attachments, a.id)
		e.attachment = nil
	}
	delete(e.subnet.enis, e)
	delete(s.laggingENIs, e)
	e.hist = nil
	s.enis.remove(e)
}

// attach starts attaching e to in at slot at. launch is an interface the
// instance boots with (or a scenario's ENI "already attached"): attached
// at once, and the only way an EFA joins an instance, since EC2 attaches
// EFAs only to stopped instances or at launch and ec2sim's instances run.
func (s *State) attach(e *eni, in *instance, at slot, launch bool) (*attachment, error) {
	typ := in.typ
	switch {
	case !in.takesAttachments():
		return nil, Errorf(CodeIncorrectInstanceState, "The instance '%s' is not in a state from which it can be attached to a network interface (%s).", in.id, in.state)
	case e.attachment != nil:
		return nil, Errorf(CodeENIInUse, "Interface: [%s] in use.", e.id)
	case e.subnet.vpc != in.subnet.vpc:
		return nil, Errorf(CodeInvalidParameterCombo, "The network interface %s and instance %s are in different VPCs.", e.id, in.id)
	case e.subnet.zone != in.subnet.zone:
		return nil, Errorf(CodeInvalidParameterCombo, "You may not attach a network interface to an instance if they are not in the same availability zone")
	case at.card < 0 || at.card >= typ.Cards():
		// EC2's answer for a card the type lacks is not documented; see doc.go.
		return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%d' for NetworkCardIndex: %s has %d network card(s) (0-%d).", at.card, typ.Name, typ.Cards(), typ.Cards()-1)
	case at.device < 0 || at.device > 127:
		return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%d' for deviceIndex.", at.device)
	case in.slots[at] != nil:
		return nil, Errorf(CodeInvalidParameterValue, "Instance '%s' already has an interface attached at device index '%d'.", in.id, at.device)
	case in.onCard(at.card) >= typ.MaxENIs:
		return nil, Errorf(CodeAttachmentLimitExceeded, "Interface count %d exceeds the limit for %s", in.onCard(at.card)+1, typ.Name)
	case at.device >= typ.MaxENIs:
		// The card has a free slot, but not at this index. EC2's answer
		// is not documented; see doc.go.
		return nil, Errorf(CodeInvalidParameterValue, "Invalid value '%d' for deviceIndex: %s has %d network interface slots per card (0-%d).",
			at.device, typ.Name, typ.MaxENIs, typ.MaxENIs-1)
	case e.slotsUsed() > typ.IPv4PerENI:
		return nil, Errorf(CodePrivateIPLimitExceeded, "Network interface %s has %d private addresses, more than %s allows (%d).", e.id, e.slotsUsed(), typ.Name, typ.IPv4PerENI)
	case e.ipv6SlotsUsed() > typ.IPv6PerENI:
		// EC2's answer is not documented; see doc.go.
		return nil, Errorf(CodePrivateIPLimitExceeded, "Network interface %s has %d IPv6 addresses and prefixes, more than %s allows (%d).", e.id, e.ipv6SlotsUsed(), typ.Name, typ.IPv6PerENI)
	}
	if err := checkEFA(e, in, at, launch); err != nil {
		return nil, err
	}
	a := &attachment{id: s.ids.newID("eni-attach"), eni: e, instance: in, networkCard: at.card, deviceIndex: at.device, status: attaching, since: s.now()}
	e.attachment = a
	in.slots[at] = e
	s.attachments[a.id] = a
	if launch {
		a.status = attached
	} else {
		s.schedule(a, s.timing.AttachDelay)
	}
	return a, nil
}

// checkEFA holds EC2's documented EFA rules: an EFA attaches only at
// launch (or to a stopped instance), to a type that has EFA, within its
// EfaInfo.MaximumEfaInterfaces; an EFA-only interface is never the
// primary. The codes are not documented; see doc.go.
func checkEFA(e *eni, in *instance, at slot, launch bool) error {
	switch {
	case !e.efa():
		return nil
	case at == primarySlot && e.interfaceType == typeEFAOnly:
		return Errorf(CodeInvalidParameterCombo, "An EFA-only network interface cannot be the primary network interface (network card 0, device index 0).")
	case in.typ.MaxEFA == 0:
		return Errorf(CodeInvalidParameterCombo, "Instance type %s does not support EFA interfaces.", in.typ.Name)
	case !launch && in.state != instanceStopped:
		return Errorf(CodeIncorrectInstanceState, "EFA interface %s can be attached to instance '%s' only while it is stopped or at launch.", e.id, in.id)
	case in.efas() >= in.typ.MaxEFA:
		return Errorf(CodeAttachmentLimitExceeded, "EFA interface count %d exceeds the limit for %s (%d).", in.efas()+1, in.typ.Name, in.typ.MaxEFA)
	}
	return nil
}

// detach starts detaching a.
func (s *State) detach(a *attachment) error {
	switch {
	case a.slot() == primarySlot:
		return Errorf(CodeOperationNotPermitted, "The network interface at device index 0 and networkCard index 0 cannot be detached.")
	case a.eni.efa() && a.instance.state != instanceStopped:
		// EC2 detaches EFAs only from stopped instances; its code for a
		// running one is not documented (see doc.go).
		return Errorf(CodeIncorrectInstanceState, "EFA interface %s can be detached from instance '%s' only while it is stopped.", a.eni.id, a.instance.id)
	case a.status == attaching:
		// EC2 refuses to detach what is still attaching; its wording is
		// not documented (see doc.go).
		return Errorf(CodeIncorrectState, "Attachment '%s' is still attaching and cannot be detached yet.", a.id)
	case a.status == detaching:
		return Errorf(CodeIncorrectState, "Attachment '%s' is already detaching.", a.id)
	}
	a.status = detaching
	s.schedule(a, s.timing.DetachDelay)
	return nil
}

// disassociate breaks an Elastic IP's association.
func (s *State) disassociate(addr *address) {
	if addr.eni != nil {
		addr.eni.eips = slices.DeleteFunc(addr.eni.eips, func(x *address) bool { return x == addr })
	}
	delete(s.assocs, addr.associationID)
	addr.eni, addr.associationID, addr.privateIP = nil, "", netip.Addr{}
}
