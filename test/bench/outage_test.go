package bench

import (
	"testing"
	"time"
)

// TestCheckTermsCountsOverlapsAndStrayMutations: replica 0 acts from 0 s
// to 10 s, replica 1 from 9 s to 20 s (overlapping by a second) and from
// 30 s on; mutations at 5 s by 0 (inside), 12 s by 0 (outside) and 25 s by
// 1 (between its terms) → one overlap, two mutations outside.
func TestCheckTermsCountsOverlapsAndStrayMutations(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	terms := []term{
		{replica: 0, from: at(0), to: at(10)},
		{replica: 1, from: at(9), to: at(20)},
		{replica: 1, from: at(30)},
	}
	ms := []mutation{{replica: 0, at: at(5)}, {replica: 0, at: at(12)}, {replica: 1, at: at(25)}, {replica: 1, at: at(40)}}
	overlaps, outside := checkTerms(terms, ms)
	if overlaps != 1 || outside != 2 {
		t.Errorf("overlaps %d, outside %d; want 1 and 2", overlaps, outside)
	}
	if o, _ := checkTerms(terms[1:], nil); o != 0 {
		t.Errorf("one replica's own terms overlap: %d", o)
	}
}

// TestCrashLoopBackOffDoublesToFiveMinutes: a kubelet waits 10 s before
// the first restart, doubling up to 5 minutes.
func TestCrashLoopBackOffDoublesToFiveMinutes(t *testing.T) {
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := crashLoopBackOff(i + 1); got != w {
			t.Errorf("restart %d: %s, want %s", i+1, got, w)
		}
	}
}
