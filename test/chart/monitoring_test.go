package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/promcheck"
)

// TestDashboardAndAlertsAreOffByDefault: without the values, neither the
// dashboard ConfigMap nor the PrometheusRule renders (a cluster without
// Prometheus Operator would refuse the latter).
func TestDashboardAndAlertsAreOffByDefault(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod")
	if len(m.ofKind("PrometheusRule")) != 0 || len(m.ofKind("ConfigMap")) != 1 { // enipam-scheduler's configuration
		t.Errorf("rendered by default: %v", m.names())
	}
}

// TestDashboardIsAConfigMapForGrafanasSidecar: grafanaDashboard.enabled
// renders one ConfigMap labelled grafana_dashboard "1" (kube-prometheus
// stack's sidecar convention) in the release's namespace, or the one
// asked, with its annotations; its one key is the chart's
// dashboards/enipam.json, a Grafana dashboard whose data source is a
// variable and whose every panel has a PromQL query that Prometheus's
// parser accepts and that names one of enipam's metrics (or
// controller-runtime's leader gauge). Which of those the binaries really
// export is test/e2e's and test/schedtest's part, against live scrapes.
func TestDashboardIsAConfigMapForGrafanasSidecar(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod", "--set", "grafanaDashboard.enabled=true",
		"--set", "grafanaDashboard.namespace=monitoring", "--set", "grafanaDashboard.annotations.grafana_folder=enipam")
	cm := m.find("ConfigMap", "enipam-dashboard")
	if cm == nil {
		t.Fatalf("no dashboard ConfigMap; rendered %v", m.names())
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != "monitoring" || cm.GetAnnotations()["grafana_folder"] != "enipam" {
		t.Errorf("ConfigMap labels %v namespace %q annotations %v", cm.GetLabels(), cm.GetNamespace(), cm.GetAnnotations())
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	_, chartDir := paths(t)
	file, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "enipam.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || data["enipam.json"] != strings.TrimSpace(string(file)) {
		t.Fatalf("ConfigMap data has %d keys, want one, enipam.json, holding dashboards/enipam.json", len(data))
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type       string         `json:"type"`
			Title      string         `json:"title"`
			Datasource map[string]any `json:"datasource"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(file, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Templating.List) == 0 || d.Templating.List[0].Type != "datasource" {
		t.Errorf("dashboard uid %q, first variable %+v: want a uid and a data source variable", d.UID, d.Templating.List)
	}
	for _, p := range d.Panels {
		if p.Type != "row" && p.Datasource["uid"] != "${datasource}" {
			t.Errorf("panel %q reads data source %v, want the variable", p.Title, p.Datasource)
		}
	}
	queries, err := promcheck.DashboardQueries(file)
	if err != nil {
		t.Fatal(err)
	}
	checkMetricNames(t, queries)
	for _, want := range []string{"enipam_node_ips", "enipam_node_policy", "enipam_subnet_available_ips", "enipam_ec2_api_throttled_total",
		"enipam_ec2_api_duration_seconds_count", "enipam_allocation_duration_seconds_bucket", "enipam_agent_ready", "enipam_leaked_enis",
		"enipam_enis_collected_total", "enipam_scheduler_node_refusals_total"} {
		used, _ := promcheck.AllMetrics(queries)
		if _, ok := used[want]; !ok {
			t.Errorf("the dashboard shows nothing of %s", want)
		}
	}
}

// checkMetricNames parses every query and requires each metric it names
// to be enipam's, controller-runtime's leader gauge, or Prometheus's own
// up.
func checkMetricNames(t *testing.T, queries []promcheck.Query) {
	t.Helper()
	used, err := promcheck.AllMetrics(queries)
	if err != nil {
		t.Fatal(err)
	}
	for name, where := range used {
		if !strings.HasPrefix(name, "enipam_") && name != "leader_election_master_status" && name != "up" {
			t.Errorf("%s (%v) is no metric of enipam's binaries", name, where)
		}
	}
}

// alertRule is one rule of the rendered PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func alertRules(t *testing.T, m manifest) []alertRule {
	t.Helper()
	prs := m.ofKind("PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(prs))
	}
	var spec struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	b, _ := json.Marshal(prs[0].Object["spec"])
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// TestAlertsLinkTheirRunbookAndParse: prometheusRule.enabled renders the
// thirteen alerts, each with a severity, a for, a summary, and a
// runbook_url into docs/operations.md on the chart's home's main branch
// (unless runbookURL says otherwise) whose anchor is the alert's own
// section there: a heading named after the alert, by GitHub's anchor
// rules, one per alert. Every expression parses with Prometheus's parser, names
// enipam's metrics (or controller-runtime's leader gauge, or up) and
// carries the series selector; the values reach the thresholds, the
// down alerts read the jobs of the chart's metrics Services (or those
// named). Without leader election there is no leader alert; without the
// agent or the scheduler, none of theirs.
func TestAlertsLinkTheirRunbookAndParse(t *testing.T) {
	m := render(t, "enipam", "kube-system", "--set", "clusterName=prod", "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.subnetLow.minFreeIPs=200", "--set", "prometheusRule.alertLabels.team=net")
	rules := alertRules(t, m)
	var names []string
	anchors := operationsAnchors(t)
	for _, r := range rules {
		names = append(names, r.Alert)
		if r.For == "" || r.Labels["severity"] == "" || r.Labels["team"] != "net" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: for %q labels %v annotations %v", r.Alert, r.For, r.Labels, r.Annotations)
		}
		url := r.Annotations["runbook_url"]
		base, anchor, ok := strings.Cut(url, "#")
		if !ok || base != "https://github.com/enipam/enipam/blob/main/docs/operations.md" || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is not the alert's own section of docs/operations.md", r.Alert, url)
		}
		if !strings.Contains(r.Expr, `namespace="kube-system"`) {
			t.Errorf("%s: %q lacks the series selector", r.Alert, r.Expr)
		}
		checkMetricNames(t, []promcheck.Query{{Where: r.Alert, Expr: r.Expr}})
	}
	want := []string{"EnipamPoolShort", "EnipamPodsWaitOnFullNode", "EnipamSubnetLowOnAddresses", "EnipamEC2Throttled", "EnipamEC2Errors", "EnipamAgentNotReady", "EnipamLeakedENIsGrowing",
		"EnipamOperatorDown", "EnipamAgentDown", "EnipamSchedulerExtenderDown", "EnipamSchedulerExtenderErrors", "EnipamStaticIPClaimStuck", "EnipamOperatorNoLeader"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	if i := slices.IndexFunc(rules, func(r alertRule) bool { return r.Alert == "EnipamSubnetLowOnAddresses" }); i < 0 || !strings.HasSuffix(rules[i].Expr, "< 200") {
		t.Errorf("subnet threshold not applied")
	}
	if i := slices.IndexFunc(rules, func(r alertRule) bool { return r.Alert == "EnipamOperatorNoLeader" }); i < 0 || !strings.Contains(rules[i].Expr, `name="enipam-operator"`) {
		t.Errorf("leader alert does not watch the operator's Lease")
	}
	for alert, job := range map[string]string{"EnipamOperatorDown": "enipam-operator-metrics", "EnipamAgentDown": "enipam-agent-metrics", "EnipamSchedulerExtenderDown": "enipam-scheduler-metrics"} {
		if i := slices.IndexFunc(rules, func(r alertRule) bool { return r.Alert == alert }); i < 0 || !strings.Contains(rules[i].Expr, `up{job="`+job+`"`) {
			t.Errorf("%s does not read the job of Service %s", alert, job)
		}
		if m.find("Service", job) == nil {
			t.Errorf("%s reads job %s, but no Service of that name renders", alert, job)
		}
	}

	m = render(t, "enipam", "kube-system", "--set", "clusterName=prod", "--set", "prometheusRule.enabled=true",
		"--set", "operator.replicas=1", "--set", "operator.leaderElection.enabled=false", "--set", "prometheusRule.seriesSelector=",
		"--set", "prometheusRule.runbookURL=https://wiki.example.com/enipam", "--set", "scheduler.enabled=false",
		"--set", "agent.enabled=false", "--set", "prometheusRule.jobs.operator=ops")
	for _, r := range alertRules(t, m) {
		switch r.Alert {
		case "EnipamOperatorNoLeader", "EnipamAgentDown", "EnipamSchedulerExtenderDown", "EnipamSchedulerExtenderErrors":
			t.Errorf("%s rendered without its component", r.Alert)
		case "EnipamOperatorDown":
			if r.Expr != `absent(up{job="ops"} == 1)` {
				t.Errorf("EnipamOperatorDown reads %q, want the job named and no selector", r.Expr)
			}
		}
		if !strings.HasPrefix(r.Annotations["runbook_url"], "https://wiki.example.com/enipam#") {
			t.Errorf("%s: runbook_url %q ignores runbookURL", r.Alert, r.Annotations["runbook_url"])
		}
		checkMetricNames(t, []promcheck.Query{{Where: r.Alert, Expr: r.Expr}})
	}
}

// operationsAnchors are the anchors GitHub gives the headings of
// docs/operations.md.
func operationsAnchors(t *testing.T) map[string]bool {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}
