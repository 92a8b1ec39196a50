package intern

import (
	"strings"
	"testing"
	"unsafe"
)

// TestPackOneArray: the strings packed keep their values and share one
// backing array, in the order gathered; empty strings stay as they are.
func TestPackOneArray(t *testing.T) {
	a, b, c := strings.Clone("eni-0123"), "", strings.Clone("10.0.0.5")
	l := []string{strings.Clone("10.0.0.6"), strings.Clone("10.0.0.7")}
	var k Packer
	k.Add(&a)
	k.Add(&b)
	k.Add(&c)
	k.AddAll(l)
	k.Pack()
	if a != "eni-0123" || b != "" || c != "10.0.0.5" || l[0] != "10.0.0.6" || l[1] != "10.0.0.7" {
		t.Fatalf("values changed: %q %q %q %q", a, b, c, l)
	}
	base := unsafe.StringData(a)
	for i, s := range []string{c, l[0], l[1]} {
		off := []uintptr{8, 16, 24}[i]
		if unsafe.StringData(s) != (*byte)(unsafe.Add(unsafe.Pointer(base), off)) {
			t.Errorf("%q is not in the packed array at offset %d", s, off)
		}
	}
	k.Pack() // nothing gathered: nothing changes
	if a != "eni-0123" {
		t.Errorf("a second pack changed %q", a)
	}
}
