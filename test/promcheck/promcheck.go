// Package promcheck holds the chart's Grafana dashboard and alert rules to
// the metrics the binaries really export: it renders the chart with both
// on, reads every PromQL query out of them (panel targets, template
// variables, alert expressions), parses each with Prometheus's own parser
// (github.com/prometheus/prometheus/promql/parser), lists the metric names
// they select, and compares those with a scrape of a running binary.
package promcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/enipam/enipam/test/cluster"
)

// Query is one PromQL query of the chart.
type Query struct {
	// Where names it: the dashboard panel and target, the template
	// variable, or the alert.
	Where string
	// Expr is the query as written (Grafana variables included).
	Expr string
}

// Render runs `helm template` of the chart at chartDir with the dashboard
// and the alert rules on (plus extra arguments) using the helm binary,
// and returns every query of both.
func Render(helm, chartDir string, extra ...string) ([]Query, error) {
	args := append([]string{"template", "enipam", chartDir, "--namespace", "kube-system",
		"--kube-version", cluster.KubernetesVersion, "--set", "clusterName=promcheck", "--set", "grafanaDashboard.enabled=true", "--set", "prometheusRule.enabled=true"}, extra...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template: %w\n%s", err, stderr.String())
	}
	return FromManifest(stdout.String())
}

// RepoPaths returns bin/helm and charts/enipam under the repository root.
func RepoPaths(root string) (helm, chartDir string) {
	return filepath.Join(root, "bin", "helm"), filepath.Join(root, "charts", "enipam")
}

// FromManifest reads the queries of the dashboard ConfigMaps (any
// ConfigMap whose data holds Grafana dashboard JSON) and PrometheusRules
// of a rendered manifest. It fails if it finds neither.
func FromManifest(manifest string) ([]Query, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []Query
	dashboards, rules := 0, 0
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		switch u.GetKind() {
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for key, text := range data {
				if !strings.HasSuffix(key, ".json") {
					continue
				}
				qs, err := DashboardQueries([]byte(text))
				if err != nil {
					return nil, fmt.Errorf("ConfigMap %s, %s: %w", u.GetName(), key, err)
				}
				dashboards++
				out = append(out, qs...)
			}
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
			for _, g := range groups {
				gm, _ := g.(map[string]any)
				rs, _ := gm["rules"].([]any)
				for _, r := range rs {
					rm, _ := r.(map[string]any)
					name, _ := rm["alert"].(string)
					if name == "" {
						name, _ = rm["record"].(string)
					}
					expr, _ := rm["expr"].(string)
					out = append(out, Query{Where: "rule " + name, Expr: expr})
					rules++
				}
			}
		}
	}
	if dashboards == 0 || rules == 0 {
		return nil, fmt.Errorf("found %d dashboards and %d rules, want both", dashboards, rules)
	}
	return out, nil
}

// dashboard is the part of Grafana's dashboard JSON that holds queries.
type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
	// Templating holds the variables; a query variable's query is either
	// a string or {"query": "..."}.
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// DashboardQueries returns the queries of a Grafana dashboard: every
// target of every panel (rows' panels included) and every query
// variable. A panel other than a row without a query is an error.
func DashboardQueries(text []byte) ([]Query, error) {
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(text))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	var out []Query
	var walk func(ps []panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type == "row" {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					return fmt.Errorf("panel %q target %s has no expression", p.Title, tg.RefID)
				}
				out = append(out, Query{Where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), Expr: tg.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("variable %s: query is neither a string nor an object", v.Name)
			}
			q = obj.Query
		}
		out = append(out, Query{Where: "variable " + v.Name, Expr: q})
	}
	return out, nil
}

var (
	// labelValues is Grafana's label_values(<selector>, <label>).
	labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	// grafanaVar is a Grafana variable: $name or ${name}.
	grafanaVar = regexp.MustCompile(`\$(\{[a-zA-Z_:][a-zA-Z0-9_:]*\}|[a-zA-Z_][a-zA-Z0-9_]*)`)
)

// PromQL returns the PromQL of a query with Grafana's syntax replaced:
// label_values(selector, label) becomes its selector, range variables a
// 5m duration, any other variable `.*` (they sit in regex matchers).
func PromQL(expr string) string {
	expr = strings.TrimSpace(expr)
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		switch strings.Trim(v, "${}") {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		return ".*"
	})
}

// Metrics parses the query with Prometheus's parser and returns the
// metric names it selects, sorted; a selector without a metric name is
// an error (it would match every series).
func Metrics(q Query) ([]string, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(PromQL(q.Expr))
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", q.Where, err, q.Expr)
	}
	var names []string
	var walkErr error
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			walkErr = fmt.Errorf("%s: selector %s names no metric", q.Where, vs)
		}
		names = append(names, name)
		return nil
	})
	if walkErr != nil {
		return nil, walkErr
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// AllMetrics returns the metric names of every query, each with the
// places that name it; the first query that does not parse is an error.
func AllMetrics(qs []Query) (map[string][]string, error) {
	out := map[string][]string{}
	for _, q := range qs {
		names, err := Metrics(q)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out[n] = append(out[n], q.Where)
		}
	}
	return out, nil
}

// Scrape fetches url (a /metrics endpoint) and returns the names of the
// series it exposes: each family's name, and for histograms and summaries
// the _bucket, _sum and _count series a query selects.
func Scrape(url string) (map[string]bool, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Parse reads a scrape in Prometheus's text format (see Scrape).
func Parse(r io.Reader) (map[string]bool, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape, %w", err)
	}
	out := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		out[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case "SUMMARY":
			out[name+"_sum"], out[name+"_count"] = true, true
		}
	}
	return out, nil
}

// Synthetic are the series Prometheus records itself for every target it
// scrapes (Prometheus's documentation, Jobs and instances: automatically
// generated labels and time series); a query may name them though no
// scrape exposes them.
var Synthetic = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling", "scrape_series_added"}

// Missing returns, sorted, the metric names of used that no scrape has
// (Synthetic ones aside), each with where it is used.
func Missing(used map[string][]string, scrapes ...map[string]bool) []string {
	var out []string
	for name, where := range used {
		if slices.Contains(Synthetic, name) {
			continue
		}
		if !slices.ContainsFunc(scrapes, func(s map[string]bool) bool { return s[name] }) {
			out = append(out, fmt.Sprintf("%s (%s)", name, strings.Join(where, "; ")))
		}
	}
	slices.Sort(out)
	return out
}
