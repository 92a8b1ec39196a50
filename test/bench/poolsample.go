package bench

import (
	"context"
	"slices"
	"time"

	"github.com/enipam/enipam/test/ec2sim"
)

// poolSampler holds what the pools scenario samples while the trace
// plays: every node's idle addresses, the addresses the fleet took from
// the subnets and its running pods, and EC2's call counters.
type poolSampler struct {
	idle           []float64
	taken, running []float64
	// at: when each taken/running sample was taken, since the measure
	// began.
	at        []time.Duration
	start     time.Time
	calls     []callSnapshot
	throttled int64
	// headroom: the operator's mean headroom per node, per sample; free:
	// the free addresses it saw, per node (available - used - waiting).
	headroom, free []float64
}

// callSnapshot is EC2's call counters at one moment.
type callSnapshot struct {
	at    time.Time
	calls map[string]int64
}

// samplePoolsEvery is how often the pools scenario samples.
const samplePoolsEvery = 2 * time.Second

// samplePools samples until ctx ends, then reads the counters once more.
func (w *world) samplePools(ctx context.Context) *poolSampler {
	s := &poolSampler{start: time.Now()}
	t := time.NewTicker(samplePoolsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c, err := w.sim.Admin.Counters(final); err == nil {
				s.addCalls(c)
				for _, n := range c.Throttled {
					s.throttled += n
				}
			}
			return s
		case <-t.C:
			s.sample(ctx, w)
		}
	}
}

func (s *poolSampler) sample(ctx context.Context, w *world) {
	running := 0
	for _, n := range w.agents.NodeFigures() {
		if !n.Ready {
			continue
		}
		s.idle = append(s.idle, float64(n.IdleIPs))
		running += n.Pods
	}
	if dump, err := w.sim.Admin.Dump(ctx); err == nil {
		s.taken = append(s.taken, float64(addressesTaken(dump)))
		s.running = append(s.running, float64(running))
		s.at = append(s.at, time.Since(s.start))
	}
	if c, err := w.sim.Admin.Counters(ctx); err == nil {
		s.addCalls(c)
	}
	if m, err := w.metrics(ctx); err == nil {
		if f, ok := m["enipam_node_ips"]; ok {
			var headroom, free float64
			var n int
			for _, metric := range f.Metric {
				v := metric.GetGauge().GetValue()
				switch {
				case labelsMatch(metric, map[string]string{"state": "headroom"}):
					headroom += v
					n++
				case labelsMatch(metric, map[string]string{"state": "available"}):
					free += v
				case labelsMatch(metric, map[string]string{"state": "used"}), labelsMatch(metric, map[string]string{"state": "waiting"}):
					free -= v
				}
			}
			if n > 0 {
				s.headroom = append(s.headroom, headroom/float64(n))
				s.free = append(s.free, free/float64(n))
			}
		}
	}
}

// mean is the mean of samples, 0 without any.
func mean(samples []float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	total := 0.0
	for _, v := range samples {
		total += v
	}
	return total / float64(len(samples))
}

func (s *poolSampler) addCalls(c ec2sim.Counters) {
	calls := map[string]int64{}
	for action := range c.Calls {
		calls[action] = c.Succeeded(action)
	}
	s.calls = append(s.calls, callSnapshot{at: time.Now(), calls: calls})
}

// addressesTaken counts the addresses the fleet's ENIs hold beyond each
// instance's own (its primary ENI's primary address): secondary
// addresses, the primary addresses of the ENIs added for pods, delegated
// prefixes (16 each), on ENIs attached or not.
func addressesTaken(d ec2sim.Dump) int {
	n := 0
	for _, e := range d.NetworkInterfaces {
		n += len(e.PrivateIPAddresses) + 16*len(e.IPv4Prefixes)
	}
	return n - len(d.Instances)
}

// summary returns the mean and 99th percentile of the idle addresses
// per node over every sample of every node, and the addresses taken per
// running pod (the ratio of their means).
func (s *poolSampler) summary() (idleMean, idleP99, takenPerPod float64) {
	if len(s.idle) > 0 {
		sorted := slices.Clone(s.idle)
		slices.Sort(sorted)
		sum := 0.0
		for _, v := range sorted {
			sum += v
		}
		idleMean = sum / float64(len(sorted))
		rank := max(0, min(int(0.99*float64(len(sorted))+0.999999999)-1, len(sorted)-1))
		idleP99 = sorted[rank]
	}
	var taken, running float64
	for i := range s.taken {
		taken += s.taken[i]
		running += s.running[i]
	}
	if running > 0 {
		takenPerPod = taken / running
	}
	return idleMean, idleP99, takenPerPod
}

// callRates returns each action's calls per minute over the run, and its
// most calls within any 60 s between two samples.
func (s *poolSampler) callRates(run time.Duration) (perMinute, busiest map[string]float64) {
	perMinute, busiest = map[string]float64{}, map[string]float64{}
	if len(s.calls) == 0 {
		return perMinute, busiest
	}
	last := s.calls[len(s.calls)-1]
	for action, n := range last.calls {
		perMinute[action] = float64(n) / run.Minutes()
	}
	for i, from := range s.calls {
		j := i
		for j+1 < len(s.calls) && s.calls[j+1].at.Sub(from.at) <= time.Minute {
			j++
		}
		for action, n := range s.calls[j].calls {
			busiest[action] = max(busiest[action], float64(n-from.calls[action]))
		}
	}
	// The first minute counts from the start of the run (counters at 0).
	for _, c := range s.calls {
		if c.at.Sub(s.calls[0].at) > time.Minute-samplePoolsEvery {
			break
		}
		for action, n := range c.calls {
			busiest[action] = max(busiest[action], float64(n))
		}
	}
	return perMinute, busiest
}
