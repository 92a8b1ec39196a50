package poolcontroller

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// TestDecideConsolidation: what consolidation of a node's ENIs decides
// from its facts alone, on consolidationSnap's ENIs (m5.large-like, 10
// slots per ENI; eni-empty and eni-empty-2 are the cluster's attached
// secondary ENIs without addresses), a one-minute delay: wait out the
// delay, detach the last grown emptied ENI when the others carry the
// node, then delete it once EC2 shows it available.
func TestDecideConsolidation(t *testing.T) {
	now := time.Unix(10_000, 0)
	const delay = time.Minute
	cases := []struct {
		name string
		edit func(f *consolidationFacts)
		// wantEmpty: the record of emptied ENIs kept (nil: left as it was).
		wantEmpty  map[string]time.Time
		wantDetach string
		wantRe     string
		wantDelete string
		wantDone   bool
		wantWait   time.Duration
	}{
		{name: "off: the record of emptied ENIs is cleared",
			edit:      func(f *consolidationFacts) { f.on, f.snap = false, nil },
			wantEmpty: map[string]time.Time{}},
		{name: "growing: nothing decided, the record left as it was",
			edit: func(f *consolidationFacts) { f.growing, f.snap = true, nil }},
		{name: "emptied ENIs start their delay; looked at again when it ends",
			edit:      func(f *consolidationFacts) { f.mem.emptySince = nil },
			wantEmpty: map[string]time.Time{"eni-empty": now, "eni-empty-2": now}, wantWait: delay},
		{name: "an ENI empty for the delay is detached, the last grown first; ENIs no longer empty are forgotten",
			edit: func(f *consolidationFacts) {
				f.mem.emptySince = map[string]time.Time{"eni-empty": now.Add(-2 * delay), "eni-empty-2": now.Add(-2 * delay), "eni-used": now.Add(-2 * delay)}
			},
			wantEmpty:  map[string]time.Time{"eni-empty": now.Add(-2 * delay), "eni-empty-2": now.Add(-2 * delay)},
			wantDetach: "eni-empty-2"},
		{name: "a node grown within the delay keeps its emptied ENIs",
			edit: func(f *consolidationFacts) {
				f.mem.emptySince = map[string]time.Time{"eni-empty": now.Add(-2 * delay), "eni-empty-2": now.Add(-2 * delay)}
				f.mem.grewAt = now.Add(-delay / 2)
			},
			wantEmpty: map[string]time.Time{"eni-empty": now.Add(-2 * delay), "eni-empty-2": now.Add(-2 * delay)}, wantWait: delay / 2},
		{name: "the node's other ENIs cannot carry its headroom: none detached",
			edit: func(f *consolidationFacts) {
				f.mem.emptySince = map[string]time.Time{"eni-empty": now.Add(-2 * delay), "eni-empty-2": now.Add(-2 * delay)}
				f.headroom = 1000
			},
			wantEmpty: map[string]time.Time{"eni-empty": now.Add(-2 * delay), "eni-empty-2": now.Add(-2 * delay)}},
		{name: "the detached ENI EC2 shows available is deleted",
			edit: func(f *consolidationFacts) {
				f.mem.detaching, f.mem.detachedAt = "eni-gone", now.Add(-10*time.Second)
				f.detached, f.detachedKnown = cloud.ENI{ID: "eni-gone", Status: cloud.ENIAvailable}, true
			},
			wantDelete: "eni-gone", wantDone: true},
		{name: "a detach EC2 still does not show after a minute is sent again",
			edit: func(f *consolidationFacts) {
				f.mem.detaching, f.mem.detachedAt = "eni-gone", now.Add(-2*detachResend)
				f.detached, f.detachedKnown = cloud.ENI{ID: "eni-gone", Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentAttached, AttachmentID: "attach-eni-gone"}, true
			},
			wantRe: "eni-gone", wantWait: detachRetry},
		{name: "a detach under way is waited for",
			edit: func(f *consolidationFacts) {
				f.mem.detaching, f.mem.detachedAt = "eni-gone", now.Add(-10*time.Second)
				f.detached, f.detachedKnown = cloud.ENI{ID: "eni-gone", Status: cloud.ENIInUse, AttachmentStatus: cloud.AttachmentDetaching}, true
			},
			wantWait: detachRetry},
		{name: "a detached ENI already gone ends consolidation without a call",
			edit: func(f *consolidationFacts) {
				f.mem.detaching, f.mem.detachedAt = "eni-gone", now.Add(-10*time.Second)
			},
			wantDone: true},
		{name: "a describe that failed is retried",
			edit: func(f *consolidationFacts) {
				f.mem.detaching, f.readErr = "eni-gone", errors.New("throttled")
			},
			wantWait: detachRetry},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := consolidationSnap()
			snap.Type = cloud.InstanceType{Name: "m5.large", MaxENIs: 8, IPv4PerENI: 10}
			f := consolidationFacts{on: true, snap: snap, cfg: &pool.Config{}, delay: delay, cluster: "test",
				named: map[string]bool{"eni-named": true}, now: now}
			tc.edit(&f)
			before := maps.Clone(f.mem.emptySince)
			step := decideConsolidation(f)
			if !maps.Equal(f.mem.emptySince, before) {
				t.Errorf("the facts' record was edited: %v, was %v", f.mem.emptySince, before)
			}
			if tc.wantEmpty != nil && (!step.keep || !maps.Equal(step.emptySince, tc.wantEmpty)) {
				t.Errorf("emptySince %v (kept %v), want %v", step.emptySince, step.keep, tc.wantEmpty)
			}
			if tc.wantEmpty == nil && step.keep {
				t.Errorf("emptySince replaced by %v, want it left as it was", step.emptySince)
			}
			id := func(e *cloud.ENI) string {
				if e == nil {
					return ""
				}
				return e.ID
			}
			if id(step.detach) != tc.wantDetach || id(step.redetach) != tc.wantRe || step.deleteENI != tc.wantDelete || step.finished != tc.wantDone {
				t.Errorf("detach %q, detach again %q, delete %q, finished %v; want %q, %q, %q, %v",
					id(step.detach), id(step.redetach), step.deleteENI, step.finished, tc.wantDetach, tc.wantRe, tc.wantDelete, tc.wantDone)
			}
			if step.wait != tc.wantWait {
				t.Errorf("look again within %s, want %s", step.wait, tc.wantWait)
			}
		})
	}
}

