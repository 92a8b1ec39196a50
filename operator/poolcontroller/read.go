package poolcontroller

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/snapshot"
)

// nodeState is what one reconcile of a node decides on, read beforehand
// by read: plain values, no client.
type nodeState struct {
	// node is the Node of the CiliumNode; nil when it cannot be read.
	node *corev1.Node
	// instanceID names the node's instance; cfg is the policy resolved
	// for it.
	instanceID string
	cfg        policy.Config
	// snap is the inventory's view of the instance (haveSnap: taken).
	snap     snapshot.Node
	haveSnap bool
	// routing is the node's NodeRouting; routed its agent's report, nil
	// while the agent reports nothing.
	routing *enipamv1alpha1.NodeRouting
	routed  routedFunc
	// routingRead is the NodeRouting as read (or as last written), the
	// base of writeRouting's patch; routingWant the policy's values for
	// its spec.
	routingRead *enipamv1alpha1.NodeRouting
	routingWant *enipamv1alpha1.NodeRoutingSpec
	// noSpecENIs: the NodeRouting's applies go without spec.enis, which
	// the stored CRD lacks (Reconciler.withoutSpecENIs); the node's agent
	// is then one that routes status.eni.enis only.
	noSpecENIs bool
	// static are the claims concerning the node and the facts about them
	// (nil when none could be read).
	static *staticInputs
	// waiting: pods bound to the node still waiting for an address
	// (the pod watch); headroom: the free addresses kept ahead of them
	// and the used ones.
	waiting, headroom int
	// staticIP are the facts of the node's static IP (haveStaticIP:
	// there is something to decide, readStaticIP).
	staticIP     staticIPFacts
	haveStaticIP bool
	// detached is the ENI consolidation detached, described afresh
	// (readDetached).
	detached detachedENI
	// poolIn is what the pool's reconcile decides on (readPoolInputs);
	// moving the addresses this process reassigned onto the node's ENIs
	// that no describe has shown there yet (askRemaps); window6 what the
	// IPv6 window is decided on, the cache's trust included
	// (readWindow6).
	poolIn  *poolInputs
	moving  map[netip.Addr]string
	window6 *window6Inputs
	// consolidationSnap is the instance's snapshot taken again for
	// consolidation (readConsolidationSnapshot).
	consolidationSnap freshSnapshot
	// fillIn is what fill writes into the CiliumNode from the inventory
	// (readFill).
	fillIn fillFacts
}

// fillFacts are the inventory's answers fill writes from: the VPC of the
// instance (vpcKnown: the inventory knows it), the subnets of the ENIs
// the snapshots show, and which ENIs of those the node's status lists
// this process deleted or detached (gone).
type fillFacts struct {
	vpc      cloud.VPC
	vpcKnown bool
	subnets  map[string]cloud.Subnet
	gone     map[string]bool
}

// readFill reads from the inventory what fill writes from (fillFacts),
// once the instance's snapshot is taken: the subnets of the ENIs of both
// snapshots the read took (the decision may count on the one taken for
// consolidation).
func (s *nodeSync) readFill() fillFacts {
	inv := s.r.inv
	f := fillFacts{subnets: map[string]cloud.Subnet{}, gone: map[string]bool{}}
	f.vpc, f.vpcKnown = inv.VPC(s.snap.Instance.VPCID)
	subnetsOf := func(enis []cloud.ENI) {
		for i := range enis {
			id := enis[i].SubnetID
			if _, ok := f.subnets[id]; ok {
				continue
			}
			if sub, ok := inv.Subnet(id); ok {
				f.subnets[id] = sub
			}
		}
	}
	subnetsOf(s.snap.ENIs)
	if s.consolidationSnap.taken && s.consolidationSnap.err == nil {
		subnetsOf(s.consolidationSnap.snap.ENIs)
	}
	for id := range s.cn.Status.ENI.ENIs {
		if inv.Deleted(id) || inv.Detached(id) {
			f.gone[id] = true
		}
	}
	return f
}

