package poolcontroller

import (
	"context"
	"fmt"
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
	// for it; policyConflict names the other policies that match the
	// node too ("": none).
	instanceID     string
	cfg            policy.Config
	policyConflict string
	// snap is the inventory's view of the instance (haveSnap: taken).
	snap     snapshot.Node
	haveSnap bool
	// adapts: the policy's headroom is adaptive and a pod watch tells
	// the node's arrivals (readArrivals): the times pods were bound to
	// it within the headroom's memory, oldest first.
	adapts   bool
	arrivals []time.Time
	// routing is the node's NodeRouting as read (readRouting: nil when
	// there is none), which the decision makes the desired one of
	// (decideRouting), making one when there is none; routed its
	// agent's report, nil while the agent reports nothing.
	routing *enipamv1alpha1.NodeRouting
	routed  routedFunc
	// routingRead is the NodeRouting as read (or as last written), the
	// base of writeRouting's apply (nil: the cache lacks it, and the
	// write applies it whatever it holds); routingLooked: the read
	// looked it up, found or not (the decision decides it only then).
	routingRead   *enipamv1alpha1.NodeRouting
	routingLooked bool
	// routingCached is the generation of the NodeRouting in the cache
	// (0: the cache lacks it), which routingRead's may pass while the
	// cache has not seen this process's last apply.
	routingCached int64
	// remapMoves is where the inventory has each address the
	// NodeRouting's spec.remapQueries lists moving ("": no move under
	// way), which the agent's answers to them are decided on
	// (decideLandings).
	remapMoves map[netip.Addr]string
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
	// (readDetached); nil: none is detaching.
	detached *detachedENI
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
	// describes is what the read knows of the describes by ID the
	// decision may wait for (decideReads); nil: none is to be made.
	describes *describeFacts
	// failed is why the read could not gather what the decision needs
	// (nil: it did), failedReason the event reason that names it: the
	// decision is then the failure's alone (decideReadFailed).
	failed       error
	failedReason string
}

// describeFacts: listedUnseen are the ENIs the node agent has been told
// of that the snapshot lacks and this process did not delete; trustFrom is
// when the inventory's describes are trusted from (read when an address
// ready for the pool is untrusted); listed and confirm are the describes
// decideReads asked for, as made (readAgain).
type describeFacts struct {
	listedUnseen    []string
	trustFrom       time.Time
	listed, confirm describeRead
}

// describeFacts returns the read's describeFacts, made on first use.
func (s *nodeSync) describeFacts() *describeFacts {
	if s.describes == nil {
		s.describes = &describeFacts{}
	}
	return s.describes
}

// fillFacts are the inventory's answers fill writes from: the VPC of the
// instance (vpcKnown: the inventory knows it), the subnets of the ENIs
// the snapshots show, and which ENIs of those the node agent has been
// told of (eachListedENI) this process deleted or detached (gone).
type fillFacts struct {
	vpc      cloud.VPC
	vpcKnown bool
	subnets  map[string]cloud.Subnet
	gone     map[string]bool
}

// readFailed records why the read cannot gather what the node's
// decision needs, for decide to decide the failure (decideReadFailed);
// the first failure stands.
func (s *nodeSync) readFailed(err error, reason string) {
	if s.failed == nil {
		s.failed, s.failedReason = err, reason
	}
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
	s.eachListedENI(func(id string) {
		if inv.Deleted(id) || inv.Detached(id) {
			f.gone[id] = true
		}
	})
	return f
}

