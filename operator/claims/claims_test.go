package claims

import (
	"context"
	"slices"
	"testing"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

func TestPoolBlock(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.1.7":        "10.0.1.0/24",
		"10.0.1.255":      "10.0.1.0/24",
		"10.0.2.0":        "10.0.2.0/24",
		"2600:1f14::1:7":  "2600:1f14::1:0/120",
		"2600:1f14::1:ff": "2600:1f14::1:0/120",
		"not-an-address":  "not-an-address",
	} {
		if got := PoolBlock(in); got != want {
			t.Errorf("PoolBlock(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPoolNodes: a lookup returns exactly the nodes whose pool lists the
// address, not the others sharing its block, and follows pool changes.
func TestPoolNodes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := ciliumv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	node := func(name string, ips ...string) *ciliumv2.CiliumNode {
		cn := &ciliumv2.CiliumNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		cn.Spec.IPAM.Pool = ipamtypes.AllocationMap{}
		for _, ip := range ips {
			cn.Spec.IPAM.Pool[ip] = ipamtypes.AllocationIP{Resource: "eni-" + name}
		}
		return cn
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, idx := range Indexes() {
		if idx.Field == IndexPoolBlock {
			b = b.WithIndex(idx.Object, idx.Field, idx.Extract)
		}
	}
	c := b.WithObjects(node("a", "10.0.1.5", "10.0.1.6", "10.0.2.9"), node("b", "10.0.1.7"), node("c", "10.0.1.5")).Build()
	ctx := context.Background()
	names := func(ip string) []string {
		nodes, err := PoolNodes(ctx, c, ip)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cn := range nodes {
			out = append(out, cn.Name)
		}
		slices.Sort(out)
		return out
	}
	for ip, want := range map[string][]string{
		"10.0.1.5": {"a", "c"}, "10.0.1.6": {"a"}, "10.0.1.7": {"b"}, "10.0.2.9": {"a"}, "10.0.1.8": nil, "10.0.3.1": nil,
	} {
		if got := names(ip); !slices.Equal(got, want) {
			t.Errorf("PoolNodes(%s) = %v, want %v", ip, got, want)
		}
	}
	b2 := &ciliumv2.CiliumNode{}
	if err := c.Get(ctx, client.ObjectKey{Name: "b"}, b2); err != nil {
		t.Fatal(err)
	}
	b2.Spec.IPAM.Pool = ipamtypes.AllocationMap{"10.0.2.9": {}}
	if err := c.Update(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if got := names("10.0.1.7"); got != nil {
		t.Errorf("after b's pool changed, PoolNodes(10.0.1.7) = %v, want none", got)
	}
	if got := names("10.0.2.9"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after b's pool changed, PoolNodes(10.0.2.9) = %v, want [a b]", got)
	}
}

// TestCurrentNote: the pool controller's note is acted on only when it is
// about the claim as it is (the address it records, its generation) and
// was written in the reader's term; a note of an earlier term (a process
// since restarted) or about an earlier state of the claim is not.
func TestCurrentNote(t *testing.T) {
	claim := func(specAddr, statusAddr string, gen int64, n *enipamv1alpha1.PlacementNote) *enipamv1alpha1.StaticIPClaim {
		c := &enipamv1alpha1.StaticIPClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Generation: gen}}
		c.Spec.Address, c.Status.Address, c.Status.Placement = specAddr, statusAddr, n
		return c
	}
	note := func(addr string, gen int64, term string) *enipamv1alpha1.PlacementNote {
		return &enipamv1alpha1.PlacementNote{Address: addr, Node: "n1", ObservedGeneration: gen, Term: term,
			Reason: enipamv1alpha1.ReasonAddressTaken}
	}
	for _, tc := range []struct {
		name string
		c    *enipamv1alpha1.StaticIPClaim
		want bool
	}{
		{"about the picked address, this generation, this term", claim("", "10.0.1.5", 2, note("10.0.1.5", 2, "t2")), true},
		{"about the asked address", claim("10.0.1.5", "", 2, note("10.0.1.5", 2, "t2")), true},
		{"about a first placement", claim("", "", 2, note("", 2, "t2")), true},
		{"no note", claim("", "10.0.1.5", 2, nil), false},
		{"written by an earlier term", claim("", "10.0.1.5", 2, note("10.0.1.5", 2, "t1")), false},
		{"about an earlier generation", claim("", "10.0.1.5", 2, note("10.0.1.5", 1, "t2")), false},
		{"about another address", claim("", "10.0.1.6", 2, note("10.0.1.5", 2, "t2")), false},
		{"about a first placement, the address since chosen", claim("", "10.0.1.6", 2, note("", 2, "t2")), true},
		{"about a first placement, left before a restart", claim("", "10.0.1.6", 2, note("", 2, "t1")), false},
		{"about an address, none recorded any more", claim("", "", 2, note("10.0.1.5", 2, "t2")), false},
	} {
		got := CurrentNote(tc.c, "t2")
		if (got != nil) != tc.want {
			t.Errorf("%s: CurrentNote = %+v, want a note: %v", tc.name, got, tc.want)
		}
		if got != nil && got != tc.c.Status.Placement {
			t.Errorf("%s: CurrentNote = %+v, not the claim's note", tc.name, got)
		}
	}
}
