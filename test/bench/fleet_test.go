package bench

import (
	"fmt"
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

// TestDualStackFleetHasIPv6OnEverySubnet: the dual-stack scale-up's fleet
// builds in ec2sim with the VPC's IPv6 /56 and a distinct /64 of it on
// each of its four subnets.
func TestDualStackFleetHasIPv6OnEverySubnet(t *testing.T) {
	text := dualStackFleet(4, "m5.xlarge", true)
	sc, err := ec2sim.ParseScenario([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if _, err := ec2sim.New(sc); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if got := strings.Count(text, "ipv6Cidr: "+fleetVPCIPv6); got != 1 {
		t.Errorf("VPC IPv6 CIDR appears %d times, want 1:\n%s", got, text)
	}
	for i := 1; i <= 4; i++ {
		want := fmt.Sprintf("ipv6Cidr: 2600:1f18:abc:de%02x::/64", i)
		if strings.Count(text, want) != 1 {
			t.Errorf("want one subnet with %q:\n%s", want, text)
		}
	}
}
