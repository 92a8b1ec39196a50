package poolcontroller

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
)

// attachCheckInterval is how soon a node with an ENI still attaching is
// looked at again.
const attachCheckInterval = time.Second

// readRouting reads the node's NodeRouting and the agent's report of
// what it has routed (s.routed): s.routing is the object the decision
// makes the desired one of (decideRouting), s.routingRead the base of
// its write (writeRouting); both nil when there is none. It writes
// nothing: the object is made, and an earlier CiliumNode's owner
// reference dropped, by the reconcile's one write of it, after the
// CiliumNode's. Where the cache has not yet seen this process's last
// apply, what is read is that apply's word (memory.routingApplied), so
// no apply ever sends back an older word; where the cache lacks the
// object that word stands for it, with no base: the write applies it
// again, making it should it be gone. routingCached is the generation
// the cache shows (trimApplied). The list to apply is decided from the
// snapshot (fill).
func (s *nodeSync) readRouting(ctx context.Context) error {
	nr := &enipamv1alpha1.NodeRouting{}
	err := s.r.client.Get(ctx, types.NamespacedName{Name: s.cn.Name}, nr)
	s.noSpecENIs = s.r.withoutSpecENIs()
	switch {
	case apierrors.IsNotFound(err):
		s.routingLooked = true
		if a := s.mem.routingApplied; a != nil {
			s.routing = &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: s.cn.Name, Generation: a.Generation,
				Finalizers: slices.Clone(a.Finalizers)}, Spec: *a.Spec.DeepCopy()}
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading NodeRouting %s, %w", s.cn.Name, err)
	}
	s.routingCached = nr.Generation
	if a := s.mem.routingApplied; a != nil && a.UID == nr.UID && a.Generation > nr.Generation {
		nr.Spec, nr.Generation, nr.Finalizers = *a.Spec.DeepCopy(), a.Generation, slices.Clone(a.Finalizers)
	}
	s.routingLooked = true
	s.routing, s.routingRead = nr, copyRouting(nr)
	s.routed = s.ownReport(nr)
	return nil
}

// decideRouting decides what the node's NodeRouting is to be, once the
// read looked it up: the policy's values for the agent (routingSpec)
// over the operator's word the decision goes on to set, and the
// CiliumNode as its one CiliumNode owner. One the read did not find is
// made here, to be created by the reconcile's write of it. A
// NodeRouting left by an earlier CiliumNode of the same name (a node
// deleted and registered again before the garbage collector ran) is
// taken over: with its old owner's UID the garbage collector would
// delete it from under the new node, its agent's report and the
// operator's word with it.
func (s *deciding) decideRouting() {
	if !s.routingLooked {
		return
	}
	want := routingSpec(s.instanceID, &s.cfg)
	if s.routing == nil {
		s.routing = &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: s.cn.Name}, Spec: want}
	}
	nr := s.routing
	nr.Spec = withOperatorWord(want, nr.Spec)
	if !ownedBy(nr, s.cn) || len(staleOwners(nr.OwnerReferences, nil, s.cn)) > 0 {
		nr.OwnerReferences = ownerRefs(nr.OwnerReferences, s.cn)
	}
}

// routingSpec is the NodeRouting's spec as the node's policy has it:
// the instance, and the values that decide which ENIs carry pod
// addresses.
func routingSpec(instanceID string, cfg *policy.Config) enipamv1alpha1.NodeRoutingSpec {
	return enipamv1alpha1.NodeRoutingSpec{
		InstanceID:           instanceID,
		FirstInterfaceIndex:  int32(cfg.FirstInterfaceIndex),
		ExcludeInterfaceTags: maps.Clone(cfg.ExcludeTags),
	}
}

// trimApplied drops the ENIs from the base of the node's next apply
// (memory.routingApplied) once the cache shows that apply, the
// NodeRouting read being at its generation or a later one
// (routingCached): the cache keeps spec.enis, so the base's copy of the
// list is then read by nothing but a NodeRouting made again should it
// be deleted, whose list fill decides anew from EC2's view. Every node
// keeps a base, and its ENIs were a second copy of every node's
// spec.enis. The next apply keeps them again. A decision on the memory
// alone: the read and the write leave the base as they found it.
func (s *deciding) trimApplied() {
	a, nr := s.mem.routingApplied, s.routingRead
	if a == nil || nr == nil || len(a.Spec.ENIs) == 0 || a.UID != nr.UID || a.Generation > s.routingCached {
		return
	}
	kept := *a
	kept.Spec.ENIs = nil
	s.mem.routingApplied = &kept
}

