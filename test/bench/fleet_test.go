package bench

import (
	"strings"
	"testing"

	"github.com/enipam/enipam/test/ec2sim"
)

// TestFleetScenarioHoldsTenThousandSteadyNodes: the steady scenario's
// fleet of 10 000 nodes (20 addresses each, seeded) builds in ec2sim (it
// ran out of addresses in one /16 per zone); a small fleet keeps its pod
// subnets and instance names.
func TestFleetScenarioHoldsTenThousandSteadyNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10 000 instances")
	}
	seeded := ", secondaryIPs: 9, enis: [{deviceIndex: 1, secondaryIPs: 9, deleteOnTermination: true}]"
	sc, err := ec2sim.ParseScenario([]byte(fleetScenario(10000, "m5.large", seeded, false)))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := ec2sim.New(sc)
	if err != nil {
		t.Fatalf("10 000 seeded nodes: %v", err)
	}
	_ = sim
	small := fleetScenario(100, "m5.large", "", false)
	for _, want := range []string{"name: pods-a", "name: node-a, count: 50", "name: node-b, count: 50"} {
		if !strings.Contains(small, want) {
			t.Errorf("100-node fleet lacks %q:\n%s", want, small)
		}
	}
}