// TestDecideRepairsSettlesAndBacksOff: of the cluster's attached
// secondary ENIs, those lacking delete-on-termination are repaired unless
// their last try backs off past now; the remembered tries of ENIs that
// have the flag now are forgotten; the primary and another cluster's ENIs
// are never touched.
func TestDecideRepairsSettlesAndBacksOff(t *testing.T) {
	now := time.Unix(10_000, 0)
	snap := consolidationSnap() // every ENI attached, none with the flag
	for i := range snap.ENIs {
		if snap.ENIs[i].ID == "eni-used" {
			snap.ENIs[i].DeleteOnTermination = true
		}
	}
	backoff := map[string]repair{
		"eni-used":    {failures: 2, next: now.Add(time.Minute)},
		"eni-empty":   {failures: 1, next: now.Add(time.Minute)},
		"eni-empty-2": {failures: 1, next: now.Add(-time.Second)},
	}
	d := decideRepairs(snap, "test", backoff, now)
	var due []string
	for _, r := range d.due {
		due = append(due, r.eniID)
		if r.attachmentID != "attach-"+r.eniID {
			t.Errorf("repair of %s names attachment %q", r.eniID, r.attachmentID)
		}
	}
	if want := []string{"eni-named", "eni-detaching", "eni-empty-2"}; !slices.Equal(due, want) {
		t.Errorf("repairs due %v, want %v", due, want)
	}
	if want := []string{"eni-used"}; !slices.Equal(d.settled, want) {
		t.Errorf("settled %v, want %v", d.settled, want)
	}
}