// writeRouting writes the NodeRouting as decided (decideRouting and the
// operator's word set on it since), once per reconcile, when it changed
// or the cache lacks it: an earlier CiliumNode's owner references
// dropped first (takeOverRouting), then one apply, which makes the
// object when there is none. A write that changes the queries carries
// an optimistic lock on the version read, so that the generation it
// makes is the one the agent's answers are matched against; only then
// does this process remember what it asked (staticfast.go,
// staticremap.go).
func (s *nodeSync) writeRouting(ctx context.Context) error {
	if s.routing == nil {
		return nil
	}
	orig := s.routingRead
	if orig == nil {
		orig = &enipamv1alpha1.NodeRouting{} // not in the cache: applied, whatever it holds
	} else if sameRoutingSpec(orig.Spec, s.routing.Spec) && sameJSON(orig.OwnerReferences, s.routing.OwnerReferences) {
		return nil
	}
	if stale := staleOwners(orig.OwnerReferences, s.routing.OwnerReferences, s.cn); len(stale) > 0 {
		if err := s.r.takeOverRouting(ctx, orig, stale); err != nil {
			return err
		}
		s.routing.ResourceVersion = orig.ResourceVersion
	}
	endpoints := !slices.Equal(orig.Spec.EndpointQueries, s.routing.Spec.EndpointQueries)
	remaps := !slices.Equal(orig.Spec.RemapQueries, s.routing.Spec.RemapQueries)
	// A record of the Elastic IP found on the primary address
	// (executeStaticIP) goes with this write; one that brings the
	// finalizer carries the lock, as recordStaticIP's does.
	record := !sameJSON(orig.Spec.StaticIP, s.routing.Spec.StaticIP)
	lock := endpoints || remaps || (record && !controllerutil.ContainsFinalizer(orig, enipamv1alpha1.NodeStaticIPFinalizer))
	if err := s.r.applyRouting(ctx, s.routing, lock); err != nil {
		if record {
			s.routing.Spec.StaticIP = orig.Spec.StaticIP // not recorded: no later apply may claim it
		}
		if apierrors.IsConflict(err) && lock {
			// The write's answer: the cache lags the last write, and
			// the node is decided again on what it then shows.
			s.requeueWithin(staticRecheck)
			return nil
		}
		return fmt.Errorf("writing NodeRouting %s, %w", s.cn.Name, err)
	}
	if record || (!s.noSpecENIs && s.r.withoutSpecENIs()) {
		// Recorded: the next reconcile, at once, reports the address in
		// status.ipam.assigned-static-ip. Or spec.enis was refused
		// (applyRouting): the next reconcile, at once, copies the ENIs
		// into status.eni.enis, which this one held back for it.
		s.requeueWithin(actedRequeue)
	}
	if endpoints {
		s.askedEndpoints(orig.Spec.EndpointQueries, s.routing.Spec.EndpointQueries, s.routing.Generation)
	}
	if remaps {
		s.askedRemaps(orig.Spec.RemapQueries, s.routing.Spec.RemapQueries, s.routing.Generation)
	}
	if !sameJSON(orig.Spec.Capacity, s.routing.Spec.Capacity) {
		s.mem.capacityWritten = s.r.now()
	}
	s.routingRead = copyRouting(s.routing)
	return nil
}

