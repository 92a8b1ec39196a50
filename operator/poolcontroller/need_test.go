package poolcontroller

import (
	"slices"
	"testing"
)

// TestServeByNeedOrder: when EC2's buckets bind, the order in which nodes
// are served and whether a node's new ENI waits are a function of the
// nodes' needs alone. The m5.large cases: one ENI holds 9 secondaries,
// pre-allocate 8 plus Cilium's router and health addresses need 10.
func TestServeByNeedOrder(t *testing.T) {
	cases := []struct {
		name           string
		need           nodeNeed
		emptyElsewhere int
		priority       int
		empty, hold    bool
		// whole: every new ENI the need calls for at once (planWhole),
		// one beyond the first, the buckets' tokens unknown.
		whole bool
	}{
		{name: "joined, no address, in a wave", need: nodeNeed{Free: 0, Needed: 10}, emptyElsewhere: 999, priority: priorityStarving, empty: true},
		{name: "joined, no address, few others empty", need: nodeNeed{Free: 0, Needed: 10}, emptyElsewhere: wholeNeedEmptyNodes - 1, priority: priorityStarving, empty: true, whole: true},
		{name: "joined, no address, as many others empty as a wave", need: nodeNeed{Free: 0, Needed: 10}, emptyElsewhere: wholeNeedEmptyNodes, priority: priorityStarving, empty: true},
		{name: "pods wait on an empty pool", need: nodeNeed{Free: -3, Waiting: 3, Needed: 13}, emptyElsewhere: 5, priority: priorityStarving, empty: true, whole: true},
		{name: "pods wait on an empty pool in a wave", need: nodeNeed{Free: -3, Waiting: 3, Needed: 13}, emptyElsewhere: 200, priority: priorityStarving, empty: true, whole: true},
		{name: "first ENI attaching: addresses on their way", need: nodeNeed{Free: 9, Needed: 1, PoolReady: true}, emptyElsewhere: 5, priority: priorityPoolReady, hold: true, whole: true},
		{name: "m5.large top-up while others are empty", need: nodeNeed{Free: 7, Needed: 1}, emptyElsewhere: 1, priority: priorityDeficit, hold: true, whole: true},
		{name: "m5.large top-up, no node empty", need: nodeNeed{Free: 7, Needed: 1}, emptyElsewhere: 0, priority: priorityDeficit, whole: true},
		{name: "first ENI pooled in a wave, the rest of a large need", need: nodeNeed{Free: 9, Needed: 91}, emptyElsewhere: 50, priority: priorityDeficit, hold: true},
		{name: "top-up with a pod waiting on it", need: nodeNeed{Free: 6, Waiting: 1, Needed: 2}, emptyElsewhere: 40, priority: priorityDeficit, whole: true},
		{name: "in shape", need: nodeNeed{Free: 8}, emptyElsewhere: 40, priority: priorityIdle, hold: true},
		{name: "pool used up, pods coming", need: nodeNeed{Free: 0, Needed: 8}, emptyElsewhere: 40, priority: priorityStarving, empty: true},
		{name: "pool used up, no wave", need: nodeNeed{Free: 0, Needed: 8}, emptyElsewhere: 3, priority: priorityStarving, empty: true, whole: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.need.priority(); got != c.priority {
				t.Errorf("priority = %d, want %d", got, c.priority)
			}
			if got := c.need.empty(); got != c.empty {
				t.Errorf("empty = %v, want %v", got, c.empty)
			}
			if got := holdNewENI(c.need, c.emptyElsewhere); got != c.hold {
				t.Errorf("holdNewENI(%d empty elsewhere) = %v, want %v", c.emptyElsewhere, got, c.hold)
			}
			if got := planWhole(c.need, c.emptyElsewhere, 1, -1); got != c.whole {
				t.Errorf("planWhole(%d empty elsewhere) = %v, want %v", c.emptyElsewhere, got, c.whole)
			}
		})
	}
}

