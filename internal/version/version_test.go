package version

import (
	"bytes"
	"flag"
	"runtime/debug"
	"strings"
	"testing"
)

// TestResolve: a stamped version wins; else the module version Go
// recorded (go install …@v0.2.0); a checkout's "(devel)" or no build info
// gives "dev".
func TestResolve(t *testing.T) {
	info := func(v string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{}
			bi.Main.Version = v
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, c := range []struct {
		stamped string
		bi      func() (*debug.BuildInfo, bool)
		want    string
	}{
		{"0.3.0", info("v0.2.0"), "0.3.0"},
		{"", info("v0.2.0"), "v0.2.0"},
		{"", info("(devel)"), "dev"},
		{"", info(""), "dev"},
		{"", none, "dev"},
	} {
		if got := resolve(c.stamped, c.bi); got != c.want {
			t.Errorf("resolve(%q) = %q, want %q", c.stamped, got, c.want)
		}
	}
}

// TestLineNamesRevision: the line carries the program, the version and the
// VCS revision (12 digits, -dirty when modified).
func TestLineNamesRevision(t *testing.T) {
	bi := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0ca770e1234567890abcdef"},
			{Key: "vcs.modified", Value: "true"},
		}}, true
	}
	got := line("enipam-agent", "0.2.0", bi)
	if !strings.HasPrefix(got, "enipam-agent 0.2.0 (0ca770e12345-dirty) go") {
		t.Errorf("line = %q", got)
	}
}

// TestFlag: --version is reported and printed only when given.
func TestFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{{[]string{"--version"}, true}, {[]string{"-version=false"}, false}, {nil, false}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		f := AddFlag(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if got := f.Requested(&out, "enipam-x"); got != c.want || (out.Len() > 0) != c.want {
			t.Errorf("%v: Requested = %v, printed %q", c.args, got, out.String())
		}
		if c.want && !strings.HasPrefix(out.String(), "enipam-x "+Get()+" ") {
			t.Errorf("%v: printed %q", c.args, out.String())
		}
	}
}
