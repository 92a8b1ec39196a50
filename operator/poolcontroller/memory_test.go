package poolcontroller

import (
	"fmt"
	"runtime"
	"testing"
)

// TestNodeMemoryCost: the memory a node's reconciles keep, as made for a
// node first seen, costs at most 704 bytes (5000 nodes measured on the
// shared machine: 744 bytes each with a map for DeleteOnTermination
// repairs made up front, 703 with it made by the first repair; 760-767
// once the join's completion was remembered (joinedAt), which took the
// struct, 640 bytes, and its malloc header into Go's 704-byte class;
// 688-696 with excessFloor an int32 sharing a word with deficitENI, 632
// bytes and the header in the 640-byte class; 608 bytes without
// joinedAt, in the same class).
func TestNodeMemoryCost(t *testing.T) {
	r := &Reconciler{nodes: map[string]*memory{}}
	const n = 5000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%d", i)
	}
	kept := make([]*memory, n)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i, name := range names {
		kept[i] = r.memory(name)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	clear(r.nodes) // the table's own cost is not the memories'
	runtime.GC()
	var m2 runtime.MemStats
	runtime.ReadMemStats(&m2)
	perNode := (int64(m2.HeapAlloc) - int64(m0.HeapAlloc)) / n
	t.Logf("%d node memories: %d bytes each (%d with the table)", n, perNode, (int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/n)
	if perNode > 704 {
		t.Errorf("a node's memory costs %d bytes, more than 704", perNode)
	}
	runtime.KeepAlive(kept)
}
