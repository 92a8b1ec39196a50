package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

var nodeSeq atomic.Int64

// createCiliumNode writes a NodeRouting (first interface index 1) and a
// CiliumNode the way the operator does: the ENIs into status first, then
// the pool into spec. Each ENI is given as id, device number, MAC, subnet
// CIDR; pool maps IP -> ENI ID.
func createCiliumNode(t *testing.T, enis []awstypes.ENI, pool map[string]string) *ciliumv2.CiliumNode {
	t.Helper()
	cn := createCiliumNodeOnly(t, enis, pool)
	createNodeRouting(t, cn.Name, 1)
	return cn
}

// createNodeRouting writes the NodeRouting of node as the operator does.
func createNodeRouting(t *testing.T, node string, firstInterfaceIndex int32) *enipamv1alpha1.NodeRouting {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       enipamv1alpha1.NodeRoutingSpec{InstanceID: "i-0123456789abcdef0", FirstInterfaceIndex: firstInterfaceIndex},
	}
	if err := env.Client.Create(context.Background(), nr); err != nil {
		t.Fatalf("creating NodeRouting: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), nr) })
	return nr
}

// createCiliumNodeOnly is createCiliumNode without the NodeRouting.
func createCiliumNodeOnly(t *testing.T, enis []awstypes.ENI, pool map[string]string) *ciliumv2.CiliumNode {
	t.Helper()
	ctx := context.Background()
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-0-1-%d.ec2.internal", nodeSeq.Add(1))}}
	if err := env.Client.Create(ctx, cn); err != nil {
		t.Fatalf("creating CiliumNode: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cn) })
	cn.Status.ENI.ENIs = map[string]awstypes.ENI{}
	for _, e := range enis {
		cn.Status.ENI.ENIs[e.ID] = e
	}
	if err := env.Client.Status().Update(ctx, cn); err != nil {
		t.Fatalf("writing status.eni: %v", err)
	}
	setPool(t, cn, pool)
	return cn
}

// setPool rewrites spec.ipam.pool, retrying on conflicts on a fresh read.
func setPool(t *testing.T, cn *ciliumv2.CiliumNode, pool map[string]string) {
	t.Helper()
	ctx := context.Background()
	for range 5 {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cn), cn); err != nil {
			t.Fatal(err)
		}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		for ip, eni := range pool {
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: eni}
		}
		if err := env.Client.Update(ctx, cn); err == nil {
			return
		}
	}
	t.Fatal("could not write spec.ipam.pool")
}

func awsENI(id string, number int, mac, cidr string) awstypes.ENI {
	return awstypes.ENI{ID: id, Number: number, MAC: mac, Subnet: awstypes.AwsSubnet{ID: "subnet-" + id, CIDR: iputil.PrefixFrom(netip.MustParsePrefix(cidr))}}
}

// testConfig is a Config with short delays, so tests do not wait on
// production timings.
func testConfig(node string) agent.Config {
	cfg := agent.DefaultConfig(node)
	cfg.ResyncInterval = 2 * time.Second
	cfg.LinkWaitBackoff = 20 * time.Millisecond
	cfg.LinkWaitTimeout = 200 * time.Millisecond
	return cfg
}

// startAgent runs an agent until the test ends.
func startAgent(t *testing.T, cfg agent.Config, kube *rest.Config, host routing.Host) (*agent.Agent, *prometheus.Registry) {
	t.Helper()
	a, reg, _ := startStoppableAgent(t, cfg, kube, host)
	return a, reg
}

// startStoppableAgent runs an agent until stop is called or the test ends.
func startStoppableAgent(t *testing.T, cfg agent.Config, kube *rest.Config, host routing.Host) (*agent.Agent, *prometheus.Registry, func()) {
	t.Helper()
	return startAgentWith(t, cfg, kube, host, nil)
}

