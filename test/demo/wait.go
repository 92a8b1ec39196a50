package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// pollEvery is how often the demo looks at the CiliumNodes while waiting.
const pollEvery = 200 * time.Millisecond

// poolState is one node's pool as its CiliumNode shows it.
type poolState struct {
	node node
	cn   *ciliumv2.CiliumNode
	// pool: IPs in spec.ipam.pool; used: in status.ipam.used; releasing:
	// free IPs in the release handshake; free: the rest.
	pool, used, releasing, free int
}

// pools reads the demo nodes' CiliumNodes; a node without one yet has a
// nil cn.
func (d *world) pools(ctx context.Context) ([]poolState, error) {
	var list ciliumv2.CiliumNodeList
	if err := d.cluster.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing CiliumNodes, %w", err)
	}
	byName := map[string]*ciliumv2.CiliumNode{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	states := make([]poolState, 0, len(d.nodes))
	for _, n := range d.nodes {
		s := poolState{node: n, cn: byName[n.name]}
		if s.cn != nil {
			s.pool, s.used = len(s.cn.Spec.IPAM.Pool), len(s.cn.Status.IPAM.Used)
			for ip := range s.cn.Spec.IPAM.Pool {
				_, used := s.cn.Status.IPAM.Used[ip]
				_, leaving := s.cn.Status.IPAM.ReleaseIPs[ip]
				switch {
				case used:
				case leaving:
					s.releasing++
				default:
					s.free++
				}
			}
		}
		states = append(states, s)
	}
	return states, nil
}

// unfilled says what keeps the pool from being filled, or "" if it is:
// the agent has reported all its pods (and its router and health IPs) in
// status.ipam.used, preAllocate IPs are free beside them, and the operator
// reports no error.
func (s *poolState) unfilled() string {
	switch want := len(s.node.pods) + 2; {
	case s.cn == nil:
		return "no CiliumNode yet"
	case s.cn.Status.IPAM.OperatorStatus.Error != "":
		return "the operator says: " + s.cn.Status.IPAM.OperatorStatus.Error
	case s.used != want:
		return fmt.Sprintf("status.ipam.used lists %d IPs, want %d (its pods, router and health)", s.used, want)
	case s.free < preAllocate:
		return fmt.Sprintf("%d IPs free in a pool of %d, want %d", s.free, s.pool, preAllocate)
	}
	return ""
}

// policyUnready says why the demo's ENIPolicy does not yet show itself
// Accepted for every node, or "".
func (d *world) policyUnready(ctx context.Context) string {
	var p enipamv1alpha1.ENIPolicy
	if err := d.cluster.Client.Get(ctx, client.ObjectKey{Name: policyName}, &p); err != nil {
		return err.Error()
	}
	c := apimeta.FindStatusCondition(p.Status.Conditions, enipamv1alpha1.ConditionAccepted)
	switch {
	case p.Status.ObservedGeneration != p.Generation || c == nil:
		return "not yet observed by the operator"
	case c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Accepted is %s: %s", c.Status, c.Message)
	case int(p.Status.MatchedNodes) != len(d.nodes):
		return fmt.Sprintf("matches %d nodes, want %d", p.Status.MatchedNodes, len(d.nodes))
	}
	return ""
}

// waitFilled waits until every pool is filled and the policy shows it
// governs every node, within o.wait.
func (d *world) waitFilled(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Wait)
	defer cancel()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		var missing []string
		states, err := d.pools(ctx)
		if err != nil {
			missing = append(missing, err.Error())
		}
		for _, s := range states {
			if why := s.unfilled(); why != "" {
				missing = append(missing, s.node.name+": "+why)
			}
		}
		if why := d.policyUnready(ctx); why != "" {
			missing = append(missing, "ENIPolicy "+policyName+": "+why)
		}
		if len(missing) == 0 {
			return nil
		}
		if err := d.checkProcesses(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pools were not filled within %s:\n    %s", d.o.Wait, strings.Join(missing, "\n    "))
		case <-t.C:
		}
	}
}
