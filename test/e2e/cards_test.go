package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/test/ec2sim"
)

// trn1Scenario: a trn1.32xlarge (8 network cards of 5 interfaces, 8 EFAs)
// booted with an EFA (with ENA, so with addresses) at device 1 of card 0,
// an EFA-only interface at device 0 of cards 1 to 7, and an ordinary ENA
// interface at device 1 of card 1: device numbers 0 and 1 each exist on
// two cards.
const trn1Scenario = `
account: "123456789012"
clusterName: e2e
region: us-east-1
seed: 13
zones: [us-east-1a]
vpcs:
- id: vpc-0d000000000000001
  cidrs: [10.3.0.0/16]
  subnets:
  - {id: subnet-0d000000000000001, name: nodes, cidr: 10.3.0.0/20, zone: us-east-1a}
  securityGroups:
  - {id: sg-0d000000000000001, name: nodes}
instances:
- id: i-0d000000000000001
  type: trn1.32xlarge
  subnet: nodes
  securityGroups: [nodes]
  enis:
  - {networkCard: 0, deviceIndex: 1, interfaceType: efa, secondaryIPs: 2}
  - {networkCard: 1, deviceIndex: 0, interfaceType: efa-only}
  - {networkCard: 1, deviceIndex: 1, secondaryIPs: 3}
  - {networkCard: 2, deviceIndex: 0, interfaceType: efa-only}
  - {networkCard: 3, deviceIndex: 0, interfaceType: efa-only}
  - {networkCard: 4, deviceIndex: 0, interfaceType: efa-only}
  - {networkCard: 5, deviceIndex: 0, interfaceType: efa-only}
  - {networkCard: 6, deviceIndex: 0, interfaceType: efa-only}
  - {networkCard: 7, deviceIndex: 0, interfaceType: efa-only}
`

