package poolcontroller

import (
	"log/slog"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// SetOnDecide has r call f as each node's decision starts, once its
// reads are done.
func SetOnDecide(r *Reconciler, f func(node string)) { r.onDecide = f }

// SetOnDecided has r call f as each node's decision ends, before the
// CiliumNode's write.
func SetOnDecided(r *Reconciler, f func(node string)) { r.onDecided = f }

// SetOnShared has r call f with each change of the state shared between
// nodes (the needs, the EC2 slots, the nodes' states, the metrics).
func SetOnShared(r *Reconciler, f func(what string)) {
	r.onShared, r.needs.changed, r.slots.changed = f, f, f
}

// testSync is a reconcile of one node on r, whose working state is d,
// with the decision's environment on r's clock and options and the
// other nodes' answers read from r's coordinators, as newSync and facts
// make them.
func testSync(r *Reconciler, orig *ciliumv2.CiliumNode, d deciding) *nodeSync {
	now := r.now
	if now == nil {
		now = time.Now
	}
	d.r = newDecisionEnv(now, r.opts, slog.LevelDebug)
	if r.needs != nil && d.cn != nil {
		d.cross.emptyElsewhere = r.needs.emptyElsewhere(d.cn.Name)
	}
	d.cross.newENITokens = r.newENITokens()
	if r.slots != nil {
		d.cross.slotOpen = r.slots.open()
	}
	d.orig = orig
	return &nodeSync{r: r, deciding: d}
}
