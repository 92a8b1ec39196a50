package chart

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLintPassesWithEveryCIValuesFile: `helm lint --strict` accepts the
// chart with the minimal values (only clusterName) and with the values
// that turn every option on; these are what `make lint` runs.
func TestLintPassesWithEveryCIValuesFile(t *testing.T) {
	_, chartDir := paths(t)
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("ci values files: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := helm(t, "lint", "--strict", chartDir, "-f", f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("lint output:\n%s", out)
			}
		})
	}
}

// TestLintOfDefaultsPassesAndNamesTheMissingClusterName: lint of the
// chart as shipped passes (helm lint reports a template's refusal as
// information); what it reports is the sentence `helm install` would fail
// with: clusterName is required, and how to set it.
func TestLintOfDefaultsPassesAndNamesTheMissingClusterName(t *testing.T) {
	_, chartDir := paths(t)
	stdout, stderr, err := helmOutput(t, "lint", "--strict", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "0 chart(s) failed") {
		t.Errorf("lint output:\n%s", stdout)
	}
	if !strings.Contains(stderr, "clusterName is required") || !strings.Contains(stderr, "--set clusterName=<name>") {
		t.Errorf("lint does not report the missing clusterName:\n%s", stderr)
	}
}
