package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
)

// converge waits until the run has settled: the operator serves (its
// process runs and, with a Lease, leads), no proxy cuts it off, and for
// Options.Quiet neither the pools, the release handshakes, the pods'
// outcomes nor EC2's mutating calls have changed. It gives up after
// Options.ConvergeTimeout and reports whether it converged and when.
func (w *world) converge(ctx context.Context) (bool, time.Duration, error) {
	start := time.Now()
	deadline := start.Add(w.opts.ConvergeTimeout)
	var last uint64
	var since time.Time
	for {
		now := time.Now()
		d, err := w.digest(ctx)
		if err != nil {
			return false, 0, err
		}
		serving := w.serving()
		switch {
		case !serving || d != last:
			last, since = d, now
		case now.Sub(since) >= w.opts.Quiet:
			return true, since.Sub(start), nil
		}
		if now.After(deadline) {
			return false, now.Sub(start), nil
		}
		if err := sleep(ctx, time.Second); err != nil {
			return false, 0, err
		}
	}
}

// serving reports whether an operator can act now: it runs, no proxy
// cuts it off, and with a Lease it has logged taking it.
func (w *world) serving() bool {
	p := w.op.running()
	if p == nil || p.Exited() || w.opProxy.CutOff() || w.agentProxy.CutOff() {
		return false
	}
	if !w.opts.leaderElection() || w.leader == p {
		return true
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil || !strings.Contains(strings.ToLower(string(data)), "successfully acquired lease") {
		return false
	}
	w.leader = p
	return true
}

// digest sums up everything that moves while the operator works.
func (w *world) digest(ctx context.Context) (uint64, error) {
	var list ciliumv2.CiliumNodeList
	if err := w.cluster.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("listing CiliumNodes, %w", err)
	}
	counters, err := w.sim.Admin.Counters(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading ec2sim's counters, %w", err)
	}
	h := fnv.New64a()
	for _, cn := range list.Items {
		fmt.Fprintf(h, "%s|", cn.Name)
		for _, ip := range slices.Sorted(maps.Keys(cn.Spec.IPAM.Pool)) {
			fmt.Fprintf(h, "%s=%s,", ip, cn.Spec.IPAM.Pool[ip].Resource)
		}
		for _, ip := range slices.Sorted(maps.Keys(cn.Status.IPAM.ReleaseIPs)) {
			fmt.Fprintf(h, "%s:%s,", ip, cn.Status.IPAM.ReleaseIPs[ip])
		}
		fmt.Fprintf(h, "used=%d|", len(cn.Status.IPAM.Used))
	}
	for _, action := range slices.Sorted(maps.Keys(counters.Calls)) {
		if !strings.HasPrefix(action, "Describe") {
			fmt.Fprintf(h, "%s=%d,", action, counters.Calls[action])
		}
	}
	asked, started, failed, deleted := w.pods.outcomes()
	fmt.Fprintf(h, "pods=%d/%d/%d/%d", asked, started, failed, deleted)
	return h.Sum64(), nil
}
