package operator_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/test/ec2sim"
)

// vpcScenario: one VPC over two zones; a node subnet, two tagged pod
// subnets in us-east-1a (a /20 and a /28) and one in us-east-1b; node and
// pod security groups; three instances of different types in us-east-1a.
const vpcScenario = `
account: "123456789012"
region: us-east-1
seed: 7
zones: [us-east-1a, us-east-1b]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  - {id: subnet-0a000000000000002, name: pods-a, cidr: 10.0.16.0/20, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0a000000000000003, name: pods-a-small, cidr: 10.0.32.0/28, zone: us-east-1a, tags: {pods: "true"}}
  - {id: subnet-0b000000000000001, name: pods-b, cidr: 10.0.48.0/20, zone: us-east-1b, tags: {pods: "true"}}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
  - {id: sg-0a000000000000002, name: pods, tags: {pods: "true"}}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000002, type: m5.xlarge, subnet: nodes-a, securityGroups: [nodes]}
- {id: i-0a000000000000003, type: t3.medium, subnet: nodes-a, securityGroups: [nodes]}
`

func i32(v int32) *int32 { return &v }

// secondaryPolicy: nodes labelled pool=secondary keep pod IPs off the
// primary ENI, in the tagged pod subnets, with the pod security group.
func secondaryPolicy() *enipamv1alpha1.ENIPolicy {
	return &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secondary"},
		Spec: enipamv1alpha1.ENIPolicySpec{
			NodeSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "secondary"}},
			FirstInterfaceIndex: i32(1),
			SubnetTags:          map[string]string{"pods": "true"},
			SecurityGroupTags:   map[string]string{"pods": "true"},
		},
	}
}

