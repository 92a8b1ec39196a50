package kernel_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
)

// These tests drive the network of packets_test.go the way the agent
// does: from the CiliumNode and the NodeRouting spec, through
// ciliumnode.ToNode, to a converge of the namespace's kernel. The policy
// changes while pods run; their traffic must not notice.

// vpcCiliumNode is the CiliumNode of vpcNet's node: the primary ENI
// (device 0, the node's 10.0.1.10) and eni-a (device 1, tagged team=a)
// with pod-a's 10.0.2.10 in use and pod-b's 10.0.2.11 pooled and free
// (its pod holds it only in this test's network).
func vpcCiliumNode() *ciliumv2.CiliumNode {
	vpc := awstypes.AwsVPC{ID: "vpc-1", PrimaryCIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.0.0/16"))}
	cn := &ciliumv2.CiliumNode{}
	cn.Name = "ip-10-0-1-10.ec2.internal"
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{
		"eni-primary": {ID: "eni-primary", Number: 0, MAC: macPrimary, IP: iputil.AddrFrom(netip.MustParseAddr("10.0.1.10")), VPC: vpc,
			Subnet: awstypes.AwsSubnet{ID: "subnet-1", CIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.1.0/24"))}},
		"eni-a": {ID: "eni-a", Number: 1, MAC: macENIA, VPC: vpc, Tags: map[string]string{"team": "a"},
			Subnet:    awstypes.AwsSubnet{ID: "subnet-2", CIDR: iputil.PrefixFrom(netip.MustParsePrefix("10.0.2.0/24"))},
			Addresses: []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.2.10")), iputil.AddrFrom(netip.MustParseAddr("10.0.2.11"))}},
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{
		"10.0.2.10": {Resource: "eni-a"},
		"10.0.2.11": {Resource: "eni-a"},
	}
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.2.10": {Resource: "eni-a", Owner: "default/pod-a"}}
	return cn
}

func nodeRoutingSpec(first int32, exclude map[string]string) *enipamv1alpha1.NodeRoutingSpec {
	return &enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-0123456789abcdef0", FirstInterfaceIndex: first, ExcludeInterfaceTags: exclude}
}

// convergeCN converges the node as the agent does with cn under spec.
func (n *vpcNet) convergeCN(t *testing.T, cn *ciliumv2.CiliumNode, spec *enipamv1alpha1.NodeRoutingSpec) routing.Result {
	t.Helper()
	node, _, problems := ciliumnode.ToNode(cn, spec)
	if len(problems) != 0 {
		t.Fatalf("converting the CiliumNode: %v", problems)
	}
	return n.converge(t, routing.DefaultConfig(), node)
}

// leavesByENI reports whether a UDP datagram from pod (address src) to the
// VPC peer arrives on the VPC side of eth1 (true) or of eth0 (false); it
// fails the test if it arrives on neither.
func (n *vpcNet) leavesByENI(t *testing.T, pod *kerneltest.Namespace, src string) bool {
	t.Helper()
	gw0, gw1 := n.vpc.Capture(t, "gw0"), n.vpc.Capture(t, "gw1")
	pod.SendUDP(t, "", "10.0.9.9:53")
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		switch {
		case gw1.Saw(src, "10.0.9.9"):
			return true
		case gw0.Saw(src, "10.0.9.9"):
			return false
		}
	}
	t.Fatalf("%s's datagram arrived nowhere", src)
	return false
}

// rulesOf are the owned rules naming ip.
func rulesOf(t *testing.T, ns *kerneltest.Namespace, ip string) []string {
	t.Helper()
	var out []string
	for _, r := range ownedRules(t, ns) {
		if strings.Contains(r, " "+ip+"/32 ") {
			out = append(out, r)
		}
	}
	return out
}

// drainAcrossPolicyChange routes vpcNet's node under first interface
// index 1, changes the policy to changed (which drops eni-a), and checks
// that pod-a's connections and pod-b's datagrams still leave by eth1 and
// that the converge deleted none of their rules. Then the release
// handshake of pod-b's free address: marked and ready-for-release keep
// its routing, released takes it (its datagrams now leave by eth0, where
// the VPC drops them), pod-a unharmed. Then pod-a's pod goes and its
// address is released and leaves the pool: its rules and table 11 go.
func drainAcrossPolicyChange(t *testing.T, changed *enipamv1alpha1.NodeRoutingSpec) {
	n := newVPCNet(t)
	cn := vpcCiliumNode()
	n.convergeCN(t, cn, nodeRoutingSpec(1, nil))
	if got := fetch(t, n.podA, "", "10.0.9.9:80"); got != "vpc" {
		t.Fatalf("pod-a before the change: %q", got)
	}
	if !n.leavesByENI(t, n.podB, "10.0.2.11") {
		t.Fatal("pod-b's datagram left by eth0 before the change")
	}
	podA, podB := rulesOf(t, n.node, "10.0.2.10"), rulesOf(t, n.node, "10.0.2.11")
	if len(podA) != 2 || len(podB) != 2 {
		t.Fatalf("rules before the change: pod-a %v, pod-b %v, want two each", podA, podB)
	}

	res := n.convergeCN(t, cn, changed)
	if len(res.Plan.DelRules) != 0 || len(res.Plan.DelRoutes) != 0 || len(res.Plan.AddRules) != 0 {
		t.Errorf("the policy change planned %+v, want no rule or route touched", res.Plan)
	}
	if got := fetch(t, n.podA, "", "10.0.9.9:80"); got != "vpc" {
		t.Errorf("pod-a after the change: %q", got)
	}
	if !waitSaw(n.gw1, "10.0.2.10", "10.0.9.9") {
		t.Error("pod-a's packets did not arrive by eth1 after the change")
	}
	if !n.leavesByENI(t, n.podB, "10.0.2.11") {
		t.Error("pod-b's free, pooled address lost its routing with the change")
	}
	if len(res.Routed) != 1 || res.Routed[0].ID != "eni-a" || len(res.Routed[0].IPs) != 2 {
		t.Errorf("reported %+v, want eni-a with its two held addresses", res.Routed)
	}

	for _, state := range []ipamtypes.IPReleaseStatus{"marked-for-release", "ready-for-release"} {
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.2.11": state}
		n.convergeCN(t, cn, changed)
		if !n.leavesByENI(t, n.podB, "10.0.2.11") {
			t.Errorf("pod-b's address lost its routing at %s", state)
		}
	}
	cn.Status.IPAM.ReleaseIPs["10.0.2.11"] = "released"
	if res := n.convergeCN(t, cn, changed); res.Ops[routing.OpDelRule] != 2 || res.Ops.Writes() != 2 {
		t.Errorf("the release of 10.0.2.11 cost %v, want its two rules deleted", res.Ops)
	}
	if r := rulesOf(t, n.node, "10.0.2.11"); len(r) != 0 {
		t.Errorf("rules of the released address left: %v", r)
	}
	if n.leavesByENI(t, n.podB, "10.0.2.11") {
		t.Error("pod-b's datagram still left by eth1 after its address was released")
	}
	if got := fetch(t, n.podA, "", "10.0.9.9:80"); got != "vpc" {
		t.Errorf("pod-a after pod-b's release: %q", got)
	}

	// pod-a's pod goes; its address goes through the handshake and leaves
	// the pool.
	delete(cn.Status.IPAM.Used, "10.0.2.10")
	delete(cn.Spec.IPAM.Pool, "10.0.2.11")
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.2.10": "ready-for-release"}
	n.convergeCN(t, cn, changed)
	if r := rulesOf(t, n.node, "10.0.2.10"); len(r) != 2 {
		t.Errorf("pod-a's address lost its rules before its release: %v", r)
	}
	cn.Status.IPAM.ReleaseIPs["10.0.2.10"] = "released"
	delete(cn.Spec.IPAM.Pool, "10.0.2.10")
	res = n.convergeCN(t, cn, changed)
	if r := rulesOf(t, n.node, "10.0.2.10"); len(r) != 0 {
		t.Errorf("rules of pod-a's released address left: %v", r)
	}
	if res.Ops[routing.OpDelRoute] != 2 || len(res.Routed) != 0 {
		t.Errorf("after the last release: %v, reported %+v; want table 11's two routes deleted and nothing reported", res.Ops, res.Routed)
	}
	if r := tableRoutes(t, n.node, 11); len(r) != 0 {
		t.Errorf("routes of table 11 left: %v", r)
	}
}

// TestPodTrafficSurvivesFirstInterfaceIndexRaised: the ENIPolicy's
// firstInterfaceIndex goes from 1 to 2, dropping eni-a (device 1) from
// the policy while pod-a uses 10.0.2.10 on it. See drainAcrossPolicyChange.
func TestPodTrafficSurvivesFirstInterfaceIndexRaised(t *testing.T) {
	drainAcrossPolicyChange(t, nodeRoutingSpec(2, nil))
}

// TestPodTrafficSurvivesExcludeInterfaceTagsAdded: the ENIPolicy gains
// excludeInterfaceTags team=a, which eni-a carries, while pod-a uses
// 10.0.2.10 on it. See drainAcrossPolicyChange.
func TestPodTrafficSurvivesExcludeInterfaceTagsAdded(t *testing.T) {
	drainAcrossPolicyChange(t, nodeRoutingSpec(1, map[string]string{"team": "a"}))
}
