package poolcontroller

import (
	"slices"

	"github.com/enipam/enipam/operator/snapshot"
)

// decision is what one look at a node's state decides about its pool and
// its static addresses, beyond the desired CiliumNode (the poolView's,
// edited in place): what the pool's reconcile changed, and the static
// addresses' outcome (the addresses to place on the node's ENIs, the ENI
// to create or the secondary address to assign for them, the agent's
// queries, the claims' notes and the first placements waiting), and the
// ENIs whose delete-on-termination is repaired.
type decision struct {
	pool    poolChanges
	static  staticOutcome
	repairs repairs
}

// decide derives the node's pool from EC2 and the release handshake
// (poolView.reconcile), then runs the static addresses' steps on it
// (reconcileStatic), from the facts in in alone: it makes no call and
// reads no clock (in.now is the reconcile's). It also picks the repairs
// of delete-on-termination due (decideRepairs). Its EC2 actions are
// carried out by runStatic, the pool's plan by apply, the repairs by
// executeRepairs.
func decide(v *poolView, in *poolInputs) decision {
	d := decision{pool: v.reconcile(in), repairs: decideRepairs(in.snap, in.cluster, in.backoff, in.now)}
	if in.static != nil {
		// On a copy: a placement takes its slot on the copy's ENI, for
		// the pass's next choices, while the node's snapshot (and the
		// ENIs its status lists) stays what EC2 holds until the
		// executor placed it.
		snap := cloneENIs(in.snap)
		d.static = v.reconcileStatic(in.static, &snap, in.cfg)
	}
	return d
}

// cloneENIs copies snap with its ENIs and their address lists.
func cloneENIs(snap *snapshot.Node) snapshot.Node {
	out := *snap
	out.ENIs = slices.Clone(snap.ENIs)
	for i := range out.ENIs {
		out.ENIs[i].IPs = slices.Clone(out.ENIs[i].IPs)
	}
	return out
}