// read gathers the node's state: its Node and instance (when the
// CiliumNode names another instance, nothing more: the decision is its
// reset, decideReset), its policy, the inventory's snapshot of the
// instance, its NodeRouting and the agent's report, the ENIs the agent
// has been told of that the snapshot lacks (readListedUnseen), the ENI consolidation detached (readDetached); then,
// on the snapshot (readOnSnapshot), where the addresses the agent is
// asked about move, the claims that concern it, the Elastic IPs and the pods waiting for an
// address, and what the pool's reconcile, the agent's remap queries and
// the IPv6 window decide on (readPoolInputs, readMoving, readWindow6).
// Every EC2 read of the reconcile's decision, and every read of the
// cache and the inventory it needs, is made here, before it, or by
// readAgain, on decide's word (decideReads). A read that cannot gather
// what the decision needs stops and says why (readFailed).
func (s *nodeSync) read(ctx context.Context) {
	r := s.r
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: s.cn.Name}, node); err != nil {
		node = nil
	}
	s.node = node
	s.instanceID = resolveInstance(node, s.cn)
	if s.instanceID == "" {
		s.readFailed(fmt.Errorf("%w: no aws:/// providerID on Node %q and no spec.instance-id", cloud.ErrNotFound, s.cn.Name), ReasonInstanceNotFound)
		return
	}
	if instanceReplaced(s.cn, s.instanceID) {
		// The decision is the reset alone (decideReset): the rest is
		// read by the next reconcile, on the reset CiliumNode.
		return
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
		s.policyConflict = fmt.Sprintf("ENIPolicy %s governs this node; %s also match and are ignored", winner.Name, strings.Join(names, ", "))
	}
	s.cfg = policy.Resolve(s.cn, winner, r.opts.Defaults)
	s.readArrivals()

	if !s.snapshot(ctx) {
		return
	}
	if err := s.readRouting(ctx); err != nil {
		s.readFailed(err, ReasonRoutingUnreadable)
		return
	}
	if ids := s.readListedUnseen(); ids != nil {
		s.describeFacts().listedUnseen = ids
	}
	s.readDetached(ctx)
	s.readOnSnapshot(ctx)
}

// readOnSnapshot gathers what is read on the instance's snapshot: where
// the addresses the agent is asked about move (readRemapMoves), the
// claims, the Elastic IPs, the pods waiting, and what the pool's
// reconcile, the agent's remap queries, the IPv6 window and
// consolidation decide on (readFailed: what stopped it).
func (s *nodeSync) readOnSnapshot(ctx context.Context) {
	s.remapMoves = s.readRemapMoves()
	if !s.gatherStatic(ctx) {
		return
	}
	s.readRest(ctx)
}

// readRest reads what the read gathers after the claims.
func (s *nodeSync) readRest(ctx context.Context) {
	s.staticIP, s.haveStaticIP = s.readStaticIP(ctx)
	s.countDemand()
	s.poolIn = s.readPoolInputs(ctx)
	s.moving = s.readMoving()
	s.window6 = s.readWindow6()
	if len(s.poolIn.untrusted) > 0 {
		s.describeFacts().trustFrom = s.r.inv.TrustFrom()
	}
	s.readConsolidationSnapshot(ctx)
}

// readAgain makes the describes by ID decideReads asked for before the
// decision, then takes the instance's snapshot again and gathers on it
// again what depends on it, as read did (readFailed: what stopped it;
// a snapshot that cannot be taken again does). A describe that failed
// changes nothing of the facts but that it failed (decide says so).
func (s *nodeSync) readAgain(ctx context.Context, ask readAsk) {
	d := s.describeFacts()
	if ask.listed != nil {
		d.listed = describeRead{enis: ask.listed, err: s.exec().describeENIs(ctx, ask.listed)}
		if d.listed.err != nil {
			return
		}
		if !s.snapshot(ctx) {
			return
		}
		if s.routing != nil {
			s.routed = s.ownReport(s.routing)
		}
		s.readOnSnapshot(ctx)
		return
	}
	d.confirm = describeRead{enis: ask.confirm, err: s.exec().describeENIs(ctx, ask.confirm)}
	if d.confirm.err != nil {
		return
	}
	s.described = true
	if !s.snapshot(ctx) {
		return
	}
	// The claims' facts are read again on the snapshot the describe
	// refreshed: the decision sees one view of EC2.
	s.readOnSnapshot(ctx)
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

// readListedUnseen returns the ENIs the node agent has been told of
// (eachListedENI: the node's status.eni.enis and its NodeRouting's
// spec.enis) that the snapshot lacks and the inventory does not know
// deleted, sorted (nil: none).
func (s *nodeSync) readListedUnseen() []string {
	var ids []string
	s.eachListedENI(func(id string) {
		if !slices.ContainsFunc(s.snap.ENIs, func(e cloud.ENI) bool { return e.ID == id }) && !s.r.inv.Deleted(id) {
			ids = append(ids, id)
		}
	})
	slices.Sort(ids)
	return slices.Compact(ids)
}
