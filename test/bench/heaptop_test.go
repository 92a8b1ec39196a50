package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

var retained [][]byte

//go:noinline
func retainSixteenMiB() {
	// Allocations this large are all sampled: the profile's figure is
	// exact, not an estimate.
	for range 4 {
		retained = append(retained, make([]byte, 4<<20))
	}
}

// TestHeapTopReadsPprof: a process holding 16 MiB allocated in one
// function writes its heap profile; heapTop, through go tool pprof,
// names that function first with 16 MiB (± 2 %: pprof's MB are MiB), and the total is at
// least the sum of the entries.
func TestHeapTopReadsPprof(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go tool pprof")
	}
	retained = nil
	runtime.GC()
	retainSixteenMiB()
	runtime.GC()
	path := filepath.Join(t.TempDir(), "heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	top, total, err := heapTop(context.Background(), exe, path, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(top) == 0 {
		t.Fatal("no entries")
	}
	if !strings.HasSuffix(top[0].Func, "retainSixteenMiB") || top[0].MiB < 15.68 || top[0].MiB > 16.32 {
		t.Errorf("first entry %+v, want retainSixteenMiB with 16 MiB", top[0])
	}
	sum := 0.0
	for _, e := range top {
		sum += e.MiB
	}
	if total < sum-0.01 {
		t.Errorf("total %.2f MiB below the entries' %.2f", total, sum)
	}
	runtime.KeepAlive(retained)
}
