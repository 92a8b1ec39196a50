package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// valuesFile writes a values file for -f and returns its path.
func valuesFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// strictDocuments checks every document of a rendered chart with a
// strict YAML decoder, which refuses a mapping with a key twice (a plain
// decoder keeps the last value silently; kubectl and Argo CD refuse or
// warn). It fails the test naming the document.
func strictDocuments(t *testing.T, rendered string) {
	t.Helper()
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var v map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
			head, _, _ := strings.Cut(strings.TrimSpace(doc), "\n")
			t.Errorf("%s: %v", head, err)
		}
	}
}

// TestSharedLabelKeysRenderOnce: commonLabels may name a key that another
// value also sets (the dashboard's sidecar label, the labels Prometheus
// selects rules and ServiceMonitors by, pod labels) or that the chart sets
// itself. Every rendered object still has each label key once: the
// object's own value wins over commonLabels (the dashboard keeps
// grafana_dashboard "1"), the chart's own labels win over commonLabels
// and podLabels (selectors keep matching), and commonLabels still reach
// every object. The previous chart (testdata) rendered such keys twice.
func TestSharedLabelKeysRenderOnce(t *testing.T) {
	vals := valuesFile(t, `
clusterName: labels
commonLabels: {grafana_dashboard: "0", release: common, team: net, app.kubernetes.io/part-of: other}
grafanaDashboard: {enabled: true, labels: {grafana_dashboard: "1"}}
prometheusRule: {enabled: true, labels: {release: kps}}
serviceMonitor: {enabled: true, labels: {release: kps}}
operator: {podLabels: {team: ops, app.kubernetes.io/component: other}}
`)
	out, err := helm(t, templateArgs(t, "enipam", "kube-system", "-f", vals)...)
	if err != nil {
		t.Fatal(err)
	}
	strictDocuments(t, out)
	m, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ kind, name, key, want string }{
		{"ConfigMap", "enipam-dashboard", "grafana_dashboard", "1"},
		{"ConfigMap", "enipam-dashboard", "team", "net"},
		{"PrometheusRule", "enipam", "release", "kps"},
		{"ServiceMonitor", "enipam-agent", "release", "kps"},
		{"Deployment", "enipam-operator", "app.kubernetes.io/part-of", "enipam"},
		{"Deployment", "enipam-operator", "release", "common"},
	} {
		u := m.find(tc.kind, tc.name)
		if u == nil {
			t.Fatalf("%s/%s not rendered", tc.kind, tc.name)
		}
		if got := u.GetLabels()[tc.key]; got != tc.want {
			t.Errorf("%s/%s label %s=%q, want %q", tc.kind, tc.name, tc.key, got, tc.want)
		}
	}
	var d appsv1.Deployment
	m.typed(t, "Deployment", "enipam-operator", &d)
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if pl := d.Spec.Template.Labels; !sel.Matches(labels.Set(pl)) || pl["team"] != "ops" {
		t.Errorf("operator pod labels %v: want its selector %v matched and podLabels' team=ops", pl, sel)
	}

	// The previous chart, as a witness that the check finds duplicates.
	prev, err := helm(t, "template", "enipam", previousChart, "--namespace", "kube-system", "-f", vals)
	if err != nil {
		t.Fatal(err)
	}
	var dup bool
	for _, doc := range strings.Split(prev, "\n---\n") {
		var v map[string]any
		if yaml.UnmarshalStrict([]byte(doc), &v) != nil {
			dup = true
		}
	}
	if !dup {
		t.Error("the previous chart renders no duplicate key with these values: the check does not discriminate")
	}
}