// TestMultiCardNodeWithEFAJoins: the trn1.32xlarge of trn1Scenario joins
// and asks for more addresses than it can hold (min-allocate 1000). The
// operator binary fills the pool only on interface-type ENIs of card 0:
// the primary and three new ENIs at devices 2 to 4 (card 0's 5 slots, one
// taken by the EFA), 4 × 49 = 196 addresses, exactly what
// `enipam max-pods --instance-type trn1.32xlarge --reserved-enis 1`
// states, and the NodeRouting says it cannot grow. Its spec.enis lists
// those four ENIs only, so the node agent, running on a network namespace
// that shows every interface with a link (the EFA's and card 1's ENA
// too), routes each of them and every pool address, and leaves the EFA
// and card-1 links alone.
func TestMultiCardNodeWithEFAJoins(t *testing.T) {
	w := newWorld(t, trn1Scenario)
	ctx := w.ctx
	c := env.Client
	const name, instance = "node-trn1", "i-0d000000000000001"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	dump, err := w.sim.Admin.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The links the kernel shows: every interface with an ENA device.
	ns := kerneltest.New(t)
	others := map[string]ec2sim.NetworkInterface{}
	for _, e := range dump.NetworkInterfaces {
		if e.Attachment == nil || e.Attachment.InstanceID != instance || e.InterfaceType == "efa-only" {
			continue
		}
		index := ns.AddENILink(t, fmt.Sprintf("ens%d-%d", e.Attachment.NetworkCardIndex, e.Attachment.DeviceIndex), e.MacAddress)
		if e.Attachment.DeviceIndex != 0 || e.Attachment.NetworkCardIndex != 0 {
			others[e.MacAddress] = e
			continue
		}
		// The primary interface is the node's own, up before any agent.
		if err := ns.Handle.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}); err != nil {
			t.Fatal(err)
		}
	}

	w.startOperator("--vpc-id=vpc-0d000000000000001")
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ciliumv2.NodeSpec{IPAM: ipamtypes.IPAMSpec{MinAllocate: 1000}}}); err != nil {
		t.Fatal(err)
	}

	w.startAgent(name, ns)

	// New ENIs show up as links once EC2 attached them, as on a node.
	showLinks := w.linkShower(ns, instance)
	nr := waitNodeRouting(t, ctx, name, "the node at capacity", func(nr *enipamv1alpha1.NodeRouting) bool {
		showLinks()
		capa := nr.Spec.Capacity
		return capa != nil && !capa.CanGrow && capa.Awaiting == 0 && capa.PoolIPs == capa.MaxIPs
	})
	cn := waitNode(t, ctx, name, "the pool", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == int(nr.Spec.Capacity.PoolIPs) })
	t.Logf("capacity %+v", *nr.Spec.Capacity)

	out, err := exec.CommandContext(ctx, bins.CLI, "max-pods", "--instance-type", "trn1.32xlarge", "--reserved-enis", "1", "--output", "json").Output()
	if err != nil {
		t.Fatalf("enipam max-pods: %v", err)
	}
	var stated struct {
		PoolIPs, MaxAllowed int
	}
	if err := json.Unmarshal(out, &stated); err != nil {
		t.Fatal(err)
	}
	if len(cn.Spec.IPAM.Pool) != 196 || stated.PoolIPs != len(cn.Spec.IPAM.Pool) || int(nr.Spec.Capacity.MaxIPs) != stated.PoolIPs {
		t.Errorf("pool %d, NodeRouting max %d, enipam max-pods %d; want 196 each", len(cn.Spec.IPAM.Pool), nr.Spec.Capacity.MaxIPs, stated.PoolIPs)
	}

	dump, err = w.sim.Admin.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ec2sim.NetworkInterface{}
	for _, e := range dump.NetworkInterfaces {
		byID[e.NetworkInterfaceID] = e
	}
	// The ENIs the agent is told of: the NodeRouting's spec.enis.
	var listed []int32
	number := map[string]int32{}
	for _, e := range nr.Spec.ENIs {
		got := byID[e.ID]
		if got.InterfaceType != "interface" || got.Attachment == nil || got.Attachment.NetworkCardIndex != 0 {
			t.Errorf("spec.enis lists %s (%s, attachment %+v)", e.ID, got.InterfaceType, got.Attachment)
		}
		listed = append(listed, e.Number)
		number[e.ID] = e.Number
	}
	slices.Sort(listed)
	if !slices.Equal(listed, []int32{0, 2, 3, 4}) {
		t.Errorf("spec.enis device numbers %v, want the primary and devices 2-4 of card 0", listed)
	}
	for ip, entry := range cn.Spec.IPAM.Pool {
		if e := byID[entry.Resource]; e.InterfaceType != "interface" || e.Attachment == nil || e.Attachment.NetworkCardIndex != 0 {
			t.Fatalf("pool address %s is on %s (%s, attachment %+v)", ip, entry.Resource, e.InterfaceType, e.Attachment)
		}
	}

	// The agent routes every listed ENI and every pool address, and has
	// no table, rule or link change for the EFA or card 1.
	nr = waitNodeRouting(t, ctx, name, "every ENI routed", func(nr *enipamv1alpha1.NodeRouting) bool {
		return nr.Status.RoutedENIs == 4
	})
	rules, err := ns.Handle.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	ruleTables := map[string]int{}
	enipamRules := 0
	for _, r := range rules {
		if r.Protocol != routing.DefaultProtocol {
			continue
		}
		enipamRules++
		if r.Src != nil {
			ruleTables[r.Src.IP.String()] = r.Table
		}
	}
	if want := 2*len(cn.Spec.IPAM.Pool) + 1; enipamRules != want {
		t.Errorf("%d enipam rules, want %d: an egress and an ingress rule per pool address and the connmark rule", enipamRules, want)
	}
	for ip, entry := range cn.Spec.IPAM.Pool {
		want := routing.Table(int(number[entry.Resource]))
		if !nr.Status.Routes(entry.Resource, ip) || ruleTables[ip] != want {
			t.Errorf("pool address %s of %s: reported %v, rule to table %d, want %d", ip, entry.Resource, nr.Status.Routes(entry.Resource, ip), ruleTables[ip], want)
		}
	}
	for _, table := range ruleTables {
		if table == routing.Table(1) {
			t.Errorf("a rule looks up table %d, device 1's: the EFA or card 1's ENA", table)
		}
	}
	links, err := ns.Handle.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if e, ok := others[l.Attrs().HardwareAddr.String()]; ok && (l.Attrs().MTU != 1500 || l.Attrs().Flags&net.FlagUp != 0) {
			t.Errorf("link %s of %s (%s, card %d) was changed: MTU %d, flags %v", l.Attrs().Name, e.NetworkInterfaceID, e.InterfaceType, e.Attachment.NetworkCardIndex, l.Attrs().MTU, l.Attrs().Flags)
		}
	}
	f := w.poolFindings(name)
	t.Logf("trn1.32xlarge with EFA: pool %d on %d ENIs of card 0 (enipam max-pods: pool %d, max pods %d), %d enipam rules; invariants: %d in two pools, %d free off their ENI, %d released in a pool, %d on two ENIs",
		len(cn.Spec.IPAM.Pool), len(listed), stated.PoolIPs, stated.MaxAllowed, enipamRules, f.InTwoPools, f.FreeOffENI, f.ReleasedInPool, f.OnTwoENIs)
	if f.Total() != 0 {
		t.Errorf("pools against EC2: %d breaches: %v", f.Total(), f.Details)
	}
}

// linkShower returns a function that adds a link to ns for each ENI EC2
// shows attached to the instance without one yet, as the kernel shows a
// newly attached ENI; EFA-only interfaces have no link.
func (w *world) linkShower(ns *kerneltest.Namespace, instance string) func() {
	seen := map[string]bool{}
	links, err := ns.Handle.LinkList()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, l := range links {
		seen[l.Attrs().HardwareAddr.String()] = true
	}
	return func() {
		dump, err := w.sim.Admin.Dump(w.ctx)
		if err != nil {
			return
		}
		for _, e := range dump.NetworkInterfaces {
			a := e.Attachment
			if a == nil || a.InstanceID != instance || a.Status != "attached" || seen[e.MacAddress] || e.InterfaceType == "efa-only" {
				continue
			}
			seen[e.MacAddress] = true
			ns.AddENILink(w.t, fmt.Sprintf("ens%d-%d", a.NetworkCardIndex, a.DeviceIndex), e.MacAddress)
		}
	}
}

// startAgent runs the node's enipam-agent (the agent package the binary
// runs) on ns until the test ends.
func (w *world) startAgent(name string, ns *kerneltest.Namespace) {
	w.t.Helper()
	a, err := agent.New(agent.DefaultConfig(name), env.Config, ns.Kernel(), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	w.t.Cleanup(func() { stop(); <-done })
}
