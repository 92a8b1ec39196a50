// Package intern keeps one copy of strings that repeat across many
// cached objects: zones, subnet, VPC and security group IDs, instance
// types, states, tag and label keys. The table holds its strings for the
// life of the process and stops growing at Cap distinct strings (a string
// arriving after that is returned as it is), so strings unique to one
// object (an ENI's ID, a node's hostname) cost a bounded amount however
// many come and go.
//
// Go's unique package was not enough: its canonical copy is released at
// the next garbage collection once no handle refers to it, and the cache
// keeps the string, not the handle, so objects decoded after a collection
// got copies of their own again.
package intern

import "sync"

// Cap is the most distinct strings the table holds.
const Cap = 16384

var (
	mu    sync.RWMutex
	table = map[string]string{}
)

// String returns the table's copy of s, adding s while the table has room.
func String(s string) string {
	if s == "" {
		return s
	}
	mu.RLock()
	c, ok := table[s]
	mu.RUnlock()
	if ok {
		return c
	}
	mu.Lock()
	defer mu.Unlock()
	if c, ok := table[s]; ok {
		return c
	}
	if len(table) >= Cap {
		return s
	}
	table[s] = s
	return s
}

// Len is the number of strings the table holds.
func Len() int {
	mu.RLock()
	defer mu.RUnlock()
	return len(table)
}
