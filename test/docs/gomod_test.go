package docs

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/enipam/enipam/test/cluster"
)

// TestGoInstallable holds docs/configuration.md's `go install …@latest` to the
// module: the go command refuses to install from a module whose go.mod
// has replace or exclude directives ("The go.mod file for the module
// providing named packages contains one or more replace directives"),
// so ours carries none.
func TestGoInstallable(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join(root, "go.mod")).Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Module  struct{ Path string }
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
		Exclude []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("reading go mod edit -json: %v", err)
	}
	if mod.Module.Path != "github.com/enipam/enipam" {
		t.Errorf("module path %q, docs/configuration.md installs github.com/enipam/enipam/...", mod.Module.Path)
	}
	for _, r := range mod.Replace {
		t.Errorf("go.mod replaces %s with %s %s: `go install github.com/enipam/enipam/operator/cmd/enipam@latest` would refuse the module", r.Old.Path, r.New.Path, r.New.Version)
	}
	for _, e := range mod.Exclude {
		t.Errorf("go.mod excludes %s %s: `go install …@latest` would refuse the module", e.Path, e.Version)
	}
}
