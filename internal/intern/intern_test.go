package intern

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestSharedAcrossCollections: equal strings interned on either side of a
// garbage collection share one copy; past Cap, strings come back as they
// are and the table stops growing.
func TestSharedAcrossCollections(t *testing.T) {
	a := String(strings.Clone("us-east-1a"))
	runtime.GC()
	b := String(strings.Clone("us-east-1a"))
	if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("a string interned after a collection got a copy of its own")
	}
	for i := 0; Len() < Cap; i++ {
		String(fmt.Sprintf("filler-%d", i))
	}
	s := strings.Clone("past-the-cap")
	if got := String(s); unsafe.StringData(got) != unsafe.StringData(s) || Len() != Cap {
		t.Errorf("past the cap: table holds %d, want %d, and the string returned as it is", Len(), Cap)
	}
	if c := String(strings.Clone("us-east-1a")); unsafe.StringData(c) != unsafe.StringData(a) {
		t.Error("a string interned before the cap is not shared after it")
	}
}
