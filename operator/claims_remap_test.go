package operator_test

import (
	"slices"
	"testing"
	"time"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/ec2sim/cloudfake"
)

// remaps plays enipam-agent's answer to the node's remap queries from its
// instance's metadata: an address EC2 has on the queried MAC (its remap
// landed) is landed, another missing.
func (w *staticWorld) remaps(nr *enipamv1alpha1.NodeRouting) *enipamv1alpha1.RemapReport {
	return agentsim.RemapsFromState(nr, w.state.Dump().NetworkInterfaces)
}

// TestStaticIPMoveLandsOnTheAgentsMetadataWord: EC2 remaps db-0's address
// onto node-2's ENI 1 s after the reassignment call, and describes show
// the landed remap only 10 minutes later. The address is not pooled on
// node-2 while EC2 still has it on node-1's ENI; once node-2's
// enipam-agent reads it in the instance metadata (its answer to the
// NodeRouting's remap query), it is stamped there, with no describe
// showing it yet, and the query is withdrawn. Nodes: m5.large, first
// interface index 1, pre-allocate 4; node-1 runs Cilium with endpoint
// routes (the fast move).
func TestStaticIPMoveLandsOnTheAgentsMetadataWord(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	timing := w.state.Timing()
	timing.ReassignDelay = ec2sim.Range{Min: ec2sim.Duration(time.Second), Max: ec2sim.Duration(time.Second)}
	timing.Lag.Reassign = ec2sim.Range{Min: ec2sim.Duration(10 * time.Minute), Max: ec2sim.Duration(10 * time.Minute)}
	timing.Lag.Share = 1
	if err := w.state.SetTiming(timing); err != nil {
		t.Fatal(err)
	}
	w.endpointRoutes["node-1"] = true

	w.target("db-0", "node-2")
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	asked := false
	w.until(l, "db-0's address stamped on node-2", func() bool {
		_, in, _ := w.eniHolding(ip)
		if w.inPoolOf("node-2", ip) && in != "i-0a000000000000002" {
			t.Fatalf("%s in node-2's pool while EC2 has it on %q:%s", ip, in, w.describe())
		}
		asked = asked || slices.ContainsFunc(w.routingOf("node-2").Spec.RemapQueries, func(q enipamv1alpha1.RemapQuery) bool { return q.Address == ip })
		n, _ := w.stampedOn("default/db-0")
		return n == "node-2"
	})
	if !asked {
		t.Error("node-2's agent was never asked about the remap")
	}
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
	if q := w.routingOf("node-2").Spec.RemapQueries; len(q) != 0 {
		t.Errorf("node-2 still asked about %v after the remap was confirmed", q)
	}
	enis, err := w.cloud.GetENIs(t.Context(), []string{w.routingOf("node-2").Status.ENIs[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range enis {
		for _, a := range e.IPs {
			if a.String() == ip {
				t.Fatalf("a describe already shows %s on %s: the test proves nothing", ip, e.ID)
			}
		}
	}
}

// TestStaticIPStampKeptAcrossARestartWhileDescribesLagTheRemap: as above,
// db-0's address is stamped on node-2 on its agent's word that the remap
// landed, describes showing the remap only 10 minutes later; then the
// operator restarts. The new process's describes still show the address
// on node-1's ENI and not on node-2's; before it trusts them (the
// consistency grace after its start) it asks node-2's agent, which finds
// the address in the instance metadata on the ENI the entry names: the
// stamp stands, and the address is not reassigned again.
func TestStaticIPStampKeptAcrossARestartWhileDescribesLagTheRemap(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	timing := w.state.Timing()
	timing.ReassignDelay = ec2sim.Range{Min: ec2sim.Duration(300 * time.Millisecond), Max: ec2sim.Duration(300 * time.Millisecond)}
	timing.Lag.Reassign = ec2sim.Range{Min: ec2sim.Duration(10 * time.Minute), Max: ec2sim.Duration(10 * time.Minute)}
	timing.Lag.Share = 1
	if err := w.state.SetTiming(timing); err != nil {
		t.Fatal(err)
	}
	w.endpointRoutes["node-1"] = true
	w.target("db-0", "node-2")
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "db-0's address stamped on node-2", func() bool { n, _ := w.stampedOn("default/db-0"); return n == "node-2" })
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
	assigns := w.cloud.Calls()[cloudfake.AssignPrivateIpAddresses]

	l.cancel()
	l = w.start()
	for range 5 {
		w.step(l)
	}
	w.moved(ip, "node-2", "i-0a000000000000002")
	if n := w.cloud.Calls()[cloudfake.AssignPrivateIpAddresses] - assigns; n != 0 {
		t.Errorf("the restarted operator assigned addresses %d times; want none (the stamp's address is on its ENI)", n)
	}
}

// recheckInterval is the operator's unverifiedRecheck: how often it
// describes the ENIs of a node whose addresses are not confirmed yet.
const recheckInterval = 2 * time.Second

// TestAStaticMoveTheAgentWatchesIsNotDescribedOnEveryLook: EC2 remaps db-0's
// address onto node-2's ENI 1.5 s after the reassignment call, and
// describes lag it by 10 minutes. node-2's enipam-agent, asked about the
// remap, answers Missing until the metadata lists it, then Landed. The
// node is looked at many times meanwhile (every 20 ms here); the agent's
// word is what lands the address, so its ENIs are not described on each
// look: at most once per 2 s after the query (unverifiedRecheck). Nodes:
// m5.large, first interface index 1, pre-allocate 4; node-1 runs Cilium
// with endpoint routes (the fast move).
func TestAStaticMoveTheAgentWatchesIsNotDescribedOnEveryLook(t *testing.T) {
	w := newStaticWorld(t)
	l := w.start()
	ip := w.placed(l)
	timing := w.state.Timing()
	timing.ReassignDelay = ec2sim.Range{Min: ec2sim.Duration(1500 * time.Millisecond), Max: ec2sim.Duration(1500 * time.Millisecond)}
	timing.Lag.Reassign = ec2sim.Range{Min: ec2sim.Duration(10 * time.Minute), Max: ec2sim.Duration(10 * time.Minute)}
	timing.Lag.Share = 1
	if err := w.state.SetTiming(timing); err != nil {
		t.Fatal(err)
	}
	w.endpointRoutes["node-1"] = true

	w.target("db-0", "node-2")
	w.release("node-1", "default/db-0")
	w.pod("db-0", "node-1", false)
	w.until(l, "db-0's address reassigned onto node-2", func() bool {
		return slices.ContainsFunc(w.routingOf("node-2").Spec.RemapQueries, func(q enipamv1alpha1.RemapQuery) bool { return q.Address == ip })
	})
	w.cloud.ResetCalls()
	looks := 0
	began := time.Now()
	w.until(l, "db-0's address stamped on node-2", func() bool {
		looks++
		n, _ := w.stampedOn("default/db-0")
		return n == "node-2"
	})
	// The bound is counted in recheck intervals of the time the remap
	// took here: a loaded machine stretches the 1.5 s remap, and the
	// operator may describe once more per interval, never once per look.
	allowed := 1 + int(time.Since(began)/recheckInterval)
	describes := w.cloud.Calls()[cloudfake.DescribeNetworkInterfaces]
	t.Logf("%d describes over %d looks at the nodes while the remap was under way (at most %d allowed)", describes, looks, allowed)
	if looks < 2*allowed {
		t.Fatalf("only %d looks during the remap, for %d describes allowed: the test proves nothing", looks, allowed)
	}
	if describes > allowed {
		t.Errorf("%d DescribeNetworkInterfaces calls while node-2's agent watched the remap, want at most %d (one, and one per %v it took)", describes, allowed, recheckInterval)
	}
	w.step(l)
	w.moved(ip, "node-2", "i-0a000000000000002")
}