// wantRoutingENIs is the NodeRouting's spec.enis as decided: the ENIs
// fill lists in status.eni.enis, enis, sorted by ID, the list the node
// agent routes (set: false when the node has no NodeRouting to write).
// The ENIs kept for the consistency grace (kept) keep the entry the spec
// had. A list that stands as read is kept as it is, without making its
// entries again.
func (s *deciding) wantRoutingENIs(enis map[string]awstypes.ENI, kept []string) routingENIs {
	if s.routing == nil || !s.routingLooked || s.noSpecENIs {
		return routingENIs{} // spec.enis stands as read
	}
	had := s.routing.Spec.ENIs // as read, or as the base of the last apply has them
	if len(kept) == 0 && unchangedRoutingENIs(enis, had, s.cfg.ExcludeTags) {
		return routingENIs{list: had, set: true}
	}
	out := make([]enipamv1alpha1.NodeENI, 0, len(enis)+len(kept))
	for _, id := range slices.Sorted(maps.Keys(enis)) {
		if i := slices.IndexFunc(had, func(e enipamv1alpha1.NodeENI) bool { return e.ID == id }); i >= 0 && slices.Contains(kept, id) {
			out = append(out, had[i])
			continue
		}
		e := enis[id]
		out = append(out, specENI(&e, s.cfg.ExcludeTags))
	}
	for _, id := range kept {
		if _, listed := enis[id]; listed {
			continue
		}
		if i := slices.IndexFunc(had, func(e enipamv1alpha1.NodeENI) bool { return e.ID == id }); i >= 0 {
			out = append(out, had[i])
		}
	}
	slices.SortFunc(out, func(a, b enipamv1alpha1.NodeENI) int { return strings.Compare(a.ID, b.ID) })
	return routingENIs{list: out, set: true}
}

// routingENIs is the NodeRouting's spec.enis as decided (decideWrite,
// wantRoutingENIs), which fill sets in the desired NodeRouting (set:
// decided; unset, the list stands as read).
type routingENIs struct {
	list []enipamv1alpha1.NodeENI
	set  bool
}

