package agentsim_test

import (
	"fmt"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"

	"github.com/enipam/enipam/test/agentsim"
)

// TestUsedWritesAreRateLimitedAndFolded: update interval 2 s, pool of 12.
// Starting (router and health) makes one write. Ten pods then allocate in
// a burst, far quicker than the interval: their changes fold into one more
// write, so status.ipam.used reaches all 12 owners after exactly 2 writes
// (the next write could come only 2 s later, and nothing asks for one).
func TestUsedWritesAreRateLimitedAndFolded(t *testing.T) {
	t.Parallel()
	name := nodeName(t, "a")
	createNode(t, name, ipamtypes.IPAMSpec{}, pool(ips("10.9.0.", 12)...))
	sim := startSim(t, agentsim.Options{UpdateInterval: 2 * time.Second})
	a := sim.AddAgent(name)
	waitReady(t, a)
	router, _ := a.IP(agentsim.RouterOwner)
	health, _ := a.IP(agentsim.HealthOwner)
	want := map[string]string{router.String(): "router", health.String(): "health"}
	written := func(n int, used func() bool) func() bool {
		return func() bool { return a.Figures().Writes >= n && used() }
	}
	eventually(t, "the first write shows router and health", written(1, usedIs(t, name, want)))
	if f := a.Figures(); f.Writes != 1 {
		t.Fatalf("%d writes after start, want 1", f.Writes)
	}

	for i := range 10 {
		owner := fmt.Sprintf("default/p-%d", i)
		want[allocateNow(t, a, owner)] = owner
	}
	eventually(t, "a write shows the 10 pods", written(2, usedIs(t, name, want)))
	if f := a.Figures(); f.Writes != 2 || f.WriteConflicts != 0 {
		t.Errorf("%d writes (%d conflicts) for start + 10 pods, want 2 and 0", f.Writes, f.WriteConflicts)
	}
	if f := sim.Figures(); f.Writes != 2 {
		t.Errorf("sim counts %d writes, want 2", f.Writes)
	}
}
