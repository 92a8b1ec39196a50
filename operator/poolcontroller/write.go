package poolcontroller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumip "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
)

// fill puts what the operator knows into the desired object (decide,
// once the rest is decided; decideReadFailed, when the read failed): the
// instance and its ENIs (every address EC2 shows on them, pooled or not
// yet: the node agent routes what it is told of before the pool lists
// it), and the operator-status. The ENIs go to the NodeRouting's
// spec.enis, which the agent routes (wantRoutingENIs: the list the write
// applies, routingENIs), and to status.eni.enis only where something
// reads that copy (eniCopyFor). The policy's effective values go to the
// node's NodeRouting, never into spec.eni, so every value there is the
// user's.
func (s *deciding) fill() {
	cn := s.cn
	msg := ""
	switch {
	case s.opErr != nil:
		msg = s.opErr.Error()
	case s.mem.actErr != nil:
		// The last actions failed; this reconcile tries them again.
		msg = s.mem.actErr.Error()
	case s.staticErr != nil:
		msg = s.staticErr.Error()
	}
	cn.Status.IPAM.OperatorStatus.Error = msg
	if !s.haveSnap {
		return
	}
	in := &s.snap.Instance
	if cn.Spec.InstanceID == "" {
		cn.Spec.InstanceID = in.ID
	}
	eni := &cn.Spec.ENI
	eni.InstanceType, eni.VpcID, eni.AvailabilityZone, eni.NodeSubnetID = in.Type, in.VPCID, in.AZ, in.SubnetID

	enis := s.nodeENIs()
	kept := s.keepMissingENIs(enis)
	for _, id := range kept {
		if old, ok := s.cn.Status.ENI.ENIs[id]; ok {
			enis[id] = old
		}
	}
	s.routingENIs = s.wantRoutingENIs(enis, kept)
	if s.routingENIs.set {
		s.routing.Spec.ENIs = s.routingENIs.list
	}
	cn.Status.ENI.ENIs = s.eniCopyFor(enis)
}

// nodeENIs are the node's ENIs as fill lists them, from the snapshot:
// only ordinary ENIs of card 0 (the node agent routes what is listed,
// and device numbers repeat across cards: an EFA or trunk interface is
// never the agent's), and no detaching one, so the agent takes its
// routes down.
func (s *deciding) nodeENIs() map[string]awstypes.ENI {
	var vpc awstypes.AwsVPC
	if v := s.fillIn.vpc; s.fillIn.vpcKnown {
		vpc.ID = v.ID
		for i, c := range v.CIDRs {
			if i == 0 {
				vpc.PrimaryCIDR = ciliumip.PrefixFrom(c)
			}
			vpc.CIDRs = append(vpc.CIDRs, ciliumip.PrefixFrom(c))
		}
	}
	enis := make(map[string]awstypes.ENI, len(s.snap.ENIs))
	for i := range s.snap.ENIs {
		if e := &s.snap.ENIs[i]; e.Ordinary() && e.AttachmentStatus != cloud.AttachmentDetaching {
			enis[e.ID] = s.statusENI(e, vpc)
		}
	}
	return enis
}

