// Package chart tests charts/enipam: helm lint, rendering with default and
// edge values, the schema's refusals, the rendered objects created in a
// real kube-apiserver, and the RBAC of each binary exercised by
// impersonating its ServiceAccount. It runs bin/helm, which `make test`
// builds first (`make tools`).
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// paths of the repository's helm binary and chart.
func paths(t *testing.T) (helmBin, chartDir string) {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helmBin = filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helmBin); err != nil {
		t.Fatalf("%s not found: `make test` builds it (make tools): %v", helmBin, err)
	}
	return helmBin, filepath.Join(root, "charts", "enipam")
}

// helm runs bin/helm with args in private config, cache and data homes, so
// nothing from the machine's helm setup leaks in. It returns stdout, and
// an error carrying stderr when helm fails.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	stdout, _, err := helmOutput(t, args...)
	return stdout, err
}

// helmOutput is helm that also returns stderr.
func helmOutput(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	bin, _ := paths(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), stderr.String(), nil
}

// templateArgs are the arguments of `helm template` for release in
// namespace with extra arguments (--set, -f) appended. The cluster is the
// Kubernetes version the tests run (cluster.KubernetesVersion) unless
// extra names one with --kube-version: helm template has no apiserver to
// ask, and the chart's kubeVersion refuses helm's own default.
func templateArgs(t *testing.T, release, namespace string, extra ...string) []string {
	_, chartDir := paths(t)
	args := []string{"template", release, chartDir, "--namespace", namespace}
	if !slices.Contains(extra, "--kube-version") {
		args = append(args, "--kube-version", cluster.KubernetesVersion)
	}
	return append(args, extra...)
}

// manifest is a rendered chart: its objects in rendering order.
type manifest []*unstructured.Unstructured

// render runs `helm template` and decodes every object; the test fails if
// helm does.
func render(t *testing.T, release, namespace string, extra ...string) manifest {
	t.Helper()
	out, err := helm(t, templateArgs(t, release, namespace, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(out)
	if err != nil {
		t.Fatalf("decoding rendered manifest: %v\n%s", err, out)
	}
	return m
}

// renderError runs `helm template` expecting a refusal and returns helm's
// message.
func renderError(t *testing.T, extra ...string) string {
	t.Helper()
	out, err := helm(t, templateArgs(t, "enipam", "kube-system", extra...)...)
	if err == nil {
		t.Fatalf("helm template %v succeeded, want a refusal; rendered:\n%s", extra, out)
	}
	return err.Error()
}

func decode(yamlText string) (manifest, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(yamlText), 4096)
	var m manifest
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return m, nil
			}
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		m = append(m, u)
	}
}

// find returns the object of kind and name, or nil.
func (m manifest) find(kind, name string) *unstructured.Unstructured {
	for _, u := range m {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// names lists "Kind/name" of every object.
func (m manifest) names() []string {
	var out []string
	for _, u := range m {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	return out
}

// ofKind returns every object of kind.
func (m manifest) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// typed converts the object of kind and name into into; the test fails if
// it is missing.
func (m manifest) typed(t *testing.T, kind, name string, into runtime.Object) {
	t.Helper()
	u := m.find(kind, name)
	if u == nil {
		t.Fatalf("%s/%s not rendered; rendered: %v", kind, name, m.names())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s/%s does not decode strictly: %v", kind, name, err)
	}
}

var bg = context.Background()

// kubeconfigFile writes the test apiserver's kubeconfig for helm's
// --kubeconfig and returns its path.
func kubeconfigFile(t *testing.T) string {
	t.Helper()
	kubeconfig, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}
