package cluster

import (
	"net"
	"testing"
)

// TestFreeAddrsAreDistinct: the addresses picked together are distinct
// and each can be listened on once they are returned.
func TestFreeAddrsAreDistinct(t *testing.T) {
	for range 20 {
		addrs, err := FreeAddrs(64)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("%s picked twice among %v", a, addrs)
			}
			seen[a] = true
		}
		l, err := net.Listen("tcp", addrs[0])
		if err != nil {
			t.Fatalf("listening on %s: %v", addrs[0], err)
		}
		l.Close()
	}
}
