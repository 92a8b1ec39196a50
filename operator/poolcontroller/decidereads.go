package poolcontroller

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

// Some of a node's decision waits for a describe by ID: the read's
// snapshot may lack what the decision is about. decideReads, decide's
// first step, says which ENIs are to be described before anything else
// is decided; the read describes them, takes the snapshot again and
// gathers the facts again on it (readAgain), and the decision is made
// on those. Nothing else is decided on a snapshot that lacks them.

// describeRead is a describe by ID decideReads asked for, as the read
// made it: enis described (nil: not asked), err its failure.
type describeRead struct {
	enis []string
	err  error
}

// readAsk is what decideReads decides: listed, the ENIs the node's
// status lists that the snapshot lacks, to describe; confirm, the ENIs
// of addresses ready for the pool whose describe the cache does not
// trust, to describe; wait, how soon to look at the node again when
// those addresses' describe waits.
type readAsk struct {
	listed, confirm []string
	wait            time.Duration
}

// any reports whether a describe is asked for before deciding.
func (a readAsk) any() bool { return a.listed != nil || a.confirm != nil }

// decideReads decides, from f alone, the describes by ID the decision
// waits for, each asked once per reconcile (f.listed, f.confirm: made):
//
//   - the ENIs the node's status lists that the snapshot lacks (and this
//     process did not delete): a process that took over may have missed,
//     in its first describes, an ENI its predecessor created seconds
//     before, and would otherwise not learn of it before the next
//     resync;
//   - the ENIs of the addresses the pool would lack on a describe's word
//     that may predate this process (an earlier process may have
//     unassigned them just before it stopped), or on this process's own
//     reassignment that EC2 may not have completed: the pool's reconcile,
//     run on a copy of the node (unpooledUnverified), names them. Before
//     describes are trusted, only this process's own reassignments are
//     worth a describe now (one started a consistency grace after the
//     call shows whether the remap landed whenever it runs); the others
//     wait for the trust, and the node is looked at again then. A
//     describe the agent's answers make a back-up waits too
//     (describeCanWait).
func decideReads(f *facts) readAsk {
	var r describeFacts
	if f.describes != nil {
		r = *f.describes
	}
	if r.listed.enis == nil && len(r.listedUnseen) > 0 && f.cn.Spec.InstanceID == f.instanceID {
		return readAsk{listed: r.listedUnseen}
	}
	if r.confirm.enis != nil || f.poolIn == nil || len(f.poolIn.untrusted) == 0 {
		return readAsk{}
	}
	n, enis := unpooledUnverified(f)
	if n == 0 {
		return readAsk{}
	}
	if wait := r.trustFrom.Sub(f.now); wait > 0 && !movingOnto(f.moving, enis) {
		return readAsk{wait: wait}
	}
	if wait := describeCanWait(f, n, enis); wait > 0 {
		return readAsk{wait: wait}
	}
	return readAsk{confirm: enis}
}

// unpooledUnverified counts the addresses the pool's reconcile would
// leave out for want of a trusted describe (poolView.unverified), and
// names their ENIs: it runs the reconcile on a copy of the node and of
// the memory it edits.
func unpooledUnverified(f *facts) (int, []string) {
	in := *f.poolIn
	in.snap, in.cfg, in.now = &f.snap, &f.cfg.Config, f.now
	in.missing, in.backoff = maps.Clone(f.mem.missing), f.mem.repairs
	v := &poolView{cn: f.cn.DeepCopy()}
	v.reconcile(&in)
	return v.unverified, v.unverifiedENIs
}

// movingOnto reports whether any of the addresses this process
// reassigned (moving) is on its way onto one of enis.
func movingOnto(moving map[netip.Addr]string, enis []string) bool {
	for _, eni := range moving {
		if slices.Contains(enis, eni) {
			return true
		}
	}
	return false
}

// describeCanWait returns how long the describe of the node's
// unverified addresses (unverified of them, on enis) can wait, 0 if it
// cannot: while each is a reassignment this process made whose query
// the node's agent answered Missing (it reads the metadata again every
// 100 ms and reports the landing before any describe, which lags the
// remap, could show it), describes only back it up, at most every
// unverifiedRecheck after the last query or describe, rather than on
// every look at the node. An agent that has not answered, and addresses
// that are no reassignment of this process, are described at once.
func describeCanWait(f *facts, unverified int, enis []string) time.Duration {
	wait := f.mem.remapsLooked.Add(unverifiedRecheck).Sub(f.now)
	if wait <= 0 {
		return 0
	}
	watched := 0
	for ip, eni := range f.moving {
		if !slices.Contains(enis, eni) {
			continue
		}
		if a, ok := f.mem.remapsAsked[ip.String()]; ok && a.missing {
			watched++
		}
	}
	if watched < unverified {
		return 0
	}
	return wait
}
