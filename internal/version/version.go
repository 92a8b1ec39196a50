// Package version is the version every enipam binary reports with
// --version and in its image labels.
//
// Builds of this repository stamp it (make build, make images):
//
//	go build -ldflags "-X github.com/enipam/enipam/internal/version.Version=0.2.0" ./...
//
// An unstamped binary reports the module version Go recorded in it
// (`go install github.com/enipam/enipam/operator/cmd/enipam@v0.2.0` gives
// v0.2.0), and "dev" when there is none (go build in a checkout).
package version

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Version is set at link time with -X; empty in an unstamped build.
var Version string

// Get returns the binary's version: the stamped one, else the module
// version from the build info, else "dev".
func Get() string {
	return resolve(Version, debug.ReadBuildInfo)
}

func resolve(stamped string, buildInfo func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := buildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Line is what --version prints: the program, its version, the VCS
// revision when Go recorded one, and the Go version and platform.
func Line(program string) string {
	return line(program, Get(), debug.ReadBuildInfo)
}

func line(program, v string, buildInfo func() (*debug.BuildInfo, bool)) string {
	s := program + " " + v
	if bi, ok := buildInfo(); ok {
		var rev, modified string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				if kv.Value == "true" {
					modified = "-dirty"
				}
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			s += " (" + rev + modified + ")"
		}
	}
	return s + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// AddFlag registers --version on fs; after fs.Parse, Requested tells
// whether it was given.
func AddFlag(fs *flag.FlagSet) *Flag {
	f := &Flag{}
	fs.BoolVar(&f.set, "version", false, "print the version and exit")
	return f
}

// Flag is the parsed --version.
type Flag struct{ set bool }

// Requested reports whether --version was given; if so it prints the
// version line for program to w, and the caller exits 0.
func (f *Flag) Requested(w io.Writer, program string) bool {
	if f.set {
		fmt.Fprintln(w, Line(program))
	}
	return f.set
}
