// Package agentsim simulates Cilium's agent in `ipam: crd` mode, one agent
// per node, many nodes in one process, against a real kube-apiserver.
//
// Each simulated agent behaves like pkg/ipam/crd.go of Cilium towards its
// CiliumNode: it waits until spec.ipam.pool holds its initial IPs
// (min-allocate, else pre-allocate, else 2), takes the router and health
// IPs, hands pool IPs to pods (an entry whose owner names the pod first),
// never hands out an IP in the release handshake or already in use, answers
// the handshake in status.ipam.release-ips, and writes status.ipam.used no
// more often than once per update interval (Cilium's
// ipam.ciliumNodeUpdateRate, 15 s by default).
//
// What an operator must never do is counted in a Ledger shared by all
// agents: an IP held by two pods (on one node or two), an IP removed from a
// pool while in use, an IP removed without the agent's ready-for-release.
// Every pod that found no free IP is counted as a wait, with its duration.
//
// One Sim serves all agents with one shared CiliumNode informer and a
// bounded pool of status writers behind one client-side rate limit, so
// thousands of agents cost memory and apiserver writes, not goroutines.
// Churn drives pods onto Ready agents: Poisson arrivals per node,
// lifetimes from a distribution, and bursts like a deployment scaled up.
//
// A typical run:
//
//	sim, _ := agentsim.New(cfg, agentsim.Options{UpdateInterval: time.Second})
//	_ = agentsim.CreateNodes(ctx, c, specs, 32)
//	_ = sim.Start(ctx)
//	for _, s := range specs {
//		sim.AddAgent(s.Name)
//	}
//	_ = sim.WaitReady(ctx, len(specs))
//	report, _ := agentsim.NewChurn(sim, agentsim.ChurnConfig{Seed: 1, ArrivalRate: 0.5, MeanLifetime: time.Minute, Duration: 10 * time.Minute}).Run(ctx)
//	figures := sim.Figures() // figures.Violations.Total() must be 0
//
// Figures gives the fleet's totals (allocations, waits with p50/p99,
// status writes and how long changes waited for them, idle IPs now and
// sampled over time); NodeFigures and Agent.PoolReachedAt the per-node
// ones. Pods can also be driven by hand with Agent.Allocate, AllocateAsync
// and Release, or be real Pod objects: Kubelet plays the kubelets of the
// Sim's nodes, giving a pod bound by a real scheduler its CNI ADD a
// configurable moment after binding, writing its status.podIP, and
// confirming deletions after the CNI DEL, so real controllers (a
// StatefulSet's, enipam-operator's) see pods live as in a cluster.
//
// An owner-stamped pool entry goes to the pod of that owner and to no
// other, whatever its state, as Cilium's nodeStore.allocateNext hands it
// out (pkg/ipam/crd.go): in the release handshake or held by another pod
// too, the latter then counted as a double allocation.
//
// Where the simulator departs from Cilium, on purpose: a pod asking an
// agent that has not started yet waits (Cilium's CNI would fail and the
// kubelet retry); a dual-stack pod (Options.IPFamilies) waits until it
// can get an address of each family, where Cilium's CNI ADD fails and the
// kubelet retries; spec.ipam.ipv6-pool is ignored (enipam lists IPv6 in
// spec.ipam.pool, which Cilium's crd allocator serves per family). Its
// routing report (Routed) carries IPv6 as enipam-agent reports it: IPv6
// addresses in ipv6, ipv6-prefixes whole in ipv6Prefixes.
package agentsim
