package agentsim

import (
	"reflect"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/ec2sim"
)

// TestCheckClaimsCountsEachBreach: db-0 (Bound on .10) is where it
// belongs: in node a's pool, on eni-a only, used by its pod. db-1's .11
// is in the pools of a and b and on eni-a and eni-b. db-2's .12 is on no
// ENI. db-3's .13 is used by web-9 on a, and pod web-8 has it too: before
// db-3's pod held it, that is a first placement's collision, not counted
// until db-3's pod was seen with it; on the second look (db-3's pod has
// been seen holding it) and at rest it counts. db-4's .14 is used on a
// and on b (two pods). db-5, being deleted, is not held to anything. At
// rest, db-1 (Placing) counts as not Bound and pod db-0 running with .99
// as a wrong address.
func TestCheckClaimsCountsEachBreach(t *testing.T) {
	eni := func(id string, ips ...string) ec2sim.NetworkInterface {
		e := ec2sim.NetworkInterface{NetworkInterfaceID: id, Attachment: &ec2sim.Attachment{InstanceID: "i-" + id}}
		for _, ip := range ips {
			e.PrivateIPAddresses = append(e.PrivateIPAddresses, ec2sim.PrivateIPAddress{PrivateIPAddress: ip})
		}
		return e
	}
	dump := ec2sim.Dump{NetworkInterfaces: []ec2sim.NetworkInterface{
		eni("eni-a", "10.0.0.10", "10.0.0.11", "10.0.0.13", "10.0.0.14"), eni("eni-b", "10.0.0.11", "10.0.0.14"),
	}}
	a := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	a.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.0.10": {Owner: "db/db-0"}, "10.0.0.11": {}, "10.0.0.13": {Owner: "db/db-3"}, "10.0.0.14": {Owner: "db/db-4"}}
	a.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.0.10": {Owner: "db/db-0"}, "10.0.0.13": {Owner: "db/web-9"}, "10.0.0.14": {Owner: "db/db-4"}}
	b := ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	b.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.0.11": {Owner: "db/db-1"}, "10.0.0.14": {}}
	b.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.0.14": {Owner: "db/web-7"}}
	nodes := []ciliumv2.CiliumNode{a, b}
	claim := func(name, ip string, phase enipamv1alpha1.ClaimPhase) enipamv1alpha1.StaticIPClaim {
		c := enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: types.UID("uid-" + name)},
			Status: enipamv1alpha1.StaticIPClaimStatus{Phase: phase, Address: ip}}
		reason := enipamv1alpha1.ReasonBound
		if phase != enipamv1alpha1.ClaimBound {
			reason = enipamv1alpha1.ReasonPlacing
		}
		c.Status.Conditions = []metav1.Condition{{Type: enipamv1alpha1.ClaimReady, Reason: reason}}
		return c
	}
	deleting := claim("db-5", "10.0.0.15", enipamv1alpha1.ClaimReleasing)
	deleting.DeletionTimestamp = &metav1.Time{}
	claims := []enipamv1alpha1.StaticIPClaim{
		claim("db-0", "10.0.0.10", enipamv1alpha1.ClaimBound), claim("db-1", "10.0.0.11", enipamv1alpha1.ClaimPlacing),
		claim("db-2", "10.0.0.12", enipamv1alpha1.ClaimBound), claim("db-3", "10.0.0.13", enipamv1alpha1.ClaimBound),
		claim("db-4", "10.0.0.14", enipamv1alpha1.ClaimBound), deleting,
	}
	pod := func(name, ip string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name}, Status: corev1.PodStatus{PodIP: ip}}
	}
	pods := []corev1.Pod{pod("db-0", "10.0.0.10"), pod("db-1", ""), pod("web-8", "10.0.0.13")}

	held := map[types.UID]string{}
	f := CheckClaims(claims, nodes, pods, dump, held, false)
	want := ClaimFindings{InTwoPools: 2, OnTwoENIs: 2, TwoPods: 1, OtherPod: 1, Unassigned: 1, Claims: 6, Bound: 4}
	if f.Details = nil; !reflect.DeepEqual(f, want) {
		t.Errorf("first look: got %+v, want %+v", f, want)
	}
	if held["uid-db-3"] != "" || held["uid-db-0"] != "10.0.0.10" {
		t.Errorf("held after the first look: %v", held)
	}

	held["uid-db-3"] = "10.0.0.13" // db-3's pod was seen with it since
	f = CheckClaims(claims, nodes, pods, dump, held, false)
	want.OtherPod = 3
	if f.Details = nil; !reflect.DeepEqual(f, want) {
		t.Errorf("second look: got %+v, want %+v", f, want)
	}

	pods[0].Status.PodIP = "10.0.0.99"
	f = CheckClaims(claims, nodes, pods, dump, map[types.UID]string{}, true)
	want.NotBound, want.WrongAddress = 1, 1
	if len(f.Details) != f.Total() {
		t.Errorf("%d details for %d breaches: %v", len(f.Details), f.Total(), f.Details)
	}
	if f.Details = nil; !reflect.DeepEqual(f, want) {
		t.Errorf("at rest: got %+v, want %+v", f, want)
	}
}

// TestStableClaimsKeepsThoseThatLastedTheLook: of the claims seen before
// a look, those gone, recreated (another UID), moved to another address
// or deleted since are dropped.
func TestStableClaimsKeepsThoseThatLastedTheLook(t *testing.T) {
	claim := func(name, uid, ip string) enipamv1alpha1.StaticIPClaim {
		return enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: types.UID(uid)},
			Status: enipamv1alpha1.StaticIPClaimStatus{Address: ip}}
	}
	deleted := claim("db-4", "u4", "10.0.0.4")
	deleted.DeletionTimestamp = &metav1.Time{}
	before := []enipamv1alpha1.StaticIPClaim{claim("db-0", "u0", "10.0.0.0"), claim("db-1", "u1", "10.0.0.1"),
		claim("db-2", "u2", "10.0.0.2"), claim("db-3", "u3", "10.0.0.3"), claim("db-4", "u4", "10.0.0.4")}
	after := []enipamv1alpha1.StaticIPClaim{claim("db-0", "u0", "10.0.0.0"), claim("db-2", "u2b", "10.0.0.2"),
		claim("db-3", "u3", "10.0.0.33"), deleted}
	got := StableClaims(before, after)
	if len(got) != 1 || got[0].Name != "db-0" {
		t.Errorf("stable: %v", got)
	}
}
