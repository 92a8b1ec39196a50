package pool

import (
	"fmt"
	"testing"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestComputeWhole: a joining node's whole need is planned at once, each
// new ENI at the next free device index, in the subnet the rules pick
// once the ENIs planned before it have taken their addresses.
func TestComputeWhole(t *testing.T) {
	m5xlarge := cloud.InstanceType{Name: "m5.xlarge", MaxENIs: 4, IPv4PerENI: 15, Hypervisor: "nitro"}
	joining := Knobs{PreAllocate: 8, AgentEndpoints: 2}
	tests := []struct {
		name string
		n    *snapshot.Node
		cfg  Config
		// want lists the new ENIs planned, Create first, as
		// "subnet/device/ips/prefixes"; assigns the Assigns' IPs.
		want    []string
		assigns []int
		blocked bool
	}{
		{
			name: "m5.large, first index 1: 9 on the first ENI, the tenth on a second",
			n:    node(m5large), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/1/9/0", "subnet-a/2/1/0"},
		},
		{
			name: "m5.large, max-above-watermark: the second ENI takes the extra too",
			n:    node(m5large), cfg: Config{Knobs: Knobs{PreAllocate: 8, AgentEndpoints: 2, MaxAboveWatermark: 4}, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/1/9/0", "subnet-a/2/5/0"},
		},
		{
			name: "m5.xlarge: one ENI holds the need, nothing more",
			n:    node(m5xlarge), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/1/10/0"},
		},
		{
			name: "m5.large, first index 0: the primary's room first, then one new ENI",
			n:    node(m5large), cfg: Config{Knobs: Knobs{PreAllocate: 16, AgentEndpoints: 2}},
			want: []string{"subnet-a/1/9/0"}, assigns: []int{9},
		},
		{
			name: "m5.large, need past what the instance holds: every free index, no more",
			n:    node(m5large), cfg: Config{Knobs: Knobs{PreAllocate: 30}, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/1/9/0", "subnet-a/2/9/0"},
		},
		{
			name: "the second ENI goes where the first left the most room",
			n:    node(m5large), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1, SubnetTags: map[string]string{"pods": "yes"}},
			// subnet-c 150 free, subnet-b 100: the first takes 10 of c
			// (140 left), still the most free.
			want: []string{"subnet-c/1/9/0", "subnet-c/2/1/0"},
		},
		{
			name: "the first ENI leaves its subnet below the other's free count",
			n:    node(m5large, withSubnetFree("subnet-c", 105)), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1, SubnetTags: map[string]string{"pods": "yes"}},
			want: []string{"subnet-c/1/9/0", "subnet-b/2/1/0"},
		},
		{
			name: "no room in the subnet for the second ENI: the first alone",
			n:    node(m5large, withSubnetFree("subnet-a", 11)), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/1/9/0"},
		},
		{
			name: "prefix delegation: one /28 holds the need",
			n:    node(m5large), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1, PrefixDelegation: true},
			want: []string{"subnet-a/1/0/1"},
		},
		{
			name: "an ENI already at index 1 with room: filled, then one new ENI at 2",
			n:    node(m5large, withENI(1, nil), withSubnetFree("subnet-b", 100)), cfg: Config{Knobs: Knobs{PreAllocate: 14}, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/2/5/0"}, assigns: []int{9},
		},
		{
			name: "t3.medium: the primary's 2 slots, then two new ENIs for the other 6 (5 slots each)",
			n:    node(t3med, withIPs(0, 3), withPool(3, 3)), cfg: Config{Knobs: Knobs{PreAllocate: 8}},
			want: []string{"subnet-a/1/5/0", "subnet-a/2/1/0"}, assigns: []int{2},
		},
		{
			name: "max-allocate caps the whole need: one ENI",
			n:    node(m5large), cfg: Config{Knobs: Knobs{PreAllocate: 8, AgentEndpoints: 2, MaxAllocate: 9}, FirstInterfaceIndex: 1},
			want: []string{"subnet-a/1/9/0"},
		},
		{
			name: "at capacity: nothing planned, blocked",
			n: func() *snapshot.Node {
				n := node(m5large, withENI(1, nil), withENI(2, nil), withIPs(1, 9), withIPs(2, 9))
				return n
			}(), cfg: Config{Knobs: joining, FirstInterfaceIndex: 1},
			blocked: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprint(*tt.n)
			p := ComputeWhole(tt.n, &tt.cfg)
			if fmt.Sprint(*tt.n) != before {
				t.Fatalf("ComputeWhole changed the snapshot")
			}
			var got []string
			if p.Create != nil {
				got = append(got, fmt.Sprintf("%s/%d/%d/%d", p.Create.SubnetID, p.Create.DeviceIndex, p.Create.IPs, p.Create.Prefixes))
			}
			for _, c := range p.More {
				got = append(got, fmt.Sprintf("%s/%d/%d/%d", c.SubnetID, c.DeviceIndex, c.IPs, c.Prefixes))
				if fmt.Sprint(c.SecurityGroups) != fmt.Sprint(p.Create.SecurityGroups) {
					t.Errorf("ENI at %d: groups %v, the first's %v", c.DeviceIndex, c.SecurityGroups, p.Create.SecurityGroups)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("new ENIs = %v, want %v (plan %+v)", got, tt.want, p)
			}
			var assigns []int
			for _, a := range p.Assign {
				assigns = append(assigns, a.IPs)
			}
			if fmt.Sprint(assigns) != fmt.Sprint(tt.assigns) {
				t.Errorf("assigns = %v, want %v", assigns, tt.assigns)
			}
			if (p.Blocked != nil) != tt.blocked {
				t.Errorf("blocked = %v, want %v", p.Blocked, tt.blocked)
			}
			if p.Empty() != (len(got) == 0 && len(assigns) == 0) {
				t.Errorf("Empty() = %v with %d new ENIs and %d assigns", p.Empty(), len(got), len(assigns))
			}
		})
	}
}

// TestComputeWholeAgreesWithCompute: where the first new ENI covers the
// need, or none is needed, ComputeWhole is Compute.
func TestComputeWholeAgreesWithCompute(t *testing.T) {
	for _, n := range []*snapshot.Node{
		node(m5large, withIPs(0, 8), withPool(8, 2)),
		node(m5large, withIPs(0, 2), withPool(2, 2)),
		node(m5large, withPool(20, 0)),
	} {
		cfg := &Config{Knobs: Knobs{PreAllocate: 8, AgentEndpoints: 2}}
		show := func(p Plan) string { c := p.Create; p.Create = nil; return fmt.Sprintf("%+v %+v", p, c) }
		if a, b := show(Compute(n, cfg)), show(ComputeWhole(n, cfg)); a != b {
			t.Errorf("Compute %s, ComputeWhole %s", a, b)
		}
	}
}