// read gathers the node's state: its Node, instance and policy, the
// inventory's snapshot of the instance (describing the ENIs its status
// lists that the snapshot lacks), its NodeRouting and the agent's report
// (trusting the remaps the agent confirmed), the claims that concern it,
// the addresses the pool lacks confirmed by a describe (confirmUnpooled),
// the Elastic IPs, the ENI consolidation detached (readDetached) and the
// pods waiting for an address; then what the pool's reconcile, the
// agent's remap queries and the IPv6 window decide on (readPoolInputs,
// readMoving, readWindow6). Every EC2 read of the reconcile's decision,
// and every read of the cache and the inventory it needs, is made here,
// before it. False when the node
// cannot be served (s.opErr says why).
func (s *nodeSync) read(ctx context.Context) bool {
	r := s.r
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: s.cn.Name}, node); err != nil {
		node = nil
	}
	s.node = node
	s.instanceID = s.resolveInstance(node)
	if s.instanceID == "" {
		s.fail(fmt.Errorf("%w: no aws:/// providerID on Node %q and no spec.instance-id", cloud.ErrNotFound, s.cn.Name), ReasonInstanceNotFound)
		return false
	}
	var nodeLabels map[string]string
	if node != nil {
		nodeLabels = node.Labels
	} else {
		nodeLabels = s.cn.Labels
	}
	winner, others := policy.Select(s.policies, nodeLabels)
	if len(others) > 0 {
		names := make([]string, len(others))
		for i, p := range others {
			names[i] = p.Name
		}
		r.warn(s.cn, s.mem, ReasonPolicyConflict, fmt.Sprintf("ENIPolicy %s governs this node; %s also match and are ignored", winner.Name, strings.Join(names, ", ")))
	}
	s.cfg = policy.Resolve(s.cn, winner, r.opts.Defaults)
	if r.now().Before(s.mem.noPrefixesUntil) {
		s.cfg.PrefixDelegation = false
	}
	s.adaptKnobs()

	if !s.snapshot(ctx) {
		return false
	}
	s.findListedENIs(ctx)
	if err := s.syncRouting(ctx); err != nil {
		s.fail(err, ReasonRoutingUnreadable)
		return false
	}
	if s.confirmRemaps() && !s.snapshot(ctx) {
		return false
	}
	if !s.gatherStatic(ctx) {
		return false
	}
	if s.confirmUnpooled(ctx) && !s.gatherStatic(ctx) {
		// The claims' facts are read again on the snapshot the describe
		// refreshed: the decision sees one view of EC2.
		return false
	}
	s.staticIP, s.haveStaticIP = s.readStaticIP(ctx)
	s.readDetached(ctx)
	s.countDemand()
	s.poolIn = s.readPoolInputs(ctx)
	s.moving = s.readMoving()
	s.window6 = s.readWindow6()
	s.readConsolidationSnapshot(ctx)
	return true
}

// readMoving reads from the inventory the addresses this process
// reassigned onto the node's ENIs whose remap no describe (nor the
// instance's metadata) has shown complete yet.
func (s *nodeSync) readMoving() map[netip.Addr]string {
	ids := make([]string, 0, len(s.snap.ENIs))
	for _, e := range s.snap.ENIs {
		ids = append(ids, e.ID)
	}
	return s.r.inv.MovingOnto(ids)
}

// findListedENIs describes by ID the ENIs the node's status lists that
// the snapshot lacks: a process that took over may have missed, in its
// first describes, an ENI its predecessor created seconds before, and
// would otherwise not learn of it before the next resync.
func (s *nodeSync) findListedENIs(ctx context.Context) {
	if s.cn.Spec.InstanceID != s.instanceID {
		return
	}
	var ids []string
	for id := range s.cn.Status.ENI.ENIs {
		if !slices.ContainsFunc(s.snap.ENIs, func(e cloud.ENI) bool { return e.ID == id }) && !s.r.inv.Deleted(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.Sort(ids)
	if err := s.exec().describeENIs(ctx, ids); err != nil {
		s.r.log.Info("describing listed ENIs missing from EC2's view failed", "node", s.cn.Name, "enis", ids, "error", err)
		return
	}
	s.snapshot(ctx)
}

// confirmUnpooled settles, before the decision, the addresses the pool
// would lack on a describe's word that may predate this process (an
// earlier process may have unassigned them just before it stopped), or
// on this process's own reassignment that EC2 may not have completed:
// the pool's reconcile, run on a copy of the node (unpooledUnverified),
// names their ENIs; once describes are trusted, a describe of those
// ENIs by ID confirms or drops them, and the snapshot is taken again;
// before that, the node is looked at again when they are. True when the
// snapshot was taken again.
func (s *nodeSync) confirmUnpooled(ctx context.Context) bool {
	n, enis := s.unpooledUnverified(ctx)
	if n == 0 {
		return false
	}
	// Before describes are trusted, only this process's own
	// reassignments are worth a describe now: one started a consistency
	// grace after the call shows whether the remap landed whenever it
	// runs (inventory landed). Waiting for the trust would hold a move
	// made in the operator's first minute for the rest of that minute.
	if wait := s.r.inv.TrustFrom().Sub(s.r.now()); wait > 0 && len(s.r.inv.MovingOnto(enis)) == 0 {
		s.requeueWithin(wait)
		return false
	}
	if wait := s.describeCanWait(n, enis); wait > 0 {
		s.requeueWithin(wait)
		return false
	}
	if err := s.exec().describeENIs(ctx, enis); err != nil {
		s.r.log.Info("describing ENIs to confirm addresses failed; retrying", "node", s.cn.Name, "enis", enis, "error", err)
		s.requeueWithin(time.Second)
		return false
	}
	s.mem.remapsLooked = s.r.now()
	s.described = true
	return s.snapshot(ctx)
}

// unpooledUnverified counts the addresses the pool's reconcile would
// leave out for want of a trusted describe (poolView.unverified), and
// names their ENIs: it runs the reconcile on a copy of the node and of
// the memory it edits, only when some address ready for the pool is
// untrusted.
func (s *nodeSync) unpooledUnverified(ctx context.Context) (int, []string) {
	untrusted := false
	s.readyUnpooled(func(eni *cloud.ENI, ip netip.Addr) {
		untrusted = untrusted || !s.r.inv.Trusted(eni.ID, ip)
	})
	if !untrusted {
		return 0, nil
	}
	in := s.readPoolInputs(ctx)
	in.missing = maps.Clone(in.missing)
	v := &poolView{cn: s.cn.DeepCopy()}
	v.reconcile(in)
	return v.unverified, v.unverifiedENIs
}
