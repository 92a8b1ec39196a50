// Package agent is the core of enipam-agent: it watches the node's own
// NodeRouting and CiliumNode, converges the kernel's ENI links, route
// tables and rules towards them (on start, on every change of either, when
// a managed ENI's link changes, on a resync interval, and on a backoff
// while links are missing or writes fail), reports what is routed in the
// NodeRouting's status, removes the optional start-up taint once routing
// is ready, and tells how that goes through readiness, metrics and
// Kubernetes events.
//
// An Agent acts on whatever routing.Host it is given, so tests start the
// same core against a network namespace of their own:
//
//	ns := kerneltest.New(t)
//	a, err := agent.New(agent.DefaultConfig("node-1"), restConfig, ns.Kernel(), prometheus.NewRegistry(), logger)
//	go a.Start(ctx)
package agent
