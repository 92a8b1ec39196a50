package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/enipam/enipam/test/cluster"
)

// TestChartCRDsAreTheGeneratedOnes: charts/enipam/crds holds exactly the
// files of crds/ (what controller-gen generates and the tests install),
// byte for byte; `make generate` copies them.
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	generated, _ := filepath.Glob(filepath.Join(root, "crds", "*.yaml"))
	shipped, _ := filepath.Glob(filepath.Join(root, "charts", "enipam", "crds", "*.yaml"))
	base := func(paths []string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if len(generated) == 0 || !slices.Equal(base(generated), base(shipped)) {
		t.Fatalf("crds/ has %v, the chart has %v: run `make generate`", base(generated), base(shipped))
	}
	for i := range generated {
		a, err := os.ReadFile(generated[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(shipped[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/enipam/crds/%s differs from crds/%s: run `make generate`", filepath.Base(shipped[i]), filepath.Base(generated[i]))
		}
	}
}
