package claimcontroller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestClaimPhasesAreTimedFromTheirLastChange: four claims seen by the
// controller over ten minutes. db-0 went Pending → Placing at minute 2 and
// is still placing at minute 10 (8 minutes, though seen again at minute
// 6); db-1 is Bound, db-2 Pending (neither has a series of its own);
// bad went Invalid at minute 9; old was Releasing and is gone. The scrape
// counts claims per phase (every phase listed, zeros included) and
// times the claims in the phases they should leave from their last
// change, not their first sight.
func TestClaimPhasesAreTimedFromTheirLastChange(t *testing.T) {
	start := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	now := start
	r := &Reconciler{now: func() time.Time { return now }}
	at := func(min int) time.Time { return start.Add(time.Duration(min) * time.Minute) }

	r.phases.observe("default/db-0", enipamv1alpha1.ClaimPending, at(0))
	r.phases.observe("default/db-1", enipamv1alpha1.ClaimBound, at(0))
	r.phases.observe("default/db-2", enipamv1alpha1.ClaimPending, at(1))
	r.phases.observe("default/old", enipamv1alpha1.ClaimReleasing, at(1))
	r.phases.observe("default/db-0", enipamv1alpha1.ClaimPlacing, at(2))
	r.phases.observe("default/db-0", enipamv1alpha1.ClaimPlacing, at(6))
	r.phases.forget("default/old")
	r.phases.observe("default/bad", enipamv1alpha1.ClaimInvalid, at(9))
	now = at(10)

	reg := prometheus.NewRegistry()
	reg.MustRegister(r)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s{%s} %v", f.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	want := []string{
		"enipam_static_ip_claim_phase_seconds{claim=default/bad,phase=Invalid} 60",
		"enipam_static_ip_claim_phase_seconds{claim=default/db-0,phase=Placing} 480",
		"enipam_static_ip_claims{phase=Bound} 1",
		"enipam_static_ip_claims{phase=Invalid} 1",
		"enipam_static_ip_claims{phase=Pending} 1",
		"enipam_static_ip_claims{phase=Placing} 1",
		"enipam_static_ip_claims{phase=Releasing} 0",
		"enipam_static_ip_wrong_address_total{} 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("scrape:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
