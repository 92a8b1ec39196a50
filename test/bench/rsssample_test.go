package bench

import "testing"

// TestRSSReadingsJudgeEveryReading: a window whose end reading meets the
// goal but whose middle does not is counted as above it.
func TestRSSReadingsJudgeEveryReading(t *testing.T) {
	r := rssReadings{190, 204.5, 199, 195}
	if got := r.above(200); got != 1 {
		t.Errorf("above(200) = %d, want 1", got)
	}
	if got := r.max(); got != 204.5 {
		t.Errorf("max = %v, want 204.5", got)
	}
	if got, want := r.String(), "190.0 / 197.1 / 204.5 (4 readings)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (rssReadings{}).String(); got != "no reading" {
		t.Errorf("empty String = %q", got)
	}
}
