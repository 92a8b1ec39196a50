package poolcontroller

import (
	"fmt"
	"testing"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/policy"
	"github.com/enipam/enipam/operator/pool"
	"github.com/enipam/enipam/operator/snapshot"
)

// TestJoiningNodeInAWaveTakesItsFirstENIAlone: a joining m5.large node
// (first interface index 1: 9 secondaries an ENI, pre-allocate 8 plus
// Cilium's 2 addresses need 10) gets both its ENIs planned at once while
// fewer than wholeNeedEmptyNodes other nodes are empty; with more, its
// first ENI alone, so that it comes ahead of no other node's first,
// unless pods already wait on it.
func TestJoiningNodeInAWaveTakesItsFirstENIAlone(t *testing.T) {
	for _, tt := range []struct {
		emptyElsewhere int
		waiting        int
		newENIs        int
	}{
		{0, 0, 2},
		{wholeNeedEmptyNodes - 1, 0, 2},
		{wholeNeedEmptyNodes, 0, 1},
		{200, 0, 1},
		{200, 3, 2}, // pods wait on it: its whole need at once
	} {
		t.Run(fmt.Sprintf("%d other nodes empty, %d pods waiting", tt.emptyElsewhere, tt.waiting), func(t *testing.T) {
			r := &Reconciler{needs: newNeeds(), nodes: map[string]*memory{}}
			r.needs.set("n1", true)
			for i := range tt.emptyElsewhere {
				r.needs.set(fmt.Sprintf("other-%d", i), true)
			}
			snap := snapshot.Node{
				Instance: cloud.Instance{ID: "i-1", Type: "m5.large", AZ: "us-east-1a", VPCID: "vpc-1", SubnetID: "subnet-a"},
				Type:     cloud.InstanceType{Name: "m5.large", MaxENIs: 3, IPv4PerENI: 10, Hypervisor: "nitro"},
				ENIs:     []cloud.ENI{{ID: "eni-0", DeviceIndex: 0, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"}, Status: cloud.ENIInUse}},
				Subnets:  []cloud.Subnet{{ID: "subnet-a", AZ: "us-east-1a", VPCID: "vpc-1", Available: 200}},
			}
			cfg := policy.Config{Config: pool.Config{Knobs: pool.Knobs{PreAllocate: 8, AgentEndpoints: 2}, FirstInterfaceIndex: 1}, IPv4: true}
			cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			s := &nodeSync{r: r, mem: r.memory("n1"), cn: cn, pool: &poolView{cn: cn}, nodeState: nodeState{cfg: cfg, snap: snap, haveSnap: true, waiting: tt.waiting}}
			plan := s.computePlan()
			if plan.Create == nil {
				t.Fatalf("no new ENI planned: %+v", plan)
			}
			if got := 1 + len(plan.More); got != tt.newENIs {
				t.Fatalf("%d new ENIs planned, want %d", got, tt.newENIs)
			}
		})
	}
}
