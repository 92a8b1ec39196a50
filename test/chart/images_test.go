package chart

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/enipam/enipam/test/cluster"
)

// TestChartImagesAreBuilt: every image the chart renders by default is
// one `make images` builds (hack/images.sh --list), so the default install
// never names an image nothing produces; the one upstream image, the
// kube-scheduler enipam-scheduler's pod runs, is pinned to the version the
// tests run (cluster.KubernetesVersion).
func TestChartImagesAreBuilt(t *testing.T) {
	out, err := exec.Command("../../hack/images.sh", "--list").Output()
	if err != nil {
		t.Fatalf("hack/images.sh --list: %v", err)
	}
	built := strings.Fields(string(out))
	if len(built) < 2 {
		t.Fatalf("images.sh lists %v, want at least the operator and the agent", built)
	}
	rendered := renderedImages(t)
	if len(rendered) == 0 {
		t.Fatal("the chart renders no image")
	}
	upstream := "registry.k8s.io/kube-scheduler:v" + cluster.KubernetesVersion
	for _, img := range rendered {
		if img == upstream {
			continue
		}
		if !slices.Contains(built, img) {
			t.Errorf("the chart renders image %s, which make images does not build (it builds %v)", img, built)
		}
	}
}

// renderedImages returns every container image of the chart rendered with
// only the required value, in order of appearance.
func renderedImages(t *testing.T) []string {
	t.Helper()
	var images []string
	for _, obj := range render(t, "enipam", "kube-system", "--set", "clusterName=images") {
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		inits, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "initContainers")
		for _, c := range append(containers, inits...) {
			if img, ok := c.(map[string]any)["image"].(string); ok && !slices.Contains(images, img) {
				images = append(images, img)
			}
		}
	}
	return images
}