// TestThreeNodesOfDifferentTypesJoin: m5.large with room on its primary
// ENI (default pre-allocate 8, plus the agent's 2 endpoint IPs on a fresh
// node), m5.xlarge under a policy with first interface index 1, t3.medium
// whose primary holds only 5 of the 10 → the pools fill with exactly one
// Assign for the first, Create + Attach + Modify for the second, and one
// Assign plus one new ENI for the third.
func TestThreeNodesOfDifferentTypesJoin(t *testing.T) {
	r := newRig(t, vpcScenario)
	if err := r.c.Create(r.ctx, secondaryPolicy()); err != nil {
		t.Fatal(err)
	}
	opts := r.options()
	opts.VPCIDs = nil // found from the first instance
	r.startOperator(opts)
	r.addNode("node-m5", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	r.addNode("node-m5x", "i-0a000000000000002", "us-east-1a", map[string]string{"pool": "secondary"}, ipamtypes.IPAMSpec{})
	r.addNode("node-t3", "i-0a000000000000003", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 8})

	for _, name := range []string{"node-m5", "node-m5x", "node-t3"} {
		r.waitNode(name, 30*time.Second, "8 free IPs", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 8 })
	}
	// Let any stray follow-up reconcile happen before counting.
	time.Sleep(500 * time.Millisecond)
	for action, want := range map[string]int64{
		"AssignPrivateIpAddresses": 2, "CreateNetworkInterface": 2, "AttachNetworkInterface": 2, "ModifyNetworkInterfaceAttribute": 2,
	} {
		if got := r.calls(action); got != want {
			t.Errorf("%s calls = %d, want %d", action, got, want)
		}
	}
	if n := r.mutatingCalls(); n != 8 {
		t.Errorf("mutating calls = %d, want 8: %v", n, r.sim.Counters().Calls)
	}

	m5, m5ENIs := r.waitTold("node-m5")
	if m5.Spec.InstanceID != "i-0a000000000000001" || m5.Spec.ENI.InstanceType != "m5.large" || m5.Spec.ENI.VpcID != "vpc-0a000000000000001" ||
		m5.Spec.ENI.AvailabilityZone != "us-east-1a" || m5.Spec.ENI.NodeSubnetID != "subnet-0a000000000000001" {
		t.Errorf("identity not filled: instance %q, eni %+v", m5.Spec.InstanceID, m5.Spec.ENI)
	}
	if len(m5.Spec.IPAM.Pool) != 9 || len(m5ENIs) != 1 {
		t.Errorf("node-m5: pool %d, ENIs %d; want the primary's 9 slots filled in one call", len(m5.Spec.IPAM.Pool), len(m5ENIs))
	}

	m5x, m5xENIs := r.waitTold("node-m5x")
	if nr := r.routing("node-m5x"); len(m5xENIs) != 2 || nr.Spec.FirstInterfaceIndex != 1 || m5x.Spec.ENI.FirstInterfaceIndex != nil {
		t.Fatalf("node-m5x: %d ENIs, NodeRouting first index %d, spec.eni first index %v; want a second ENI under first index 1, told the agent through NodeRouting only",
			len(m5xENIs), nr.Spec.FirstInterfaceIndex, m5x.Spec.ENI.FirstInterfaceIndex)
	}
	for ip, e := range m5x.Spec.IPAM.Pool {
		eni, ok := m5xENIs[e.Resource]
		if !ok || eni.Number != 1 {
			t.Fatalf("pool IP %s on %q: want the ENI at device 1, listed in spec.enis", ip, e.Resource)
		}
		if eni.MAC == "" || !eni.Subnet.CIDR.IsValid() {
			t.Errorf("spec.enis' ENI lacks MAC or subnet CIDR: %+v", eni)
		}
		// The subnet, groups and tags as EC2 holds them.
		i := slices.IndexFunc(r.dump().NetworkInterfaces, func(n ec2sim.NetworkInterface) bool { return n.NetworkInterfaceID == e.Resource })
		if i < 0 {
			t.Fatalf("ENI %s not in EC2", e.Resource)
		}
		ec2ENI := r.dump().NetworkInterfaces[i]
		var groups []string
		for _, g := range ec2ENI.Groups {
			groups = append(groups, g.GroupID)
		}
		if ec2ENI.SubnetID != "subnet-0a000000000000002" || eni.Subnet.ID != ec2ENI.SubnetID || !slices.Equal(groups, []string{"sg-0a000000000000002"}) {
			t.Errorf("new ENI in %s (spec.enis: %s) with %v; want the larger tagged subnet and the pod group", ec2ENI.SubnetID, eni.Subnet.ID, groups)
		}
		tags := map[string]string{}
		for _, tag := range ec2ENI.Tags {
			tags[tag.Key] = tag.Value
		}
		if tags[cloud.TagCluster] != "test" || tags[cloud.TagInstance] != "i-0a000000000000002" || tags[cloud.TagManagedBy] != "enipam" {
			t.Errorf("new ENI tags %v lack enipam's", tags)
		}
	}

	t3, t3ENIs := r.waitTold("node-t3")
	if len(t3ENIs) != 2 || len(t3.Spec.IPAM.Pool) != 10 {
		t.Errorf("node-t3: %d ENIs, pool %d; want 5 on the primary and 5 on a new ENI", len(t3ENIs), len(t3.Spec.IPAM.Pool))
	}
	dump := r.dump()
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.DeviceIndex > 0 && !e.Attachment.DeleteOnTermination {
			t.Errorf("ENI %s attached without delete-on-termination", e.NetworkInterfaceID)
		}
	}
	for _, name := range []string{"node-m5", "node-m5x", "node-t3"} {
		if msg := r.node(name).Status.IPAM.OperatorStatus.Error; msg != "" {
			t.Errorf("%s operator-status: %q", name, msg)
		}
	}
}

