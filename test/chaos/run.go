package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/faultproxy"
)

// Run runs one campaign and returns its report; an error means the run
// could not be carried out, not that the operator broke an invariant
// (see Report.OK). Logs stay under Options.Dir/Options.Name.
//
// The phases: the instances launch and boot; their nodes join in waves
// with their pods (scale-up), the
// operator SIGKILLed at a random moment after each of its starts while
// waves remain; then most pods leave, node group by node group (shrink),
// with the remaining kills; then the run waits until nothing changes,
// gives the collector two passes and its minimum age, and checks the
// invariants.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	w, err := startWorld(ctx, o)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	rep := &Report{Name: o.Name, Params: fmt.Sprintf(
		"nodes=%d pods/node=%d→%d kills=%d fault=%s seed=%d type=%s pre-allocate=%d release-delay=%s gc=%s resync=%s ec2=realistic+%g%% InternalError+%s consistency static=2x%d pods, %d+ moves",
		o.Nodes, o.PodsPerNode, o.ShrinkTo, o.Kills, cmp.Or(string(o.Fault), "none"), o.Seed, o.InstanceType, o.PreAllocate,
		o.ReleaseDelay, o.GCInterval, o.ResyncInterval, 100*o.EC2FaultRate, o.EventualConsistency, o.StaticReplicas, o.StaticMoves)}
	if err := w.waitSynced(ctx); err != nil {
		return nil, err
	}
	// A kubelet registers its node once the instance has booted, long
	// after EC2's describes show the instance and its primary ENI.
	if err := w.pods.launch(ctx, o.Nodes); err != nil {
		return nil, err
	}
	w.say("%d instances launched; they boot for %s", o.Nodes, o.EventualConsistency+time.Second)
	if err := sleep(ctx, o.EventualConsistency+time.Second); err != nil {
		return nil, err
	}
	faults, err := w.armFaults()
	if err != nil {
		return nil, err
	}
	if err := w.scaleUp(ctx); err != nil {
		return nil, err
	}
	if err := w.shrink(ctx, faults); err != nil {
		return nil, err
	}
	faults.disarm()
	if w.static != nil {
		w.say("static: finishing the moves under way and those left")
		if err := w.static.finish(ctx); err != nil {
			return nil, err
		}
	}

	w.say("waiting for quiet (%s without a change)", o.Quiet)
	if rep.Converged, rep.ConvergedAfter, err = w.converge(ctx); err != nil {
		return nil, err
	}
	// Two passes, and a leak left by the last kill old enough by its tag
	// to be collected.
	grace := max(2*o.GCInterval, gcMinAge(o)+o.GCInterval) + o.EventualConsistency + 2*time.Second
	w.say("converged=%v after %s; %s more for the collector", rep.Converged, rep.ConvergedAfter.Round(time.Second), grace)
	if err := sleep(ctx, grace); err != nil {
		return nil, err
	}
	if err := w.findings(ctx, rep); err != nil {
		return nil, err
	}
	w.figures(ctx, rep, faults)
	rep.Ran = time.Since(w.start)
	return rep, nil
}

