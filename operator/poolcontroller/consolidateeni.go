package poolcontroller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// consolidateENIs decides whether to detach a secondary ENI left without
// addresses for the delay, or to delete the one detached once EC2 shows
// it available: read, then decide, then record what needs no call; the
// call, if any, is left to the executor (act, executeConsolidation).
func (s *deciding) consolidateENIs() {
	step := decideConsolidation(s.readConsolidation())
	c := &s.mem.consolidation
	if step.keep {
		if len(step.emptySince) == 0 {
			clear(c.emptySince)
		} else {
			c.emptySince = step.emptySince
		}
	}
	if step.wait > 0 {
		s.requeueWithin(step.wait)
	}
	switch {
	case step.detach != nil, step.redetach != nil, step.deleteENI != "":
		s.acts.consolidation = &step
	case step.finished:
		s.finishConsolidation()
	}
}

// consolidationFacts is what the consolidation of a node's ENIs decides
// on, read beforehand by readConsolidation: plain values, no client.
type consolidationFacts struct {
	// on: consolidation acts on the node (consolidating); growing: the
	// node is short of addresses, waits for routes or for a static
	// address to be placed.
	on, growing bool
	// snap is the inventory's view of the instance, taken afresh; nil
	// when it was not needed or could not be taken.
	snap *snapshot.Node
	cfg  *pool.Config
	// delay is the policy's consolidation delay; cluster names the ENIs
	// that may go; named the ENIs the pool lists an address of.
	delay   time.Duration
	cluster string
	named   map[string]bool
	// used, headroom: what the node's other ENIs must carry.
	used, headroom int
	// mem is consolidation's memory of the node, as the reconcile began.
	mem consolidationMemory
	now time.Time
	// detached is the ENI consolidation detached, as a describe by ID
	// showed it (known: EC2 still has it; readErr: the describe failed).
	detached      cloud.ENI
	detachedKnown bool
	readErr       error
}

// consolidationStep is what consolidation decided: at most one EC2 call
// (detach an emptied ENI, detach again the one EC2 never showed
// detaching, or delete the detached one), the ENIs' new emptySince, and
// when to look again.
type consolidationStep struct {
	// detach is the emptied ENI to detach now; redetach the detached ENI
	// whose detach is sent again; deleteENI the detached ENI EC2 shows
	// available.
	detach, redetach *cloud.ENI
	deleteENI        string
	// finished: the detached ENI is gone; consolidation of it is over.
	finished bool
	// emptySince replaces the memory's when keep is set.
	emptySince map[string]time.Time
	keep       bool
	// wait: look at the node again within wait (0: no need).
	wait time.Duration
}

// readConsolidation gathers what consolidation decides on: the detached
// ENI as read described afresh by ID (readDetached), else the instance's
// snapshot the read took again (readConsolidationSnapshot) when
// consolidation may act (none when it could not be, s.opErr says why).
func (s *deciding) readConsolidation() consolidationFacts {
	c := s.mem.consolidation
	f := consolidationFacts{on: s.consolidating(), mem: c, now: s.r.now(), cluster: s.r.opts.Cluster}
	if c.detaching != "" {
		if d := s.detached; d != nil {
			f.detached, f.detachedKnown, f.readErr = d.eni, d.known, d.err
		}
		return f
	}
	if !f.on {
		return f
	}
	f.growing = s.needed() > 0 || s.pool.awaiting > 0 || s.staticDemand > 0
	if f.growing {
		return f
	}
	switch fresh := s.consolidationSnap; {
	case fresh.taken:
		if !s.useSnapshot(fresh.snap, fresh.err, s.fail) {
			return f
		}
		// A snapshot taken afresh carries no pool counts: the node's
		// pods are counted again, so that its other ENIs must carry
		// them too.
		s.countPool()
	case !fresh.settled:
		return f
	}
	f.snap, f.cfg, f.delay, f.headroom = &s.snap, &s.cfg.Config, s.cfg.Consolidation.Delay, s.headroom
	f.used = s.snap.Used
	f.named = map[string]bool{}
	for _, entry := range s.cn.Spec.IPAM.Pool {
		f.named[entry.Resource] = true
	}
	return f
}

// freshSnapshot is the instance's snapshot taken again at the end of
// the read for consolidation (taken), or why it could not be; settled:
// none was needed, the read's snapshot showing no ENI consolidation
// could find empty.
type freshSnapshot struct {
	taken, settled bool
	snap           snapshot.Node
	err            error
}

// readConsolidationSnapshot takes the instance's snapshot again, last of
// the read, for consolidation to decide on (readConsolidation): only
// when it may act, no ENI detaching, and the read's snapshot shows an
// ENI it could find empty (mayEmpty). Otherwise that snapshot settles
// it: no ENI is empty, and none is detached.
func (s *nodeSync) readConsolidationSnapshot(ctx context.Context) {
	if !s.cfg.ReleaseExcessIPs || !s.cfg.Consolidation.Enabled || s.mem.consolidation.detaching != "" {
		return
	}
	if !mayEmpty(&s.snap, s.r.opts.Cluster) {
		s.consolidationSnap.settled = true
		return
	}
	s.consolidationSnap.snap, s.consolidationSnap.err = s.r.inv.Snapshot(ctx, s.instanceID, s.r.opts.Cluster)
	s.consolidationSnap.taken = true
}

// mayEmpty reports whether snap shows an ENI that consolidation could
// find empty (emptyENIs): a secondary ENI of the cluster without an
// address or a prefix, attached or not yet (its attachment may complete
// before consolidation decides).
func mayEmpty(snap *snapshot.Node, cluster string) bool {
	for i := range snap.ENIs {
		e := &snap.ENIs[i]
		if e.DeviceIndex > 0 && e.Tags[cloud.TagCluster] == cluster && len(e.IPs) == 0 && len(e.Prefixes) == 0 {
			return true
		}
	}
	return false
}

