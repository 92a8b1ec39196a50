package bench

import (
	"context"
	"fmt"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// After the burst. A pool sized well while demand holds may still keep
// what the burst took once it is gone: every secondary ENI a node grew
// keeps its own primary address out of the subnet, and a delegated /28
// goes back only wholly free. So the pools scenario goes on After the
// burst ends and reports the subnet addresses per running pod (ENI
// primaries included) over the half minute before the burst, the half
// minute before it ends (its peak) and the half minute ending After its
// end; and, at that last moment, the free addresses each node's pool
// holds (pool addresses no pod uses, those in the release handshake
// included), against pre-allocate + 16 on prefix-delegated nodes.

// afterWindow is how long each of the three figures averages over.
const afterWindow = 30 * time.Second

// afterFigures is one configuration's figures around the burst.
type afterFigures struct {
	before, peak, after float64
	// freeMax, freeMean: free addresses per node at the end; overBound
	// counts the nodes above freeBound.
	freeMax, overBound, freeBound int
	freeMean                      float64
}

// perPodWithin is the ratio of the mean addresses taken to the mean
// running pods over the samples taken within [from, to) of the measure;
// 0 without samples.
func (s *poolSampler) perPodWithin(from, to time.Duration) float64 {
	var taken, running float64
	for i, at := range s.at {
		if at >= from && at < to {
			taken += s.taken[i]
			running += s.running[i]
		}
	}
	if running == 0 {
		return 0
	}
	return taken / running
}

// aroundBurst returns the three per-pod figures of the trace.
func (s *poolSampler) aroundBurst(spec TraceSpec, after time.Duration) (before, peak, afterwards float64) {
	end := spec.BurstAt + spec.BurstHold
	return s.perPodWithin(spec.BurstAt-afterWindow, spec.BurstAt),
		s.perPodWithin(end-afterWindow, end),
		s.perPodWithin(end+after-afterWindow, end+after+samplePoolsEvery)
}

// freeAtRest reads every CiliumNode's free addresses: pool entries no
// pod uses (release handshake included). Each node above bound is
// described in over: its pool, used and handshake counts.
func (w *world) freeAtRest(ctx context.Context, bound int) (freeMax, overBound int, freeMean float64, over []string, err error) {
	var list ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &list); err != nil {
		return 0, 0, 0, nil, err
	}
	total := 0
	for _, cn := range list.Items {
		free, leaving := 0, 0
		for ip := range cn.Spec.IPAM.Pool {
			if _, used := cn.Status.IPAM.Used[ip]; !used {
				free++
				if _, ok := cn.Status.IPAM.ReleaseIPs[ip]; ok {
					leaving++
				}
			}
		}
		total += free
		freeMax = max(freeMax, free)
		if free > bound {
			overBound++
			over = append(over, fmt.Sprintf("%s: %d free (%d of them in the release handshake), %d in the pool, %d used",
				cn.Name, free, leaving, len(cn.Spec.IPAM.Pool), len(cn.Status.IPAM.Used)))
		}
	}
	if len(list.Items) > 0 {
		freeMean = float64(total) / float64(len(list.Items))
	}
	return freeMax, overBound, freeMean, over, nil
}

// addAfterFigures reports one configuration's figures around the burst.
func (s Pools) addAfterFigures(rep *Report, name string, a afterFigures) {
	p := name + ": "
	rep.add(p+"subnet addresses per running pod, ENI primaries included: before the burst, at its peak, "+s.After.String()+" after it",
		fmt.Sprintf("%.2f, %.2f, %.2f", a.before, a.peak, a.after), "")
	rep.add(p+fmt.Sprintf("free addresses per node at the end, mean (max; nodes above %d)", a.freeBound),
		fmt.Sprintf("%.2f (%d; %d)", a.freeMean, a.freeMax, a.overBound), "")
}

// addAfterTargets holds enipam adaptive to its after-burst goal and the
// prefix-delegated run to its bound.
func (s Pools) addAfterTargets(rep *Report, by map[string]poolFigures) {
	if a, ok := by["enipam-adaptive"]; ok {
		limit := 1.1 * a.around.before
		rep.target("enipam-adaptive: subnet addresses per running pod "+s.After.String()+" after the burst within 10 % of before it",
			fmt.Sprintf("≤ %.2f", limit), fmt.Sprintf("%.2f", a.around.after), a.around.after > 0 && a.around.after <= limit)
	}
	if p, ok := by["enipam-adaptive-prefix"]; ok {
		rep.target(fmt.Sprintf("enipam-adaptive-prefix: no node above pre-allocate + 16 = %d free addresses at the end", p.around.freeBound),
			"0", fmt.Sprint(p.around.overBound), p.around.overBound == 0)
		rep.target("enipam-adaptive-prefix: no pod waits for an IP", "0", fmt.Sprint(p.waits+p.waitingAtEnd), p.waits+p.waitingAtEnd == 0)
	}
}
