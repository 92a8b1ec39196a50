package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"sync"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// routingAgents play enipam-agent on every node of a test: every 100 ms
// they report on each NodeRouting what the real agent would have routed —
// per ENI of status.eni.enis at or above spec.firstInterfaceIndex, not
// excluded, and attached in ec2sim (a link exists only then): its
// addresses and prefixes and the pool IPs naming it, less those released.
// Nodes can be taken down (the agent stops reporting) and brought back.
type routingAgents struct {
	r    *rig
	mu   sync.Mutex
	down map[string]bool
}

func (r *rig) startRoutingAgents() *routingAgents {
	a := &routingAgents{r: r, down: map[string]bool{}}
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
				a.report(r.ctx)
			}
		}
	}()
	return a
}

// setDown stops (true) or restarts (false) the agent of a node.
func (a *routingAgents) setDown(node string, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down[node] = down
}

func (a *routingAgents) report(ctx context.Context) {
	var list enipamv1alpha1.NodeRoutingList
	if err := a.r.c.List(ctx, &list); err != nil || len(list.Items) == 0 {
		return
	}
	attached := map[string]bool{}
	for _, e := range a.r.dump().NetworkInterfaces {
		if e.Attachment != nil && e.Attachment.Status == "attached" {
			attached[e.NetworkInterfaceID] = true
		}
	}
	for i := range list.Items {
		nr := &list.Items[i]
		a.mu.Lock()
		down := a.down[nr.Name]
		a.mu.Unlock()
		if down {
			continue
		}
		cn := &ciliumv2.CiliumNode{}
		if err := a.r.c.Get(ctx, client.ObjectKey{Name: nr.Name}, cn); err != nil {
			continue
		}
		want := nr.DeepCopy()
		want.Status.ENIs = routedENIs(cn, &nr.Spec, attached)
		want.Status.RoutedENIs, want.Status.RoutedIPs = int32(len(want.Status.ENIs)), 0
		for _, e := range want.Status.ENIs {
			want.Status.RoutedIPs += int32(len(e.IPs))
		}
		want.Status.ObservedGeneration = nr.Generation
		meta.SetStatusCondition(&want.Status.Conditions, metav1.Condition{
			Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: enipamv1alpha1.ReasonRouted,
			ObservedGeneration: nr.Generation,
		})
		if equalJSON(nr.Status, want.Status) {
			continue
		}
		_ = a.r.c.Status().Patch(ctx, want, client.MergeFrom(nr))
	}
}

func routedENIs(cn *ciliumv2.CiliumNode, spec *enipamv1alpha1.NodeRoutingSpec, attached map[string]bool) []enipamv1alpha1.RoutedENI {
	var out []enipamv1alpha1.RoutedENI
	for id, eni := range cn.Status.ENI.ENIs {
		if eni.Number < int(spec.FirstInterfaceIndex) || !attached[id] || excluded(eni.Tags, spec.ExcludeInterfaceTags) {
			continue
		}
		ips := map[string]bool{}
		for _, a := range eni.Addresses {
			ips[a.String()] = true
		}
		for ip, e := range cn.Spec.IPAM.Pool {
			if e.Resource == id {
				ips[ip] = true
			}
		}
		r := enipamv1alpha1.RoutedENI{ID: id, MAC: eni.MAC, Number: int32(eni.Number), Table: int32(10 + eni.Number)}
		for ip := range ips {
			if cn.Status.IPAM.ReleaseIPs[ip] == ipamoption.IPAMReleased {
				continue
			}
			if _, err := netip.ParseAddr(ip); err == nil {
				r.IPs = append(r.IPs, ip)
			}
		}
		for _, p := range eni.Prefixes {
			r.Prefixes = append(r.Prefixes, p.String())
		}
		slices.Sort(r.IPs)
		slices.Sort(r.Prefixes)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b enipamv1alpha1.RoutedENI) int { return int(a.Number - b.Number) })
	return out
}

func excluded(tags, exclude map[string]string) bool {
	if len(exclude) == 0 {
		return false
	}
	for k, v := range exclude {
		if tags[k] != v {
			return false
		}
	}
	return true
}

func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