// keepMissingENIs returns, to keep listed for the consistency grace, the
// ENIs the node's status.eni.enis or its NodeRouting's spec.enis listed
// that EC2's describes do not show: a process that took over may not see
// an ENI its predecessor created seconds ago. Dropping the entry would
// make the node agent unroute its addresses while a report that still
// lists them may be what the next reconcile reads, so an address could be
// pooled unrouted. ENIs this process deleted or detached go at once, as
// do all of them when the node's instance changed.
func (s *deciding) keepMissingENIs(enis map[string]awstypes.ENI) []string {
	if s.orig.Spec.InstanceID != s.instanceID || s.allListedSeen(enis) {
		clear(s.mem.missingENIs)
		return nil
	}
	listed := s.listedENIs()
	now := s.r.now()
	var kept []string
	for _, id := range listed {
		if _, seen := enis[id]; seen || s.fillIn.gone[id] {
			delete(s.mem.missingENIs, id)
			continue
		}
		since, ok := s.mem.missingENIs[id]
		if !ok {
			since = now
			s.mem.missingENIs[id] = since
		}
		if now.Sub(since) < s.r.opts.ConsistencyGrace {
			kept = append(kept, id)
			s.requeueWithin(max(since.Add(s.r.opts.ConsistencyGrace).Sub(now), time.Second))
		} else {
			delete(s.mem.missingENIs, id)
		}
	}
	for id := range s.mem.missingENIs {
		if !slices.Contains(listed, id) {
			delete(s.mem.missingENIs, id)
		}
	}
	return kept
}

// allListedSeen reports whether EC2's describes show every ENI the node
// agent has been told of (eachListedENI), as they do for a node in
// shape: none is kept, and none is missing. It makes no list.
func (s *deciding) allListedSeen(enis map[string]awstypes.ENI) bool {
	all := true
	s.eachListedENI(func(id string) {
		if _, seen := enis[id]; !seen {
			all = false
		}
	})
	return all
}

// listedENIs are the IDs of the ENIs the node agent has been told of
// (eachListedENI), sorted.
func (s *deciding) listedENIs() []string {
	var ids []string
	s.eachListedENI(func(id string) { ids = append(ids, id) })
	slices.Sort(ids)
	return slices.Compact(ids)
}

// eachListedENI calls f with the ID of each ENI the node agent has been
// told of: those of the node's status.eni.enis (its copy, where one
// stands) and of its NodeRouting's spec.enis for this instance (as read,
// or as this process last applied it), an ENI both list twice. The
// agent routes the union of both lists.
func (s *deciding) eachListedENI(f func(id string)) {
	for id := range s.cn.Status.ENI.ENIs {
		f(id)
	}
	if nr := s.routingRead; nr != nil && nr.Spec.InstanceID == s.instanceID {
		for i := range nr.Spec.ENIs {
			f(nr.Spec.ENIs[i].ID)
		}
	}
}

// eniCopyFor is status.eni.enis as decided, enis the node's ENIs as
// fill lists them: the whole list where something reads the copy
// (eniCopyWanted), and where a copy stands that cannot be cleared yet
// (eniCopyClearable: kept whole, so that no ENI or address the agent
// routes from it is lost or stale); nil everywhere else. Every Cilium
// agent watches every CiliumNode, so a copy nothing reads would cost a
// status write on every node for each change of its ENIs.
func (s *deciding) eniCopyFor(enis map[string]awstypes.ENI) map[string]awstypes.ENI {
	if s.eniCopyWanted() || (len(s.orig.Status.ENI.ENIs) > 0 && !s.eniCopyClearable()) {
		return enis
	}
	return nil
}

// eniCopyWanted reports whether something reads the node's copy of its
// ENIs in status.eni.enis: its agent, when it may not know spec.enis
// (no NodeRouting looked up, or the stored CRD lacks spec.enis), or when
// it reported without status.routesSpecENIs (an agent of an earlier
// version, which routes status.eni.enis alone; one that has not
// reported yet is taken for a new one: an earlier agent's first report
// brings the node back, and the copy is made then); and enipam-scheduler,
// which reads a stamped address's ENI there, when a static address
// concerns the node (a claim, or an owner's stamped entry in the pool
// read or decided).
func (s *deciding) eniCopyWanted() bool {
	if s.routing == nil || !s.routingLooked || s.noSpecENIs {
		return true
	}
	if st := &s.routing.Status; !st.RoutesSpecENIs && (st.ObservedGeneration > 0 || len(st.Conditions) > 0) {
		return true
	}
	if s.static != nil && len(s.static.claims) > 0 {
		return true
	}
	for _, pool := range []ipamtypes.AllocationMap{s.orig.Spec.IPAM.Pool, s.cn.Spec.IPAM.Pool} {
		for _, e := range pool {
			if e.Owner != "" {
				return true
			}
		}
	}
	return false
}

