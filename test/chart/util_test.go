package chart

import (
	"path/filepath"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ciValues is the path of a values file in the chart's ci/ folder.
func ciValues(t *testing.T, name string) string {
	_, chartDir := paths(t)
	return filepath.Join(chartDir, "ci", name)
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true)
}

func unstructuredMap(u *unstructured.Unstructured, fields ...string) (map[string]any, bool, error) {
	return unstructured.NestedMap(u.Object, fields...)
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
