package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/cluster"
	"github.com/enipam/enipam/test/faultproxy"
)

var env *cluster.Cluster

func TestMain(m *testing.M) { os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c })) }

// start runs a proxy in front of the test apiserver and returns it with a
// client that goes through it.
func start(t *testing.T) (*faultproxy.Proxy, client.WithWatch) {
	t.Helper()
	p, err := faultproxy.New(env.Config, faultproxy.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := client.NewWithWatch(p.Config(), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func add(t *testing.T, p *faultproxy.Proxy, r faultproxy.Rule) *faultproxy.Handle {
	t.Helper()
	h, err := p.Add(r)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string]string{"k": "v"}}
}

// TestSpecPatchFailsWhileStatusPatchPasses: the operator's write of a
// CiliumNode is a status patch, then a spec patch; a rule on patches of
// the object itself lets the status patch through and fails the spec
// patch with a 500 the client reads as an InternalError, and the spec is
// unchanged on the apiserver.
func TestSpecPatchFailsWhileStatusPatchPasses(t *testing.T) {
	p, c := start(t)
	ctx := ctxFor(t, 30*time.Second)
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "spec-fails"}}
	if err := env.Client.Create(ctx, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cn) })
	h := add(t, p, faultproxy.Rule{Verbs: []string{"patch"}, Resource: "ciliumnodes", Name: "spec-*", Action: faultproxy.Fail})

	orig := cn.DeepCopy()
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.0.9": "released"}
	if err := c.Status().Patch(ctx, cn, client.MergeFrom(orig)); err != nil {
		t.Fatalf("status patch through the proxy: %v", err)
	}
	orig = cn.DeepCopy()
	cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.0.9": {Resource: "eni-1"}}
	err := c.Patch(ctx, cn, client.MergeFrom(orig))
	if !apierrors.IsInternalError(err) {
		t.Fatalf("spec patch: %v, want an InternalError", err)
	}

	got := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cn), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.IPAM.ReleaseIPs["10.0.0.9"] != "released" || len(got.Spec.IPAM.Pool) != 0 {
		t.Errorf("apiserver holds release-ips %v and pool %v; want the status written and the spec not", got.Status.IPAM.ReleaseIPs, got.Spec.IPAM.Pool)
	}
	if h.Matched() != 1 || h.Fired() != 1 {
		t.Errorf("rule matched %d, fired %d; want 1 and 1", h.Matched(), h.Fired())
	}
	if s := p.Stats(); s.Failed != 1 {
		t.Errorf("stats %+v, want 1 failed", s)
	}
}

// TestOnlyTheThirdCreateFailsWithConflict: After 2 and Times 1 fire on
// the third matching request only, with the chosen status.
func TestOnlyTheThirdCreateFailsWithConflict(t *testing.T) {
	p, c := start(t)
	ctx := ctxFor(t, 30*time.Second)
	add(t, p, faultproxy.Rule{Verbs: []string{"create"}, Resource: "configmaps", Name: "*", After: 2, Times: 1, Action: faultproxy.Fail, Status: http.StatusConflict})
	var outcomes []string
	for i := range 4 {
		cm := configMap(fmt.Sprintf("third-%d", i))
		err := c.Create(ctx, cm)
		switch {
		case err == nil:
			outcomes = append(outcomes, "ok")
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
		case apierrors.IsConflict(err):
			outcomes = append(outcomes, "conflict")
		default:
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if got := strings.Join(outcomes, ","); got != "ok,ok,conflict,ok" {
		t.Errorf("creates: %s, want ok,ok,conflict,ok", got)
	}
}

// TestDroppedCreateIsAppliedButClientSeesError: a dropped request reaches
// the apiserver, which applies it, and the client gets a reset connection
// (or the chosen status) instead of the answer.
func TestDroppedCreateIsAppliedButClientSeesError(t *testing.T) {
	p, c := start(t)
	ctx := ctxFor(t, 30*time.Second)
	for _, status := range []int{0, http.StatusGatewayTimeout} {
		name := fmt.Sprintf("dropped-%d", status)
		h := add(t, p, faultproxy.Rule{Verbs: []string{"create"}, Resource: "ciliumnodes", Name: name, Action: faultproxy.Drop, Status: status})
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err := c.Create(ctx, cn)
		if err == nil {
			t.Fatalf("status %d: the client got the answer of a dropped create (rule matched %d, fired %d)", status, h.Matched(), h.Fired())
		}
		if status != 0 && !apierrors.IsTimeout(err) {
			t.Errorf("status %d: client error %v, want a Timeout", status, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cn) })
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cn), &ciliumv2.CiliumNode{}); err != nil {
			t.Errorf("status %d: the dropped create was not applied: %v", status, err)
		}
		h.Remove()
	}
	if s := p.Stats(); s.Dropped != 2 {
		t.Errorf("stats %+v, want 2 dropped", s)
	}
}

// TestWatchEventsStreamThrough: a watch through the proxy gets each event
// as it happens, not when the stream ends.
func TestWatchEventsStreamThrough(t *testing.T) {
	_, c := start(t)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace("default"), client.MatchingFields{"metadata.name": "streamed"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm := configMap("streamed")
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("event %s, want ADDED", ev.Type)
		}
	case <-ctx.Done():
		t.Fatal("no event came through the proxy")
	}
}

