package agentsim_test

import (
	"context"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/agentsim"
)

// TestKubeletStartsAndEndsRealPods: pods bound to a simulated node get
// their CNI ADD after the delay, with the owner Cilium's CNI passes, so an
// owner-stamped entry goes to its pod; their status then carries the
// address. A pod deleted with a grace period is removed once its CNI DEL
// freed the address, as a kubelet confirms a deletion.
func TestKubeletStartsAndEndsRealPods(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, agentsim.Options{})
	name := nodeName(t, "n1")
	addrs := ips("10.9.1.", 4)
	p := pool(addrs...)
	p[addrs[3]] = ipamtypes.AllocationIP{Resource: "eni-0test", Owner: "default/kubelet-web-1"}
	createNode(t, name, ipamtypes.IPAMSpec{PreAllocate: 2}, p)
	a := sim.AddAgent(name)
	waitReady(t, a)
	k := agentsim.NewKubelet(sim, agentsim.KubeletOptions{CNIDelay: 50 * time.Millisecond})
	kctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	if err := k.Start(kctx); err != nil {
		t.Fatal(err)
	}

	pod := func(n string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: n},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
		return p
	}
	started := func(p *corev1.Pod) string {
		t.Helper()
		eventually(t, p.Name+" running with an address", func() bool {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)
			return err == nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning
		})
		return p.Status.PodIP
	}
	web0, web1 := pod("kubelet-web-0"), pod("kubelet-web-1")
	ip0, ip1 := started(web0), started(web1)
	if held, ok := a.IP("default/kubelet-web-0"); !ok || held.String() != ip0 {
		t.Errorf("web-0's status says %s, the agent holds %v for it", ip0, held)
	}
	if ip1 != addrs[3] {
		t.Errorf("web-1 got %s, want its owner-stamped %s", ip1, addrs[3])
	}
	if ip0 == addrs[3] {
		t.Errorf("web-0 got web-1's stamped address %s", ip0)
	}

	if err := env.Client.Delete(ctx, web0); err != nil { // the default grace period
		t.Fatal(err)
	}
	eventually(t, "web-0 removed and its address free", func() bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(web0), &corev1.Pod{})
		_, held := a.IP("default/kubelet-web-0")
		return apierrors.IsNotFound(err) && !held
	})
	if got := len(k.BindToIP()); got != 2 {
		t.Errorf("%d pods started, want 2", got)
	}
	noViolations(t, sim)
}
