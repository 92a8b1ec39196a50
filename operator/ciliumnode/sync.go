package ciliumnode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
)

// nodeSync is one reconcile of one node: the object as read, the object
// as it should be written, and what happened on the way.
type nodeSync struct {
	r        *Reconciler
	mem      *memory
	orig     *ciliumv2.CiliumNode
	cn       *ciliumv2.CiliumNode
	policies []enipamv1alpha1.ENIPolicy

	instanceID string
	cfg        policy.Config
	snap       pool.Node
	haveSnap   bool
	pool       *poolView

	// opErr becomes status.ipam.operator-status.error.
	opErr   error
	requeue time.Duration
}

func (r *Reconciler) newSync(_ context.Context, cn *ciliumv2.CiliumNode, policies []enipamv1alpha1.ENIPolicy) *nodeSync {
	return &nodeSync{r: r, mem: r.memory(cn.Name), orig: cn, cn: cn.DeepCopy(), policies: policies}
}

// run decides and executes everything; it never writes the CiliumNode.
func (s *nodeSync) run(ctx context.Context) {
	r := s.r
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: s.cn.Name}, node); err != nil {
		node = nil
	}
	s.instanceID = instanceID(s.cn, node)
	if s.instanceID == "" {
		s.fail(fmt.Errorf("%w: no spec.instance-id and no aws:/// providerID on Node %q", cloud.ErrNotFound, s.cn.Name), ReasonInstanceNotFound)
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
		r.warn(s.cn, s.mem, ReasonPolicyConflict, fmt.Sprintf("ENIPolicy %s governs this node; %s also match and are ignored", winner.Name, strings.Join(names, ", ")))
	}
	s.cfg = policy.Resolve(s.cn, winner, r.opts.Defaults)

	if !s.snapshot(ctx) {
		return
	}
	s.pool = newPoolView(s.cn, &s.snap, &s.cfg.Config)
	s.snap.Available, s.snap.Used = s.pool.counts()
	needed := pool.Needed(s.snap.Available, s.snap.Used, s.cfg.Knobs)
	r.metrics.observeNode(s.cn.Name, s.snap.Available, s.snap.Used, needed)

	if needed > 0 {
		// Demand is back: IPs on their way out are handed back first.
		if s.pool.abortRelease() > 0 {
			s.snap.Available, s.snap.Used = s.pool.counts()
		}
	} else if err := s.finishRelease(ctx); err != nil {
		s.fail(err, ReasonEC2Error)
	}

	plan := pool.Compute(&s.snap, &s.cfg.Config)
	if plan.Needed > 0 && s.mem.deficitAt.IsZero() {
		s.mem.deficitAt = r.now()
	}
	if !plan.Empty() {
		err := s.apply(ctx, &plan)
		// Whatever succeeded is in the inventory now; the pool follows it.
		if s.snapshot(ctx) {
			s.pool.addCloudIPs(&s.snap, &s.cfg.Config)
			s.snap.Available, s.snap.Used = s.pool.counts()
		}
		if err != nil {
			s.fail(err, reasonFor(err))
			return
		}
	}
	if err := s.repairDeleteOnTermination(ctx); err != nil {
		s.fail(err, ReasonEC2Error)
		return
	}
	if plan.Blocked != nil {
		s.fail(plan.Blocked, reasonFor(plan.Blocked))
		return
	}
	if pool.Needed(s.snap.Available, s.snap.Used, s.cfg.Knobs) == 0 && !s.mem.deficitAt.IsZero() {
		r.metrics.allocationLatency.Observe(r.now().Sub(s.mem.deficitAt).Seconds())
		s.mem.deficitAt = time.Time{}
	}
	s.mem.failures = 0
	s.mem.lastWarning = ""
	s.r.setState(s.mem, stateServed)
	if pool.Needed(s.snap.Available, s.snap.Used, s.cfg.Knobs) > 0 {
		s.r.setState(s.mem, stateDeficit)
	}
	s.markExcess()
}

// snapshot refreshes s.snap from the inventory; false when the node
// cannot be served.
func (s *nodeSync) snapshot(ctx context.Context) bool {
	snap, err := s.r.inv.Snapshot(ctx, s.instanceID, s.r.opts.Cluster)
	if err != nil {
		if errors.Is(err, cloud.ErrNotFound) {
			s.fail(fmt.Errorf("EC2 instance %s: %w", s.instanceID, err), ReasonInstanceNotFound)
		} else {
			s.fail(err, ReasonEC2Error)
		}
		return false
	}
	s.snap, s.haveSnap = snap, true
	return true
}

// fail records why the node is not served as it should be: the node's
// operator-status, an event, and when to look again.
func (s *nodeSync) fail(err error, reason string) {
	s.opErr = err
	s.r.warn(s.cn, s.mem, reason, err.Error())
	state := stateFailing
	switch {
	case errors.Is(err, pool.ErrAtCapacity):
		state = stateAtCapacity
	case isBlocked(err) || errors.Is(err, pool.ErrSubnetExhausted) || errors.Is(err, pool.ErrNoSecurityGroup):
		state = stateBlocked
	}
	s.r.setState(s.mem, state)
	if state == stateFailing {
		s.mem.failures++
		s.requeue = s.r.retryAfter(s.mem.failures - 1)
	} else {
		// Nothing but a change helps; watch events bring the changes,
		// and a slow retry covers the cloud's.
		s.requeue = s.r.opts.BlockedRetry
	}
	s.r.log.Info("node not fully served", "node", s.cn.Name, "instance", s.instanceID, "reason", reason, "error", err)
}

func (s *nodeSync) result() ctrl.Result {
	d := s.requeue
	if s.pool != nil && s.pool.pendingRelease > 0 && (d == 0 || s.pool.pendingRelease < d) {
		d = s.pool.pendingRelease
	}
	return ctrl.Result{RequeueAfter: d}
}

// reasonFor maps an error to an event reason.
func reasonFor(err error) string {
	switch {
	case errors.Is(err, pool.ErrAtCapacity), errors.Is(err, cloud.ErrENILimit), errors.Is(err, cloud.ErrIPLimit):
		return ReasonInstanceAtCapacity
	case errors.Is(err, pool.ErrSubnetExhausted), errors.Is(err, cloud.ErrSubnetFull):
		return ReasonSubnetExhausted
	case errors.Is(err, pool.ErrNoSecurityGroup):
		return ReasonNoSecurityGroup
	case errors.Is(err, cloud.ErrNotFound):
		return ReasonInstanceNotFound
	}
	return ReasonEC2Error
}

// instanceID finds the node's EC2 instance: spec.instance-id, else the
// Node's providerID aws:///<zone>/<instance-id>.
func instanceID(cn *ciliumv2.CiliumNode, node *corev1.Node) string {
	if cn.Spec.InstanceID != "" {
		return cn.Spec.InstanceID
	}
	if node == nil {
		return ""
	}
	id, ok := strings.CutPrefix(node.Spec.ProviderID, "aws://")
	if !ok {
		return ""
	}
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}
