package cluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/enipam/enipam/test/cluster"
)

var env *cluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, func(c *cluster.Cluster) { env = c }))
}

// TestCiliumNodeRoundTrip: the contract enipam lives on, against the real
// apiserver with Cilium's own CRD. A CiliumNode is created with Cilium's
// typed structs (pool in spec), the agent's side writes status.ipam.used
// through the status subresource, the pool is read back unchanged, and a
// watch sees the change to the pool.
func TestCiliumNodeRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := env.Client

	cn := &ciliumv2.CiliumNode{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-10.ec2.internal"},
		Spec: ciliumv2.NodeSpec{
			InstanceID: "i-0123456789abcdef0",
			IPAM: ipamtypes.IPAMSpec{
				Pool: ipamtypes.AllocationMap{
					"10.0.1.20": {Resource: "eni-0aaa"},
					"10.0.1.21": {Resource: "eni-0aaa"},
				},
				PreAllocate: 8,
			},
		},
	}
	if err := c.Create(ctx, cn); err != nil {
		t.Fatalf("creating CiliumNode: %v", err)
	}

	var list ciliumv2.CiliumNodeList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	watcher, err := c.Watch(ctx, &ciliumv2.CiliumNodeList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatalf("watching CiliumNodes: %v", err)
	}
	defer watcher.Stop()

	// The agent's side: status.ipam.used, through the status subresource.
	cn.Status.IPAM.Used = ipamtypes.AllocationMap{"10.0.1.20": {Owner: "default/web-0", Resource: "eni-0aaa"}}
	if err := c.Status().Update(ctx, cn); err != nil {
		t.Fatalf("writing status.ipam.used: %v", err)
	}
	// A status write must not touch spec, and a spec write must not touch status.
	cn.Spec.IPAM.Pool["10.0.1.22"] = ipamtypes.AllocationIP{Resource: "eni-0aaa"}
	cn.Status.IPAM.Used = nil
	if err := c.Update(ctx, cn); err != nil {
		t.Fatalf("growing spec.ipam.pool: %v", err)
	}

	var got ciliumv2.CiliumNode
	if err := c.Get(ctx, client.ObjectKeyFromObject(cn), &got); err != nil {
		t.Fatal(err)
	}
	if n := len(got.Spec.IPAM.Pool); n != 3 {
		t.Errorf("pool has %d IPs, want 3: %v", n, got.Spec.IPAM.Pool)
	}
	if got.Spec.IPAM.Pool["10.0.1.21"].Resource != "eni-0aaa" {
		t.Errorf("pool entry lost its resource: %+v", got.Spec.IPAM.Pool["10.0.1.21"])
	}
	if u := got.Status.IPAM.Used["10.0.1.20"]; u.Owner != "default/web-0" {
		t.Errorf("status.ipam.used = %v, want 10.0.1.20 owned by default/web-0", got.Status.IPAM.Used)
	}
	if got.Spec.IPAM.PreAllocate != 8 || got.Spec.InstanceID != "i-0123456789abcdef0" {
		t.Errorf("spec fields lost: pre-allocate %d, instance %q", got.Spec.IPAM.PreAllocate, got.Spec.InstanceID)
	}

	// The watch delivers the status write, then the pool growth.
	var sawUsed, sawPool bool
	for !sawPool {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("watch closed early")
			}
			if ev.Type != watch.Modified {
				continue
			}
			n := ev.Object.(*ciliumv2.CiliumNode)
			if len(n.Status.IPAM.Used) == 1 {
				sawUsed = true
			}
			if len(n.Spec.IPAM.Pool) == 3 {
				sawPool = true
			}
		case <-ctx.Done():
			t.Fatalf("watch saw used=%v pool=%v before timeout", sawUsed, sawPool)
		}
	}
	if !sawUsed {
		t.Error("watch never showed status.ipam.used")
	}
}
