package e2e

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/stack"
)

// publicOperatorArgs are the flags of the operators of the public IP
// tests: a collector pass every 2 s, taking leaks older than 2 s (excess
// addresses are released, by releasePolicy).
var publicOperatorArgs = append(slices.Clone(staticOperatorArgs), "--gc-interval=2s", "--gc-min-age=2s")

// publicIPs checks every claim's Elastic IP against ec2sim's state
// (agentsim.CheckPublicIPs).
func (w *staticWorld) publicIPs(ctx context.Context, atRest bool) (agentsim.PublicIPFindings, error) {
	var claims enipamv1alpha1.StaticIPClaimList
	if err := env.Client.List(ctx, &claims); err != nil {
		return agentsim.PublicIPFindings{}, err
	}
	var nodes ciliumv2.CiliumNodeList
	if err := env.Client.List(ctx, &nodes); err != nil {
		return agentsim.PublicIPFindings{}, err
	}
	dump, err := w.world.sim.Admin.Dump(ctx)
	if err != nil {
		return agentsim.PublicIPFindings{}, err
	}
	return agentsim.CheckPublicIPs(claims.Items, nodes.Items, dump, "e2e", atRest), nil
}

// sampled sums the breaches of the looks taken during a test.
type sampled struct {
	agentsim.PublicIPFindings
	looks int
}

