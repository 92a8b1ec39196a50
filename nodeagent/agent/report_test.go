package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	iputil "github.com/cilium/cilium/pkg/ip"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/nodeagent/routing"
	"github.com/enipam/enipam/nodeagent/routing/routingtest"
)

// nodeRouting reads the NodeRouting of node.
func nodeRouting(t *testing.T, node string) *enipamv1alpha1.NodeRouting {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, nr); err != nil {
		t.Fatal(err)
	}
	return nr
}

// reported tells whether the NodeRouting status lists ip routed on eni.
func reported(t *testing.T, node, eni, ip string) bool {
	t.Helper()
	return nodeRouting(t, node).Status.Routes(eni, ip)
}

// readyCondition returns the Ready condition of the NodeRouting, or nil.
func readyCondition(t *testing.T, node string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(nodeRouting(t, node).Status.Conditions, enipamv1alpha1.ConditionReady)
}

// createNode creates the Node with taints until the test ends.
func createNode(t *testing.T, name string, taints ...corev1.Taint) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
}

func hasTaint(taints []corev1.Taint, key string) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == key })
}

func nodeTaints(t *testing.T, name string) []corev1.Taint {
	t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n.Spec.Taints
}

// update applies mutate to the CiliumNode (spec and status), retrying on
// conflicts on a fresh read.
func update(t *testing.T, cn *ciliumv2.CiliumNode, mutate func(*ciliumv2.CiliumNode)) {
	t.Helper()
	ctx := context.Background()
	for range 5 {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cn), cn); err != nil {
			t.Fatal(err)
		}
		mutate(cn)
		if err := env.Client.Status().Update(ctx, cn); err != nil {
			continue
		}
		if err := env.Client.Update(ctx, cn); err == nil {
			return
		}
	}
	t.Fatal("could not update the CiliumNode")
}

func fakeHostWith(macs ...string) *routingtest.Host {
	h := &routingtest.Host{}
	h.AddLink(routing.Link{Index: 1, Name: "lo"})
	for i, m := range macs {
		hw, _ := net.ParseMAC(m)
		h.AddLink(routing.Link{Index: 10 + i, Name: "eth" + string(rune('0'+i)), MAC: hw, MTU: 9001, Up: true, RPFilter: 2})
	}
	return h
}

// TestAgentReportsRoutedAddressesOncePerChange: the agent's NodeRouting
// status lists eni-a (device 1, table 11) with its pool IP, and its Ready
// condition is True (Routed) with the spec's generation observed. An
// address the operator listed on the ENI but has not pooled yet (routed
// before pooled) is routed and reported too. Resyncs of a node in shape
// write nothing; a new address costs exactly one more status write.
func TestAgentReportsRoutedAddressesOncePerChange(t *testing.T) {
	eniA := awsENI("eni-a", 1, "02:00:00:00:07:01", "10.0.2.0/24")
	eniA.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.2.11"))}
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-primary", 0, "02:00:00:00:07:00", "10.0.1.0/24"), eniA}, map[string]string{"10.0.2.10": "eni-a"})
	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = 200 * time.Millisecond
	a, _ := startAgent(t, cfg, env.Config, fakeHostWith("02:00:00:00:07:00", "02:00:00:00:07:01"))

	eventually(t, "10.0.2.10 and the unpooled 10.0.2.11 reported", func() bool {
		return reported(t, cn.Name, "eni-a", "10.0.2.10") && reported(t, cn.Name, "eni-a", "10.0.2.11")
	})
	nr := nodeRouting(t, cn.Name)
	if nr.Status.RoutedENIs != 1 || nr.Status.RoutedIPs != 2 || nr.Status.ObservedGeneration != nr.Generation {
		t.Errorf("status counts %d ENIs, %d IPs, generation %d of %d", nr.Status.RoutedENIs, nr.Status.RoutedIPs, nr.Status.ObservedGeneration, nr.Generation)
	}
	if e := nr.Status.ENIs[0]; e.ID != "eni-a" || e.Number != 1 || e.Table != 11 || e.MAC != "02:00:00:00:07:01" || !slices.Equal(e.IPs, []string{"10.0.2.10", "10.0.2.11"}) {
		t.Errorf("reported ENI %+v", e)
	}
	if c := readyCondition(t, cn.Name); c == nil || c.Status != metav1.ConditionTrue || c.Reason != enipamv1alpha1.ReasonRouted {
		t.Errorf("Ready condition %+v, want True/Routed", c)
	}

	writes := a.Status().StatusWrites
	converges := a.Status().Converges
	eventually(t, "five resyncs", func() bool { return a.Status().Converges >= converges+5 })
	if got := a.Status().StatusWrites; got != writes {
		t.Errorf("resyncs of a node in shape wrote the status %d times", got-writes)
	}

	setPool(t, cn, map[string]string{"10.0.2.10": "eni-a", "10.0.2.12": "eni-a"})
	eventually(t, "10.0.2.12 reported", func() bool { return reported(t, cn.Name, "eni-a", "10.0.2.12") })
	converges = a.Status().Converges
	eventually(t, "five more resyncs", func() bool { return a.Status().Converges >= converges+5 })
	if got := a.Status().StatusWrites; got != writes+1 {
		t.Errorf("one new address cost %d status writes, want 1", got-writes)
	}
}