// specENI is an ENI as status.eni.enis lists it (Cilium's type), as the
// NodeRouting's spec.enis lists it: the fields routing reads, with only
// the tags exclude names.
func specENI(e *awstypes.ENI, exclude map[string]string) enipamv1alpha1.NodeENI {
	n := enipamv1alpha1.NodeENI{ID: e.ID, MAC: e.MAC, Number: int32(e.Number), SubnetID: e.Subnet.ID}
	if e.IP.IsValid() {
		n.PrimaryIP = e.IP.Addr.String()
	}
	if e.Subnet.CIDR.IsValid() {
		n.SubnetCIDR = e.Subnet.CIDR.Prefix.String()
	}
	// The primary CIDR first; Cilium's type lists it again among CIDRs.
	if e.VPC.PrimaryCIDR.IsValid() {
		n.VPCCIDRs = append(n.VPCCIDRs, e.VPC.PrimaryCIDR.Prefix.String())
	}
	for _, c := range e.VPC.CIDRs {
		if c.IsValid() && !slices.Contains(n.VPCCIDRs, c.Prefix.String()) {
			n.VPCCIDRs = append(n.VPCCIDRs, c.Prefix.String())
		}
	}
	// Addresses and prefixes in the order the agent reports them routed
	// (by address), so that the operator's cache keeps one list of an ENI
	// whose every address the report lists (slim.go), whatever order EC2
	// returned them in.
	addrs := make([]netip.Addr, 0, len(e.Addresses))
	for _, a := range e.Addresses {
		if a.IsValid() {
			addrs = append(addrs, a.Addr)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		n.Addresses = append(n.Addresses, a.String())
	}
	prefixes := make([]netip.Prefix, 0, len(e.Prefixes))
	for _, p := range e.Prefixes {
		if p.IsValid() {
			prefixes = append(prefixes, p.Prefix)
		}
	}
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for _, p := range prefixes {
		n.Prefixes = append(n.Prefixes, p.String())
	}
	for _, p := range e.IPv6Prefixes {
		if p.IsValid() {
			n.IPv6Prefixes = append(n.IPv6Prefixes, p.Prefix.String())
		}
	}
	for k := range exclude {
		if v, ok := e.Tags[k]; ok {
			if n.Tags == nil {
				n.Tags = map[string]string{}
			}
			n.Tags[k] = v
		}
	}
	return n
}

// ownReport is the agent's report as a lookup (nil when it reports
// nothing), kept to the ENIs EC2 shows on the node's instance. An ENI the
// inventory shows on another instance is named in a warning event and a
// log, and its addresses are never pooled on this report's word: an agent
// reports only its own node's ENIs, so such a report is forged or
// corrupt. ENIs EC2 shows nowhere (detached or deleted while the agent
// catches up) are dropped silently.
//
// A report made over an earlier generation of the spec than nr's (the
// spec read, or this process's last apply where the cache has not seen
// it yet) vouches only for the ENIs that spec still lists, and on each
// only for the addresses its entry still lists: what the newer spec.enis
// dropped left the agent's union (most nodes have no copy in
// status.eni.enis), so the agent may have unrouted it since the report.
// Without that, a reconcile that reads the cache before the agent's next
// report pools an address listed again (dropped from a stale spec.enis,
// then assigned or seen again) while the agent's newer report lacks it.
func (s *nodeSync) ownReport(nr *enipamv1alpha1.NodeRouting) routedFunc {
	if len(nr.Status.ENIs) == 0 {
		s.mem.foreignENIs = ""
		return nil
	}
	// Only an agent that routes spec.enis may have unrouted what a newer
	// spec dropped; an earlier one (or one under an earlier CRD) routes
	// status.eni.enis.
	stale := nr.Status.RoutesSpecENIs && nr.Status.ObservedGeneration < nr.Generation
	own := enipamv1alpha1.NodeRoutingStatus{}
	var foreign []string
	for _, e := range nr.Status.ENIs {
		if slices.ContainsFunc(s.snap.ENIs, func(x cloud.ENI) bool { return x.ID == e.ID && x.InstanceID == s.instanceID }) {
			if stale {
				i := slices.IndexFunc(nr.Spec.ENIs, func(x enipamv1alpha1.NodeENI) bool { return x.ID == e.ID })
				if i < 0 {
					continue // dropped from the spec since the report: maybe unrouted
				}
				e = stillListed(e, &nr.Spec.ENIs[i])
			}
			own.ENIs = append(own.ENIs, e)
			continue
		}
		if at, known := s.r.inv.AttachedTo(e.ID); known && at != "" && at != s.instanceID {
			foreign = append(foreign, fmt.Sprintf("%s (attached to %s)", e.ID, at))
		}
	}
	if msg := strings.Join(foreign, ", "); msg != s.mem.foreignENIs {
		s.mem.foreignENIs = msg
		if msg != "" {
			s.r.events.Eventf(s.cn, nil, "Warning", ReasonForeignENIReported, "Allocate",
				"NodeRouting %s reports ENIs of other instances as routed on %s, ignored: %s", nr.Name, s.instanceID, msg)
			s.r.log.Info("routing report names ENIs of other instances; ignored", "node", s.cn.Name, "instance", s.instanceID, "enis", foreign)
		}
	}
	return own.Routed()
}

// stillListed is the report of an ENI, routed, kept to what the spec's
// entry of it, listed, still lists: its addresses (IPv4 addresses and
// prefixes, and IPv6 prefixes and the IPv6 addresses inside them).
func stillListed(routed enipamv1alpha1.RoutedENI, listed *enipamv1alpha1.NodeENI) enipamv1alpha1.RoutedENI {
	var prefixes6 []netip.Prefix
	for _, p := range listed.IPv6Prefixes {
		if pfx, err := netip.ParsePrefix(p); err == nil {
			prefixes6 = append(prefixes6, pfx.Masked())
		}
	}
	in6 := func(ip string) bool {
		a, err := netip.ParseAddr(ip)
		return err == nil && slices.ContainsFunc(prefixes6, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	out := routed
	out.IPs = slices.DeleteFunc(slices.Clone(routed.IPs), func(ip string) bool { return !slices.Contains(listed.Addresses, ip) })
	out.Prefixes = slices.DeleteFunc(slices.Clone(routed.Prefixes), func(p string) bool { return !slices.Contains(listed.Prefixes, p) })
	out.IPv6 = slices.DeleteFunc(slices.Clone(routed.IPv6), func(ip string) bool { return !in6(ip) })
	out.IPv6Prefixes = slices.DeleteFunc(slices.Clone(routed.IPv6Prefixes), func(p string) bool { return !slices.Contains(listed.IPv6Prefixes, p) })
	return out
}

// ownedBy reports whether nr names this CiliumNode (its UID, not only
// its name) as an owner.
func ownedBy(nr *enipamv1alpha1.NodeRouting, cn *ciliumv2.CiliumNode) bool {
	return slices.ContainsFunc(nr.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "CiliumNode" && o.UID == cn.UID
	})
}

// ownerRefs is refs with the CiliumNode reference naming cn as the one
// CiliumNode owner (decideRouting).
func ownerRefs(refs []metav1.OwnerReference, cn *ciliumv2.CiliumNode) []metav1.OwnerReference {
	out := slices.DeleteFunc(slices.Clone(refs), func(o metav1.OwnerReference) bool { return o.Kind == "CiliumNode" })
	return append(out, metav1.OwnerReference{APIVersion: "cilium.io/v2", Kind: "CiliumNode", Name: cn.Name, UID: cn.UID})
}

// staleOwners are the CiliumNode owner references of have that want
// does not keep and that name another CiliumNode than cn: an earlier
// node's of the same name.
func staleOwners(have, want []metav1.OwnerReference, cn *ciliumv2.CiliumNode) []metav1.OwnerReference {
	var stale []metav1.OwnerReference
	for _, o := range have {
		if o.Kind == "CiliumNode" && o.UID != cn.UID && !slices.ContainsFunc(want, func(w metav1.OwnerReference) bool { return w.UID == o.UID }) {
			stale = append(stale, o)
		}
	}
	return stale
}

// withOperatorWord is want with the fields of spec that routingSpec does
// not give (capacity, the Elastic IP record, the endpoint and remap
// queries and the ENIs, decided on their own) taken from have.
func withOperatorWord(want, have enipamv1alpha1.NodeRoutingSpec) enipamv1alpha1.NodeRoutingSpec {
	want.Capacity, want.StaticIP, want.EndpointQueries, want.RemapQueries = have.Capacity, have.StaticIP, have.EndpointQueries, have.RemapQueries
	want.ENIs = have.ENIs
	return want
}

// refreshAttaching looks at the node again shortly while one of its
// usable ENIs is attaching: the inventory describes attaching ENIs in one
// batch every second, and their addresses reach the pool only once EC2
// says attached.
func (s *deciding) refreshAttaching() {
	for i := range s.snap.ENIs {
		if e := &s.snap.ENIs[i]; e.AttachmentStatus == cloud.AttachmentAttaching && pool.Usable(e, &s.cfg.Config) {
			s.requeueWithin(attachCheckInterval)
			return
		}
	}
}

// routeHold bounds how long a node's EC2 calls wait for addresses on its
// attached ENIs to be routed and pooled (routesDue): the agent reports
// within a fraction of a second, and pods bound in a burst make their
// CNI calls a second after their binding.
const routeHold = time.Second

// routesDue reports whether a node that has a pool waits for the agent's
// routes of addresses on an attached ENI, for less than routeHold: the
// reconcile its report brings writes them into the pool, and must not
// wait behind EC2 calls. A joining node (nothing pooled) takes its whole
// need at once, as planned.
func (s *deciding) routesDue() bool {
	if len(s.orig.Spec.IPAM.Pool) == 0 || s.pool.awaiting == 0 || s.r.now().Sub(s.awaitedFrom()) >= routeHold {
		return false
	}
	for i := range s.snap.ENIs {
		e := &s.snap.ENIs[i]
		if e.AttachmentStatus == cloud.AttachmentAttached && slices.Contains(s.pool.awaitingENIs, e.ID) {
			return true
		}
	}
	return false
}

// awaitedFrom is when the node's addresses began to wait for the agent:
// now if this decision is the first to see them wait.
func (s *deciding) awaitedFrom() time.Time {
	if s.mem.awaitingSince.IsZero() {
		return s.r.now()
	}
	return s.mem.awaitingSince
}

// awaitRouting says why addresses EC2 holds for the node are not pooled
// yet: an attachment still completing (looked at again shortly), or the
// node's agent not reporting them routed (an event and operator-status;
// the agent's report brings the node back).
func (s *deciding) awaitRouting() {
	attaching := false
	for i := range s.snap.ENIs {
		if s.snap.ENIs[i].AttachmentStatus == cloud.AttachmentAttaching {
			attaching = true
		}
	}
	if attaching {
		s.requeueWithin(attachCheckInterval)
	}
	why := "enipam-agent has not reported them routed yet"
	if s.routing != nil {
		if c := meta.FindStatusCondition(s.routing.Status.Conditions, enipamv1alpha1.ConditionReady); c == nil {
			why = fmt.Sprintf("enipam-agent has not reported on NodeRouting %s (is it running on the node?)", s.cn.Name)
		} else if c.Status != metav1.ConditionTrue {
			why = fmt.Sprintf("enipam-agent is not ready: %s: %s", c.Reason, c.Message)
		}
	}
	now := s.r.now()
	if s.mem.awaitingSince.IsZero() {
		s.mem.awaitingSince = now
	}
	if wait := s.r.opts.RoutingPatience - now.Sub(s.mem.awaitingSince); wait > 0 {
		// The usual moment between attach and route: nothing to tell
		// unless it lasts.
		s.requeueWithin(wait)
		return
	}
	msg := fmt.Sprintf("%d addresses on %s wait to enter the pool: %s", s.pool.awaiting, strings.Join(s.pool.awaitingENIs, ","), why)
	s.opErr = fmt.Errorf("%s", msg)
	s.r.warn(s.cn, s.mem, ReasonAwaitingRouting, msg)
	s.requeueWithin(s.r.opts.BlockedRetry)
}

// requeueWithin asks to look at the node again within d.
func (s *deciding) requeueWithin(d time.Duration) {
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

// routedFunc is the agent's report as a lookup.
type routedFunc = func(eniID string, ip netip.Addr) bool

// capacityDecision is the NodeRouting's spec.capacity as the decision
// left it: the capacity to set (nil: the spec's stands), how soon to
// look again when a change of the counts alone waits for countsEvery,
// and the pool's sizes for the node's gauges (observed: there are some).
// setCapacity carries it out once the CiliumNode is written.
type capacityDecision struct {
	set              *enipamv1alpha1.NodeCapacity
	wait             time.Duration
	observed         bool
	awaiting, maxIPs int
}

// decideCapacity decides the NodeRouting's spec.capacity (writeRouting
// writes it). It is the operator's word, so it lives in the spec, where
// the node's agent (which writes only the status) cannot change what
// schedulers read.
func (s *deciding) decideCapacity() capacityDecision {
	if s.routing == nil || !s.haveSnap || s.pool == nil {
		return capacityDecision{}
	}
	room := pool.Capacity(&s.snap, &s.cfg.Config)
	available, used := s.pool.counts()
	c := &enipamv1alpha1.NodeCapacity{
		MaxIPs: int32(room.MaxIPs), PoolIPs: int32(available), Awaiting: int32(s.pool.awaiting),
		UsedIPs: int32(used), FreeIPs: int32(max(available-used, 0)),
		CanGrow: room.CanGrow, AvailabilityZone: s.snap.Instance.AZ, Subnets: room.Subnets,
		FreeENISlots: int32(room.FreeENISlots),
	}
	for _, id := range slices.Sorted(maps.Keys(room.SubnetSlots)) {
		c.SubnetSlots = append(c.SubnetSlots, enipamv1alpha1.SubnetSlots{SubnetID: id, Free: int32(room.SubnetSlots[id])})
	}
	if room.Blocked != nil {
		c.Reason = room.Blocked.Error()
	}
	out := capacityDecision{observed: true, awaiting: s.pool.awaiting, maxIPs: room.MaxIPs}
	if sameJSON(s.routing.Spec.Capacity, c) {
		return out
	}
	if have := s.routing.Spec.Capacity; have != nil && countsOnly(have, c) {
		if wait := s.mem.capacityWritten.Add(countsEvery).Sub(s.r.now()); wait > 0 {
			out.wait = wait
			return out
		}
	}
	out.set = c
	return out
}

// setCapacity carries out the capacity decided (decideCapacity), once
// the CiliumNode's write went through: the node's gauges, the look
// again, the capacity in the desired NodeRouting.
func (s *nodeSync) setCapacity() {
	c := s.capacity
	if c.observed {
		s.r.metrics.observeCapacity(s.cn.Name, c.awaiting, c.maxIPs)
	}
	if c.wait > 0 {
		s.requeueWithin(c.wait)
	}
	if c.set != nil {
		s.routing.Spec.Capacity = c.set
	}
}

// countsEvery is how often at most a change of only the used and free
// counts of a node's capacity is written. Those two move with every pod
// start and stop, and nothing decides on them (they are kubectl's Free
// and Used columns), so writing each change would cost two apiserver
// writes per pod (the operator's, and the agent's status answering the
// new generation). Cilium's agent reports status.ipam.used at most every
// 15 s by default, so the columns lag it by no more than that again.
const countsEvery = 10 * time.Second

// countsOnly reports whether two capacities differ at most in their used
// and free counts.
func countsOnly(a, b *enipamv1alpha1.NodeCapacity) bool {
	x, y := *a, *b
	x.UsedIPs, x.FreeIPs, y.UsedIPs, y.FreeIPs = 0, 0, 0, 0
	return sameJSON(&x, &y)
}
