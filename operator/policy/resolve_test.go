package policy

import (
	"testing"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/pool"
)

func i32(v int32) *int32 { return &v }
func iptr(v int) *int    { return &v }

var defaults = Defaults{Knobs: pool.Knobs{PreAllocate: 8}, ReleaseExcessIPs: true, ReleaseDelay: 3 * time.Minute}

func policyNamed(name string, prio int32, sel map[string]string, spec func(*enipamv1alpha1.ENIPolicySpec)) enipamv1alpha1.ENIPolicy {
	p := enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Priority = prio
	if sel != nil {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	if spec != nil {
		spec(&p.Spec)
	}
	return p
}

// TestResolvePrecedence: node value beats policy beats default, knob by
// knob.
func TestResolvePrecedence(t *testing.T) {
	p := policyNamed("pods", 0, nil, func(s *enipamv1alpha1.ENIPolicySpec) {
		s.PreAllocate, s.MaxAboveWatermark, s.FirstInterfaceIndex = i32(16), i32(4), i32(1)
		s.SubnetTags = map[string]string{"tier": "pods"}
	})
	cn := &ciliumv2.CiliumNode{}
	cn.Spec.IPAM.PreAllocate = 2
	cn.Spec.ENI.SubnetIDs = []string{"subnet-1"}

	c := Resolve(cn, &p, defaults)
	if c.PreAllocate != 2 {
		t.Errorf("pre-allocate = %d, want the node's 2", c.PreAllocate)
	}
	if c.MaxAboveWatermark != 4 || c.FirstInterfaceIndex != 1 {
		t.Errorf("watermark %d, first index %d: want the policy's 4 and 1", c.MaxAboveWatermark, c.FirstInterfaceIndex)
	}
	if len(c.SubnetIDs) != 1 || c.SubnetTags["tier"] != "pods" {
		t.Errorf("subnets %v %v: want the node's IDs and the policy's tags", c.SubnetIDs, c.SubnetTags)
	}
	if c.Policy != "pods" || !c.ReleaseExcessIPs || c.ReleaseDelay != 3*time.Minute {
		t.Errorf("config %+v: want policy pods with the default release", c)
	}
	if c := Resolve(&ciliumv2.CiliumNode{}, nil, defaults); c.PreAllocate != 8 || c.Policy != "" {
		t.Errorf("without policy: %+v, want the defaults", c)
	}
}

// TestResolveUserIndexWins: a policy's first-interface-index applies
// until the user sets one on the CiliumNode; Cilium's agent rewriting the
// object's metadata changes nothing, since no operator state lives there.
func TestResolveUserIndexWins(t *testing.T) {
	cn := &ciliumv2.CiliumNode{}
	p := policyNamed("p", 0, nil, func(s *enipamv1alpha1.ENIPolicySpec) { s.FirstInterfaceIndex = i32(2) })
	if c := Resolve(cn, &p, defaults); c.FirstInterfaceIndex != 2 {
		t.Errorf("first index = %d, want the policy's 2", c.FirstInterfaceIndex)
	}
	cn.Annotations = map[string]string{"anything": "rewritten"}
	cn.Labels = nil
	if c := Resolve(cn, &p, defaults); c.FirstInterfaceIndex != 2 {
		t.Errorf("first index = %d after a metadata rewrite, want the policy's 2", c.FirstInterfaceIndex)
	}
	cn.Spec.ENI.FirstInterfaceIndex = iptr(3)
	if c := Resolve(cn, &p, defaults); c.FirstInterfaceIndex != 3 {
		t.Errorf("first index = %d, want the user's 3", c.FirstInterfaceIndex)
	}
}

// TestSelectDeterministic: of two matching policies the lower priority
// wins, then the name; a non-matching selector never wins.
func TestSelectDeterministic(t *testing.T) {
	policies := []enipamv1alpha1.ENIPolicy{
		policyNamed("zeta", 5, nil, nil),
		policyNamed("alpha", 5, map[string]string{"pool": "gpu"}, nil),
		policyNamed("beta", 1, map[string]string{"pool": "cpu"}, nil),
	}
	win, others := Select(policies, map[string]string{"pool": "gpu"})
	if win == nil || win.Name != "alpha" || len(others) != 1 || others[0].Name != "zeta" {
		t.Fatalf("winner %v others %v, want alpha over zeta", win, others)
	}
	win, _ = Select(policies, map[string]string{"pool": "cpu"})
	if win.Name != "beta" {
		t.Fatalf("winner %s, want beta by priority", win.Name)
	}
}

// TestResolveHeadroom: the adaptive headroom is opt-in per policy; a
// policy's choice beats the operator's default either way.
func TestResolveHeadroom(t *testing.T) {
	adaptive, fixed := enipamv1alpha1.HeadroomAdaptive, enipamv1alpha1.HeadroomFixed
	cn := &ciliumv2.CiliumNode{}
	for _, tc := range []struct {
		name     string
		policy   *enipamv1alpha1.Headroom
		def      bool
		adaptive bool
	}{
		{"default fixed", nil, false, false},
		{"policy opts in", &adaptive, false, true},
		{"operator default adaptive", nil, true, true},
		{"policy keeps fixed against an adaptive default", &fixed, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policyNamed("p", 0, nil, func(s *enipamv1alpha1.ENIPolicySpec) { s.Headroom = tc.policy })
			d := defaults
			d.Adaptive = tc.def
			if got := Resolve(cn, &p, d).Adaptive; got != tc.adaptive {
				t.Errorf("adaptive = %v, want %v", got, tc.adaptive)
			}
		})
	}
}