// startAgentWith is startStoppableAgent with setup applied to the agent
// before it starts (nil: none).
func startAgentWith(t *testing.T, cfg agent.Config, kube *rest.Config, host routing.Host, setup func(*agent.Agent)) (*agent.Agent, *prometheus.Registry, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := agent.New(cfg, kube, host, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return a, reg, stop
}

// eventually polls cond until it holds; the bound only limits a failing
// test, the assertion is cond itself.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()

	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasRule reports whether the namespace holds `from ip/32 lookup table`
// with enipam's protocol.
func hasRule(t *testing.T, ns *kerneltest.Namespace, ip string, table int) bool {
	t.Helper()
	rules, err := ns.Handle.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(rules, func(r netlink.Rule) bool {
		return r.Protocol == routing.DefaultProtocol && r.Table == table && r.Src != nil && r.Src.String() == ip+"/32"
	})
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// counter returns the counter name's child whose label has value, 0 if
// there is none yet.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// kernelWrites sums enipam_agent_kernel_operations_total over the
// operations that change the kernel.
func kernelWrites(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]bool{routing.OpListLinks: true, routing.OpListRules: true, routing.OpListRoutes: true, routing.OpGetConnmark: true, routing.OpGetRPFilter: true}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "enipam_agent_kernel_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !reads[m.GetLabel()[0].GetValue()] {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func hasEvent(t *testing.T, cn *ciliumv2.CiliumNode, reason string) bool {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "CiliumNode" && e.InvolvedObject.Name == cn.Name && e.Reason == reason
	})
}

// TestAgentRoutesNewPoolIPAfterPoolGrows: the whole agent against the
// real apiserver and a network namespace. A CiliumNode with the primary
// ENI (device 0) and one secondary ENI (device 1, 10.0.2.0/24, one pool
// IP); the agent routes the pool IP and turns ready. The pool then grows by
// one IP, as the operator does when pods arrive, and its rule appears
// through the watch, well before any resync. The primary's secondary
// address 10.0.1.20, which the node does not hold (first interface index
// 1: the operator pools nothing there), never gets a rule.
func TestAgentRoutesNewPoolIPAfterPoolGrows(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth0", "02:00:00:00:01:00")
	ns.AddENILink(t, "eth1", "02:00:00:00:01:01")
	primary := awsENI("eni-primary", 0, "02:00:00:00:01:00", "10.0.1.0/24")
	primary.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.1.20"))}
	cn := createCiliumNode(t,
		[]awstypes.ENI{primary, awsENI("eni-a", 1, "02:00:00:00:01:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a"})

	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = time.Hour // the new IP must come through the watch
	a, reg := startAgent(t, cfg, env.Config, ns.Kernel())

	eventually(t, "rule for 10.0.2.10 and readiness", func() bool {
		return hasRule(t, ns, "10.0.2.10", 11) && a.Ready() == nil
	})
	setPool(t, cn, map[string]string{"10.0.2.10": "eni-a", "10.0.2.11": "eni-a"})
	eventually(t, "rule for the new IP 10.0.2.11", func() bool { return hasRule(t, ns, "10.0.2.11", 11) })

	if hasRule(t, ns, "10.0.1.20", 10) || hasRule(t, ns, "10.0.1.20", 11) {
		t.Error("the primary ENI's address got a rule")
	}
	if got := gauge(t, reg, "enipam_agent_rules_managed"); got != 5 {
		t.Errorf("enipam_agent_rules_managed = %v, want 5 (2 IPs × egress, ingress; fwmark)", got)
	}
	eventually(t, "RoutingReady event", func() bool { return hasEvent(t, cn, agent.ReasonRoutingReady) })

	// The pool shrinks back: the released IP's rule goes.
	setPool(t, cn, map[string]string{"10.0.2.10": "eni-a"})
	eventually(t, "rule of the released IP removed", func() bool { return !hasRule(t, ns, "10.0.2.11", 11) })
}

// TestAgentRoutesLinkAsSoonAsItAppears: the ENI is in the CiliumNode
// before the kernel shows its link (EC2's attach is asynchronous). With
// retries pushed an hour away, the agent routes the link as soon as it
// appears: the kernel's link notification wakes it.
func TestAgentRoutesLinkAsSoonAsItAppears(t *testing.T) {
	ns := kerneltest.New(t)
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:06:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a"})
	cfg := testConfig(cn.Name)
	cfg.ResyncInterval, cfg.LinkWaitBackoff = time.Hour, time.Hour
	a, _ := startAgent(t, cfg, env.Config, ns.Kernel())
	eventually(t, "first converge finds the link missing", func() bool {
		s := a.Status()
		return s.Converges > 0 && len(s.Last.Missing) == 1
	})

	ns.AddENILink(t, "eth1", "02:00:00:00:06:01")
	eventually(t, "rule for 10.0.2.10 and readiness", func() bool {
		return hasRule(t, ns, "10.0.2.10", 11) && a.Ready() == nil
	})
	if got := ns.Sysctl(t, "net/ipv4/conf/eth1/rp_filter"); got != "2" {
		t.Errorf("rp_filter = %s, want 2", got)
	}
}

// TestAgentRestartWritesNothing: an agent routes a node with two ENIs and
// is stopped; a new agent (new process state, same kernel) starts, turns
// ready with a first converge that writes nothing, and the namespace holds
// each rule once.
func TestAgentRestartWritesNothing(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth1", "02:00:00:00:05:01")
	ns.AddENILink(t, "eth2", "02:00:00:00:05:02")
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:05:01", "10.0.2.0/24"), awsENI("eni-b", 2, "02:00:00:00:05:02", "10.0.3.0/24")},
		map[string]string{"10.0.2.10": "eni-a", "10.0.2.11": "eni-a", "10.0.3.10": "eni-b"})

	first, _, stop := startStoppableAgent(t, testConfig(cn.Name), env.Config, ns.Kernel())
	eventually(t, "first agent ready", func() bool { return first.Ready() == nil })
	stop()
	rules, err := ns.Handle.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}

	second, reg := startAgent(t, testConfig(cn.Name), env.Config, ns.Kernel())
	eventually(t, "second agent ready", func() bool { return second.Ready() == nil })
	if w := kernelWrites(t, reg); w != 0 {
		t.Errorf("restarted agent made %v kernel writes (%v), want 0", w, second.Status().Last.Plan)
	}
	after, err := ns.Handle.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(rules) {
		t.Errorf("%d rules after the restart, %d before", len(after), len(rules))
	}
	for _, ip := range []string{"10.0.2.10", "10.0.2.11"} {
		if !hasRule(t, ns, ip, 11) {
			t.Errorf("rule of %s missing", ip)
		}
	}
}