// TestOperatorMountsExtraVolumes: behind a TLS-inspecting proxy the
// operator needs the proxy's CA: operator.extraVolumes and
// extraVolumeMounts put a ConfigMap's bundle in its container, and
// extraEnv points AWS_CA_BUNDLE at it, as the README shows. Nothing is
// mounted by default; a mount without an absolute mountPath, or a volume
// without a name, is refused by the schema.
func TestOperatorMountsExtraVolumes(t *testing.T) {
	var d appsv1.Deployment
	render(t, "enipam", "kube-system", "--set", "clusterName=ca").typed(t, "Deployment", "enipam-operator", &d)
	if len(d.Spec.Template.Spec.Volumes) != 0 || len(d.Spec.Template.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("default operator volumes %v mounts %v, want none", d.Spec.Template.Spec.Volumes, d.Spec.Template.Spec.Containers[0].VolumeMounts)
	}
	vals := valuesFile(t, `
clusterName: ca
operator:
  extraVolumes:
    - name: proxy-ca
      configMap: {name: corporate-proxy-ca}
  extraVolumeMounts:
    - name: proxy-ca
      mountPath: /etc/enipam/proxy-ca
      readOnly: true
  extraEnv:
    - name: AWS_CA_BUNDLE
      value: /etc/enipam/proxy-ca/ca.crt
`)
	render(t, "enipam", "kube-system", "-f", vals).typed(t, "Deployment", "enipam-operator", &d)
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if len(spec.Volumes) != 1 || spec.Volumes[0].Name != "proxy-ca" || spec.Volumes[0].ConfigMap == nil || spec.Volumes[0].ConfigMap.Name != "corporate-proxy-ca" {
		t.Errorf("operator volumes %+v, want the proxy CA's ConfigMap", spec.Volumes)
	}
	if len(c.VolumeMounts) != 1 || !equality.Semantic.DeepEqual(c.VolumeMounts[0], corev1.VolumeMount{Name: "proxy-ca", MountPath: "/etc/enipam/proxy-ca", ReadOnly: true}) {
		t.Errorf("operator mounts %+v", c.VolumeMounts)
	}
	if e, ok := envValue(c, "AWS_CA_BUNDLE"); !ok || e.Value != "/etc/enipam/proxy-ca/ca.crt" {
		t.Errorf("operator env %+v, want AWS_CA_BUNDLE", c.Env)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("extra volumes loosened the operator's read-only root filesystem")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "operator.extraVolumeMounts[0].name=ca"}, "at '/operator/extraVolumeMounts/0': missing property 'mountPath'"},
		{[]string{"--set", "operator.extraVolumeMounts[0].name=ca", "--set", "operator.extraVolumeMounts[0].mountPath=etc/ca"}, "at '/operator/extraVolumeMounts/0/mountPath'"},
		{[]string{"--set", "operator.extraVolumes[0].configMap.name=ca"}, "at '/operator/extraVolumes/0': missing property 'name'"},
	} {
		if msg := renderError(t, append([]string{"--set", "clusterName=ca"}, tc.args...)...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %s, want %q", tc.args, msg, tc.want)
		}
	}
}

// TestServiceMonitorsCarryRelabelings: serviceMonitor.relabelings reach
// every endpoint after the chart's own (the agent's node label stays
// first), and metricRelabelings too; without them only the agent has
// relabelings. An unknown action or key is refused by the schema.
func TestServiceMonitorsCarryRelabelings(t *testing.T) {
	endpoint := func(u *unstructured.Unstructured) map[string]any {
		eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("%s: endpoints %v", u.GetName(), eps)
		}
		return eps[0].(map[string]any)
	}
	m := render(t, "enipam", "kube-system", "--set", "clusterName=sm", "--set", "serviceMonitor.enabled=true")
	for _, c := range []string{"operator", "agent", "scheduler"} {
		ep := endpoint(m.find("ServiceMonitor", "enipam-"+c))
		if _, ok := ep["relabelings"]; ok != (c == "agent") {
			t.Errorf("%s: relabelings %v by default", c, ep["relabelings"])
		}
		if _, ok := ep["metricRelabelings"]; ok {
			t.Errorf("%s: metricRelabelings %v by default", c, ep["metricRelabelings"])
		}
	}
	vals := valuesFile(t, `
clusterName: sm
serviceMonitor:
  enabled: true
  relabelings:
    - {targetLabel: cluster, replacement: prod-eu-1}
  metricRelabelings:
    - {action: drop, sourceLabels: [__name__], regex: "enipam_ec2_api_duration_seconds_bucket"}
`)
	m = render(t, "enipam", "kube-system", "-f", vals)
	for _, c := range []string{"operator", "agent", "scheduler"} {
		ep := endpoint(m.find("ServiceMonitor", "enipam-"+c))
		rl, _ := ep["relabelings"].([]any)
		want := 1
		if c == "agent" {
			want = 2
		}
		if len(rl) != want || rl[len(rl)-1].(map[string]any)["targetLabel"] != "cluster" {
			t.Errorf("%s: relabelings %v, want the chart's then the cluster label", c, rl)
		}
		if c == "agent" && rl[0].(map[string]any)["targetLabel"] != "node" {
			t.Errorf("agent: first relabeling %v, want the node label", rl[0])
		}
		mr, _ := ep["metricRelabelings"].([]any)
		if len(mr) != 1 || mr[0].(map[string]any)["action"] != "drop" {
			t.Errorf("%s: metricRelabelings %v", c, mr)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "serviceMonitor.relabelings[0].action=rename"}, "at '/serviceMonitor/relabelings/0/action'"},
		{[]string{"--set", "serviceMonitor.metricRelabelings[0].source_labels=x"}, "additional properties 'source_labels' not allowed"},
	} {
		if msg := renderError(t, append([]string{"--set", "clusterName=sm"}, tc.args...)...); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %s, want %q", tc.args, msg, tc.want)
		}
	}
}