// eniCopyClearable reports whether clearing the node's copy of its ENIs
// unroutes nothing: the NodeRouting read, of this instance, lists every
// ENI of the copy in spec.enis, and the agent reported routing spec.enis
// at that generation or a later one. The agent routes the union of both
// lists, an ENI both list taken from spec.enis, so once it routes that
// spec the copy adds nothing to it. Before, the copy stays.
func (s *deciding) eniCopyClearable() bool {
	nr := s.routingRead
	if nr == nil || nr.Spec.InstanceID != s.instanceID || !nr.Status.RoutesSpecENIs || nr.Status.ObservedGeneration < nr.Generation {
		return false
	}
	for id := range s.orig.Status.ENI.ENIs {
		if !slices.ContainsFunc(nr.Spec.ENIs, func(e enipamv1alpha1.NodeENI) bool { return e.ID == id }) {
			return false
		}
	}
	return true
}

func (s *deciding) statusENI(e *cloud.ENI, vpc awstypes.AwsVPC) awstypes.ENI {
	out := awstypes.ENI{
		ID: e.ID, MAC: e.MAC, AvailabilityZone: e.AZ, Description: e.Description, Number: e.DeviceIndex,
		VPC: vpc, SecurityGroups: e.SecurityGroups, Tags: e.Tags,
	}
	if e.PrimaryIP.IsValid() {
		out.IP = ciliumip.AddrFrom(e.PrimaryIP)
	}
	out.Subnet.ID = e.SubnetID
	if sub, ok := s.fillIn.subnets[e.SubnetID]; ok {
		out.Subnet.CIDR = ciliumip.PrefixFrom(sub.CIDR)
	}
	for _, ip := range e.IPs {
		out.Addresses = append(out.Addresses, ciliumip.AddrFrom(ip))
	}
	for _, p := range e.Prefixes {
		out.Prefixes = append(out.Prefixes, ciliumip.PrefixFrom(netip.Prefix(p)))
	}
	// The /80s reach the node agent, which routes them (the primary
	// ENI's by the main table) and reports them: the window's addresses
	// enter the pool only then.
	for _, p := range e.IPv6Prefixes {
		out.IPv6Prefixes = append(out.IPv6Prefixes, ciliumip.PrefixFrom(p))
	}
	return out
}

// write patches status, then spec, as decided (decideWrite: each only
// if it changed, the spec not while its change waits for the pool), once
// per reconcile and before any of its EC2 calls (act). Merge patches carry
// only the fields that changed, so the agent's status.ipam.used and
// anything else written meanwhile is left alone. The NodeRouting's
// spec.enis decided with it (fill) is in the desired NodeRouting, which
// writeRouting applies after it, whatever becomes of this write.
func (s *nodeSync) write(ctx context.Context) error {
	if s.writeStatus {
		obj := s.orig.DeepCopy()
		obj.Status = *s.cn.Status.DeepCopy()
		if err := s.r.client.Status().Patch(ctx, obj, client.MergeFrom(s.orig)); err != nil {
			s.r.metrics.writeFailed("status", err)
			return fmt.Errorf("writing status of %s, %w", s.cn.Name, err)
		}
		s.r.metrics.writes.WithLabelValues("status").Inc()
		s.wrote = true
		if s.eniCopy {
			s.r.metrics.eniCopies.Inc()
		}
		s.r.log.Debug("CiliumNode status written", "node", s.cn.Name, "changed", statusChanges(&s.orig.Status, &s.cn.Status))
		s.r.wrote(s.mem, obj.ResourceVersion)
		s.orig.Status = *s.cn.Status.DeepCopy()
	}
	if s.writeSpec {
		obj := s.orig.DeepCopy()
		obj.Spec = *s.cn.Spec.DeepCopy()
		if err := s.r.client.Patch(ctx, obj, client.MergeFrom(s.orig)); err != nil {
			s.r.metrics.writeFailed("spec", err)
			return fmt.Errorf("writing spec of %s, %w", s.cn.Name, err)
		}
		s.r.metrics.writes.WithLabelValues("spec").Inc()
		s.wrote = true
		s.r.log.Debug("CiliumNode spec written", "node", s.cn.Name, "changed", specChanges(&s.orig.Spec, &s.cn.Spec))
		s.r.wrote(s.mem, obj.ResourceVersion)
		s.timeHandoffs()
		s.orig.Spec = *s.cn.Spec.DeepCopy()
		if len(s.orig.Spec.IPAM.Pool) > 0 {
			s.mem.joinHeldSince = time.Time{}
		}
	}
	return nil
}