// detachedENI is the ENI consolidation detached, described by ID by the
// read (known: EC2 still has it; err: the describe failed).
type detachedENI struct {
	eni   cloud.ENI
	known bool
	err   error
}

// readDetached describes by ID the ENI consolidation detached, while one
// is detaching, for readConsolidation.
func (s *nodeSync) readDetached(ctx context.Context) {
	id := s.mem.consolidation.detaching
	if id == "" {
		return
	}
	d := &detachedENI{}
	if d.err = s.exec().describeENIs(ctx, []string{id}); d.err == nil {
		d.eni, d.known = s.r.inv.ENI(id)
	}
	s.detached = d
}

// decideConsolidation decides, from f alone, what consolidation does
// now: with an ENI detaching, delete it once EC2 shows it available (or
// send its detach again when EC2 still shows it attached past
// detachResend); otherwise detach the first secondary ENI left without
// addresses for the policy's delay, the node grown by no ENI meanwhile,
// whose node its other ENIs can carry. It makes no call.
func decideConsolidation(f consolidationFacts) consolidationStep {
	c := f.mem
	if c.detaching != "" {
		switch {
		case f.readErr != nil:
			return consolidationStep{wait: detachRetry}
		case f.detachedKnown && f.detached.Status != cloud.ENIAvailable:
			step := consolidationStep{wait: detachRetry}
			if f.detached.AttachmentStatus == cloud.AttachmentAttached && f.now.Sub(c.detachedAt) > detachResend {
				// EC2 never took the detach (or a describe keeps
				// lagging): sent again.
				eni := f.detached
				step.redetach = &eni
			}
			return step
		case f.detachedKnown:
			return consolidationStep{deleteENI: c.detaching, finished: true}
		}
		// Gone already (the collector may delete it first: it carries
		// the cluster's tag).
		return consolidationStep{finished: true}
	}
	if !f.on {
		return consolidationStep{keep: true}
	}
	if f.growing || f.snap == nil {
		// Growing: an ENI that stays empty meanwhile was not needed for
		// it, and is looked at once the node is covered.
		return consolidationStep{}
	}
	empty := emptyENIs(f.snap, f.cfg, f.cluster, func(id string) bool { return f.named[id] })
	step := consolidationStep{keep: true, emptySince: map[string]time.Time{}}
	for id, since := range c.emptySince {
		if slices.Contains(empty, id) {
			step.emptySince[id] = since
		}
	}
	due := ""
	for _, id := range empty {
		since, ok := step.emptySince[id]
		if !ok {
			since = f.now
			step.emptySince[id] = since
		}
		ready := since.Add(f.delay)
		if grown := c.grewAt.Add(f.delay); grown.After(ready) {
			ready = grown
		}
		if wait := ready.Sub(f.now); wait > 0 {
			if step.wait == 0 || wait < step.wait {
				step.wait = wait
			}
			continue
		}
		if due == "" && carriedElsewhere(f.snap, f.cfg, id) >= f.used+f.headroom+f.cfg.MaxAboveWatermark {
			due = id
		}
	}
	if due != "" {
		i := slices.IndexFunc(f.snap.ENIs, func(e cloud.ENI) bool { return e.ID == due })
		eni := f.snap.ENIs[i]
		step.detach = &eni
	}
	return step
}

// executeConsolidation makes consolidation's EC2 call, records it in the
// inventory and in consolidation's memory, and says when to look again.
func (s *nodeSync) executeConsolidation(ctx context.Context, step consolidationStep) {
	c := &s.mem.consolidation
	now := s.r.now()
	switch {
	case step.detach != nil:
		eni := step.detach
		if err := s.exec().detach(ctx, eni); err != nil {
			s.r.log.Info("detaching an emptied ENI failed; retrying", "node", s.cn.Name, "eni", eni.ID, "error", err)
			s.requeueWithin(s.r.retryAfter(0))
			return
		}
		delete(c.emptySince, eni.ID)
		c.detaching, c.detachedAt = eni.ID, now
		s.r.log.Info("detaching an emptied ENI", "node", s.cn.Name, "instance", s.instanceID, "eni", eni.ID, "device", eni.DeviceIndex)
		s.requeueWithin(detachRetry)
		return
	case step.redetach != nil:
		if err := s.exec().detach(ctx, step.redetach); err == nil {
			c.detachedAt = now
		}
		return
	case step.deleteENI != "":
		if err := s.exec().deleteDetached(ctx, step.deleteENI); err != nil {
			s.r.log.Info("deleting a detached ENI failed; retrying", "node", s.cn.Name, "eni", step.deleteENI, "error", err)
			s.requeueWithin(s.r.retryAfter(0))
			return
		}
	}
	if step.finished {
		s.finishConsolidation()
	}
}

// finishConsolidation records that the detached ENI is gone:
// consolidation of it is over.
func (s *deciding) finishConsolidation() {
	c := &s.mem.consolidation
	id := c.detaching
	c.detaching = ""
	s.r.metrics.consolidations.WithLabelValues("eni").Inc()
	s.r.events.Eventf(s.cn, nil, "Normal", ReasonENIConsolidated, "Consolidate",
		"%s", fmt.Sprintf("ENI %s held no address for %s: detached and deleted", id, s.cfg.Consolidation.Delay))
	s.r.log.Info("emptied ENI deleted", "node", s.cn.Name, "instance", s.instanceID, "eni", id)
}
