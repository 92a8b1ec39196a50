package policy

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"
)

// FamilyProblems collects, per node, why the node gets no address of a
// family its policy asks for (an IPv6 subnet or instance type missing),
// as the pool controller found; the status controller folds them into
// each policy's IPFamilies condition. Safe for concurrent use; the zero
// value is not usable, see NewFamilyProblems.
type FamilyProblems struct {
	mu     sync.Mutex
	byNode map[string]familyProblem
	wake   chan event.GenericEvent
}

type familyProblem struct{ policy, msg string }

// NewFamilyProblems returns an empty collection.
func NewFamilyProblems() *FamilyProblems {
	return &FamilyProblems{byNode: map[string]familyProblem{}, wake: make(chan event.GenericEvent, 1)}
}

// Set records the node's problem under its policy ("" msg: none). A
// change wakes the status controller.
func (f *FamilyProblems) Set(node, policy, msg string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	old, had := f.byNode[node]
	if msg == "" {
		delete(f.byNode, node)
	} else {
		f.byNode[node] = familyProblem{policy: policy, msg: msg}
	}
	changed := (msg == "") == had || (had && old != familyProblem{policy, msg})
	f.mu.Unlock()
	if changed {
		select {
		case f.wake <- event.GenericEvent{}:
		default: // a wake-up is pending: it reads the latest
		}
	}
}

// Of returns, for a policy, how many of its nodes get no address of a
// family it asks for and the first of their messages by node name.
func (f *FamilyProblems) Of(policy string) (nodes int, first string) {
	if f == nil {
		return 0, ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, node := range slices.Sorted(maps.Keys(f.byNode)) {
		if p := f.byNode[node]; p.policy == policy {
			if nodes == 0 {
				first = p.msg
			}
			nodes++
		}
	}
	return nodes, first
}

// summary is the condition's message for n nodes without the family.
func summary(n int, first string) string {
	if n == 1 {
		return first
	}
	return fmt.Sprintf("%d nodes get no IPv6, for instance: %s", n, first)
}