// TestAgentMissingLinkRaisesEventAndHoldsReadiness: the CiliumNode names a
// secondary ENI whose link the kernel never shows (in-memory kernel, no
// root needed). After the link wait timeout the agent records a
// LinkNotFound event on the CiliumNode, is not ready, and exports
// enipam_agent_links_missing 1. When the link appears it is routed on the
// next backoff retry and the agent turns ready.
func TestAgentMissingLinkRaisesEventAndHoldsReadiness(t *testing.T) {
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-late", 1, "02:00:00:00:02:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-late"})
	host := &routingtest.Host{}
	host.AddLink(routing.Link{Index: 1, Name: "lo"})
	a, reg := startAgent(t, testConfig(cn.Name), env.Config, host)

	eventually(t, "LinkNotFound event", func() bool { return hasEvent(t, cn, agent.ReasonLinkNotFound) })
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Ready() = %v, want not ready for a missing link", err)
	}
	if got := gauge(t, reg, "enipam_agent_links_missing"); got != 1 {
		t.Errorf("enipam_agent_links_missing = %v, want 1", got)
	}
	srv := httptest.NewServer(a.HealthHandler())
	defer srv.Close()
	if code := get(t, srv.URL+"/readyz"); code != 503 {
		t.Errorf("/readyz = %d, want 503", code)
	}
	if code := get(t, srv.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d, want 200", code)
	}

	mac, _ := net.ParseMAC("02:00:00:00:02:01")
	host.AddLink(routing.Link{Index: 7, Name: "eth1", MAC: mac, MTU: 1500})
	eventually(t, "ready once the link appears", func() bool { return a.Ready() == nil })
	rules, _ := host.Rules()
	if !slices.Contains(rules, routing.Rule{Priority: 111, Src: netip.MustParsePrefix("10.0.2.10/32"), Table: 11, Protocol: routing.DefaultProtocol}) {
		t.Errorf("rules %v lack the egress rule of 10.0.2.10", rules)
	}
	if code := get(t, srv.URL+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d, want 200", code)
	}
}

