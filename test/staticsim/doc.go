// Package staticsim is a deterministic simulation of enipam's static-IP
// control loop: one seed, one world, every step drawn from the seed, no
// sleeps and no goroutines, so that a failing seed replays step for step
// (go test ./test/staticsim -run TestSeeds -seed=N -v prints its trace;
// -watch=ADDRESS adds every change of that address's pool, handshake and
// used entries, -oplog the operator's debug log). TestSeeds runs -seeds
// seeds (2000 by default) from -from, on every core, and prints the steps,
// the distinct interleavings (hashes of the step kinds and their targets)
// and what they did: binds, pod starts, moves, operator restarts.
//
// # What runs for real
//
//   - The pool controller's and the claim controller's Reconcile
//     (operator/poolcontroller, operator/claimcontroller): every decision
//     of placing, stamping, moving, releasing and checking a static
//     address, with their inventory (operator/inventory) driven by
//     Inventory.SyncOnce on the simulation's clock (Options.Now).
//   - enipam-scheduler's bind verb (scheduler/extender.Bind): it creates
//     the claim of a static pod or asks it onto the chosen node, and binds
//     only once that node's pool holds the address settled (room.Digest).
//   - EC2 is ec2sim's State behind cloudfake, on a manual clock; three
//     seeds in four run on ec2sim's realistic timing: attachments that
//     take seconds, reassignments (AllowReassignment) that land 1–4 s
//     after the call, released addresses that cool down, describes that
//     lag a quarter of the changes.
//   - The apiserver is controller-runtime's fake client with the real
//     schemes, resourceVersions from one counter as etcd's; the operator
//     reads it as its informer cache would (fresh, with the cache indexes
//     of package claims) and writes through it. Merge patches and
//     updates of typed objects take a shorter path to the same result
//     (writes.go: the stored object, the answer, the error and the
//     resourceVersion the fake client would give).
//
// # What is modelled
//
//   - Cilium's agent of each node, as pkg/ipam/crd.go of v1.20.2 does it:
//     its view of its CiliumNode arrives when a step delivers it (watch
//     delay); it answers the release handshake on that view
//     (updateLocalNodeResource: do-not-release for an address it has
//     allocated, ready-for-release otherwise, release-ips entries dropped
//     once out of the pool); it hands out addresses as allocateNext does
//     (the entry stamped with the pod's name whatever its state, else a
//     free entry neither allocated, in the handshake nor stamped); and it
//     writes status.ipam.used with its answers by an UpdateStatus of its
//     whole view, no more often than every 15 s (ciliumNodeUpdateRate),
//     retried after a conflict.
//   - enipam-agent of each node reports routed what agentsim.Routed says,
//     and answers the NodeRouting's remap queries as its instance's
//     metadata would: an address landed once EC2's state has it on the
//     queried ENI (its remap landed; describes may still lag it), for
//     the spec generation it read.
//   - kube-apiserver's generations: every object of a kind with a status
//     subresource (NodeRoutings, StaticIPClaims, CiliumNodes, ENIPolicies,
//     pods) is created at generation 1 and gets the next one on each
//     write through its main resource that changes its spec; a claim's
//     placement note names the generation it was written for, so one
//     written before the extender asked the claim elsewhere is not
//     acted on (claims.CurrentNote).
//   - Kubelets: a CNI ADD for a bound pod, a CNI DEL for a pod whose
//     object is gone (a pod of the same name is started on a node only
//     after the old one stopped there).
//   - kube-scheduler: a pending pod and a schedulable node drawn by the
//     seed (four times in five the node its claim is asked onto, as the
//     extender's prioritize ranks it), then Bind, which answers at once.
//   - The StatefulSet controller (db-0 …, static, the first with an
//     Elastic IP) and as many ordinary pods (web-0 …), recreated under
//     the same name after a delete.
//   - Events: pods deleted gracefully (CNI DEL first) or by force (the
//     container runs on until its kubelet's next step); claims created
//     with spec.address (an address another claim records, an entry of a
//     pool, or an unused one) and deleted; nodes cordoned (and drained)
//     and uncordoned; an instance terminated (its pods, Node, CiliumNode
//     and NodeRouting gone with it); the operator restarted between steps
//     (inventory, marks and every memory lost; the pool controller's
//     notes stay in the claims' status, of a term now gone); and the operator
//     killed at its 1st–3rd next write to the apiserver or EC2, that write
//     landing or not (a status patch lands and the spec patch after it is
//     lost; an Unassign lands and its answer is lost).
//   - The node's Elastic IP (Cilium's ipam-static-ip-tags, served by the
//     pool controller's staticip.go): EC2 holds 0–3 Elastic IPs tagged
//     static-pool=a, 0–2 tagged b and 0–2 untagged, drawn by the seed
//     (at times fewer tagged than nodes wanting one); at times one tagged
//     address is associated with another workload's ENI, and one with a
//     node's primary address by hand (the user's own: the operator takes
//     it for the node's once the node asks for its tags, and leaves it
//     alone otherwise), both before EC2's timing is set (old, no describe
//     lags them). Each node's agent starts with tags a, b or none, drawn
//     by the seed; an event restarts a node's agent with other tags (or
//     none), written as nodediscovery's updateCiliumNodeResource does
//     (a get, then an update of the whole CiliumNode). The first
//     replica's claim takes its Elastic IP by allocating one, or, one
//     seed in two, from the pool tagged a, competing with the nodes. An
//     instance terminated with its node's Elastic IP loses the
//     association as EC2 does (its primary ENI is deleted). The operator
//     may be killed at its 1st–3rd next write of a node Elastic IP step
//     (a NodeRouting spec write touching staticIP or its finalizer, an
//     AssociateAddress, a DisassociateAddress), landing or not. A
//     terminated node's NodeRouting, held by its finalizer, is
//     reconciled while quiescing, as its deletion queues it. Cilium's
//     agent waits at start for status.ipam.assigned-static-ip when it
//     has tags (pkg/ipam/crd.go, newNodeStore, staticIPStatus), but
//     writes nothing because of it, so the wait is not modelled; its
//     status writes of its whole view, which carry assigned-static-ip as
//     it last saw it, are (under the view's resourceVersion).
//
// # What is checked, after every step
//
//   - no address on two ENIs in EC2, none in two pools;
//   - no address held by two pods; a running pod's address is on its
//     node's instance in EC2;
//   - no pod gets an address a claim of another pod has (Bound to it and
//     recording it since);
//   - no claimed address (status.address of a claim not being deleted)
//     is unassigned by the operator;
//   - Elastic IPs only on their claims' addresses (agentsim.CheckPublicIPs);
//   - the nodes' Elastic IPs (checkNodeEIPs): no private address with two;
//     none on an address that is not its claim's (recorded in the
//     claim's status or tagged with it), another workload's ENI, or a
//     node's primary address; on a primary address, only the primary
//     address of its ENI, at most one per node, and recorded in the
//     node's NodeRouting (spec.staticIP), but for the user's own not yet
//     recorded: the record comes first, so an association nobody
//     records was made out of order or its record dropped before it was
//     undone;
//   - status.ipam.assigned-static-ip names an Elastic IP EC2 has
//     associated with the node's primary address, then and there; not
//     one merely recorded and in flight: the pool controller reports the
//     address only once it finds it on the primary address (the
//     association landed, its record stored), and clears the report in
//     the CiliumNode write ahead of the release's calls; and Cilium's
//     agent takes the report for the node's static IP as soon as it
//     reads it (crd.go's wait ends there), so a report ahead of EC2
//     would be a false one;
//   - at the end, after quiescing (every actor in turn, 3 s a round, up to
//     QuiesceRounds), every claim is Bound with its running pod on its
//     address, or says why not (AddressTaken, NodeInOtherZone, …), and
//     none is stuck releasing; every live node with tags has an Elastic
//     IP carrying them on its primary address and reports it, unless none
//     is free in EC2 (or the user's own, not carrying them, blocks it:
//     StaticIPConflict); every node without tags has none (the user's own
//     unrecorded aside) and reports none; every NodeRouting's record
//     names an association EC2 has on the recorded ENI, and its finalizer
//     comes only with a record; a terminated node's NodeRouting is gone,
//     and no Elastic IP is on its instance's ENIs (nodeEIPsAtRest).
//
// A seed costs about 19 ms of CPU (300 seeds: 5.6 CPU-seconds, against
// 23.8 before the writes, lists and EC2 dumps were made cheaper, with
// the same steps, traces and operator logs seed for seed; the node
// Elastic IPs' model and checks added about a tenth: 300 seeds took 15.4
// and 14.4 CPU-seconds against 14.4 and 12.5 without them, alternated on
// the same loaded machine): 2000 seeds
// (make test) about 40 CPU-seconds, make bench's 100 000 about half an
// hour of CPU, a quarter of an hour on two free cores. Seeds split
// across processes with -from and -seeds.
//
// # What is not modelled
//
// Several operator replicas and leader election; informer caches that lag
// (the operator reads a fresh store; its stale-write guard is not
// exercised); the operator's workqueue (reconciles are drawn, not
// triggered by events); EC2 throttling and errors other than the killed
// process's; mutation consistency (the operator waits it out with real
// timers); prefix delegation; new nodes joining; more than one zone;
// Cilium's agent restarting (its allocations are kept by Cilium across
// restarts anyway); the kube-scheduler's filter.
package staticsim
