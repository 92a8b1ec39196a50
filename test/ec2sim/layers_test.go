package ec2sim_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayersImportDownward: the emulator's packages import only the layers
// below them (README.md, Layout): EC2's model knows no HTTP, no wire and
// no admin; the policy language and the behaviour know neither the model
// nor the wire; the wire knows nothing of admin; no layer imports the
// package that composes them.
func TestLayersImportDownward(t *testing.T) {
	const base = "github.com/enipam/enipam/test/ec2sim"
	forbidden := map[string][]string{
		"state":     {base, base + "/wire", base + "/admin", "net/http"},
		"iam":       {base, base + "/state", base + "/wire", base + "/admin", base + "/behaviour", "net/http"},
		"behaviour": {base, base + "/state", base + "/wire", base + "/admin", base + "/iam", "net/http"},
		"wire":      {base, base + "/admin"},
		"admin":     {base},
		"cloudfake": {base, base + "/wire", base + "/admin"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", base+"/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		if !deps[base+"/"+pkg] {
			t.Fatalf("go list -deps %s does not list the package itself: %q", pkg, out)
		}
		for _, b := range bad {
			if deps[b] {
				t.Errorf("%s imports %s (directly or not)", pkg, b)
			}
		}
	}
}
