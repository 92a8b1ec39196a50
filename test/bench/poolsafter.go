package bench

import (
	"context"
	"fmt"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
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
	// free: the free addresses per node at the end (freeFigures),
	// against freeBound.
	free      freeFigures
	freeBound int
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

// freeAtRest reads every CiliumNode's free addresses (freeFigures).
func (w *world) freeAtRest(ctx context.Context, bound int) (freeFigures, error) {
	var list ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &list); err != nil {
		return freeFigures{}, err
	}
	return countFree(list.Items, bound), nil
}

// freeFigures are the free addresses of the nodes' pools at one moment.
// Free counts the pool entries no pod uses, the release handshake
// included. At rest leaves out of them the entries Cilium's agent has
// acknowledged for release (ready-for-release): the agent hands none of
// them out again, and each goes back to EC2 as soon as its Unassign can
// be made, at once for a single address, with its last busy member's pod
// for a member of a delegated /28 being given back (the operator takes
// such members back only if the node needs addresses before then). A node
// holds them mid-return, not at rest. Marked entries the agent has not
// acknowledged yet still count: it may still refuse them.
type freeFigures struct {
	// freeMax, freeMean: free per node, the handshake included;
	// freeOver: nodes above the bound so counted.
	freeMax, freeOver int
	freeMean          float64
	// restMax, restMean: free per node at rest; restOver: nodes above
	// the bound so counted (the bound's figure).
	restMax, restOver int
	restMean          float64
	// over describes each node above the bound by either count: its
	// pool, used and handshake counts.
	over []string
}

// countFree counts the free addresses of nodes against bound.
func countFree(nodes []ciliumv2.CiliumNode, bound int) freeFigures {
	var f freeFigures
	total, totalRest := 0, 0
	for _, cn := range nodes {
		free, leaving, acked := 0, 0, 0
		for ip := range cn.Spec.IPAM.Pool {
			if _, used := cn.Status.IPAM.Used[ip]; used {
				continue
			}
			free++
			switch cn.Status.IPAM.ReleaseIPs[ip] {
			case ipamoption.IPAMReadyForRelease:
				acked++
				leaving++
			case "":
			default:
				leaving++
			}
		}
		rest := free - acked
		total, totalRest = total+free, totalRest+rest
		f.freeMax, f.restMax = max(f.freeMax, free), max(f.restMax, rest)
		if free > bound {
			f.freeOver++
		}
		if rest > bound {
			f.restOver++
		}
		if free > bound || rest > bound {
			f.over = append(f.over, fmt.Sprintf("%s: %d free, %d at rest (%d in the release handshake, %d of them acknowledged), %d in the pool, %d used",
				cn.Name, free, rest, leaving, acked, len(cn.Spec.IPAM.Pool), len(cn.Status.IPAM.Used)))
		}
	}
	if len(nodes) > 0 {
		f.freeMean = float64(total) / float64(len(nodes))
		f.restMean = float64(totalRest) / float64(len(nodes))
	}
	return f
}

// addAfterFigures reports one configuration's figures around the burst.
func (s Pools) addAfterFigures(rep *Report, name string, a afterFigures) {
	p := name + ": "
	rep.add(p+"subnet addresses per running pod, ENI primaries included: before the burst, at its peak, "+s.After.String()+" after it",
		fmt.Sprintf("%.2f, %.2f, %.2f", a.before, a.peak, a.after), "")
	rep.add(p+fmt.Sprintf("free addresses per node at the end, release handshake included: mean (max; nodes above %d)", a.freeBound),
		fmt.Sprintf("%.2f (%d; %d)", a.free.freeMean, a.free.freeMax, a.free.freeOver), "")
	rep.add(p+fmt.Sprintf("free addresses per node at rest at the end, those acknowledged for release apart: mean (max; nodes above %d)", a.freeBound),
		fmt.Sprintf("%.2f (%d; %d)", a.free.restMean, a.free.restMax, a.free.restOver), "")
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
		rep.target(fmt.Sprintf("enipam-adaptive-prefix: no node above pre-allocate + 16 = %d free addresses at rest at the end (those acknowledged for release apart; %d nodes above it counting them)", p.around.freeBound, p.around.free.freeOver),
			"0", fmt.Sprint(p.around.free.restOver), p.around.free.restOver == 0)
		rep.target("enipam-adaptive-prefix: no pod waits for an IP", "0", fmt.Sprint(p.waits+p.waitingAtEnd), p.waits+p.waitingAtEnd == 0)
	}
}
