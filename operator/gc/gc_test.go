package gc

import (
	"testing"
	"time"
)

// TestLeakDecision: the collector's rule for one unattached ENI of the
// cluster, MinAge 1 m. A readable creation tag decides alone (young:
// never, however many passes saw it; old: on first sight); without one,
// two consecutive passes and MinAge since the first; an attach in flight
// or being retried keeps any ENI.
func TestLeakDecision(t *testing.T) {
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	minAge := time.Minute
	tag := func(age time.Duration) string { return now.Add(-age).Format(time.RFC3339) }
	for _, tc := range []struct {
		name string
		s    sighting
		want bool
	}{
		{"young by tag, first sight", sighting{created: tag(13 * time.Second), firstSeen: now}, false},
		{"young by tag, seen on the last passes", sighting{created: tag(13 * time.Second), seenBefore: true, firstSeen: now.Add(-10 * time.Second)}, false},
		{"young by tag, seen for longer than MinAge", sighting{created: tag(59 * time.Second), seenBefore: true, firstSeen: now.Add(-5 * time.Minute)}, false},
		{"old by tag, first sight", sighting{created: tag(61 * time.Second), firstSeen: now}, true},
		{"young by a tag to the millisecond", sighting{created: "2026-11-26T00:59:47.123Z", seenBefore: true, firstSeen: now.Add(-5 * time.Minute)}, false},
		{"old by a tag to the millisecond", sighting{created: "2026-11-26T00:58:59.999Z", firstSeen: now}, true},
		{"old by tag, attach being retried", sighting{created: tag(time.Hour), seenBefore: true, firstSeen: now.Add(-time.Hour), inFlight: true}, false},
		{"young by tag, attach being retried", sighting{created: tag(5 * time.Second), inFlight: true, firstSeen: now}, false},
		{"no tag, first sight", sighting{firstSeen: now}, false},
		{"no tag, second pass, first sight 10 s ago", sighting{seenBefore: true, firstSeen: now.Add(-10 * time.Second)}, false},
		{"no tag, second pass, first sight MinAge ago", sighting{seenBefore: true, firstSeen: now.Add(-minAge)}, true},
		{"garbled tag, seen for MinAge", sighting{created: "yesterday", seenBefore: true, firstSeen: now.Add(-2 * time.Minute)}, true},
		{"garbled tag, first sight", sighting{created: "yesterday", firstSeen: now}, false},
		{"tag in the future beyond MinAge, seen for MinAge", sighting{created: tag(-time.Hour), seenBefore: true, firstSeen: now.Add(-2 * time.Minute)}, true},
		{"tag in the future beyond MinAge, first sight", sighting{created: tag(-time.Hour), firstSeen: now}, false},
		{"tag seconds ahead (clock skew) is young", sighting{created: tag(-5 * time.Second), seenBefore: true, firstSeen: now.Add(-5 * time.Minute)}, false},
		{"no tag, seen for MinAge, attach being retried", sighting{seenBefore: true, firstSeen: now.Add(-time.Hour), inFlight: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leak(tc.s, now, minAge); got != tc.want {
				t.Errorf("leak(%+v) = %v, want %v", tc.s, got, tc.want)
			}
		})
	}
}

// TestLeakDecisionWithoutMinAge: MinAge 0 keeps the passes' rule for
// untagged ENIs (the second sighting) and takes tagged ones at once.
func TestLeakDecisionWithoutMinAge(t *testing.T) {
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	if leak(sighting{firstSeen: now}, now, 0) {
		t.Error("untagged ENI collected on first sight")
	}
	if !leak(sighting{seenBefore: true, firstSeen: now.Add(-time.Second)}, now, 0) {
		t.Error("untagged ENI kept on its second sighting")
	}
	if !leak(sighting{created: now.Add(-time.Second).Format(time.RFC3339), firstSeen: now}, now, 0) {
		t.Error("tagged ENI kept on first sight")
	}
}
