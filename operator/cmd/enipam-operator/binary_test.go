package main

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/enipam/enipam/operator/ec2"
)

// TestBinaryLinksOnlyTheEC2OperationsItCalls builds the operator and reads
// its symbol table: the EC2 operations it links are exactly those of
// ec2.SDK. Cilium's API types link reflect's Method (through text/template
// and go-cmp), after which the linker keeps every exported method of any
// type converted to an interface; an *ec2.Client converted to one links
// all of EC2's operations and their serializers (the binary's code grew
// from 29 to 48 MB, and the pages the process maps with it).
func TestBinaryLinksOnlyTheEC2OperationsItCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	bin := filepath.Join(t.TempDir(), "enipam-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the operator: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	const prefix = "github.com/aws/aws-sdk-go-v2/service/ec2.(*Client)."
	linked := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "T" || !strings.HasPrefix(f[2], prefix) {
			continue
		}
		name := strings.TrimPrefix(f[2], prefix)
		// Exported methods only: the SDK's own unexported helpers and
		// the method values' wrappers (name-fm) are not operations.
		if name != "" && name[0] >= 'A' && name[0] <= 'Z' && !strings.Contains(name, "-") {
			linked[name] = true
		}
	}
	sdk := reflect.TypeFor[ec2.SDK]()
	want := map[string]bool{}
	for i := range sdk.NumMethod() {
		want[sdk.Method(i).Name] = true
	}
	var extra []string
	for name := range linked {
		if !want[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		t.Errorf("the operator links %d EC2 operations it never calls (%d linked, %d called), e.g. %v", len(extra), len(linked), len(want), extra[:min(len(extra), 5)])
	}
	for name := range want {
		if !linked[name] {
			t.Errorf("(*ec2.Client).%s, an operation of ec2.SDK, is not in the binary's symbols", name)
		}
	}
}
