// Package chaos proves enipam's invariants under failure, with the real
// binaries: ec2sim as EC2 (its realistic profile — attachments take
// seconds, EC2's throttling — plus InternalError answers and an
// eventual-consistency window), a real kube-apiserver, nodes joining with
// simulated cilium-agents (test/agentsim) and pods, most pods leaving and
// some coming back, and the real enipam-operator, SIGKILLed at random
// moments while pools grow and while they shrink, and restarted each time
// as a Deployment would.
//
// Between the operator (and the agents) and the apiserver sits a
// test/faultproxy, which the scenarios use to fail the spec patch that
// follows a successful status patch, to cut the operator off right after
// an Unassign for longer than its Lease, and to take the apiserver away
// for a minute in the middle of a scale-up.
//
// The kill campaign also runs static-IP StatefulSets (see statics): one
// with an Elastic IP per pod on the nodes whose pod IPs live on the
// primary ENI, one without on the nodes of the secondary policy, run by
// the real kube-controller-manager and scheduled by the real
// kube-scheduler with enipam's extender. A pod of each is moved to
// another node as each kill is about to land, and each loses its last
// ordinal (one claim released by its WithStatefulSet policy, one deleted)
// as the shrink begins. Every half second a sampler holds the claims to their
// invariants: a claimed address in one pool and on one ENI, never
// unassigned in EC2 while claimed, never held by two pods or by a pod
// other than its claim's once its own held it, an Elastic IP only on its
// claim's stamped address; at rest every claim is Bound and its pod runs
// with its address.
//
// Every run ends the same way: once nothing has changed for a while and
// the ENI collector has had two passes and its minimum age, EC2's state
// (ec2sim's dump) and the CiliumNodes are checked: no address in two pools, no pool address
// EC2 does not hold on the ENI the pool names, none of a pod ENI's
// addresses missing from its pool, no released address left in a pool,
// no ENI beyond what each node's demand needed, none left unattached, and
// nothing wrong in the agents' ledger. Report.Print shows the counts.
//
// Entry points: the tests of this package (short runs; the flags
// -chaos.nodes, -chaos.kills, -chaos.seed, -chaos.fault-nodes,
// -chaos.outage, -chaos.ec2-faults and -chaos.consistency change them)
// and Run with DefaultOptions for longer ones:
//
//	o := chaos.DefaultOptions("kill-campaign", 200, 30, chaos.NoFault)
//	o.Bins, o.Dir, o.Progress = bins, dir, os.Stdout
//	rep, err := chaos.Run(ctx, o)
//	rep.Print(os.Stdout) // rep.OK() is false on any breach
package chaos