// decideWrite fills in the desired CiliumNode (fill) and decides its
// write: the status when it changed, the spec when it changed and its
// change does not wait for the pool (specWaitsForPool,
// joiningPoolWaits); and the NodeRouting's spec.enis, set in the
// desired NodeRouting (routingENIs). A status write made for the copy
// of the ENIs in status.eni.enis alone, a copy or a clear, is counted as
// one (eniCopy).
func (s *deciding) decideWrite() {
	s.fill()
	s.writeStatus = !sameJSON(s.orig.Status, s.cn.Status)
	s.eniCopy = false
	if s.writeStatus {
		copied := s.orig.Status
		copied.ENI = s.cn.Status.ENI
		s.eniCopy = sameJSON(copied, s.cn.Status)
	}
	s.writeSpec = !sameJSON(s.orig.Spec, s.cn.Spec) && !s.specWaitsForPool() && !s.joiningPoolWaits()
}

// specWaitsForPool reports whether the spec's change can wait for the
// pool: only what fill writes of the instance (instance-id, spec.eni's
// type, VPC, zone and subnet) changed, and addresses wait for the node
// agent's routes, so the write that lists them in the pool carries it
// too: a joining node's spec is written once, not twice. A new instance
// ID is never held back.
func (s *deciding) specWaitsForPool() bool {
	if s.orig.Spec.InstanceID != "" && s.orig.Spec.InstanceID != s.cn.Spec.InstanceID {
		return false // another instance: its pool is judged by the new ID at once
	}
	return s.pool != nil && s.pool.awaiting > 0 && sameJSON(s.orig.Spec.IPAM, s.cn.Spec.IPAM)
}

// joiningPoolWaits reports whether a joining node's first pool write
// waits for the rest of its addresses: nothing is in its pool yet, some
// addresses are ready for it and others, on the ENIs created with them,
// still attach or wait for the node agent's routes. The node's pool then
// takes them all in one write instead of one per ENI. The wait is
// bounded by joinHold from the first write it held back; past it, what is
// ready is written and the rest follows as it comes. Only a pool that
// grows from nothing, by ordinary addresses alone, waits: an owner's
// stamped address, a dropped or changed entry never does.
func (s *deciding) joiningPoolWaits() bool {
	if s.pool == nil || s.pool.awaiting == 0 || len(s.orig.Spec.IPAM.Pool) > 0 || len(s.cn.Spec.IPAM.Pool) == 0 {
		return false
	}
	if s.orig.Spec.InstanceID != "" && s.orig.Spec.InstanceID != s.cn.Spec.InstanceID {
		return false
	}
	x, y := s.orig.Spec.IPAM, s.cn.Spec.IPAM
	x.Pool, y.Pool = nil, nil
	if !sameJSON(x, y) {
		return false
	}
	for _, e := range s.cn.Spec.IPAM.Pool {
		if e.Owner != "" {
			return false
		}
	}
	now := s.r.now()
	if s.mem.joinHeldSince.IsZero() {
		s.mem.joinHeldSince = now
	}
	wait := joinHold - now.Sub(s.mem.joinHeldSince)
	if wait <= 0 {
		return false
	}
	s.requeueWithin(wait)
	return true
}

