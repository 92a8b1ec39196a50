package agent_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
)

// setCleanup sets (value non-empty) or removes the cleanup annotation of
// the node's NodeRouting, as the chart's pre-delete hook and an operator
// aborting an uninstall do.
func setCleanup(t *testing.T, node, value string) {
	t.Helper()
	nr := &enipamv1alpha1.NodeRouting{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, nr); err != nil {
		t.Fatal(err)
	}
	orig := nr.DeepCopy()
	if value == "" {
		delete(nr.Annotations, enipamv1alpha1.AnnotationCleanup)
	} else {
		if nr.Annotations == nil {
			nr.Annotations = map[string]string{}
		}
		nr.Annotations[enipamv1alpha1.AnnotationCleanup] = value
	}
	if err := env.Client.Patch(context.Background(), nr, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// readyReason returns the reason of the NodeRouting's Ready condition and
// the number of addresses it reports routed.
func readyReason(t *testing.T, node string) (reason string, routedIPs int32) {
	t.Helper()
	nr := nodeRouting(t, node)
	if c := meta.FindStatusCondition(nr.Status.Conditions, enipamv1alpha1.ConditionReady); c != nil {
		return c.Reason, nr.Status.RoutedIPs
	}
	return "", nr.Status.RoutedIPs
}

// TestCleanupAnnotationRemovesRoutingButRestartsDoNot: the uninstall
// contract of the agent, on a real kernel and apiserver. A node with a
// secondary ENI and two pool IPs is routed (rules, table 11, the connmark
// table, eth0's and eth1's strict rp_filter loosened, recorded in the
// state directory). Stopping the agent and starting a new one, as a
// rolling update does, removes nothing. Then the NodeRouting gets the
// cleanup annotation: the running agent removes every rule, route and
// table it owns and puts rp_filter back, so `ip -4 rule` and
// `ip -4 route show table all` print exactly what they printed before
// enipam, the connmark table is gone, and the NodeRouting reports no
// address with Ready=False (CleanedUp); /readyz says why, a RoutingRemoved
// event is recorded. Stopping the agent keeps CleanedUp (its routing is
// not "left in place"). A new agent started while the annotation stays
// routes nothing; removing the annotation routes the node again.
func TestCleanupAnnotationRemovesRoutingButRestartsDoNot(t *testing.T) {
	ns := kerneltest.New(t)
	ns.AddENILink(t, "eth0", "02:00:00:00:0c:00")
	ns.AddENILink(t, "eth1", "02:00:00:00:0c:01")
	ns.LinkUp(t, "eth0")
	ns.AddAddr(t, "eth0", "10.0.1.20/24")
	ns.AddRoute(t, "0.0.0.0/0", "10.0.1.1", "eth0")
	for _, l := range []string{"eth0", "eth1"} {
		ns.SetSysctl(t, "net/ipv4/conf/"+l+"/rp_filter", "1")
	}
	cn := createCiliumNode(t,
		[]awstypes.ENI{awsENI("eni-primary", 0, "02:00:00:00:0c:00", "10.0.1.0/24"), awsENI("eni-a", 1, "02:00:00:00:0c:01", "10.0.2.0/24")},
		map[string]string{"10.0.2.10": "eni-a", "10.0.2.11": "eni-a"})
	rulesBefore, routesBefore := ns.IPDump(t)
	state := t.TempDir()
	host := func() *kernel.Kernel { return kernel.New(ns.Handle, ns.NS, kernel.WithStateDir(state)) }

	first, _, stop := startStoppableAgent(t, testConfig(cn.Name), env.Config, host())
	eventually(t, "first agent routes the node", func() bool { return first.Ready() == nil && hasRule(t, ns, "10.0.2.11", 11) })
	stop()
	if !hasRule(t, ns, "10.0.2.10", 11) || ns.Sysctl(t, "net/ipv4/conf/eth0/rp_filter") != "2" {
		t.Fatal("stopping the agent removed routing")
	}
	if r, _ := readyReason(t, cn.Name); r != enipamv1alpha1.ReasonAgentStopped {
		t.Errorf("condition after a plain stop %q, want AgentStopped", r)
	}
	second, reg, stopSecond := startStoppableAgent(t, testConfig(cn.Name), env.Config, host())
	eventually(t, "restarted agent ready", func() bool { return second.Ready() == nil })
	if w := kernelWrites(t, reg); w != 0 {
		t.Errorf("a restart wrote %v times to the kernel, want 0", w)
	}
	routedRules, _ := ns.IPDump(t)
	if cmp.Equal(rulesBefore, routedRules) {
		t.Fatal("routing changed no rule: the test does not discriminate")
	}

	setCleanup(t, cn.Name, "test uninstall")
	eventually(t, "NodeRouting reports CleanedUp with nothing routed", func() bool {
		r, ips := readyReason(t, cn.Name)
		return r == enipamv1alpha1.ReasonCleanedUp && ips == 0
	})
	rules, routes := ns.IPDump(t)
	if diff := cmp.Diff(rulesBefore, rules); diff != "" {
		t.Errorf("ip -4 rule after cleanup differs from before enipam (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(routesBefore, routes); diff != "" {
		t.Errorf("ip -4 route show table all after cleanup differs from before enipam (-before +after):\n%s", diff)
	}
	if c, err := ns.Kernel().Connmark(); c != nil || err != nil {
		t.Errorf("connmark table after cleanup: %v, %v", c, err)
	}
	for _, l := range []string{"eth0", "eth1"} {
		if got := ns.Sysctl(t, "net/ipv4/conf/"+l+"/rp_filter"); got != "1" {
			t.Errorf("%s rp_filter %s after cleanup, want 1 as before", l, got)
		}
	}
	rec := httptest.NewRecorder()
	second.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), enipamv1alpha1.AnnotationCleanup) {
		t.Errorf("/readyz after cleanup: %d %q, want 503 naming the annotation", rec.Code, rec.Body.String())
	}
	if got := gauge(t, reg, "enipam_agent_rules_managed"); got != 0 {
		t.Errorf("enipam_agent_rules_managed = %v after cleanup, want 0", got)
	}
	eventually(t, "RoutingRemoved event", func() bool { return hasEvent(t, cn, agent.ReasonRoutingRemoved) })

	stopSecond()
	if r, _ := readyReason(t, cn.Name); r != enipamv1alpha1.ReasonCleanedUp {
		t.Errorf("condition after stopping a cleaned-up agent %q, want CleanedUp kept", r)
	}
	third, reg3 := startAgent(t, testConfig(cn.Name), env.Config, host())
	eventually(t, "a new agent under the annotation passes once", func() bool { return third.Status().Converges > 0 })
	if w := kernelWrites(t, reg3); w != 0 || hasRule(t, ns, "10.0.2.10", 11) {
		t.Errorf("an agent started under the cleanup annotation wrote %v times to the kernel, want 0", w)
	}

	setCleanup(t, cn.Name, "")
	eventually(t, "annotation removed: routed and ready again", func() bool {
		r, ips := readyReason(t, cn.Name)
		return third.Ready() == nil && hasRule(t, ns, "10.0.2.10", 11) && r == enipamv1alpha1.ReasonRouted && ips == 2
	})
}
