package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedTableIsCurrent: the committed zz_generated.go is exactly
// what the committed data yields, so the table cannot drift from its
// sources or be edited by hand.
func TestGeneratedTableIsCurrent(t *testing.T) {
	want, err := generate("../data")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../zz_generated.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("zz_generated.go differs from what data/ yields: run go generate ./internal/instancetypes")
	}
}

// TestArchByName: the naming rule on families the reference lists and on
// those it does not.
func TestArchByName(t *testing.T) {
	for name, want := range map[string]string{
		"a1.large": "arm64", "m6g.large": "arm64", "c7gn.16xlarge": "arm64", "x2gd.metal": "arm64", "im4gn.large": "arm64",
		"is4gen.large": "arm64", "t4g.nano": "arm64", "g5g.xlarge": "arm64", "c8gb.large": "arm64",
		"m5.large": "x86_64", "g4ad.xlarge": "x86_64", "gr6.4xlarge": "x86_64", "u7in-16tb.224xlarge": "x86_64",
		"u-6tb1.metal": "x86_64", "c7i-flex.large": "x86_64", "p6-b200.48xlarge": "x86_64",
		"mac1.metal": "x86_64_mac", "mac2-m2pro.metal": "arm64_mac", "mac-m4.metal": "arm64_mac",
	} {
		if got := archByName(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
}
