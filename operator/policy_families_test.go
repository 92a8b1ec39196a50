package operator_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// TestIPFamiliesValidatedAndIPv6NotYetPooled: the apiserver refuses an
// ENIPolicy whose ipFamilies names an unknown family or one family twice,
// with the field named in the error. A dual-stack policy (IPv4, IPv6;
// pre-allocate 3) is accepted and governs its node, whose pool fills with
// IPv4 addresses alone (3 + the agent's 2), and its IPFamilies condition
// says IPv6NotPooled: the operator ignores IPv6 without failing.
func TestIPFamiliesValidatedAndIPv6NotYetPooled(t *testing.T) {
	r := newRig(t, vpcScenario)
	for _, bad := range []struct {
		families []enipamv1alpha1.IPFamily
		want     string
	}{
		{[]enipamv1alpha1.IPFamily{"IPv5"}, `spec.ipFamilies[0]: Unsupported value: "IPv5"`},
		{[]enipamv1alpha1.IPFamily{"IPv4", "IPv4"}, `spec.ipFamilies[1]: Duplicate value: "IPv4"`},
	} {
		p := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: enipamv1alpha1.ENIPolicySpec{IPFamilies: bad.families}}
		err := r.c.Create(r.ctx, p)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("creating a policy with ipFamilies %v: %v, want an error containing %q", bad.families, err, bad.want)
		}
	}
	dual := &enipamv1alpha1.ENIPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dual"}, Spec: enipamv1alpha1.ENIPolicySpec{
		PreAllocate: i32(3), IPFamilies: []enipamv1alpha1.IPFamily{enipamv1alpha1.IPv4Family, enipamv1alpha1.IPv6Family}}}
	if err := r.c.Create(r.ctx, dual); err != nil {
		t.Fatal(err)
	}
	r.startOperator(r.options())
	r.addNode("node-d", "i-0a000000000000003", "us-east-1a", nil, ipamtypes.IPAMSpec{})
	cn := r.waitNode("node-d", 20*time.Second, "the dual-stack policy's pool", func(cn *ciliumv2.CiliumNode) bool { return len(cn.Spec.IPAM.Pool) == 5 })
	for ip := range cn.Spec.IPAM.Pool {
		if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
			t.Errorf("pool entry %q is not an IPv4 address", ip)
		}
	}
	var got enipamv1alpha1.ENIPolicy
	err := wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKey{Name: "dual"}, &got); err != nil {
			return false, err
		}
		return apimeta.FindStatusCondition(got.Status.Conditions, enipamv1alpha1.ConditionIPFamilies) != nil && got.Status.MatchedNodes == 1, nil
	})
	if err != nil {
		t.Fatalf("policy status never settled: %+v", got.Status)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, enipamv1alpha1.ConditionAccepted) {
		t.Errorf("dual-stack policy not accepted: %+v", got.Status.Conditions)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, enipamv1alpha1.ConditionIPFamilies); c.Status != metav1.ConditionFalse || c.Reason != enipamv1alpha1.ReasonIPv6NotPooled {
		t.Errorf("IPFamilies condition %+v, want False/IPv6NotPooled", c)
	}
}