// TestCutBreaksWatchesAndRefusesUntilItEnds: a cut ends the watch under
// way and fails every request until it is over; then requests pass again.
func TestCutBreaksWatchesAndRefusesUntilItEnds(t *testing.T) {
	p, c := start(t)
	ctx := ctxFor(t, 30*time.Second)
	w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace("default"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p.Cut(time.Hour)
	if !p.CutOff() {
		t.Fatal("not cut off")
	}
	for ended := false; !ended; {
		select {
		case _, ok := <-w.ResultChan():
			ended = !ok
		case <-ctx.Done():
			t.Fatal("the watch survived the cut")
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err == nil {
		t.Fatal("a request passed while cut off")
	}
	p.Restore()
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err != nil {
		t.Fatalf("after the cut: %v", err)
	}
	if s := p.Stats(); s.Cuts != 1 {
		t.Errorf("stats %+v, want 1 cut", s)
	}
}

// TestStatusPatchCarryingReleasedStartsACut: a rule on the body cuts the
// client off at the status patch that records released IPs — the moment
// right after an Unassign — and that patch never reaches the apiserver.
func TestStatusPatchCarryingReleasedStartsACut(t *testing.T) {
	p, c := start(t)
	ctx := ctxFor(t, 30*time.Second)
	cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "cut-on-released"}}
	if err := env.Client.Create(ctx, cn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cn) })
	h := add(t, p, faultproxy.Rule{Verbs: []string{"patch"}, Resource: "ciliumnodes", Subresource: "status", BodyContains: `"released"`, Action: faultproxy.Cut, Duration: time.Hour})

	orig := cn.DeepCopy()
	cn.Status.IPAM.ReleaseIPs = map[string]ipamtypes.IPReleaseStatus{"10.0.0.7": "marked-for-release"}
	if err := c.Status().Patch(ctx, cn, client.MergeFrom(orig)); err != nil {
		t.Fatalf("a status patch without released: %v", err)
	}
	orig = cn.DeepCopy()
	cn.Status.IPAM.ReleaseIPs["10.0.0.7"] = "released"
	if err := c.Status().Patch(ctx, cn, client.MergeFrom(orig)); err == nil {
		t.Fatal("the status patch carrying released passed")
	}
	if !p.CutOff() || h.Fired() != 1 {
		t.Fatalf("cut off %v, rule fired %d times; want a cut by one firing", p.CutOff(), h.Fired())
	}
	got := &ciliumv2.CiliumNode{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cn), got); err != nil {
		t.Fatal(err)
	}
	if s := got.Status.IPAM.ReleaseIPs["10.0.0.7"]; s != "marked-for-release" {
		t.Errorf("apiserver holds %q, want the patch not applied", s)
	}
}

// TestLeaderLosesLeaseWhileCutOff: a client-go leader cut off from the
// apiserver for longer than its renew deadline stops leading, as the
// operator must when the apiserver is gone and EC2 is not.
func TestLeaderLosesLeaseWhileCutOff(t *testing.T) {
	p, _ := start(t)
	ctx := ctxFor(t, time.Minute)
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: "faultproxy-leader"},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "leader-1"},
	}
	started, stopped := make(chan struct{}), make(chan struct{})
	var leading atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { leading.Store(true); close(started) },
			OnStoppedLeading: func() {
				if leading.Load() {
					close(stopped)
				}
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go le.Run(ctx)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("never led")
	}
	p.Cut(10 * time.Second)
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("still leading after being cut off for longer than the renew deadline")
	}
	if err := env.Client.Delete(context.Background(), lockObject()); err != nil && !apierrors.IsNotFound(err) {
		t.Log(err)
	}
}

func lockObject() client.Object {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "faultproxy-leader"},
	}
}

// TestKubeConfigReachesTheAPIServer: the kubeconfig handed to processes
// (the operator binary) reaches the apiserver through the proxy.
func TestKubeConfigReachesTheAPIServer(t *testing.T) {
	p, _ := start(t)
	data, err := p.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	before := p.Stats().Forwarded
	if err := c.Get(ctxFor(t, 30*time.Second), client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err != nil {
		t.Fatal(err)
	}
	if p.Stats().Forwarded == before {
		t.Error("the request did not go through the proxy")
	}
}

// TestRulesAreValidated: rules that cannot act as meant are refused.
func TestRulesAreValidated(t *testing.T) {
	p, _ := start(t)
	for _, r := range []faultproxy.Rule{
		{Action: faultproxy.Cut},
		{Resource: "[", Action: faultproxy.Fail},
		{Rate: 2},
		{Status: 200},
		{After: -1},
	} {
		if _, err := p.Add(r); err == nil {
			t.Errorf("rule %+v accepted", r)
		}
	}
	if _, err := p.Add(faultproxy.Rule{Action: faultproxy.Drop}); err != nil {
		t.Error(errors.Unwrap(err))
	}
}
