package chart

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/enipam/enipam/test/cluster"
)

// promtoolTests is the part of a promtool test file this test reads: the
// alert cases of each test group.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestAlertsFireAndStayQuietInPromtool: the chart's alert rules, rendered
// by helm (prometheusRule.enabled, the default series selector, runbooks
// under https://runbooks.example.com/enipam), pass `promtool test rules`
// with testdata/alerts.test.yaml: synthetic series in, the alerts that
// fire at given times out, labels and rendered annotations compared.
// Every alert the chart renders has a case where it fires and one where
// it stays quiet, and the file names no alert the chart lacks. bin/promtool
// comes from `make tools`; without it the test fails.
func TestAlertsFireAndStayQuietInPromtool(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	promtool := filepath.Join(root, "bin", "promtool")
	if _, err := os.Stat(promtool); err != nil {
		t.Fatalf("%s not found: `make test` builds it (make tools): %v", promtool, err)
	}
	m := render(t, "enipam", "kube-system", "--set", "clusterName=promtool", "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.runbookURL=https://runbooks.example.com/enipam")
	prs := m.ofKind("PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(prs))
	}
	groups, ok := prs[0].Object["spec"].(map[string]any)["groups"]
	if !ok {
		t.Fatal("the PrometheusRule has no spec.groups")
	}
	rules, err := json.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	testFile, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases promtoolTests
	if err := yaml.Unmarshal(testFile, &cases); err != nil {
		t.Fatalf("testdata/alerts.test.yaml: %v", err)
	}
	if !slices.Equal(cases.RuleFiles, []string{"rules.yaml"}) {
		t.Fatalf("testdata/alerts.test.yaml reads %v, want [rules.yaml] (the rendered rules)", cases.RuleFiles)
	}

	fires, quiet := map[string]int{}, map[string]int{}
	for _, g := range cases.Tests {
		for _, c := range g.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				quiet[c.Alertname]++
			}
		}
	}
	rendered := map[string]bool{}
	for _, r := range alertRules(t, m) {
		rendered[r.Alert] = true
		if fires[r.Alert] == 0 || quiet[r.Alert] == 0 {
			t.Errorf("%s: %d firing and %d quiet cases in testdata/alerts.test.yaml, want at least one of each", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
	for name := range fires {
		if !rendered[name] {
			t.Errorf("testdata/alerts.test.yaml tests %s, which the chart does not render", name)
		}
	}
	for name := range quiet {
		if !rendered[name] {
			t.Errorf("testdata/alerts.test.yaml tests %s, which the chart does not render", name)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), testFile, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", filepath.Join(dir, "alerts.test.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	n := 0
	for _, c := range fires {
		n += c
	}
	for _, c := range quiet {
		n += c
	}
	t.Logf("%d alerts, %d test groups, %d alert cases pass promtool", len(rendered), len(cases.Tests), n)
}
