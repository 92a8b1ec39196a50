// Package snapshot holds what the operator knows of one node at one
// moment: the cache (operator/inventory) fills it from EC2, the planner
// (operator/pool) and the pool controller read it. It sits below both, so
// the cache never depends on the planner.
package snapshot

import "github.com/enipam/enipam/operator/cloud"

// Node is a snapshot of one node: its instance, the ENIs attached to it,
// the VPC's subnets and security groups, and its pool.
type Node struct {
	Instance cloud.Instance
	Type     cloud.InstanceType
	// ENIs are attached to the instance.
	ENIs []cloud.ENI
	// Orphans are unattached ENIs created for this instance earlier (an
	// attach that never happened); adopting one saves a Create.
	Orphans        []cloud.ENI
	Subnets        []cloud.Subnet
	SecurityGroups []cloud.SecurityGroup
	// Available counts the pool IPs the agent may hand out; Used the IPs
	// it handed out.
	Available, Used int
	// Draining is an ENI being emptied to be given back (consolidation):
	// nothing is assigned on it.
	Draining string
	// Releasing counts addresses on the node's usable ENIs that are on
	// their way out (acknowledged for release, their Unassign not done
	// yet): their slots come back without a new ENI.
	Releasing int
}
