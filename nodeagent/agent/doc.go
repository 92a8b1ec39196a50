// Package agent is the core of enipam-agent: it watches the node's own
// CiliumNode, converges the kernel's ENI links, route tables and rules
// towards it (on start, on every change of the CiliumNode, when a managed
// ENI's link changes, on a resync interval, and on a backoff while links
// are missing or writes fail), and reports how that goes through
// readiness, metrics and Kubernetes events.
//
// An Agent acts on whatever routing.Host it is given, so tests start the
// same core against a network namespace of their own:
//
//	ns := kerneltest.New(t)
//	a, err := agent.New(agent.DefaultConfig("node-1"), restConfig, ns.Kernel(), prometheus.NewRegistry(), logger)
//	go a.Start(ctx)
package agent