// samplePublicIPs checks the Elastic IPs' invariants that hold at every
// moment, every 100 ms until ctx ends, and returns the breaches seen.
func (w *staticWorld) samplePublicIPs(ctx context.Context) <-chan sampled {
	out := make(chan sampled, 1)
	go func() {
		var sum sampled
		for ctx.Err() == nil {
			if f, err := w.publicIPs(ctx, false); err == nil {
				sum.looks++
				sum.OnOrdinaryAddress += f.OnOrdinaryAddress
				sum.OnOtherPod += f.OnOtherPod
				sum.TwicePerClaim += f.TwicePerClaim
				if len(sum.Details) < 40 {
					sum.Details = append(sum.Details, f.Details...)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		out <- sum
	}()
	return out
}

// publicAtRest checks every claim's Elastic IP where it belongs, none
// leaked, and that want claims have theirs associated.
func (w *staticWorld) publicAtRest(want int) {
	w.t.Helper()
	f, err := w.publicIPs(w.ctx, true)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("Elastic IPs: %s", f)
	if f.Total() != 0 || f.Associated != want {
		w.t.Errorf("Elastic IPs: %d breaches, %d associated where they belong (want %d): %v", f.Total(), f.Associated, want, f.Details)
	}
}

// publicOn waits until pod's claim records an Elastic IP that EC2 shows
// associated with the claim's address on the ENI of node's instance
// holding it, and returns the Elastic IP and that ENI.
func (w *staticWorld) publicOn(pod, node string, timeout time.Duration) (ec2sim.Address, string) {
	w.t.Helper()
	var got ec2sim.Address
	var eni string
	w.eventually(pod+"'s Elastic IP on its address on "+node, timeout, func() bool {
		c, ok := w.claim(pod)
		if !ok || c.Status.PublicIP == nil || c.Status.PublicIP.AssociationID == "" {
			return false
		}
		dump, err := w.world.sim.Admin.Dump(w.ctx)
		if err != nil {
			return false
		}
		eni = ""
		for _, e := range dump.NetworkInterfaces {
			for _, a := range e.PrivateIPAddresses {
				if a.PrivateIPAddress == c.Status.Address && e.Attachment != nil && "node-"+e.Attachment.InstanceID == node {
					eni = e.NetworkInterfaceID
				}
			}
		}
		for _, a := range dump.Addresses {
			if a.AllocationID == c.Status.PublicIP.AllocationID {
				got = a
			}
		}
		return eni != "" && got.NetworkInterfaceID == eni && got.PrivateIPAddress == c.Status.Address && c.Status.PublicIP.ENIID == eni
	})
	return got, eni
}

// atRest checks the pools, the ledger and the Elastic IPs once the
// operator converged and its collector ran, and prints the counts.
func (w *staticWorld) atRest(s sampled) {
	w.t.Helper()
	time.Sleep(5 * time.Second) // two collector passes, with publicOperatorArgs
	w.t.Logf("Elastic IPs sampled %d times: %d on an unstamped pool address, %d on another pod's address, %d claims with two",
		s.looks, s.OnOrdinaryAddress, s.OnOtherPod, s.TwicePerClaim)
	if s.Total() != 0 {
		w.t.Errorf("Elastic IP breaches seen: %v", s.Details)
	}
	w.publicAtRest(0)
	w.checkPools(w.sim)
	if v := w.sim.Ledger().Violations(); v.Total() != 0 {
		w.t.Errorf("ledger: %+v %v", v, w.sim.Ledger().ViolationDetails())
	}
}

// deleteAll deletes a StatefulSet and the claims of its pods, and waits
// until the claims are gone.
func (w *staticWorld) deleteAll(sts *appsv1.StatefulSet, pods ...string) {
	w.t.Helper()
	if err := env.Client.Delete(w.ctx, sts); client.IgnoreNotFound(err) != nil {
		w.t.Fatal(err)
	}
	for _, p := range pods {
		if c, ok := w.claim(p); ok {
			if err := env.Client.Delete(w.ctx, c); client.IgnoreNotFound(err) != nil {
				w.t.Fatal(err)
			}
		}
	}
	w.eventually("the claims gone", 2*time.Minute, func() bool {
		var list enipamv1alpha1.StaticIPClaimList
		return env.Client.List(w.ctx, &list, client.InNamespace(w.ns)) == nil && len(list.Items) == 0
	})
}

// elasticIPs returns ec2sim's Elastic IPs.
func (w *staticWorld) elasticIPs() []ec2sim.Address {
	w.t.Helper()
	dump, err := w.world.sim.Admin.Dump(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return dump.Addresses
}

// TestStatefulSetPodKeepsItsPublicIP: StatefulSet web of one pod
// annotated enipam.io/static-ip: Retain and enipam.io/public-ip:
// allocate, with the real kube-scheduler and extender,
// kube-controller-manager, enipam-operator and ec2sim through the SDK.
// The pod runs with its claim's address and an allocated Elastic IP
// associated with it on its node's ENI. With the node cordoned and the
// pod deleted, it comes back on another node of us-east-1a with both
// addresses; ec2sim shows the association on the new node's ENI. The
// StatefulSet and claim deleted, the Elastic IP is released. At every
// look no Elastic IP is on an unstamped pool address or another pod's;
// at the end none is left, the pools hold to EC2 and the ledger counts no
// violation.
func TestStatefulSetPodKeepsItsPublicIP(t *testing.T) {
	w := newStaticWorld(t)
	ctx, stop := context.WithCancel(w.ctx)
	sampled := w.samplePublicIPs(ctx)
	sts := w.statefulSetWith("web", 1, map[string]string{
		enipamv1alpha1.StaticIPAnnotation: string(enipamv1alpha1.ReclaimRetain),
		enipamv1alpha1.PublicIPAnnotation: "allocate",
	})
	node, ip := w.running("web-0", 2*time.Minute)
	eip, eni := w.publicOn("web-0", node, time.Minute)
	t.Logf("web-0 on %s with %s, public %s (%s) on %s", node, ip, eip.PublicIP, eip.AllocationID, eni)

	w.cordon(node)
	start := time.Now()
	w.deletePod("web-0")
	w.eventually("web-0 recreated elsewhere", time.Minute, func() bool {
		p, ok := w.pod("web-0")
		return ok && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != node
	})
	moved, movedIP := w.running("web-0", 2*time.Minute)
	after, afterENI := w.publicOn("web-0", moved, time.Minute)
	t.Logf("web-0 rescheduled to %s with %s, public %s on %s, in %s", moved, movedIP, after.PublicIP, afterENI, time.Since(start).Round(time.Millisecond))
	if movedIP != ip || after.AllocationID != eip.AllocationID || after.PublicIP != eip.PublicIP || afterENI == eni || moved == node {
		t.Fatalf("web-0 came back on %s with %s and %s (%s) on %s; it was on %s with %s and %s on %s", moved, movedIP, after.PublicIP, after.AllocationID, afterENI, node, ip, eip.PublicIP, eni)
	}
	if on := w.onENIs(ip); !slices.Equal(on, []string{moved}) {
		t.Errorf("EC2 shows %s on the ENIs of %v, want %s only", ip, on, moved)
	}
	w.publicAtRest(1)

	w.deleteAll(sts, "web-0")
	for _, a := range w.elasticIPs() {
		if a.AllocationID == eip.AllocationID {
			t.Errorf("%s (%s) still allocated after its claim went: %+v", a.PublicIP, a.AllocationID, a)
		}
	}
	w.eventually(ip+" an ordinary pool address again", 30*time.Second, func() bool {
		pools, owner := w.inPool(ip)
		return len(pools) == 1 && owner == ""
	})
	stop()
	w.atRest(<-sampled)
}

// TestPublicIPsSurviveOperatorKills: StatefulSet web of two pods asking
// for allocated public IPs, ec2sim answering the Elastic IP calls and
// AssignPrivateIpAddresses in 300-600 ms. enipam-operator is SIGKILLed
// during a call of each step, after a random part of its latency (seeded
// and logged): while it allocates, while it associates, while web-0's
// address moves to another node with its Elastic IP, while it
// disassociates and while it releases them with the claims; a new
// operator starts at once. At every look no Elastic IP is on an
// unstamped pool address or another pod's, and no claim has two; each
// pod keeps both addresses; at the end, with the collector run, no
// Elastic IP is left, the pools hold to EC2 and the ledger counts no
// violation.
func TestPublicIPsSurviveOperatorKills(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 14))
	w := newStaticWorld(t)
	w.restartOperator(publicOperatorArgs...)
	slow := ec2sim.Range{Min: ec2sim.Duration(300 * time.Millisecond), Max: ec2sim.Duration(600 * time.Millisecond)}
	lat := ec2sim.LatencyConfig{Actions: map[string]ec2sim.Range{}}
	for _, a := range []string{"AllocateAddress", "AssociateAddress", "DisassociateAddress", "ReleaseAddress", "AssignPrivateIpAddresses"} {
		lat.Actions[a] = slow
	}
	if err := w.world.sim.Admin.SetLatency(w.ctx, lat); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(w.ctx)
	sampled := w.samplePublicIPs(ctx)
	kills := 0
	killDuring := func(action string) {
		t.Helper()
		delay := time.Duration(rng.IntN(700)) * time.Millisecond
		if w.killDuring(action, delay, time.Minute) {
			kills++
		}
	}

	sts := w.statefulSetWith("web", 2, map[string]string{
		enipamv1alpha1.StaticIPAnnotation: string(enipamv1alpha1.ReclaimRetain),
		enipamv1alpha1.PublicIPAnnotation: "allocate",
	})
	killDuring("AllocateAddress")
	killDuring("AssociateAddress")
	ips, nodes, eips := map[string]string{}, map[string]string{}, map[string]ec2sim.Address{}
	for _, p := range []string{"web-0", "web-1"} {
		nodes[p], ips[p] = w.running(p, 2*time.Minute)
		eips[p], _ = w.publicOn(p, nodes[p], time.Minute)
	}
	t.Logf("placed: %v on %v with %s and %s", ips, nodes, eips["web-0"].PublicIP, eips["web-1"].PublicIP)
	w.publicAtRest(2)

	w.cordon(nodes["web-0"])
	w.deletePod("web-0")
	killDuring("AssignPrivateIpAddresses")
	moved, ip := w.running("web-0", 3*time.Minute)
	after, _ := w.publicOn("web-0", moved, time.Minute)
	if ip != ips["web-0"] || moved == nodes["web-0"] || after.AllocationID != eips["web-0"].AllocationID {
		t.Fatalf("web-0 on %s with %s and %s; it was on %s with %s and %s", moved, ip, after.AllocationID, nodes["web-0"], ips["web-0"], eips["web-0"].AllocationID)
	}
	w.publicAtRest(2)

	if err := env.Client.Delete(w.ctx, sts); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"web-0", "web-1"} {
		if c, ok := w.claim(p); ok {
			if err := env.Client.Delete(w.ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	killDuring("DisassociateAddress")
	killDuring("ReleaseAddress")
	w.deleteAll(sts, "web-0", "web-1")
	stop()
	t.Logf("%d SIGKILLs of enipam-operator", kills)
	w.atRest(<-sampled)
	for _, a := range w.elasticIPs() {
		t.Errorf("Elastic IP %s (%s) left after the claims went", a.PublicIP, a.AllocationID)
	}
	c, err := w.world.sim.Admin.Counters(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EC2 calls served: %d AllocateAddress, %d AssociateAddress, %d DisassociateAddress, %d ReleaseAddress",
		c.Succeeded("AllocateAddress"), c.Succeeded("AssociateAddress"), c.Succeeded("DisassociateAddress"), c.Succeeded("ReleaseAddress"))
	if c.Succeeded("AllocateAddress") != 2 || c.Succeeded("ReleaseAddress") != 2 {
		t.Errorf("%d Elastic IPs allocated and %d released for 2 claims", c.Succeeded("AllocateAddress"), c.Succeeded("ReleaseAddress"))
	}
}

// restartOperator kills the running operator and starts one with args.
func (w *staticWorld) restartOperator(args ...string) {
	op := w.operator
	op.Kill()
	w.procs = slices.DeleteFunc(w.procs, func(p *stack.Process) bool { return p == op })
	w.operator = w.startOperator(args...)
}

// killDuring SIGKILLs the operator delay after its next call of action
// reached ec2sim (within timeout), and starts a new one at once. False
// when no such call came.
func (w *staticWorld) killDuring(action string, delay, timeout time.Duration) bool {
	w.t.Helper()
	c, err := w.world.sim.Admin.Counters(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	base := c.Calls[action]
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, err := w.world.sim.Admin.Counters(w.ctx)
		if err != nil {
			w.t.Fatal(err)
		}
		if c.Calls[action] > base {
			time.Sleep(delay)
			w.restartOperator(publicOperatorArgs...)
			w.t.Logf("operator killed %s after a call of %s reached EC2", delay, action)
			return true
		}
	}
	w.t.Logf("no call of %s within %s: no kill", action, timeout)
	return false
}