// TestAgentWaitsForItsNodeRouting: the CiliumNode is there but the
// operator has not created the NodeRouting. The agent routes nothing, is
// not ready (naming the NodeRouting) and records NodeRoutingMissing on the
// CiliumNode. Once the NodeRouting appears, it routes and reports.
func TestAgentWaitsForItsNodeRouting(t *testing.T) {
	cn := createCiliumNodeOnly(t, []awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:08:01", "10.0.2.0/24")}, map[string]string{"10.0.2.10": "eni-a"})
	host := fakeHostWith("02:00:00:00:08:01")
	a, _ := startAgent(t, testConfig(cn.Name), env.Config, host)

	eventually(t, "NodeRoutingMissing event", func() bool { return hasEvent(t, cn, agent.ReasonNodeRoutingMissing) })
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "NodeRouting") {
		t.Errorf("Ready() = %v, want not ready naming the NodeRouting", err)
	}
	if rules, _ := host.Rules(); len(rules) != 0 || a.Status().Converges != 0 {
		t.Errorf("without a NodeRouting: %d converges, rules %v", a.Status().Converges, rules)
	}

	createNodeRouting(t, cn.Name, 1)
	eventually(t, "ready and 10.0.2.10 reported", func() bool { return a.Ready() == nil && reported(t, cn.Name, "eni-a", "10.0.2.10") })
}

// TestAgentKeepsRoutingWhileTheENIVanishesUntilReleased: in a network
// namespace, eni-b vanishes from status.eni.enis for a moment while
// 10.0.3.10 is still in the pool on it. Its rule stays (and its table), and
// the report no longer lists it. When the ENI is back, it is reported
// again. When the release handshake marks 10.0.3.10 released, its rules
// go at once, while the address still sits in the pool, before the
// operator could pool it anywhere again.
func TestAgentKeepsRoutingWhileTheENIVanishesUntilReleased(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth1", "02:00:00:00:09:01")
	ns.AddENILink(t, "eth2", "02:00:00:00:09:02")
	eniA, eniB := awsENI("eni-a", 1, "02:00:00:00:09:01", "10.0.2.0/24"), awsENI("eni-b", 2, "02:00:00:00:09:02", "10.0.3.0/24")
	cn := createCiliumNode(t, []awstypes.ENI{eniA, eniB}, map[string]string{"10.0.2.10": "eni-a", "10.0.3.10": "eni-b"})
	a, reg := startAgent(t, testConfig(cn.Name), env.Config, ns.Kernel())
	eventually(t, "both addresses routed and reported", func() bool {
		return hasRule(t, ns, "10.0.3.10", 12) && reported(t, cn.Name, "eni-b", "10.0.3.10") && a.Ready() == nil
	})

	update(t, cn, func(cn *ciliumv2.CiliumNode) { delete(cn.Status.ENI.ENIs, "eni-b") })
	eventually(t, "eni-b no longer reported", func() bool { return !reported(t, cn.Name, "eni-b", "10.0.3.10") })
	if !hasRule(t, ns, "10.0.3.10", 12) {
		t.Fatal("the rule of 10.0.3.10 went while the address is in the pool")
	}
	if got := gauge(t, reg, "enipam_agent_rules_retained"); got != 2 {
		t.Errorf("enipam_agent_rules_retained = %v, want 2", got)
	}

	update(t, cn, func(cn *ciliumv2.CiliumNode) { cn.Status.ENI.ENIs["eni-b"] = eniB })
	eventually(t, "eni-b reported again", func() bool { return reported(t, cn.Name, "eni-b", "10.0.3.10") })

	update(t, cn, func(cn *ciliumv2.CiliumNode) {
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.3.10": "released"}
	})
	eventually(t, "rule of the released address gone, and its report", func() bool {
		return !hasRule(t, ns, "10.0.3.10", 12) && !reported(t, cn.Name, "eni-b", "10.0.3.10")
	})
	if !hasRule(t, ns, "10.0.2.10", 11) {
		t.Error("eni-a's rule went with the release")
	}
}

