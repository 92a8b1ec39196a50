package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/enipam/enipam/test/agentsim"
	"github.com/enipam/enipam/test/ec2sim"
)

// node is a joined node as the run knows it.
type node struct {
	name, instance string
	// firstIndex is the lowest device index of its pod ENIs.
	firstIndex int
	// pods are the owners of its pods, started or waiting.
	pods []string
}

// booting is a launched instance and the node it will register.
type booting struct {
	node *node
	spec agentsim.NodeSpec
}

// workload is the run's nodes and pods: nodes join with their pods, and
// most pods leave in the shrink.
type workload struct {
	w *world

	mu sync.Mutex
	// booting are launched instances whose nodes have not joined yet.
	booting []booting
	nodes   []*node
	// started, failed count the allocations' outcomes; deleted the pods
	// that left while waiting.
	started, failed, deleted int
	asked                    int
	// seq numbers the pods of regrowths.
	seq      int
	firstErr error
}

func newWorkload(w *world) *workload { return &workload{w: w} }

// launch starts n instances, alternating zones, every other one for the
// secondary policy, as an autoscaler would; their nodes join later.
func (l *workload) launch(ctx context.Context, n int) error {
	l.mu.Lock()
	base := len(l.booting) + len(l.nodes)
	l.mu.Unlock()
	booted := make([]booting, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			subnet := []string{"nodes-a", "nodes-b"}[(base+i)%2]
			in, err := l.w.sim.Admin.AddInstance(ctx, ec2sim.LaunchRequest{InstanceType: l.w.opts.InstanceType, SubnetID: subnet})
			if err == nil {
				nd := &node{name: "node-" + in.InstanceID, instance: in.InstanceID}
				spec := agentsim.NodeSpec{Name: nd.name, InstanceID: in.InstanceID, AvailabilityZone: in.AvailabilityZone, InstanceType: in.InstanceType}
				if (base+i)%2 == 1 {
					nd.firstIndex = 1
					spec.Labels = map[string]string{secondaryLabel: "true"}
				}
				booted[i] = booting{node: nd, spec: spec}
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return fmt.Errorf("launching instances, %w", err)
		}
	}
	l.mu.Lock()
	l.booting = append(l.booting, booted...)
	l.mu.Unlock()
	return nil
}

// join registers the next n launched instances as nodes, as their
// kubelets and cilium-agents do once booted, and asks for each node's
// pods, which wait until its agent has its first IPs.
func (l *workload) join(ctx context.Context, n int) error {
	l.mu.Lock()
	n = min(n, len(l.booting))
	wave := l.booting[:n]
	l.booting = l.booting[n:]
	l.mu.Unlock()
	specs := make([]agentsim.NodeSpec, n)
	for i, b := range wave {
		specs[i] = b.spec
		l.w.agents.AddAgent(b.spec.Name)
	}
	if err := agentsim.CreateNodes(ctx, l.w.cluster.Client, specs, 32); err != nil {
		return err
	}
	names := make([]string, n)
	for i, s := range specs {
		names[i] = s.Name
	}
	if err := l.w.static.register(ctx, names); err != nil {
		return err
	}
	for _, b := range wave {
		nd := b.node
		l.mu.Lock()
		l.nodes = append(l.nodes, nd)
		l.mu.Unlock()
		a := l.w.agents.Agent(nd.name)
		for i := range l.w.opts.PodsPerNode {
			owner := fmt.Sprintf("chaos/%s-%d", nd.name, i)
			l.mu.Lock()
			nd.pods = append(nd.pods, owner)
			l.asked++
			l.mu.Unlock()
			a.AllocateAsync(owner, l.done)
		}
	}
	return nil
}

// done accounts one allocation's outcome.
func (l *workload) done(r agentsim.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.Err == nil:
		l.started++
	case errors.Is(r.Err, agentsim.ErrPodDeleted), errors.Is(r.Err, agentsim.ErrStopped):
		l.deleted++
	default:
		l.failed++
		if l.firstErr == nil {
			l.firstErr = r.Err
		}
	}
}

// shrink deletes all but ShrinkTo pods on every node of part (of parts).
func (l *workload) shrink(part, parts int) int {
	l.mu.Lock()
	var nodes []*node
	for i, nd := range l.nodes {
		if i%parts == part {
			nodes = append(nodes, nd)
		}
	}
	l.mu.Unlock()
	released := 0
	for _, nd := range nodes {
		a := l.w.agents.Agent(nd.name)
		l.mu.Lock()
		leaving := nd.pods[min(l.w.opts.ShrinkTo, len(nd.pods)):]
		nd.pods = nd.pods[:min(l.w.opts.ShrinkTo, len(nd.pods))]
		l.mu.Unlock()
		for _, owner := range leaving {
			if a.Release(owner) {
				released++
			}
		}
	}
	return released
}

// regrow asks for k more pods on every node of part (of parts); parts 1
// is every node.
func (l *workload) regrow(part, parts, k int) int {
	l.mu.Lock()
	var nodes []*node
	for i, nd := range l.nodes {
		if i%parts == part {
			nodes = append(nodes, nd)
		}
	}
	l.mu.Unlock()
	for _, nd := range nodes {
		a := l.w.agents.Agent(nd.name)
		for range k {
			l.mu.Lock()
			l.seq++
			owner := fmt.Sprintf("chaos/%s-r%d", nd.name, l.seq)
			nd.pods = append(nd.pods, owner)
			l.asked++
			l.mu.Unlock()
			a.AllocateAsync(owner, l.done)
		}
	}
	return len(nodes) * k
}

// outcomes returns the allocations asked for, started, failed, and
// deleted while waiting.
func (l *workload) outcomes() (asked, started, failed, deleted int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked, l.started, l.failed, l.deleted
}

// all returns the joined nodes.
func (l *workload) all() []*node {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*node, len(l.nodes))
	copy(out, l.nodes)
	return out
}

// waitAllocated waits until every pod asked for has an outcome, or
// timeout; it reports whether they all have one.
func (l *workload) waitAllocated(ctx context.Context, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		asked, started, failed, deleted := l.outcomes()
		if started+failed+deleted >= asked {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return false, err
		}
	}
}