// TestWaveTakesItsWholeNeedWhenTheBucketsHoldIt: in a wave (10 or more
// other nodes empty), a joining node takes its whole need at once only
// when the client-side buckets would serve at once as many new ENIs as
// every empty node would take were each to need as many as it: 20
// m5.large nodes (two ENIs each) in a full Attach bucket (50) do, 30 do
// not, nor 20 in a bucket of 30, nor in buckets not known.
func TestWaveTakesItsWholeNeedWhenTheBucketsHoldIt(t *testing.T) {
	joining := nodeNeed{Free: 0, Needed: 10}
	for _, c := range []struct {
		emptyElsewhere, extra, tokens int
		whole                         bool
	}{
		{19, 1, 50, true},
		{24, 1, 50, true},
		{25, 1, 50, false},
		{29, 1, 50, false},
		{19, 1, 30, false},
		{19, 1, -1, false},
		{12, 3, 50, false}, // 13 nodes of 4 ENIs: 52
		{11, 3, 50, true},  // 12 of 4: 48
		{199, 1, 50, false},
	} {
		if got := planWhole(joining, c.emptyElsewhere, c.extra, c.tokens); got != c.whole {
			t.Errorf("%d other nodes empty, %d extra ENIs, %d tokens: planWhole = %v, want %v", c.emptyElsewhere, c.extra, c.tokens, got, c.whole)
		}
	}
}

// holdFor decides whether node's new ENI waits and records it held, as
// a reconcile does: the decision counts the other empty nodes (readCross)
// for holdNewENI, and take records the hold.
func holdFor(n *needs, node string, need nodeNeed) bool {
	return holdNewENI(need, n.emptyElsewhere(node)) && n.hold(node)
}

// TestHeldNodesWokenWhenNoneEmpty: a node's held new ENI is woken exactly
// when the last empty node gets addresses or goes away, and a node still
// empty never holds its own first ENI.
func TestHeldNodesWokenWhenNoneEmpty(t *testing.T) {
	n := newNeeds()
	var woken []string
	n.wake = func(nodes []string) { woken = append(woken, nodes...) }
	topUp := nodeNeed{Free: 7, Needed: 1}

	n.estimate("a", true) // joined, not reconciled yet
	n.set("b", true)
	n.set("c", false)
	if !holdFor(n, "c", topUp) {
		t.Fatal("c's top-up was not held while a and b are empty")
	}
	if holdFor(n, "b", nodeNeed{Free: 0, Needed: 10}) {
		t.Fatal("b, empty, held its own first ENI")
	}
	n.estimate("c", true) // an event of c's own write: c was reconciled, the estimate is ignored
	n.set("b", false)
	if len(woken) != 0 {
		t.Fatalf("woken %v while a is empty", woken)
	}
	n.forget("a")
	if !slices.Equal(woken, []string{"c"}) {
		t.Fatalf("woken %v once no node is empty, want [c]", woken)
	}
	if holdFor(n, "c", topUp) {
		t.Fatal("c's top-up held with no node empty")
	}
}

// TestSlotsKeepWorkersFromEC2: of 100 workers, 90 may make EC2 calls at
// once; a node turned away is woken, with the priority it was turned away
// with, as a slot frees, oldest first.
func TestSlotsKeepWorkersFromEC2(t *testing.T) {
	for workers, want := range map[int]int{1: 1, 2: 1, 10: 9, 100: 90, 1000: 900} {
		if got := slotsFor(workers); got != want {
			t.Errorf("slotsFor(%d) = %d, want %d", workers, got, want)
		}
	}
	s := newSlots(2)
	woken := map[string]int{}
	var order []string
	s.wake = func(node string, priority int) { woken[node] = priority; order = append(order, node) }
	if !s.acquire("a", priorityStarving) || !s.acquire("b", priorityStarving) {
		t.Fatal("a free slot was refused")
	}
	if s.acquire("c", priorityStarving) || s.acquire("d", priorityDeficit) || s.acquire("e", priorityDeficit) || s.acquire("c", priorityStarving) {
		t.Fatal("a slot was granted beyond the limit")
	}
	s.release()
	if !slices.Equal(order, []string{"c", "d"}) || woken["c"] != priorityStarving || woken["d"] != priorityDeficit {
		t.Fatalf("woken %v (%v) after one release, want c at %d then d at %d", order, woken, priorityStarving, priorityDeficit)
	}
	if !s.acquire("d", priorityDeficit) || s.acquire("c", priorityStarving) {
		t.Fatal("the freed slot was not granted exactly once")
	}
	s.release()
	s.release()
	if !slices.Equal(order, []string{"c", "d", "e", "c"}) {
		t.Fatalf("woken %v, want e and c after", order)
	}
}
