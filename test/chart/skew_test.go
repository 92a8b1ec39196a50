package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/enipam/enipam/test/cluster"
)

// schedulerConfigServed is, for each version of kube-scheduler's
// configuration API, the Kubernetes minor versions whose kube-scheduler
// reads it (v1beta2 was removed in 1.26, v1beta3 in 1.29; v1 is GA since
// 1.25).
var schedulerConfigServed = map[string][2]int{
	"kubescheduler.config.k8s.io/v1beta2": {22, 25},
	"kubescheduler.config.k8s.io/v1beta3": {23, 28},
	"kubescheduler.config.k8s.io/v1":      {25, 1 << 30},
}

// TestKubeSchedulerFollowsTheClusterVersion: rendered for clusters of
// several versions (helm template --kube-version, as helm install reads
// it from the apiserver), the upstream kube-scheduler of enipam-scheduler
// is the cluster's own version, a vendor's suffix dropped (EKS reports
// v1.33.4-eks-…); its configuration's apiVersion is one that
// kube-scheduler of that minor reads. A tag or digest set in values wins.
// A cluster older than the chart's kubeVersion is refused by name.
func TestKubeSchedulerFollowsTheClusterVersion(t *testing.T) {
	for _, tc := range []struct{ cluster, image string }{
		{"1.30.14", "registry.k8s.io/kube-scheduler:v1.30.14"},
		{"v1.33.4-eks-3025e55", "registry.k8s.io/kube-scheduler:v1.33.4"},
		{"1.35.0", "registry.k8s.io/kube-scheduler:v1.35.0"},
		{cluster.KubernetesVersion, "registry.k8s.io/kube-scheduler:v" + cluster.KubernetesVersion},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			s := schedulerOf(t, render(t, "enipam", "kube-system", "--set", "clusterName=skew", "--kube-version", tc.cluster), "enipam-scheduler")
			if s.kube.Image != tc.image {
				t.Errorf("kube-scheduler image %s on a %s cluster, want %s", s.kube.Image, tc.cluster, tc.image)
			}
			minor := minorOf(t, tc.cluster)
			served, ok := schedulerConfigServed[s.cfg.APIVersion]
			if !ok || minor < served[0] || minor > served[1] || s.cfg.Kind != "KubeSchedulerConfiguration" {
				t.Errorf("scheduler configuration %s %s, which kube-scheduler 1.%d does not read", s.cfg.APIVersion, s.cfg.Kind, minor)
			}
		})
	}

	s := schedulerOf(t, render(t, "enipam", "kube-system", "--set", "clusterName=skew", "--kube-version", "1.33.4",
		"--set", "scheduler.kubeScheduler.image.tag=v1.32.9"), "enipam-scheduler")
	if s.kube.Image != "registry.k8s.io/kube-scheduler:v1.32.9" {
		t.Errorf("kube-scheduler image %s with a tag set, want the tag", s.kube.Image)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	s = schedulerOf(t, render(t, "enipam", "kube-system", "--set", "clusterName=skew", "--kube-version", "1.33.4",
		"--set", "scheduler.kubeScheduler.image.digest="+digest), "enipam-scheduler")
	if s.kube.Image != "registry.k8s.io/kube-scheduler@"+digest {
		t.Errorf("kube-scheduler image %s with a digest set, want the digest", s.kube.Image)
	}

	if msg := renderError(t, "--set", "clusterName=skew", "--kube-version", "1.29.9"); !strings.Contains(msg, "kubeVersion: >=1.30.0-0") {
		t.Errorf("a 1.29 cluster: %s, want the chart's kubeVersion named", msg)
	}
}

// TestChartKubeVersionIsTheREADMEs: the chart's kubeVersion is the oldest
// Kubernetes the README supports ("Kubernetes 1.N or later"), and the
// Kubernetes the tests run is inside it.
func TestChartKubeVersionIsTheREADMEs(t *testing.T) {
	_, chartDir := paths(t)
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Kubernetes\s+1\.(\d+)\s+or\s+later`).FindSubmatch(readme)
	if m == nil {
		t.Fatal(`the README names no "Kubernetes 1.N or later"`)
	}
	if want := fmt.Sprintf(">=1.%s.0-0", m[1]); c.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q (the README's Kubernetes 1.%s or later)", c.KubeVersion, want, m[1])
	}
	if minor, _ := strconv.Atoi(string(m[1])); minorOf(t, cluster.KubernetesVersion) < minor {
		t.Errorf("the tests run Kubernetes %s, older than the README's 1.%d", cluster.KubernetesVersion, minor)
	}
}

func minorOf(t *testing.T, version string) int {
	t.Helper()
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		t.Fatalf("version %q", version)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		t.Fatalf("version %q: %v", version, err)
	}
	return minor
}
