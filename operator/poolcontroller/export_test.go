package poolcontroller

import (
	"context"
	"log/slog"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// SetOnDecide has r call f as each node's decision starts, once its
// reads are done.
func SetOnDecide(r *Reconciler, f func(node string)) { r.onDecide = f }

// SetOnDecided has r call f as each node's decision ends, before the
// CiliumNode's write, or (reads) before the describes it asked for.
func SetOnDecided(r *Reconciler, f func(node string, reads bool)) { r.onDecided = f }

// SetOnShared has r call f with each change of the state shared between
// nodes (the needs, the EC2 slots, the nodes' states, the metrics).
func SetOnShared(r *Reconciler, f func(what string)) {
	r.onShared = f
	r.needs = watchedNeeds{r.needs, f}
	r.slots = watchedSlots{r.slots, f}
}

// watchedNeeds tells changed of each change of the needs, before it.
type watchedNeeds struct {
	needTracker
	changed func(what string)
}

func (w watchedNeeds) estimate(node string, empty bool) {
	w.changed("needs.estimate")
	w.needTracker.estimate(node, empty)
}

func (w watchedNeeds) set(node string, empty bool) {
	w.changed("needs.set")
	w.needTracker.set(node, empty)
}

func (w watchedNeeds) hold(node string) bool {
	w.changed("needs.hold")
	return w.needTracker.hold(node)
}

func (w watchedNeeds) forget(node string) {
	w.changed("needs.forget")
	w.needTracker.forget(node)
}

// watchedSlots tells changed of each change of the slots, before it.
type watchedSlots struct {
	slotKeeper
	changed func(what string)
}

func (w watchedSlots) acquire(node string, priority int) bool {
	w.changed("slots.acquire")
	return w.slotKeeper.acquire(node, priority)
}

func (w watchedSlots) release() {
	w.changed("slots.release")
	w.slotKeeper.release()
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

// readDecideRouting is the read of the node's NodeRouting (readRouting)
// and the decision's first step on it (decideRouting), as a reconcile
// makes them.
func (s *nodeSync) readDecideRouting(ctx context.Context) error {
	if err := s.readRouting(ctx); err != nil {
		return err
	}
	s.decideRouting()
	return nil
}
