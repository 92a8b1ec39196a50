package poolcontroller

import (
	"context"
	"fmt"
	"strings"

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
	// static are the claims concerning the node and the facts about them
	// (nil when none could be read).
	static *staticInputs
	// waiting: pods bound to the node still waiting for an address
	// (the pod watch); headroom: the free addresses kept ahead of them
	// and the used ones.
	waiting, headroom int
}

// read gathers the node's state: its Node, instance and policy, the
// inventory's snapshot of the instance (describing the ENIs its status
// lists that the snapshot lacks), its NodeRouting and the agent's report
// (trusting the remaps the agent confirmed), the claims that concern it
// and the pods waiting for an address. False when the node cannot be
// served (s.opErr says why).
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
	s.countDemand()
	return true
}