// joinHold bounds how long a joining node's ready addresses wait for the
// others of its first ENIs (joiningPoolWaits): the attachments EC2
// completes in 2-5 s and the node agent's routes after them.
const joinHold = 10 * time.Second

// slowHandoff is a wait of addresses ready for the pool worth a log line.
const slowHandoff = 2 * time.Second

// timeHandoffs observes, for each ENI whose first addresses the pool just
// written lists, how long they waited attached and routed (handoffs).
func (s *nodeSync) timeHandoffs() {
	had := map[string]bool{}
	for _, e := range s.orig.Spec.IPAM.Pool {
		had[e.Resource] = true
	}
	now := s.r.now()
	for _, e := range s.cn.Spec.IPAM.Pool {
		if e.Resource == "" || had[e.Resource] {
			continue
		}
		had[e.Resource] = true
		ready, ok := s.r.handoffs.pooled(e.Resource, now)
		if !ok {
			continue
		}
		took := max(now.Sub(ready), 0)
		s.r.metrics.poolHandoff.Observe(took.Seconds())
		if took > slowHandoff {
			// Where the time went: waiting for a worker, or in the
			// reconcile (its reads and writes).
			s.r.log.Info("addresses ready for the pool waited", "node", s.cn.Name, "eni", e.Resource, "waited", took,
				"queued", max(s.started.Sub(ready), 0), "reconcile", now.Sub(s.started))
		}
	}
}

// statusChanges names what a status write changes, for the debug log:
// the ENIs listed or unlisted, the release handshake, the operator-status.
func statusChanges(a, b *ciliumv2.NodeStatus) []string {
	var out []string
	for id := range b.ENI.ENIs {
		if old, ok := a.ENI.ENIs[id]; !ok {
			out = append(out, "listed "+id)
		} else if !sameJSON(old, b.ENI.ENIs[id]) {
			out = append(out, "changed "+id)
		}
	}
	for id := range a.ENI.ENIs {
		if _, ok := b.ENI.ENIs[id]; !ok {
			out = append(out, "unlisted "+id)
		}
	}
	if !sameJSON(a.IPAM.ReleaseIPs, b.IPAM.ReleaseIPs) {
		out = append(out, "release-ips")
	}
	if a.IPAM.OperatorStatus != b.IPAM.OperatorStatus {
		out = append(out, "operator-status")
	}
	slices.Sort(out)
	return out
}

// specChanges names what a spec write changes, for the debug log: the
// pool's additions and removals, the instance's fields.
func specChanges(a, b *ciliumv2.NodeSpec) []string {
	var out []string
	added, dropped, restamped := 0, 0, 0
	for ip, e := range b.IPAM.Pool {
		if old, ok := a.IPAM.Pool[ip]; !ok {
			added++
		} else if old != e {
			restamped++
		}
	}
	for ip := range a.IPAM.Pool {
		if _, ok := b.IPAM.Pool[ip]; !ok {
			dropped++
		}
	}
	for what, n := range map[string]int{"pooled": added, "unpooled": dropped, "restamped": restamped} {
		if n > 0 {
			out = append(out, fmt.Sprintf("%s %d", what, n))
		}
	}
	if a.InstanceID != b.InstanceID || !sameJSON(a.ENI, b.ENI) {
		out = append(out, "instance")
	}
	x, y := a.IPAM, b.IPAM
	x.Pool, y.Pool = nil, nil
	if !sameJSON(x, y) {
		out = append(out, "ipam")
	}
	slices.Sort(out)
	return out
}

// sameJSON compares two API values as the apiserver would store them
// (equality.Semantic cannot look into netip types, and reflect.DeepEqual
// tells nil from empty maps, which serialize alike).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