// TestExistingENIsAdopted: an instance that already has a secondary ENI
// with 5 addresses and 2 extra addresses on its primary (pre-allocate 4)
// → all 7 go into the pool with no mutating call.
func TestExistingENIsAdopted(t *testing.T) {
	r := newRig(t, vpcScenario+`
- id: i-0a0000000000000aa
  type: m5.large
  subnet: nodes-a
  securityGroups: [nodes]
  secondaryIPs: 2
  enis:
  - {deviceIndex: 1, subnet: pods-a, secondaryIPs: 5}
`)
	r.startOperator(r.options())
	r.addNode("node-old", "i-0a0000000000000aa", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-old", 20*time.Second, "7 pool IPs", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 7 })
	_, told := r.waitTold("node-old")
	if len(told) != 2 {
		t.Errorf("spec.enis lists %d ENIs, want 2", len(told))
	}
	time.Sleep(300 * time.Millisecond)
	if n := r.mutatingCalls(); n != 0 {
		t.Errorf("mutating calls = %d, want 0: %v", n, r.sim.Counters().Calls)
	}
}

// TestPoolGrowsAheadOfUseUntilCapacity: m5.large (3 ENIs × 9 addresses),
// pre-allocate 4 → as pods take IPs the pool grows before it runs dry; at
// 27 IPs the node is at capacity: an InstanceAtCapacity event and
// operator-status, a need of 4 of which none is short (the alert on
// short pools stays quiet on a full node), and further use brings no
// further EC2 call. The NodeRouting's capacity counts what pods use and
// what is free (kubectl get nrt's Free, Used and Max): 2 used early on,
// 27 of 27 at the end.
func TestPoolGrowsAheadOfUseUntilCapacity(t *testing.T) {
	r := newRig(t, vpcScenario)
	_, reg, _ := r.startOperator(r.options())
	r.addNode("node-grow", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-grow", 20*time.Second, "4 free IPs", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	r.use("node-grow", 2)
	r.waitCapacity("node-grow", "2 used", func(c *enipamv1alpha1.NodeCapacity) bool {
		return c.UsedIPs == 2 && c.FreeIPs == c.PoolIPs-2 && c.MaxIPs == 27
	})

	for {
		cn := r.node("node-grow")
		if len(cn.Spec.IPAM.Pool) == 27 {
			break
		}
		r.use("node-grow", min(3, freeIPs(cn)))
		cn = r.waitNode("node-grow", 20*time.Second, "pool ahead of use", func(cn *ciliumv2.CiliumNode) bool {
			return freeIPs(cn) >= 4 || len(cn.Spec.IPAM.Pool) == 27
		})
		if freeIPs(cn) == 0 {
			t.Fatalf("pool ran dry at %d used", len(cn.Status.IPAM.Used))
		}
	}
	// The last free IPs go too: the node needs more than it can hold.
	r.use("node-grow", freeIPs(r.node("node-grow")))
	cn := r.waitNode("node-grow", 20*time.Second, "capacity reported", func(cn *ciliumv2.CiliumNode) bool {
		return strings.Contains(cn.Status.IPAM.OperatorStatus.Error, "capacity")
	})
	if n := len(r.told(cn)); n != 3 {
		t.Errorf("%d ENIs at capacity, want 3", n)
	}
	r.waitEvent("node-grow", "InstanceAtCapacity")
	r.waitCapacity("node-grow", "the pool full and used", func(c *enipamv1alpha1.NodeCapacity) bool {
		return c.UsedIPs == 27 && c.FreeIPs == 0 && c.PoolIPs == 27 && c.MaxIPs == 27 && !c.CanGrow
	})
	if needed, short := nodeIPs(t, reg, "node-grow", "needed"), nodeIPs(t, reg, "node-grow", "short"); needed != 4 || short != 0 {
		t.Errorf("node at capacity: needed %v, short %v; want 4 and 0", needed, short)
	}

	before := r.mutatingCalls()
	for range 3 {
		r.use("node-grow", 1)
		time.Sleep(200 * time.Millisecond)
	}
	if after := r.mutatingCalls(); after != before {
		t.Errorf("mutating calls went from %d to %d at capacity; want none", before, after)
	}
}

// TestPrefixDelegation: m5.large (nitro) under a policy with prefix
// delegation, pre-allocate 20 → one Assign of two /28 prefixes on the
// primary ENI, and all 32 addresses of the prefixes in the pool, each on
// that ENI.
func TestPrefixDelegation(t *testing.T) {
	r := newRig(t, vpcScenario)
	yes := true
	p := &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "prefixes"},
		Spec:       enipamv1alpha1.ENIPolicySpec{PrefixDelegation: &yes, PreAllocate: i32(20)},
	}
	if err := r.c.Create(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-pfx", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	r.waitNode("node-pfx", 20*time.Second, "32 pool IPs", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 32 })
	cn, told := r.waitTold("node-pfx")
	time.Sleep(300 * time.Millisecond)
	if got := r.calls("AssignPrivateIpAddresses"); got != 1 {
		t.Errorf("AssignPrivateIpAddresses calls = %d, want 1", got)
	}
	var primary string
	for id, e := range told {
		if e.Number == 0 {
			primary = id
			if len(e.Prefixes) != 2 {
				t.Errorf("primary ENI lists %d prefixes in spec.enis, want 2", len(e.Prefixes))
			}
		}
	}
	for ip, e := range cn.Spec.IPAM.Pool {
		if e.Resource != primary {
			t.Errorf("pool IP %s on %s, want the primary %s", ip, e.Resource, primary)
		}
	}
}