// TestAgentRoutingFailureRaisesEvent: the kernel refuses every rule (in-
// memory kernel); the agent records RoutingFailed on the CiliumNode, counts
// the failed writes, and stays not ready.
func TestAgentRoutingFailureRaisesEvent(t *testing.T) {
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:03:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a"})
	mac, _ := net.ParseMAC("02:00:00:00:03:01")
	host := &routingtest.Host{Fail: func(op string, _ any) error {
		if op == routing.OpAddRule {
			return fmt.Errorf("operation not permitted")
		}
		return nil
	}}
	host.AddLink(routing.Link{Index: 3, Name: "eth1", MAC: mac, MTU: 9001, Up: true, RPFilter: 2})
	a, _ := startAgent(t, testConfig(cn.Name), env.Config, host)

	eventually(t, "RoutingFailed event", func() bool { return hasEvent(t, cn, agent.ReasonRoutingFailed) })
	if err := a.Ready(); err == nil {
		t.Error("ready although rules could not be added")
	}
}

// TestAgentRunsWithLeastPrivilege: the agent runs as a user holding only
// the RBAC the chart grants it: list and watch on its own CiliumNode and
// NodeRouting (resourceNames, which the apiserver enforces for list and
// watch only with a metadata.name field selector), patch on its
// NodeRouting's status, patch on its Node (the start-up taint) and
// create/patch on events. That it routes, reports, untaints and records
// events proves both the RBAC and that it never lists or watches the
// cluster's objects, and never gets one.
func TestAgentRunsWithLeastPrivilege(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth1", "02:00:00:00:04:01")
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:04:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a"})

	user := "system:serviceaccount:kube-system:enipam-agent-" + cn.Name
	grant(t, user, []rbacv1.PolicyRule{
		{APIGroups: []string{"cilium.io"}, Resources: []string{"ciliumnodes"}, ResourceNames: []string{cn.Name}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"enipam.io"}, Resources: []string{"noderoutings"}, ResourceNames: []string{cn.Name}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"enipam.io"}, Resources: []string{"noderoutings/status"}, ResourceNames: []string{cn.Name}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, ResourceNames: []string{cn.Name}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	})
	kube, err := env.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	// The grant is what the apiserver enforces: listing every CiliumNode
	// is refused to this user.
	asUser, err := client.New(kube, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := asUser.List(context.Background(), &ciliumv2.CiliumNodeList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("cluster-wide list as the agent's user: %v, want Forbidden", err)
	}
	createNode(t, cn.Name, corev1.Taint{Key: "enipam.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule})
	cfg := testConfig(cn.Name)
	cfg.StartupTaintKey = "enipam.io/agent-not-ready"
	a, _ := startAgent(t, cfg, kube, ns.Kernel())
	eventually(t, "rule for 10.0.2.10 and readiness", func() bool {
		return hasRule(t, ns, "10.0.2.10", 11) && a.Ready() == nil
	})
	eventually(t, "RoutingReady event", func() bool { return hasEvent(t, cn, agent.ReasonRoutingReady) })
	eventually(t, "10.0.2.10 reported routed", func() bool { return reported(t, cn.Name, "eni-a", "10.0.2.10") })
	eventually(t, "start-up taint removed", func() bool { return !hasTaint(nodeTaints(t, cn.Name), "enipam.io/agent-not-ready") })
}

// grant binds a ClusterRole with rules to user until the test ends.
func grant(t *testing.T, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := strings.ReplaceAll(user, ":", "-")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := (&httpClient).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