// waitSynced waits until the operator has described the VPC once.
func (w *world) waitSynced(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := w.sim.Admin.Counters(ctx)
		if err == nil && c.Succeeded("DescribeNetworkInterfaces") > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			tail := ""
			if p := w.op.running(); p != nil {
				tail = p.Tail(20)
			}
			return fmt.Errorf("the operator never described the VPC:\n%s", tail)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// waves splits n into parts near-equal sizes, none empty.
func waves(n, parts int) []int {
	parts = max(1, min(parts, n))
	out := make([]int, parts)
	for i := range out {
		out[i] = n / parts
		if i < n%parts {
			out[i]++
		}
	}
	return out
}

// scaleUp joins the nodes in waves; between waves the operator is killed
// (while kills for the scale-up remain) or left alone for as long; with
// an outage, the apiserver goes away a few seconds after the first wave.
func (w *world) scaleUp(ctx context.Context) error {
	o := w.opts
	kills := o.killsDuringScaleUp()
	sizes := waves(o.Nodes, max(kills+1, 3))
	for i, n := range sizes {
		w.say("scale-up: wave %d of %d, %d nodes with %d pods each", i+1, len(sizes), n, o.PodsPerNode)
		if err := w.pods.join(ctx, n); err != nil {
			return err
		}
		if i == 0 {
			if err := w.static.begin(ctx); err != nil {
				return err
			}
		}
		if o.Fault == APIServerOutage && i == 0 {
			if err := sleep(ctx, w.between(2*time.Second, 5*time.Second)); err != nil {
				return err
			}
			w.say("apiserver gone for %s", o.Outage)
			w.opProxy.Cut(o.Outage)
			w.agentProxy.Cut(o.Outage)
			if err := sleep(ctx, o.Outage); err != nil {
				return err
			}
			w.say("apiserver back")
		}
		if i == len(sizes)-1 && i >= kills {
			break
		}
		if i < kills {
			w.static.moveAtKill(ctx)
		}
		if err := sleep(ctx, w.between(o.KillGap[0], o.KillGap[1])); err != nil {
			return err
		}
		if i < kills {
			if err := w.kill(); err != nil {
				return err
			}
		}
	}
	timeout := 3*time.Minute + time.Duration(o.Nodes)*time.Second
	all, err := w.pods.waitAllocated(ctx, timeout)
	if err != nil {
		return err
	}
	asked, started, failed, _ := w.pods.outcomes()
	w.say("scale-up: %d of %d pods have an IP, %d failed (all settled: %v)", started, asked, failed, all)
	return nil
}

// shrink deletes pods node group by node group, with the remaining kills
// in between; as each group shrinks, pods come back on the group before,
// whose excess is on its way out.
func (w *world) shrink(ctx context.Context, faults *armed) error {
	o := w.opts
	kills := o.Kills - o.killsDuringScaleUp()
	parts := max(kills+1, 2)
	for j := range parts {
		n := w.pods.shrink(j, parts)
		w.say("shrink: group %d of %d, %d pods deleted", j+1, parts, n)
		if j > 0 && o.RegrowPods > 0 {
			w.say("shrink: %d pods back on group %d", w.pods.regrow(j-1, parts, o.RegrowPods), j)
		}
		if j == 0 {
			w.static.shrink(ctx)
		}
		if j == parts-1 && j >= kills {
			break
		}
		if j < kills {
			w.static.moveAtKill(ctx)
		}
		if err := sleep(ctx, w.between(o.KillGap[0], o.KillGap[1])); err != nil {
			return err
		}
		if j < kills {
			if err := w.kill(); err != nil {
				return err
			}
		}
	}
	return faults.awaitLeaseCuts(ctx, w)
}

// kill SIGKILLs the operator and starts the next.
func (w *world) kill() error {
	starts, kills, _ := w.op.counts()
	w.say("SIGKILL enipam-operator-%d (kill %d of %d)", starts, kills+1, w.opts.Kills)
	return w.op.kill()
}

// armed are the proxy rules of the run's fault.
type armed struct {
	specFails *faultproxy.Handle
	leaseCut  *faultproxy.Handle
	// fallbackCuts: lease cuts made on an Unassign seen in EC2 because no
	// status patch carried released.
	fallbackCuts int
}

// armFaults puts the fault's rules in force for both phases.
func (w *world) armFaults() (*armed, error) {
	a := &armed{}
	var err error
	switch w.opts.Fault {
	case SpecPatchFails:
		// The operator writes status, then spec: the status patch goes
		// through, the spec patch of the same reconcile fails.
		a.specFails, err = w.opProxy.Add(faultproxy.Rule{
			Verbs: []string{"patch", "update"}, Resource: "ciliumnodes", Rate: w.opts.SpecFailRate,
			Action: faultproxy.Fail, Status: 500,
		})
	case LeaseLostAfterUnassign:
		// The status patch recording released IPs follows the Unassign
		// at once: cut there, for longer than the Lease (15 s) lasts.
		a.leaseCut, err = w.opProxy.Add(faultproxy.Rule{
			Verbs: []string{"patch", "update"}, Resource: "ciliumnodes", Subresource: "status", BodyContains: `"released"`,
			Times: w.opts.LeaseCuts, Action: faultproxy.Cut, Duration: leaseCut,
		})
	}
	return a, err
}

// leaseCut outlasts the operator's Lease (15 s) and renew deadline (10 s).
const leaseCut = 25 * time.Second

// disarm removes the rules so the run can converge.
func (a *armed) disarm() {
	for _, h := range []*faultproxy.Handle{a.specFails, a.leaseCut} {
		if h != nil {
			h.Remove()
		}
	}
}

// awaitLeaseCuts waits, with LeaseLostAfterUnassign, until the cuts have
// happened. Should no status patch carry released (an operator that
// records a release otherwise), it cuts at the next Unassign EC2 serves.
func (a *armed) awaitLeaseCuts(ctx context.Context, w *world) error {
	if a.leaseCut == nil {
		return nil
	}
	deadline := time.Now().Add(w.opts.ReleaseDelay + time.Minute)
	var lastUnassigns int64 = -1
	for a.leaseCut.Fired()+a.fallbackCuts < w.opts.LeaseCuts {
		c, err := w.sim.Admin.Counters(ctx)
		if err != nil {
			return err
		}
		n := c.Succeeded("UnassignPrivateIpAddresses")
		if time.Now().After(deadline) && lastUnassigns >= 0 && n > lastUnassigns && !w.opProxy.CutOff() {
			a.fallbackCuts++
			w.say("no status patch carried released; cutting the operator off at an Unassign seen in EC2")
			w.opProxy.Cut(leaseCut)
		}
		lastUnassigns = n
		if time.Now().After(deadline.Add(2 * time.Minute)) {
			w.say("no Unassign to cut the operator off at")
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	w.say("operator cut off after an Unassign (%d times)", a.leaseCut.Fired()+a.fallbackCuts)
	if k := w.opts.RegrowPods; k > 0 {
		// Demand comes back while no operator can act: the next leader
		// finds pods waiting and IPs it (or its predecessor) unassigned.
		w.say("%d pods arrive while the operator is cut off", w.pods.regrow(0, 1, k))
	}
	return sleep(ctx, leaseCut)
}

// findings checks the invariants on EC2's state and the CiliumNodes.
func (w *world) findings(ctx context.Context, rep *Report) error {
	dump, err := w.sim.Admin.Dump(ctx)
	if err != nil {
		return err
	}
	var list ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &list); err != nil {
		return err
	}
	perENI := 0
	for _, t := range ec2sim.Catalog() {
		if t.Name == w.opts.InstanceType {
			perENI = t.IPv4PerENI
		}
	}
	// Peak demand: the pods, the router and health endpoints, and the
	// free pre-allocate on top.
	target := w.opts.PodsPerNode + 2 + w.opts.PreAllocate
	needs := map[string]nodeNeed{}
	for _, nd := range w.pods.all() {
		needs[nd.name] = nodeNeed{instance: nd.instance, firstIndex: nd.firstIndex, enis: enisNeeded(target+w.static.extra(nd.name), perENI)}
	}
	rep.Findings = check(dump, list.Items, needs, clusterName)
	if err := w.static.atRest(ctx, &rep.Findings); err != nil {
		return err
	}
	rep.Findings.Ledger = w.agents.Ledger().Violations()
	for _, v := range w.agents.Ledger().ViolationDetails() {
		rep.Findings.detail("ledger: %s at %s", v, v.At.UTC().Format("15:04:05.000"))
	}
	pool, enis := 0, 0
	for _, cn := range list.Items {
		pool += len(cn.Spec.IPAM.Pool)
	}
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.DeviceIndex > 0 {
			enis++
		}
	}
	rep.add("nodes; pool IPs; secondary ENIs", "%d; %d; %d", len(list.Items), pool, enis)
	w.static.figures(rep)
	return nil
}

// figures records what the run put the operator through.
func (w *world) figures(ctx context.Context, rep *Report, a *armed) {
	starts, kills, exits := w.op.counts()
	rep.add("operator processes; SIGKILLs; exits on their own", "%d; %d; %d", starts, kills, exits)
	asked, started, failed, deleted := w.pods.outcomes()
	f := w.agents.Figures()
	rep.add("pods asked; got an IP; failed; deleted waiting; still waiting", "%d; %d; %d; %d; %d", asked, started, failed, deleted, f.Waits.Pending)
	rep.add("pod waits for an IP: count, p50, p99, max", "%d, %s, %s, %s", f.Waits.Count, f.Waits.P50, f.Waits.P99, f.Waits.Max)
	if c, err := w.sim.Admin.Counters(ctx); err == nil {
		var parts []string
		var throttled, faults int64
		for _, action := range slices.Sorted(maps.Keys(c.Calls)) {
			if !strings.HasPrefix(action, "Describe") {
				parts = append(parts, fmt.Sprintf("%s %d", strings.TrimSuffix(strings.TrimSuffix(action, "Addresses"), "NetworkInterface"), c.Succeeded(action)))
			}
			throttled += c.Throttled[action]
			faults += c.ErrorCount(action, "InternalError")
		}
		rep.add("EC2 mutating calls served", "%s", strings.Join(parts, ", "))
		rep.add("EC2 throttled; InternalError injected", "%d; %d", throttled, faults)
	}
	op, ag := w.opProxy.Stats(), w.agentProxy.Stats()
	rep.add("operator's apiserver path: forwarded; failed; refused; cuts", "%d; %d; %d; %d", op.Forwarded, op.Failed, op.Refused, op.Cuts)
	rep.add("agents' apiserver path: forwarded; refused; cuts", "%d; %d; %d", ag.Forwarded, ag.Refused, ag.Cuts)
	if a.specFails != nil {
		rep.add("spec patches failed", "%d of %d", a.specFails.Fired(), a.specFails.Matched())
	}
	if a.leaseCut != nil {
		rep.add("cuts after an Unassign (status patch; EC2 fallback)", "%d; %d", a.leaseCut.Fired(), a.fallbackCuts)
	}
}
