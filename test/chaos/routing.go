package chaos

import "context"

// startRouting starts the simulated enipam-agents' routing reports: each
// node's NodeRouting status listing the ENIs and addresses routed there,
// without which the operator puts no address of a new ENI in a pool
// (ARCHITECTURE.md, invariant 2).
//
// It is the one place where that reporter plugs in. The simulated agents
// get it in test/agentsim with the NodeRouting rework of the operator;
// start it here against w.cluster.Config (or w.agentProxy.Config(), so an
// outage takes it away too) for the nodes of w.agents. The operator of
// this tree does not wait for the report yet, so nothing runs today.
func startRouting(ctx context.Context, w *world) error {
	_, _ = ctx, w
	return nil
}
