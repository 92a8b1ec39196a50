package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Trace is pod churn drawn once from a seed, so that every configuration
// compared meets the same pods at the same moments; the scheduler, not
// the trace, decides where they land.
type Trace struct {
	Pods []TracePod
}

// TracePod is one pod of a trace: created At after the start, deleted
// Lifetime later.
type TracePod struct {
	Name         string
	At, Lifetime time.Duration
	Burst        bool
}

// TraceSpec describes a trace: Poisson arrivals over the whole fleet at
// Rate pods per second for Warmup then Duration, exponential lifetimes of
// mean MeanLifetime, and one burst of BurstPods created together BurstAt
// after the warm-up and deleted BurstHold later (a deployment scaled up
// and down). The warm-up brings the fleet near its steady pod count
// (Rate × MeanLifetime) before anything is measured.
type TraceSpec struct {
	Seed               uint64
	Rate               float64
	MeanLifetime       time.Duration
	Warmup, Duration   time.Duration
	BurstPods          int
	BurstAt, BurstHold time.Duration
}

// Total is the trace's length, warm-up included.
func (s TraceSpec) Total() time.Duration { return s.Warmup + s.Duration }

// NewTrace draws the trace of spec.
func NewTrace(spec TraceSpec) Trace {
	rng := rand.New(rand.NewPCG(spec.Seed, 0x706f6f6c73))
	var t Trace
	at := time.Duration(0)
	for i := 0; spec.Rate > 0; i++ {
		at += time.Duration(rng.ExpFloat64() / spec.Rate * float64(time.Second))
		if at >= spec.Total() {
			break
		}
		life := time.Duration(rng.ExpFloat64() * float64(spec.MeanLifetime))
		t.Pods = append(t.Pods, TracePod{Name: fmt.Sprintf("pod-%d", i), At: at, Lifetime: life})
	}
	for i := range spec.BurstPods {
		t.Pods = append(t.Pods, TracePod{Name: fmt.Sprintf("web-%d", i), At: spec.Warmup + spec.BurstAt, Lifetime: spec.BurstHold, Burst: true})
	}
	slices.SortStableFunc(t.Pods, func(a, b TracePod) int { return cmp.Compare(a.At, b.At) })
	return t
}

// traceRun is what playing a trace did.
type traceRun struct {
	created, deleted, failed atomic.Int64
}

// play creates the trace's pods in namespace ns (unbound: the scheduler
// binds them) at their moments and deletes them (with the default grace
// period: their kubelet confirms) at the end of their lifetimes, until
// the trace's duration has passed or ctx ends. Pods alive at the end are
// left for the caller.
func (t Trace) play(ctx context.Context, c client.Client, ns string, duration time.Duration) *traceRun {
	type op struct {
		at     time.Duration
		pod    *TracePod
		delete bool
	}
	ops := make([]op, 0, 2*len(t.Pods))
	for i := range t.Pods {
		p := &t.Pods[i]
		ops = append(ops, op{at: p.At, pod: p})
		if end := p.At + p.Lifetime; end < duration {
			ops = append(ops, op{at: end, pod: p, delete: true})
		}
	}
	slices.SortStableFunc(ops, func(a, b op) int { return cmp.Compare(a.at, b.at) })
	run := &traceRun{}
	start := time.Now()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, o := range ops {
		if d := time.Until(start.Add(o.at)); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return run
			case <-time.After(d):
			}
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			meta := metav1.ObjectMeta{Namespace: ns, Name: o.pod.Name}
			if o.delete {
				if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: meta}); err != nil && !apierrors.IsNotFound(err) {
					run.failed.Add(1)
					return
				}
				run.deleted.Add(1)
				return
			}
			if o.pod.Burst {
				meta.Labels = map[string]string{"app": "web"}
			}
			pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				TerminationGracePeriodSeconds: ptr.To(int64(30)),
			}}
			if err := c.Create(ctx, pod); err != nil {
				run.failed.Add(1)
				return
			}
			run.created.Add(1)
		})
	}
	if d := time.Until(start.Add(duration)); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	wg.Wait()
	return run
}
