package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// pods is a namespace of pods bound by hand, as a scheduler binds them;
// nothing plays their kubelet, so they wait for their CNI call.
type pods struct {
	r  *rig
	ns string
}

func (r *rig) pods(ns string) *pods {
	r.t.Helper()
	if err := r.c.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = r.c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
		_ = r.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return &pods{r: r, ns: ns}
}

// bind creates n pods bound to node, changed by opts, named prefix-i.
func (p *pods) bind(node, prefix string, n int, opts ...func(*corev1.Pod)) []string {
	p.r.t.Helper()
	var owners []string
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		for _, o := range opts {
			o(pod)
		}
		if err := p.r.c.Create(p.r.ctx, pod); err != nil {
			p.r.t.Fatal(err)
		}
		owners = append(owners, pod.Namespace+"/"+pod.Name)
	}
	return owners
}

// useFor hands a free pool IP to each owner, as Cilium's agent lists them
// in status.ipam.used.
func (r *rig) useFor(name string, owners ...string) {
	r.t.Helper()
	r.agentUpdate(name, func(cn *ciliumv2.CiliumNode) {
		if cn.Status.IPAM.Used == nil {
			cn.Status.IPAM.Used = ipamtypes.AllocationMap{}
		}
		left := owners
		for ip, e := range cn.Spec.IPAM.Pool {
			if len(left) == 0 {
				break
			}
			if _, used := cn.Status.IPAM.Used[ip]; used {
				continue
			}
			cn.Status.IPAM.Used[ip] = ipamtypes.AllocationIP{Owner: left[0], Resource: e.Resource}
			left = left[1:]
		}
		if len(left) > 0 {
			r.t.Fatalf("%s: no free IP for %v", name, left)
		}
	})
}

// nodeIPs reads enipam_node_ips{node, state}.
func nodeIPs(t *testing.T, reg *prometheus.Registry, node, state string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "enipam_node_ips" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["node"] == node && labels["state"] == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestBoundPodsGrowThePoolBeforeTheirCNICall: m5.xlarge, pre-allocate 2
// (fixed). Five pods are bound to the node while Cilium's agent reports
// only its own two endpoints: the pool grows to cover them and the
// pre-allocation (2 used + 5 bound + 2 free) before any of them asks for
// an address. Once the agent lists them, they are counted once, and the
// pool stays as it is.
func TestBoundPodsGrowThePoolBeforeTheirCNICall(t *testing.T) {
	r := newRig(t, vpcScenario)
	opts := r.options()
	opts.Knobs.PreAllocate = 2
	_, reg, _ := r.startOperator(opts)
	const name = "node-demand"
	r.addNode(name, "i-0a000000000000002", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	r.waitNode(name, 30*time.Second, "the first pool", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 4 })
	r.useFor(name, "router", "health")

	p := r.pods("demand-bound")
	web := p.bind(name, "web", 5)
	cn := r.waitNode(name, 30*time.Second, "9 addresses for 2 used, 5 bound and 2 free", func(cn *ciliumv2.CiliumNode) bool {
		return len(cn.Spec.IPAM.Pool) >= 9
	})
	if len(cn.Status.IPAM.Used) != 2 {
		t.Fatalf("the agent lists %d used, want its 2 endpoints only", len(cn.Status.IPAM.Used))
	}
	if got := nodeIPs(t, reg, name, "waiting"); got != 5 {
		t.Errorf("enipam_node_ips{state=waiting} = %v, want 5", got)
	}
	assigns := r.calls("AssignPrivateIpAddresses")

	r.useFor(name, web...)
	r.waitNode(name, 10*time.Second, "the pods listed", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Status.IPAM.Used) == 7 })
	time.Sleep(time.Second) // a reconcile after the agent's report
	if cn := r.node(name); len(cn.Spec.IPAM.Pool) != 9 {
		t.Errorf("pool %d after the agent listed the pods, want 9: each pod counted once", len(cn.Spec.IPAM.Pool))
	}
	if got := r.calls("AssignPrivateIpAddresses"); got != assigns {
		t.Errorf("%d Assign calls after the pods were listed, want none", got-assigns)
	}
}

// TestAdaptiveHeadroomFollowsArrivalsOnly: two nodes under an ENIPolicy
// with the adaptive headroom (pre-allocate 8 as its cap). On quiet, only
// host-network and static-IP pods are bound (neither takes a dynamic pool
// address); on busy, three ordinary pods within a second. busy grows for
// its pods plus a headroom of its burst; quiet keeps its floor, the two
// addresses Cilium's agent takes for itself, and no headroom.
func TestAdaptiveHeadroomFollowsArrivalsOnly(t *testing.T) {
	r := newRig(t, vpcScenario)
	adaptive := enipamv1alpha1.HeadroomAdaptive
	policy := &enipamv1alpha1.ENIPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "adaptive"},
		Spec: enipamv1alpha1.ENIPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "adaptive"}},
			Headroom:     &adaptive, PreAllocate: i32(8),
		},
	}
	if err := r.c.Create(r.ctx, policy); err != nil {
		t.Fatal(err)
	}
	_, reg, _ := r.startOperator(r.options())
	labels := map[string]string{"pool": "adaptive"}
	r.addNode("quiet", "i-0a000000000000001", "us-east-1a", labels, ipamtypes.IPAMSpec{})
	r.addNode("busy", "i-0a000000000000002", "us-east-1a", labels, ipamtypes.IPAMSpec{})
	for _, n := range []string{"quiet", "busy"} {
		r.waitNode(n, 30*time.Second, "the agent's two addresses", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 2 })
		r.useFor(n, "router", "health")
	}

	p := r.pods("demand-adaptive")
	p.bind("quiet", "host", 4, func(pod *corev1.Pod) { pod.Spec.HostNetwork = true })
	p.bind("quiet", "db", 3, func(pod *corev1.Pod) {
		pod.Annotations = map[string]string{enipamv1alpha1.StaticIPAnnotation: "true"}
	})
	p.bind("busy", "web", 3)
	// 2 used + 3 bound + a burst of up to 3 within one lead time.
	r.waitNode("busy", 30*time.Second, "room for its pods and a headroom", func(cn *ciliumv2.CiliumNode) bool {
		return len(cn.Spec.IPAM.Pool) >= 2+3+1
	})
	time.Sleep(time.Second) // quiet's reconciles after its pods were bound
	if cn := r.node("quiet"); len(cn.Spec.IPAM.Pool) != 2 {
		t.Errorf("quiet holds %d addresses, want its floor of 2: host-network and static-IP pods take no dynamic headroom", len(cn.Spec.IPAM.Pool))
	}
	for state, want := range map[string]float64{"headroom": 0, "waiting": 0} {
		if got := nodeIPs(t, reg, "quiet", state); got != want {
			t.Errorf("quiet: enipam_node_ips{state=%s} = %v, want %v", state, got, want)
		}
	}
	if got := nodeIPs(t, reg, "busy", "headroom"); got < 1 || got > 3 {
		t.Errorf("busy: headroom %v, want its burst (1 to 3)", got)
	}
}
