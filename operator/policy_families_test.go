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

// TestIPFamiliesValidatedAndIPv6UnavailableWithoutIPv6Subnet: the
// apiserver refuses an ENIPolicy whose ipFamilies names an unknown family
// or one family twice, with the field named in the error. A dual-stack
// policy (IPv4, IPv6; pre-allocate 3) is accepted and governs a node
// whose subnet has no IPv6 CIDR (t3.medium in an IPv4-only VPC): its pool
// fills with IPv4 addresses alone (3 + the agent's 2), no IPv6 is asked
// of EC2, the node gets an IPv6Unavailable event and the policy's
// IPFamilies condition says IPv6Unavailable, naming the node and why.
func TestIPFamiliesValidatedAndIPv6UnavailableWithoutIPv6Subnet(t *testing.T) {
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
	err = wait.PollUntilContextTimeout(r.ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKey{Name: "dual"}, &got); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, enipamv1alpha1.ConditionIPFamilies)
		return c.Status == metav1.ConditionFalse && c.Reason == enipamv1alpha1.ReasonIPv6Unavailable, nil
	})
	c := apimeta.FindStatusCondition(got.Status.Conditions, enipamv1alpha1.ConditionIPFamilies)
	if err != nil || !strings.Contains(c.Message, "node-d") || !strings.Contains(c.Message, "no IPv6 CIDR") {
		t.Errorf("IPFamilies condition %+v, want False/IPv6Unavailable naming node-d and its subnet", c)
	}
	if ev := r.waitEvent("node-d", "IPv6Unavailable"); !strings.Contains(ev.Note, "no IPv6 CIDR") {
		t.Errorf("IPv6Unavailable event %q does not say why", ev.Note)
	}
	if n := r.calls("AssignIpv6Addresses"); n != 0 {
		t.Errorf("%d AssignIpv6Addresses calls for a node whose subnet has no IPv6", n)
	}
}