// TestAgentRemovesTheStartupTaintOnceReady: the Node carries the
// configured start-up taint and another one. Once routing is ready the
// agent removes its taint and leaves the other.
func TestAgentRemovesTheStartupTaintOnceReady(t *testing.T) {
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:0b:01", "10.0.2.0/24")}, map[string]string{"10.0.2.10": "eni-a"})
	other := corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoSchedule}
	createNode(t, cn.Name, other, corev1.Taint{Key: "enipam.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule})
	cfg := testConfig(cn.Name)
	cfg.StartupTaintKey = "enipam.io/agent-not-ready"
	a, _ := startAgent(t, cfg, env.Config, fakeHostWith("02:00:00:00:0b:01"))

	eventually(t, "start-up taint removed", func() bool { return a.Status().TaintRemoved })
	taints := nodeTaints(t, cn.Name)
	if hasTaint(taints, "enipam.io/agent-not-ready") || !hasTaint(taints, other.Key) {
		t.Errorf("taints %v, want the other one kept and enipam's gone", taints)
	}
	eventually(t, "StartupTaintRemoved event", func() bool { return hasEvent(t, cn, agent.ReasonStartupTaintRemoved) })
}

// TestAgentStoppedMarksTheNodeRoutingNotReady: when the agent stops, the
// Ready condition turns False with reason AgentStopped; the routed ENIs
// stay listed, as their routing stays in the kernel.
func TestAgentStoppedMarksTheNodeRoutingNotReady(t *testing.T) {
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:0c:01", "10.0.2.0/24")}, map[string]string{"10.0.2.10": "eni-a"})
	_, _, stop := startStoppableAgent(t, testConfig(cn.Name), env.Config, fakeHostWith("02:00:00:00:0c:01"))
	eventually(t, "reported", func() bool { return reported(t, cn.Name, "eni-a", "10.0.2.10") })
	stop()
	c := readyCondition(t, cn.Name)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != enipamv1alpha1.ReasonAgentStopped {
		t.Errorf("Ready condition after stop %+v, want False/AgentStopped", c)
	}
	if !reported(t, cn.Name, "eni-a", "10.0.2.10") {
		t.Error("the routed address left the report when the agent stopped")
	}
}

// TestAgentStoppedKeepsWhatItReportedBeforeTheWatchSawIt: the agent
// reports 10.0.2.10, then its NodeRouting watch stalls and it reports
// 10.0.2.11 too. Stopped before the watch delivers its own write, it
// marks the NodeRouting stopped over that write, not over the watch's
// older copy: both addresses stay reported, as both stay routed.
func TestAgentStoppedKeepsWhatItReportedBeforeTheWatchSawIt(t *testing.T) {
	testStoppedKeepsTheReport(t, "02:00:00:00:0c:02", false)
}

// TestAgentStoppedAfterALostAnswerKeepsTheReport: as above, and the
// apiserver's answers to the agent's status writes are lost too (the
// writes land; the agent sees a cut connection), so the agent cannot
// know what it wrote last. Stopping, it reads the NodeRouting afresh and
// keeps both addresses reported.
func TestAgentStoppedAfterALostAnswerKeepsTheReport(t *testing.T) {
	testStoppedKeepsTheReport(t, "02:00:00:00:0c:03", true)
}

func testStoppedKeepsTheReport(t *testing.T, mac string, loseAnswers bool) {
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-a", 1, mac, "10.0.2.0/24")}, map[string]string{"10.0.2.10": "eni-a"})
	api := &laggingAPI{}
	kube := rest.CopyConfig(env.Config)
	kube.Wrap(func(rt http.RoundTripper) http.RoundTripper { api.next = rt; return api })
	_, reg, stop := startStoppableAgent(t, testConfig(cn.Name), kube, fakeHostWith(mac))
	eventually(t, "10.0.2.10 reported", func() bool { return reported(t, cn.Name, "eni-a", "10.0.2.10") })

	api.stallWatches.Store(true)
	api.loseAnswers.Store(loseAnswers)
	setPool(t, cn, map[string]string{"10.0.2.10": "eni-a", "10.0.2.11": "eni-a"})
	eventually(t, "10.0.2.11 reported", func() bool { return reported(t, cn.Name, "eni-a", "10.0.2.11") })
	if loseAnswers {
		eventually(t, "a status write failed", func() bool { return counter(t, reg, "enipam_agent_status_writes_total", "result", "error") > 0 })
	}
	stop()
	if c := readyCondition(t, cn.Name); c == nil || c.Reason != enipamv1alpha1.ReasonAgentStopped {
		t.Errorf("Ready condition after stop %+v, want AgentStopped", c)
	}
	for _, ip := range []string{"10.0.2.10", "10.0.2.11"} {
		if !reported(t, cn.Name, "eni-a", ip) {
			t.Errorf("%s left the report when the agent stopped", ip)
		}
	}
}

// laggingAPI sits between the agent and the apiserver. While
// stallWatches is set it holds the events of the NodeRouting watch (a
// watch lagging the object); while loseAnswers is set the status writes
// reach the apiserver but their answers do not reach the agent.
type laggingAPI struct {
	next         http.RoundTripper
	stallWatches atomic.Bool
	loseAnswers  atomic.Bool
}

func (l *laggingAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || !strings.Contains(req.URL.Path, "/noderoutings") {
		return resp, err
	}
	switch {
	case req.URL.Query().Get("watch") == "true":
		resp.Body = &stalledBody{ReadCloser: resp.Body, stall: &l.stallWatches}
	case req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") && l.loseAnswers.Load():
		_ = resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	return resp, nil
}

type stalledBody struct {
	io.ReadCloser
	stall  *atomic.Bool
	closed atomic.Bool
}

// Read holds what it read while stall is set: a read already waiting when
// the stall begins must not deliver the next event either.
func (b *stalledBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for b.stall.Load() && !b.closed.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	return n, err
}

func (b *stalledBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// TestAgentMissingLinkIsReportedNotReady: eni-a's link never shows; the
// NodeRouting's Ready condition says LinkNotFound and eni-a is not listed,
// so the operator pools none of its addresses.
func TestAgentMissingLinkIsReportedNotReady(t *testing.T) {
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:0d:01", "10.0.2.0/24")}, map[string]string{})
	startAgent(t, testConfig(cn.Name), env.Config, fakeHostWith())
	eventually(t, "LinkNotFound condition", func() bool {
		c := readyCondition(t, cn.Name)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == enipamv1alpha1.ReasonLinkNotFound
	})
	if nr := nodeRouting(t, cn.Name); len(nr.Status.ENIs) != 0 {
		t.Errorf("reported %v without a link", nr.Status.ENIs)
	}
}

// flakyReads is an in-memory kernel whose rule dump can be made to fail.
type flakyReads struct {
	*routingtest.Host
	fail atomic.Bool
}

func (f *flakyReads) Rules() ([]routing.Rule, error) {
	if f.fail.Load() {
		return nil, errors.New("dump interrupted")
	}
	return f.Host.Rules()
}

// TestAgentReadFailureKeepsTheReport: once eni-a is reported, the kernel
// stops answering rule dumps. The NodeRouting turns Ready=False
// (RouteFailed), but eni-a and its address stay listed: nothing was
// changed, so what was routed still is.
func TestAgentReadFailureKeepsTheReport(t *testing.T) {
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-a", 1, "02:00:00:00:0e:01", "10.0.2.0/24")}, map[string]string{"10.0.2.10": "eni-a"})
	host := &flakyReads{Host: fakeHostWith("02:00:00:00:0e:01")}
	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = 200 * time.Millisecond
	startAgent(t, cfg, env.Config, host)
	eventually(t, "reported", func() bool { return reported(t, cn.Name, "eni-a", "10.0.2.10") })

	host.fail.Store(true)
	eventually(t, "RouteFailed", func() bool {
		c := readyCondition(t, cn.Name)
		return c != nil && c.Reason == enipamv1alpha1.ReasonRouteFailed
	})
	if !reported(t, cn.Name, "eni-a", "10.0.2.10") {
		t.Error("a failed read took eni-a's address out of the report")
	}
}

// TestAgentPolicyChangeReportsTheHeldAddressesOnly: eni-a (device 1) has
// 10.0.2.10 pooled and 10.0.2.11 listed by the operator but not pooled
// yet; both are reported. The operator then raises the NodeRouting's
// first interface index to 2. eni-a stays reported with 10.0.2.10 alone,
// whose rule stays: the unpooled address is neither routed nor offered to
// the operator any more, and the node stays Ready with the new
// generation observed. Once release-ips says 10.0.2.10 released, eni-a
// leaves the report and its rule goes.
func TestAgentPolicyChangeReportsTheHeldAddressesOnly(t *testing.T) {
	eniA := awsENI("eni-a", 1, "02:00:00:00:0f:01", "10.0.2.0/24")
	eniA.Addresses = []iputil.Addr{iputil.AddrFrom(netip.MustParseAddr("10.0.2.11"))}
	cn := createCiliumNode(t, []awstypes.ENI{awsENI("eni-primary", 0, "02:00:00:00:0f:00", "10.0.1.0/24"), eniA}, map[string]string{"10.0.2.10": "eni-a"})
	host := fakeHostWith("02:00:00:00:0f:00", "02:00:00:00:0f:01")
	cfg := testConfig(cn.Name)
	cfg.ResyncInterval = 200 * time.Millisecond
	a, _ := startAgent(t, cfg, env.Config, host)
	eventually(t, "10.0.2.10 and 10.0.2.11 reported", func() bool {
		return reported(t, cn.Name, "eni-a", "10.0.2.10") && reported(t, cn.Name, "eni-a", "10.0.2.11")
	})

	ctx := context.Background()
	nr := nodeRouting(t, cn.Name)
	orig := nr.DeepCopy()
	nr.Spec.FirstInterfaceIndex = 2
	if err := env.Client.Patch(ctx, nr, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new generation observed", func() bool {
		got := nodeRouting(t, cn.Name)
		return got.Status.ObservedGeneration == got.Generation && got.Generation == nr.Generation
	})
	got := nodeRouting(t, cn.Name)
	if len(got.Status.ENIs) != 1 || got.Status.ENIs[0].ID != "eni-a" || !slices.Equal(got.Status.ENIs[0].IPs, []string{"10.0.2.10"}) {
		t.Errorf("reported %+v, want eni-a with 10.0.2.10 alone", got.Status.ENIs)
	}
	if c := readyCondition(t, cn.Name); c == nil || c.Status != metav1.ConditionTrue || a.Ready() != nil {
		t.Errorf("Ready condition %+v, agent %v; want True", c, a.Ready())
	}
	if rules, _ := host.Rules(); !slices.ContainsFunc(rules, func(r routing.Rule) bool {
		return r.Src == netip.MustParsePrefix("10.0.2.10/32") && r.Table == 11
	}) || slices.ContainsFunc(rules, func(r routing.Rule) bool { return r.Src == netip.MustParsePrefix("10.0.2.11/32") }) {
		t.Errorf("rules %v, want 10.0.2.10's into table 11 and none of 10.0.2.11", rules)
	}

	update(t, cn, func(cn *ciliumv2.CiliumNode) {
		cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.2.10": "released"}
	})
	eventually(t, "eni-a out of the report and its rule gone", func() bool {
		rules, _ := host.Rules()
		return len(nodeRouting(t, cn.Name).Status.ENIs) == 0 &&
			!slices.ContainsFunc(rules, func(r routing.Rule) bool { return r.Table == 11 })
	})
}
