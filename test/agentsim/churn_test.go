package agentsim_test

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"

	"github.com/enipam/enipam/test/agentsim"
)

// TestSmallChurnRunsPodsWithoutWaitsOrViolations: 4 nodes with pools of 40
// (far above the ~15 pods a node holds at once here). For 1 s, pods arrive
// at 20/s per node living 100 ms on average, after 2 initial pods per node;
// a configured burst scales a deployment by 40 at 200 ms for 300 ms, and a
// burst of 20 is asked for while running. Every pod gets an IP at once,
// nobody waits, no violation, and with the pods deleted at the end every
// node's status.ipam.used is back to router and health.
func TestSmallChurnRunsPodsWithoutWaitsOrViolations(t *testing.T) {
	t.Parallel()
	var names []string
	for i, s := range []string{"a", "b", "c", "d"} {
		name := nodeName(t, s)
		names = append(names, name)
		createNode(t, name, ipamtypes.IPAMSpec{}, pool(ips("10.12."+string(rune('0'+i))+".", 40)...))
	}
	sim := startSim(t, agentsim.Options{})
	for _, n := range names {
		sim.AddAgent(n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventuallyTimeout)
	defer cancel()
	if err := sim.WaitReady(ctx, len(names)); err != nil {
		t.Fatal(err)
	}

	churn := agentsim.NewChurn(sim, agentsim.ChurnConfig{
		Seed:         42,
		ArrivalRate:  20,
		MeanLifetime: 100 * time.Millisecond,
		InitialPods:  2,
		Bursts:       []agentsim.Burst{{At: 200 * time.Millisecond, Pods: 40, Hold: 300 * time.Millisecond, Name: "web"}},
		Duration:     time.Second,
		DeleteAtEnd:  true,
	})
	churn.Burst(agentsim.Burst{Pods: 20, Name: "api"})
	report, err := churn.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("churn: %+v", report)

	if report.Arrivals < 8+20 || report.BurstPods != 60 || report.Unplaced != 0 {
		t.Errorf("arrivals %d (want the 8 initial and dozens more), burst pods %d (want 60), unplaced %d", report.Arrivals, report.BurstPods, report.Unplaced)
	}
	if report.Started != report.Arrivals+report.BurstPods || report.Failed != 0 || report.WaitingAtEnd != 0 {
		t.Errorf("started %d of %d pods, %d failed, %d waiting at the end", report.Started, report.Arrivals+report.BurstPods, report.Failed, report.WaitingAtEnd)
	}
	if report.Departures+report.DeletedAtEnd != report.Started {
		t.Errorf("%d departures + %d deleted at the end, want all %d pods gone", report.Departures, report.DeletedAtEnd, report.Started)
	}
	f := sim.Figures()
	if f.Allocations != report.Started || f.Waits.Count != 0 || f.Waits.Pending != 0 {
		t.Errorf("figures: %d allocations (want %d), waits %+v (want none)", f.Allocations, report.Started, f.Waits)
	}
	noViolations(t, sim)
	for _, n := range names {
		a := sim.Agent(n)
		router, _ := a.IP(agentsim.RouterOwner)
		health, _ := a.IP(agentsim.HealthOwner)
		eventually(t, n+"'s used is back to router and health", usedIs(t, n, map[string]string{router.String(): "router", health.String(): "health"}))
		if nf := a.Figures(); nf.Pods != 0 || nf.Writes < 2 {
			t.Errorf("%s: %d pods left, %d writes", n, nf.Pods, nf.Writes)
		}
	}
}
