// Package images checks what `make images` produces: one OCI archive per
// enipam binary, built offline, whose image config runs the binary, as a
// non-root user where the binary allows.
package images

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImagesBuildOffline builds every image with hack/images.sh into a
// temporary folder and reads each archive's config. It skips, saying so,
// on a machine with no image builder that works (hack/images.sh --builder:
// a docker without buildx or a daemon does not count).
func TestImagesBuildOffline(t *testing.T) {
	b, err := exec.Command("../../hack/images.sh", "--builder").Output()
	if err != nil {
		t.Fatalf("hack/images.sh --builder: %v", err)
	}
	builder := strings.TrimSpace(string(b))
	if builder == "" {
		t.Skip("no podman, buildah, or docker with buildx and a daemon here: make images cannot run (Debian: apt-get install buildah)")
	}
	out := t.TempDir()
	cmd := exec.Command("../../hack/images.sh")
	cmd.Env = append(os.Environ(), "IMAGES_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/images.sh: %v\n%s", err, b)
	}
	list, err := exec.Command("../../hack/images.sh", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		entrypoint string
		nonRoot    bool
	}{
		"enipam-operator":  {"/enipam-operator", true},
		"enipam-agent":     {"/enipam-agent", false}, // NET_ADMIN on the host: root, see nodeagent/Containerfile
		"enipam-scheduler": {"/enipam-scheduler", true},
	}
	for _, ref := range strings.Fields(string(list)) {
		name, version, _ := strings.Cut(ref[strings.LastIndexByte(ref, '/')+1:], ":")
		archive := filepath.Join(out, fmt.Sprintf("%s-%s.tar", name, version))
		cfg, err := imageConfig(archive)
		if err != nil {
			t.Errorf("%s: %v", archive, err)
			continue
		}
		w, known := want[name]
		if !known {
			t.Errorf("%s: an image this test does not know", name)
			continue
		}
		if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != w.entrypoint {
			t.Errorf("%s: entrypoint %v, want [%s]", name, cfg.Config.Entrypoint, w.entrypoint)
		}
		if nonRoot := cfg.Config.User != "" && !strings.HasPrefix(cfg.Config.User, "0"); nonRoot != w.nonRoot {
			t.Errorf("%s: user %q, want non-root %v", name, cfg.Config.User, w.nonRoot)
		}
		if cfg.OS != "linux" {
			t.Errorf("%s: os %q", name, cfg.OS)
		}
		t.Logf("%s (%s): entrypoint %v, user %q, %s", ref, builder, cfg.Config.Entrypoint, cfg.Config.User, archive)
	}
}

type ociConfig struct {
	OS     string `json:"os"`
	Config struct {
		Entrypoint []string `json:"Entrypoint"`
		User       string   `json:"User"`
	} `json:"config"`
}

// imageConfig reads an OCI archive: index.json, its first manifest, and
// that manifest's config.
func imageConfig(archive string) (ociConfig, error) {
	blobs := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		return ociConfig{}, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ociConfig{}, err
		}
		if h.Typeflag != tar.TypeReg || h.Size > 1<<20 {
			continue // layers are large and not needed
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return ociConfig{}, err
		}
		blobs[strings.TrimPrefix(h.Name, "./")] = b
	}
	type descriptor struct {
		Digest string `json:"digest"`
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) == 0 {
		return ociConfig{}, fmt.Errorf("no manifest in index.json (%v)", err)
	}
	blob := func(digest string) []byte { return blobs["blobs/"+strings.Replace(digest, ":", "/", 1)] }
	var manifest struct {
		Config descriptor `json:"config"`
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		return ociConfig{}, fmt.Errorf("manifest: %w", err)
	}
	var cfg ociConfig
	if err := json.Unmarshal(blob(manifest.Config.Digest), &cfg); err != nil {
		return ociConfig{}, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}
