package uninstall_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
	"github.com/enipam/enipam/nodeagent/uninstall"
	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// createNode creates a Node whose kubelet posts the given Ready status
// ("" for none), and its NodeRouting.
func createNode(t *testing.T, name string, kubelet corev1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	if kubelet != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: kubelet, LastHeartbeatTime: metav1.Now()}}
		if err := env.Client.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	nr := &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: enipamv1alpha1.NodeRoutingSpec{FirstInterfaceIndex: 1}}
	if err := env.Client.Create(ctx, nr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), nr) })
}

// setCondition writes the Ready condition an agent left behind.
func setCondition(t *testing.T, name, reason string, status metav1.ConditionStatus) {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&nr.Status.Conditions, metav1.Condition{Type: enipamv1alpha1.ConditionReady, Status: status, Reason: reason, Message: "left by a test"})
	if err := env.Client.Status().Update(context.Background(), nr); err != nil {
		t.Fatal(err)
	}
}

// startAgent runs a real agent core for the node on an in-memory kernel
// with one secondary ENI and one pool address, and waits until it reports
// the node routed.
func startAgent(t *testing.T, name, mac, subnet, ip string) *routingtest.Host {
	t.Helper()
	ctx := context.Background()
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(ctx, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cn) })
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{"eni-" + name: {
		ID: "eni-" + name, Number: 1, MAC: mac,
		Subnet: awstypes.AwsSubnet{ID: "subnet-" + name, CIDR: iputil.PrefixFrom(netip.MustParsePrefix(subnet))},
	}}
	if err := env.Client.Status().Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{ip: {Resource: "eni-" + name}}
	if err := env.Client.Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	hw, _ := net.ParseMAC(mac)
	host := &routingtest.Host{}
	host.AddLink(routing.Link{Index: 2, Name: "eth0", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0}, MTU: 9001, Up: true, RPFilter: 1})
	host.AddLink(routing.Link{Index: 3, Name: "eth1", MAC: hw, MTU: 1500, RPFilter: 1})
	cfg := agent.DefaultConfig(name)
	cfg.ResyncInterval, cfg.LinkWaitBackoff = 2*time.Second, 20*time.Millisecond
	a, err := agent.New(cfg, env.Config, host, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(20 * time.Second)
	for reason(t, name) != enipamv1alpha1.ReasonRouted {
		if time.Now().After(deadline) {
			t.Fatalf("agent of %s never reported Routed", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return host
}

func reason(t *testing.T, name string) string {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// TestUninstallWaitsForEveryLiveAgent: four nodes. Two run a real agent
// that routed its node; one's NodeRouting says its agent stopped; one's
// kubelet no longer posts (Ready Unknown) although its NodeRouting still
// says Routed. Run annotates all four, waits for the two live agents to
// remove their routing (their in-memory kernels end with no rule, no
// route, no connmark table and rp_filter back at 1), and reports them
// cleaned and the other two without an agent, none pending. Each
// NodeRouting carries the annotation with the requester's name.
func TestUninstallWaitsForEveryLiveAgent(t *testing.T) {
	for _, n := range []string{"live-1", "live-2", "stopped", "silent"} {
		status := corev1.ConditionTrue
		if n == "silent" {
			status = corev1.ConditionUnknown
		}
		createNode(t, n, status)
	}
	hosts := []*routingtest.Host{
		startAgent(t, "live-1", "02:00:00:00:0d:01", "10.0.13.0/24", "10.0.13.10"),
		startAgent(t, "live-2", "02:00:00:00:0d:02", "10.0.14.0/24", "10.0.14.10"),
	}
	setCondition(t, "stopped", enipamv1alpha1.ReasonAgentStopped, metav1.ConditionFalse)
	setCondition(t, "silent", enipamv1alpha1.ReasonRouted, metav1.ConditionTrue)

	opts := uninstall.DefaultOptions()
	opts.Requester, opts.Timeout, opts.Poll = "test", 30*time.Second, 50*time.Millisecond
	out, err := uninstall.Run(context.Background(), env.Client, opts, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Cleaned, []string{"live-1", "live-2"}) || !slices.Equal(out.NoAgent, []string{"silent", "stopped"}) || len(out.Pending) != 0 {
		t.Errorf("outcome %+v, want live-1 and live-2 cleaned, silent and stopped without an agent", out)
	}
	for i, h := range hosts {
		rules, _ := h.Rules()
		routes, _ := h.Routes()
		cm, _ := h.Connmark()
		eth1, _ := h.Link(3)
		if len(rules) != 0 || len(routes) != 0 || cm != nil || eth1.RPFilter != 1 {
			t.Errorf("live-%d after uninstall: rules %v routes %v connmark %v rp_filter %d; want none, none, none, 1", i+1, rules, routes, cm, eth1.RPFilter)
		}
	}
	var nrs enipamv1alpha1.NodeRoutingList
	if err := env.Client.List(context.Background(), &nrs); err != nil {
		t.Fatal(err)
	}
	for _, nr := range nrs.Items {
		if got := nr.Annotations[enipamv1alpha1.AnnotationCleanup]; got != "test" {
			t.Errorf("NodeRouting %s annotation %q, want the requester", nr.Name, got)
		}
	}
}

// TestUninstallTimesOutNamingTheNodesLeft: a node whose NodeRouting says
// Routed and whose kubelet posts, but whose agent never answers, makes Run
// fail with ErrTimeout after the timeout, naming the node and its last
// condition.
func TestUninstallTimesOutNamingTheNodesLeft(t *testing.T) {
	createNode(t, "stuck", corev1.ConditionTrue)
	setCondition(t, "stuck", enipamv1alpha1.ReasonRouted, metav1.ConditionTrue)
	opts := uninstall.DefaultOptions()
	opts.Timeout, opts.Poll = 300*time.Millisecond, 50*time.Millisecond
	out, err := uninstall.Run(context.Background(), env.Client, opts, quiet)
	if !errors.Is(err, uninstall.ErrTimeout) || !strings.Contains(err.Error(), "stuck (Routed") {
		t.Fatalf("Run: %v, want ErrTimeout naming stuck", err)
	}
	if len(out.Pending) != 1 || !strings.HasPrefix(out.Pending[0], "stuck") {
		t.Errorf("pending %v, want stuck", out.Pending)
	}
}

// TestResumeRoutesEveryCleanedNodeAgain: an uninstall that stopped
// half-way, then an upgrade. Two nodes run a real agent that routed its
// node; a third carries a cleanup request someone set by hand. Run cleans
// the two (their kernels end with no rule, no route and rp_filter 1) and
// leaves the third's value alone. Resume, still with the same agents
// running, withdraws the uninstall's request from the two and from
// nothing else: both agents report Routed again with their rules, routes,
// connmark table and loose rp_filter back as before the uninstall, and
// the hand-set request stays (Kept, value unchanged). A second Resume
// finds nothing to do.
func TestResumeRoutesEveryCleanedNodeAgain(t *testing.T) {
	for _, n := range []string{"resume-1", "resume-2", "by-hand"} {
		createNode(t, n, corev1.ConditionTrue)
	}
	hosts := []*routingtest.Host{
		startAgent(t, "resume-1", "02:00:00:00:0e:01", "10.0.17.0/24", "10.0.17.10"),
		startAgent(t, "resume-2", "02:00:00:00:0e:02", "10.0.18.0/24", "10.0.18.10"),
	}
	type kernelState struct {
		rules, routes int
		connmark      bool
		rpFilter      int
	}
	state := func(h *routingtest.Host) kernelState {
		rules, _ := h.Rules()
		routes, _ := h.Routes()
		cm, _ := h.Connmark()
		eth1, _ := h.Link(3)
		return kernelState{len(rules), len(routes), cm != nil, eth1.RPFilter}
	}
	routed := []kernelState{state(hosts[0]), state(hosts[1])}
	for i, s := range routed {
		if s.rules == 0 || s.routes == 0 || s.rpFilter != routing.RPFilterLoose {
			t.Fatalf("resume-%d routed: %+v; the test does not discriminate", i+1, s)
		}
	}
	const byHand = "ops: handing the node to another CNI"
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "by-hand"}, nr); err != nil {
		t.Fatal(err)
	}
	nr.Annotations = map[string]string{enipamv1alpha1.AnnotationCleanup: byHand}
	if err := env.Client.Update(context.Background(), nr); err != nil {
		t.Fatal(err)
	}

	opts := uninstall.DefaultOptions()
	opts.Timeout, opts.Poll = 30*time.Second, 50*time.Millisecond
	out, err := uninstall.Run(context.Background(), env.Client, opts, quiet)
	if err != nil || !slices.Equal(out.Cleaned, []string{"resume-1", "resume-2"}) {
		t.Fatalf("uninstall: %+v, %v; want resume-1 and resume-2 cleaned", out, err)
	}
	for i, h := range hosts {
		if s := state(h); s != (kernelState{rpFilter: 1}) {
			t.Fatalf("resume-%d after uninstall: %+v, want nothing and rp_filter 1", i+1, s)
		}
	}

	res, err := uninstall.Resume(context.Background(), env.Client, uninstall.Requester, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Resumed, []string{"resume-1", "resume-2"}) || len(res.Kept) != 1 || !strings.HasPrefix(res.Kept[0], "by-hand ") {
		t.Errorf("resume outcome %+v, want resume-1 and resume-2 resumed, by-hand kept", res)
	}
	for i, h := range hosts {
		deadline := time.Now().Add(20 * time.Second)
		for reason(t, fmt.Sprintf("resume-%d", i+1)) != enipamv1alpha1.ReasonRouted || state(h) != routed[i] {
			if time.Now().After(deadline) {
				t.Fatalf("resume-%d after resume: %s, kernel %+v; want Routed and %+v", i+1, reason(t, fmt.Sprintf("resume-%d", i+1)), state(h), routed[i])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var nrs enipamv1alpha1.NodeRoutingList
	if err := env.Client.List(context.Background(), &nrs); err != nil {
		t.Fatal(err)
	}
	for _, nr := range nrs.Items {
		want := ""
		if nr.Name == "by-hand" {
			want = byHand
		}
		if got := nr.Annotations[enipamv1alpha1.AnnotationCleanup]; got != want {
			t.Errorf("NodeRouting %s annotation %q after resume, want %q", nr.Name, got, want)
		}
	}
	if again, err := uninstall.Resume(context.Background(), env.Client, uninstall.Requester, quiet); err != nil || len(again.Resumed) != 0 {
		t.Errorf("second resume: %+v, %v; want nothing resumed", again, err)
	}
}
