package operator_test

import (
	"net/netip"
	"testing"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// fragmentedScenario: a /26 pod subnet whose first three aligned /28s are
// broken up by EC2's reserved addresses and another ENI's 28 addresses;
// the last /28 holds the reserved broadcast address. 30 addresses are
// free, but no /28.
const fragmentedScenario = `
account: "123456789012"
region: us-east-1
seed: 3
zones: [us-east-1a]
vpcs:
- id: vpc-0a000000000000001
  cidrs: [10.0.0.0/16]
  subnets:
  - {id: subnet-0a000000000000001, name: nodes-a, cidr: 10.0.0.0/24, zone: us-east-1a}
  - {id: subnet-0a000000000000004, name: pods-frag, cidr: 10.0.40.0/26, zone: us-east-1a, tags: {frag: "true"}}
  securityGroups:
  - {id: sg-0a000000000000001, name: nodes}
instances:
- {id: i-0a000000000000001, type: m5.large, subnet: nodes-a, securityGroups: [nodes]}
`

// TestPrefixFallsBackToSingleAddresses: m5.large (nitro) under a policy
// with prefix delegation, first interface index 1 and the fragmented
// subnet. EC2 refuses the new ENI's /28 (InsufficientCidrBlocks): a
// PrefixFallback event says so, the ENI is created with single addresses
// instead, and the pool fills from them.
func TestPrefixFallsBackToSingleAddresses(t *testing.T) {
	r := newRig(t, fragmentedScenario)
	if _, err := r.sim.State().CreateNetworkInterface(ec2sim.CreateNetworkInterfaceRequest{
		SubnetID: "subnet-0a000000000000004", SecondaryPrivateIPAddressCount: 28,
	}); err != nil {
		t.Fatal(err)
	}
	yes := true
	p := &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "frag"},
		Spec: enipamv1alpha1.ENIPolicySpec{
			SubnetIDs: []enipamv1alpha1.SubnetID{"subnet-0a000000000000004"}, FirstInterfaceIndex: i32(1), PrefixDelegation: &yes,
		},
	}
	if err := r.c.Create(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-frag", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitEvent("node-frag", "PrefixFallback")
	r.waitNode("node-frag", 30*time.Second, "4 free single addresses", func(cn *ciliumv2.CiliumNode) bool { return freeIPs(cn) >= 4 })
	_, told := r.waitTold("node-frag")
	for _, e := range told {
		if len(e.Prefixes) != 0 {
			t.Errorf("ENI %s has prefixes %v in a subnet without a free /28", e.ID, e.Prefixes)
		}
	}
	if got := r.sim.Counters().Errors["CreateNetworkInterface"]["InsufficientCidrBlocks"]; got != 1 {
		t.Errorf("InsufficientCidrBlocks answers = %d, want 1 (then single addresses)", got)
	}
}

// TestPrefixReleasedWhole: m5.large (nitro) with prefix delegation,
// pre-allocate 4, release on with no delay. Pods take 16 addresses, so
// the pool grows to two /28s; then all but one pod leave. The /28 holding
// the remaining pod's address is never offered; the other, all 16 free,
// is marked whole, and once the agent acknowledged all 16 it is released
// with one Unassign of the prefix.
func TestPrefixReleasedWhole(t *testing.T) {
	r := newRig(t, vpcScenario)
	opts := r.options()
	opts.ReleaseExcessIPs, opts.ReleaseDelay, opts.PrefixDelegation = true, 0, true
	r.startOperator(opts)
	r.addNode("node-pd", "i-0a000000000000001", "us-east-1a", nil, ipamtypes.IPAMSpec{PreAllocate: 4})
	r.waitNode("node-pd", 20*time.Second, "one prefix", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 16 })
	r.use("node-pd", 16)
	cn := r.waitNode("node-pd", 20*time.Second, "two prefixes", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 32 })

	// All pods but one leave.
	var kept string
	for ip := range cn.Status.IPAM.Used {
		kept = ip
		break
	}
	r.agentUpdate("node-pd", func(cn *ciliumv2.CiliumNode) {
		cn.Status.IPAM.Used = ipamtypes.AllocationMap{kept: cn.Status.IPAM.Used[kept]}
	})
	r.waitNode("node-pd", 20*time.Second, "16 marked", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Status.IPAM.ReleaseIPs) == 16 })
	cn, told := r.waitTold("node-pd")
	keptAddr := netip.MustParseAddr(kept)
	var keptPrefix netip.Prefix
	for _, e := range told {
		for _, p := range e.Prefixes {
			if p.Prefix.Contains(keptAddr) {
				keptPrefix = p.Prefix
			}
		}
	}
	for ip := range cn.Status.IPAM.ReleaseIPs {
		if keptPrefix.Contains(netip.MustParseAddr(ip)) {
			t.Fatalf("%s marked although its prefix %s holds the pod address %s", ip, keptPrefix, kept)
		}
	}
	r.agentUpdate("node-pd", func(cn *ciliumv2.CiliumNode) {
		for ip := range cn.Status.IPAM.ReleaseIPs {
			cn.Status.IPAM.ReleaseIPs[ip] = ipamoption.IPAMReadyForRelease
		}
	})
	cn = r.waitNode("node-pd", 20*time.Second, "the prefix released", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 16 })
	for ip := range cn.Spec.IPAM.Pool {
		if !keptPrefix.Contains(netip.MustParseAddr(ip)) {
			t.Errorf("pool keeps %s outside the prefix in use", ip)
		}
	}
	attached, _ := r.enisOf("i-0a000000000000001")
	var prefixes []string
	for _, e := range attached {
		for _, p := range e.IPv4Prefixes {
			prefixes = append(prefixes, p.IPv4Prefix)
		}
	}
	if len(prefixes) != 1 || prefixes[0] != keptPrefix.String() {
		t.Errorf("EC2 shows prefixes %v, want only %s", prefixes, keptPrefix)
	}
	if got := r.calls("UnassignPrivateIpAddresses"); got != 1 {
		t.Errorf("UnassignPrivateIpAddresses calls = %d, want 1", got)
	}
}
