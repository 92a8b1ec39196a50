package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/test/agentsim"
)

// routingAgents play enipam-agent on every node of a test: every 100 ms
// they report on each NodeRouting what the real agent would have routed
// (agentsim.Routed: the ENIs of spec.enis and of status.eni.enis), counting
// an ENI only once ec2sim shows it attached (a link exists only then), and
// say routesSpecENIs as the real agent does.
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
		want.Status.ENIs = agentsim.Routed(cn, &nr.Spec, func(id string) bool { return attached[id] })
		want.Status.RoutedENIs, want.Status.RoutedIPs = int32(len(want.Status.ENIs)), 0
		for _, e := range want.Status.ENIs {
			want.Status.RoutedIPs += int32(len(e.IPs))
		}
		want.Status.ObservedGeneration = nr.Generation
		want.Status.RoutesSpecENIs = true
		meta.SetStatusCondition(&want.Status.Conditions, metav1.Condition{
			Type: enipamv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: enipamv1alpha1.ReasonRouted,
			ObservedGeneration: nr.Generation,
		})
		if equalJSON(nr.Status, want.Status) {
			continue
		}
		_ = agentsim.ApplyStatus(ctx, a.r.c, want)
	}
}

func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
