package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/agent"
	"github.com/enipam/enipam/nodeagent/kernel/kerneltest"
	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/ec2sim"
	"github.com/enipam/enipam/test/promcheck"
)

// TestDashboardAndAlertsNameExportedMetrics: every metric the chart's
// Grafana dashboard and alert rules name is in a live scrape. The real
// enipam-operator binary runs with leader election and its metrics
// endpoint against ec2sim, which throttles its first two EC2 calls and
// fails one with InternalError, as EC2 sometimes does; an ENIPolicy
// governs the node; the node agent routes a second ENI in a network
// namespace, its registry served over HTTP as the binary serves it; a
// StaticIPClaim asks for an address outside the VPC and turns Invalid
// (the claim alert's series has one). Once the node's pool holds routed
// addresses of the new ENI and the claim is Invalid, both /metrics
// are scraped, the chart is rendered with the dashboard and the rules on,
// every query is parsed with Prometheus's parser, and each metric name
// outside enipam-scheduler's (held to the extender's scrape in
// test/schedtest) must be in one of the two scrapes. The pools end held to
// EC2's state, counts printed.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	w := newWorld(t, routingScenario)
	ctx := w.ctx
	c := env.Client
	const name = "node-m1"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &enipamv1alpha1.NodeRouting{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	if err := w.sim.Admin.SetFaults(ctx, ec2sim.FaultConfig{Rules: []ec2sim.FaultRule{
		{Code: "RequestLimitExceeded", Count: 2},
		{Code: "InternalError", Count: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       enipamv1alpha1.ENIPolicySpec{SubnetTags: map[string]string{"pods": "true"}},
	}); err != nil {
		t.Fatal(err)
	}
	metricsAddr, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	w.startOperator("--first-interface-index=1", "--pre-allocate=4", "--vpc-id=vpc-0e000000000000001",
		"--leader-elect=true", "--leader-election-namespace=default", "--leader-election-id=enipam-operator",
		"--metrics-bind-address="+metricsAddr)
	if err := c.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0e000000000000001"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	listed := waitNodeRouting(t, ctx, name, "a second ENI listing its addresses", hasSecondENI)
	number := map[string]int32{}
	ns := kerneltest.New(t)
	for _, eni := range listed.Spec.ENIs {
		number[eni.ID] = eni.Number
		ns.AddENILink(t, fmt.Sprintf("eth%d", eni.Number), eni.MAC)
	}
	reg := prometheus.NewRegistry()
	a, err := agent.New(agent.DefaultConfig(name), env.Config, ns.Kernel(), reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	agentMetrics := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	t.Cleanup(agentMetrics.Close)
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(actx) }()
	t.Cleanup(func() { stop(); <-done })

	bad := &enipamv1alpha1.StaticIPClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "metrics-outside"},
		Spec:       enipamv1alpha1.StaticIPClaimSpec{Address: "192.168.7.7"},
	}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), bad) })
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad)
		return err == nil && bad.Status.Phase == enipamv1alpha1.ClaimInvalid, nil
	}); err != nil {
		t.Fatalf("claim %s never turned Invalid: phase %q", bad.Name, bad.Status.Phase)
	}

	cn := waitNode(t, ctx, name, "addresses of the second ENI pooled", func(cn *ciliumv2.CiliumNode) bool {
		for _, e := range cn.Spec.IPAM.Pool {
			if n, ok := number[e.Resource]; ok && n == 1 {
				return true
			}
		}
		return false
	})
	nr := &enipamv1alpha1.NodeRouting{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, nr); err != nil {
		t.Fatal(err)
	}
	unrouted := 0
	for ip, e := range cn.Spec.IPAM.Pool {
		if n, ok := number[e.Resource]; ok && n == 1 && !nr.Status.Routes(e.Resource, ip) {
			unrouted++
		}
	}

	operator, err := promcheck.Scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the operator: %v", err)
	}
	agentScrape, err := promcheck.Scrape(agentMetrics.URL + "/metrics")
	if err != nil {
		t.Fatalf("scraping the agent: %v", err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	queries, err := promcheck.Render(promcheck.RepoPaths(root))
	if err != nil {
		t.Fatal(err)
	}
	used, err := promcheck.AllMetrics(queries)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for n := range used {
		if strings.HasPrefix(n, "enipam_scheduler_") {
			delete(used, n)
			continue
		}
		checked++
	}
	missing := promcheck.Missing(used, operator, agentScrape)
	t.Logf("%d queries (dashboard and alerts); %d metric names checked against the operator's scrape (%d series names) and the agent's (%d); %d missing",
		len(queries), checked, len(operator), len(agentScrape), len(missing))
	for _, m := range missing {
		t.Errorf("named by the chart but in no scrape: %s", m)
	}
	for _, want := range []string{"leader_election_master_status", "enipam_ec2_api_throttled_total", "enipam_node_policy", "enipam_agent_ready", "enipam_static_ip_claim_phase_seconds"} {
		if !operator[want] && !agentScrape[want] {
			t.Errorf("%s not scraped: the test does not show what it should", want)
		}
	}

	f := w.poolFindings(name)
	t.Logf("invariants: %d IPs in two pools, %d free pool IPs off their ENI, %d released IPs in a pool, %d on two ENIs, %d pooled before routed",
		f.InTwoPools, f.FreeOffENI, f.ReleasedInPool, f.OnTwoENIs, unrouted)
	if f.Total() != 0 || unrouted != 0 {
		t.Errorf("invariants: %d pool breaches (%v), %d addresses pooled before routed", f.Total(), f.Details, unrouted)
	}
}
