package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/enipam/enipam/test/stack"
)

// Fault is what goes wrong in a run besides the SIGKILLs.
type Fault string

const (
	// NoFault: SIGKILLs only (the kill campaign).
	NoFault Fault = ""
	// SpecPatchFails: during scale-up and shrink, a share of the
	// operator's CiliumNode spec patches fail (500) while its status
	// patches go through.
	SpecPatchFails Fault = "spec-patch-fails"
	// LeaseLostAfterUnassign: while shrinking, the operator is cut off
	// from the apiserver at the status patch that records an Unassign it
	// just made (EC2 stays reachable), for longer than its Lease lasts.
	LeaseLostAfterUnassign Fault = "lease-lost-after-unassign"
	// APIServerOutage: in the middle of a scale-up the apiserver is gone
	// for the operator and the agents for Options.Outage.
	APIServerOutage Fault = "apiserver-outage"
)

// Options describe one run. DefaultOptions fills everything but Bins and
// Dir.
type Options struct {
	// Name names the run in logs and the report.
	Name string
	// Nodes join in waves during scale-up; every other one is under an
	// ENIPolicy that keeps pod IPs off the primary ENI.
	Nodes int
	// PodsPerNode arrive on each node as it joins; ShrinkTo of them stay
	// after the shrink; RegrowPods come back on a node group once the
	// next group has shrunk (and, with LeaseLostAfterUnassign, on every
	// node while the operator is cut off), so demand returns while
	// releases are under way.
	PodsPerNode, ShrinkTo, RegrowPods int
	// Kills is how many times the operator is SIGKILLed (and restarted),
	// a share during scale-up and the rest during shrink.
	Kills int
	// KillGap bounds the random time from an operator's start to its
	// kill.
	KillGap [2]time.Duration
	// Fault adds a fault of the apiserver path (see Fault).
	Fault Fault
	// SpecFailRate is the share of spec patches failed by SpecPatchFails.
	SpecFailRate float64
	// Outage is how long the apiserver is gone for APIServerOutage.
	Outage time.Duration
	// LeaseCuts is how many times LeaseLostAfterUnassign cuts the
	// operator off.
	LeaseCuts int
	// Seed drives wave sizes, kill moments, ec2sim's draws and the
	// proxy's.
	Seed uint64

	// EC2FaultRate is the share of EC2 calls answered InternalError.
	EC2FaultRate float64
	// EventualConsistency hides new resources from ec2sim's describes.
	EventualConsistency time.Duration
	// InstanceType of every node.
	InstanceType string
	// PreAllocate, ReleaseDelay, GCInterval and ResyncInterval are the
	// operator's flags.
	PreAllocate    int
	ReleaseDelay   time.Duration
	GCInterval     time.Duration
	ResyncInterval time.Duration
	// AgentUpdateInterval is the simulated cilium-agents' status write
	// interval.
	AgentUpdateInterval time.Duration
	// StaticReplicas, when above 0, adds two static-IP StatefulSets of
	// that many pods (one with Elastic IPs) with kube-controller-manager,
	// kube-scheduler and enipam's extender (see statics); StaticMoves is
	// the fewest pod moves they make, those begun at the kills included.
	StaticReplicas, StaticMoves int
	// Quiet is how long nothing may change for a run to count as
	// converged; ConvergeTimeout bounds the wait.
	Quiet, ConvergeTimeout time.Duration

	// Bins are the built binaries; Dir receives the logs.
	Bins stack.Binaries
	Dir  string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// DefaultOptions is a run of nodes nodes with kills SIGKILLs and fault:
// m5.xlarge nodes taking 14 pods each (2 ENIs of 14 addresses at the peak
// of 24 with pre-allocate 8), keeping 3 after the shrink, 6 coming back
// on most; ec2sim
// realistic (attach in 2-5 s, EC2's throttling) with 5% InternalError
// and a 5 s eventual-consistency window; excess released after 5 s; the
// collector every 5 s. The kill campaign (NoFault) adds two static-IP
// StatefulSets of 3 pods, one with Elastic IPs, and at least 6 moves.
func DefaultOptions(name string, nodes, kills int, fault Fault) Options {
	static := 0
	if fault == NoFault {
		static = 3
	}
	return Options{
		StaticReplicas: static, StaticMoves: 2 * static,
		Name: name, Nodes: nodes, PodsPerNode: 14, ShrinkTo: 3, RegrowPods: 6, Kills: kills,
		KillGap: [2]time.Duration{time.Second, 8 * time.Second},
		Fault:   fault, SpecFailRate: 0.3, Outage: time.Minute, LeaseCuts: 1,
		Seed: 1, EC2FaultRate: 0.05, EventualConsistency: 5 * time.Second, InstanceType: "m5.xlarge",
		PreAllocate: 8, ReleaseDelay: 5 * time.Second, GCInterval: 5 * time.Second, ResyncInterval: 10 * time.Second,
		AgentUpdateInterval: 2 * time.Second,
		Quiet:               15 * time.Second, ConvergeTimeout: 3*time.Minute + time.Duration(nodes)*time.Second,
	}
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Name != "", "a run needs a name")
	check(o.Nodes >= 1, "nodes must be at least 1")
	check(o.PodsPerNode >= 0 && o.ShrinkTo >= 0 && o.RegrowPods >= 0 && o.ShrinkTo+o.RegrowPods <= o.PodsPerNode,
		"pods per node %d, shrink-to %d and regrow %d: the regrown nodes must stay below the peak", o.PodsPerNode, o.ShrinkTo, o.RegrowPods)
	check(o.Kills >= 0, "kills must not be negative")
	check(o.StaticReplicas >= 0 && o.StaticMoves >= 0, "static replicas %d and moves %d", o.StaticReplicas, o.StaticMoves)
	check(o.StaticReplicas == 0 || o.Nodes >= 2*(o.StaticReplicas+1),
		"%d static pods per zone need %d nodes or more (one spare per zone to move to)", o.StaticReplicas, 2*(o.StaticReplicas+1))
	check(o.KillGap[0] > 0 && o.KillGap[1] >= o.KillGap[0], "kill gap %v", o.KillGap)
	check(o.Fault != APIServerOutage || o.Outage > 0, "an outage needs a duration")
	check(o.Fault != LeaseLostAfterUnassign || o.LeaseCuts >= 1, "lease cuts must be at least 1")
	check(o.SpecFailRate >= 0 && o.SpecFailRate <= 1, "spec fail rate %v", o.SpecFailRate)
	check(o.EC2FaultRate >= 0 && o.EC2FaultRate < 1, "EC2 fault rate %v", o.EC2FaultRate)
	check(o.Quiet > 0 && o.ConvergeTimeout > o.Quiet, "quiet %s and converge timeout %s", o.Quiet, o.ConvergeTimeout)
	check(o.Bins.Operator != "" && o.Bins.EC2Sim != "", "binaries not built")
	check(o.Dir != "", "a run needs a directory for its logs")
	switch o.Fault {
	case NoFault, SpecPatchFails, LeaseLostAfterUnassign, APIServerOutage:
	default:
		errs = append(errs, fmt.Errorf("unknown fault %q", o.Fault))
	}
	return errors.Join(errs...)
}

// leaderElection: the faults that take the apiserver away run the
// operator as it is deployed, with a Lease, so that losing it counts.
func (o Options) leaderElection() bool {
	return o.Fault == LeaseLostAfterUnassign || o.Fault == APIServerOutage
}

// killsDuringScaleUp is the share of the kills made while pools grow;
// the rest land while they shrink.
func (o Options) killsDuringScaleUp() int { return (o.Kills + 1) / 2 }
