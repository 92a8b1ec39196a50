// Package images checks what `make images` produces: one OCI archive per
// enipam binary, built offline, holding an image index with a linux/amd64
// and a linux/arm64 image, each running its own architecture's binary,
// stamped with the chart's version (--version and the image labels), as
// a non-root user where the binary allows, and with nothing from the
// build host beside the binary (no /etc/ssl).
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// platforms are the ones every image index must hold, with the ELF
// machine of the binary each runs.
var platforms = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// TestImagesBuildOffline builds every image with hack/images.sh into a
// temporary folder and reads each archive: its index, each platform's
// manifest, config and layer. It skips, saying so, on a machine with no
// image builder that works (hack/images.sh --builder: a docker without
// buildx or a daemon does not count).
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
	revision := ""
	if b, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		revision = strings.TrimSpace(string(b))
	}
	want := map[string]struct {
		entrypoint string
		nonRoot    bool
	}{
		"enipam-operator":  {"/enipam-operator", true},
		"enipam-agent":     {"/enipam-agent", false}, // NET_ADMIN on the host: root, see nodeagent/Containerfile
		"enipam-scheduler": {"/enipam-scheduler", true},
	}
	refs := strings.Fields(string(list))
	if len(refs) != len(want) {
		t.Errorf("hack/images.sh --list: %d images %v, want %d", len(refs), refs, len(want))
	}
	for _, ref := range refs {
		name, version, _ := strings.Cut(ref[strings.LastIndexByte(ref, '/')+1:], ":")
		archive := filepath.Join(out, fmt.Sprintf("%s-%s.tar", name, version))
		w, known := want[name]
		if !known {
			t.Errorf("%s: an image this test does not know", name)
			continue
		}
		images, refName, err := readArchive(archive)
		if err != nil {
			t.Errorf("%s: %v", archive, err)
			continue
		}
		// The archive names the image as the chart does (docker buildx
		// writes the tag alone).
		if refName != ref && refName != version {
			t.Errorf("%s: archive names the image %q, want %q", name, refName, ref)
		}
		var archs []string
		for _, img := range images {
			archs = append(archs, img.platform)
		}
		slices.Sort(archs)
		if !slices.Equal(archs, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("%s: index holds %v, want linux/amd64 and linux/arm64", name, archs)
		}
		for _, img := range images {
			where := name + " " + img.platform
			cfg := img.config
			if got := cfg.OS + "/" + cfg.Architecture; got != img.platform {
				t.Errorf("%s: config says %s", where, got)
			}
			if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != w.entrypoint {
				t.Errorf("%s: entrypoint %v, want [%s]", where, cfg.Config.Entrypoint, w.entrypoint)
			}
			if nonRoot := cfg.Config.User != "" && !strings.HasPrefix(cfg.Config.User, "0"); nonRoot != w.nonRoot {
				t.Errorf("%s: user %q, want non-root %v", where, cfg.Config.User, w.nonRoot)
			}
			labels := cfg.Config.Labels
			if labels["org.opencontainers.image.version"] != version || labels["org.opencontainers.image.source"] != "https://github.com/enipam/enipam" ||
				(revision != "" && labels["org.opencontainers.image.revision"] != revision) {
				t.Errorf("%s: labels %v, want version %s, the source, revision %q", where, labels, version, revision)
			}
			// Only the binary: no CA bundle or anything else from the
			// build host.
			if files := slices.Sorted(maps.Keys(img.files)); !slices.Equal(files, []string{strings.TrimPrefix(w.entrypoint, "/")}) {
				t.Errorf("%s: files %v, want only %s", where, files, w.entrypoint)
			}
			bin := img.files[strings.TrimPrefix(w.entrypoint, "/")]
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Errorf("%s: binary: %v", where, err)
				continue
			}
			arch := strings.TrimPrefix(img.platform, "linux/")
			if f.Machine != platforms[arch] {
				t.Errorf("%s: binary for %v, want %v", where, f.Machine, platforms[arch])
			}
			if name == "enipam-operator" {
				// EC2 over HTTPS from an image with no /etc/ssl: Go's
				// own roots are in the binary.
				bi, err := buildinfo.Read(bytes.NewReader(bin))
				if err != nil || !slices.ContainsFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
					t.Errorf("%s: binary does not carry golang.org/x/crypto/x509roots/fallback (%v)", where, err)
				}
			}
			if arch == runtime.GOARCH {
				// The host can run this one: it reports the image's version.
				path := filepath.Join(t.TempDir(), name)
				if err := os.WriteFile(path, bin, 0o755); err != nil {
					t.Fatal(err)
				}
				got, err := exec.Command(path, "--version").Output()
				if err != nil || !strings.HasPrefix(string(got), name+" "+version+" ") {
					t.Errorf("%s: %s --version = %q, %v; want %q…", where, name, got, err, name+" "+version+" ")
				}
			}
		}
		t.Logf("%s (%s): %v, %d MiB", ref, builder, archs, fileSize(archive)>>20)
	}
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		User       string            `json:"User"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	// Annotations of index.json's entry name the image (ref.name).
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// image is one platform's image of an archive: its config and the regular
// files of its layers by path.
type image struct {
	platform string
	config   ociConfig
	files    map[string][]byte
}

const ociIndex = "application/vnd.oci.image.index.v1+json"

// readArchive reads an OCI archive: index.json, the image index it names
// (or holds), and each platform's manifest, config and layers; and the
// name index.json gives the image.
func readArchive(archive string) ([]image, string, error) {
	blobs := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, "", err
		}
		blobs[strings.TrimPrefix(h.Name, "./")] = b
	}
	blob := func(digest string) []byte { return blobs["blobs/"+strings.Replace(digest, ":", "/", 1)] }
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil {
		return nil, "", fmt.Errorf("index.json: %w", err)
	}
	var refName string
	if len(index.Manifests) > 0 {
		refName = index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	}
	// index.json names the image index (podman, buildah) or is it.
	if len(index.Manifests) == 1 && index.Manifests[0].MediaType == ociIndex {
		if err := json.Unmarshal(blob(index.Manifests[0].Digest), &index); err != nil {
			return nil, "", fmt.Errorf("image index: %w", err)
		}
	}
	var images []image
	for _, d := range index.Manifests {
		if d.Platform == nil {
			return nil, "", fmt.Errorf("manifest %s names no platform", d.Digest)
		}
		img := image{platform: d.Platform.OS + "/" + d.Platform.Architecture, files: map[string][]byte{}}
		var manifest struct {
			Config descriptor   `json:"config"`
			Layers []descriptor `json:"layers"`
		}
		if err := json.Unmarshal(blob(d.Digest), &manifest); err != nil {
			return nil, "", fmt.Errorf("%s manifest: %w", img.platform, err)
		}
		if err := json.Unmarshal(blob(manifest.Config.Digest), &img.config); err != nil {
			return nil, "", fmt.Errorf("%s config: %w", img.platform, err)
		}
		for _, l := range manifest.Layers {
			if err := layerFiles(blob(l.Digest), strings.HasSuffix(l.MediaType, "gzip"), img.files); err != nil {
				return nil, "", fmt.Errorf("%s layer %s: %w", img.platform, l.Digest, err)
			}
		}
		images = append(images, img)
	}
	return images, refName, nil
}

// layerFiles adds a layer's regular files to files, and fails on a
// directory or link (a FROM scratch image needs none: /etc/ssl would
// show here).
func layerFiles(layer []byte, gzipped bool, files map[string][]byte) error {
	var r io.Reader = bytes.NewReader(layer)
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag != tar.TypeReg {
			files[name+" (type "+string(h.Typeflag)+")"] = nil
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		files[name] = b
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
