package claimcontroller

import (
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

var (
	claimsDesc = prometheus.NewDesc("enipam_static_ip_claims",
		"StaticIPClaims this operator serves, by phase (Pending, Placing, Bound, Releasing, Invalid).",
		[]string{"phase"}, nil)
	phaseDesc = prometheus.NewDesc("enipam_static_ip_claim_phase_seconds", phaseHelp, []string{"claim", "phase"}, nil)
)

const phaseHelp = "How long each claim waiting on enipam or its user (phase Placing, Releasing or Invalid) has been in that phase, as this operator process saw it: a restart starts the count again. Pending (no pod bound yet) and Bound claims have no series."

// phaseClock remembers each claim's phase and since when this process
// has seen the claim in it.
type phaseClock struct {
	mu sync.Mutex
	of map[string]phaseSince // claim owner ("namespace/name") → phase
}

type phaseSince struct {
	phase enipamv1alpha1.ClaimPhase
	since time.Time
}

// observe records that owner is in phase at now; the clock restarts only
// when the phase changes.
func (c *phaseClock) observe(owner string, phase enipamv1alpha1.ClaimPhase, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.of == nil {
		c.of = map[string]phaseSince{}
	}
	if was, ok := c.of[owner]; ok && was.phase == phase {
		return
	}
	c.of[owner] = phaseSince{phase: phase, since: now}
}

func (c *phaseClock) forget(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.of, owner)
}

// stuckPhases are those a claim should not stay in: an address on its
// way to a node or back to a pool, or a spec that cannot be honoured.
var stuckPhases = map[enipamv1alpha1.ClaimPhase]bool{
	enipamv1alpha1.ClaimPlacing: true, enipamv1alpha1.ClaimReleasing: true, enipamv1alpha1.ClaimInvalid: true,
}

// Describe implements prometheus.Collector.
func (r *Reconciler) Describe(ch chan<- *prometheus.Desc) {
	ch <- claimsDesc
	ch <- phaseDesc
	ch <- wrongAddressDesc
}

// Collect implements prometheus.Collector: claims per phase, how long
// each in a phase it should leave has been there, and the static-IP pods
// found with another address.
func (r *Reconciler) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(wrongAddressDesc, prometheus.CounterValue, float64(r.wrongAddress.Load()))
	counts := map[enipamv1alpha1.ClaimPhase]int{
		enipamv1alpha1.ClaimPending: 0, enipamv1alpha1.ClaimPlacing: 0, enipamv1alpha1.ClaimBound: 0,
		enipamv1alpha1.ClaimReleasing: 0, enipamv1alpha1.ClaimInvalid: 0,
	}
	now := r.now()
	r.phases.mu.Lock()
	of := maps.Clone(r.phases.of)
	r.phases.mu.Unlock()
	for owner, p := range of {
		counts[p.phase]++
		if stuckPhases[p.phase] {
			ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, now.Sub(p.since).Seconds(), owner, string(p.phase))
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
}
