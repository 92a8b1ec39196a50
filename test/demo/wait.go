package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	awstypes "github.com/cilium/cilium/pkg/aws/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/nodeagent/ciliumnode"
)

// pollEvery is how often the demo looks at the CiliumNodes while waiting.
const pollEvery = 200 * time.Millisecond

// poolState is one node's pool as its CiliumNode shows it, and its ENIs
// as its agent is told of them (enis: the NodeRouting's spec.enis, and
// those only a copy in status.eni.enis lists, as the agent reads them).
type poolState struct {
	node node
	cn   *ciliumv2.CiliumNode
	enis map[string]awstypes.ENI
	// pool: IPv4 addresses in spec.ipam.pool; used: in status.ipam.used;
	// releasing: free ones in the release handshake; free: the rest.
	pool, used, releasing, free int
	// pool6, used6 and free6 count the IPv6 addresses the same way.
	pool6, used6, free6 int
}

// pools reads the demo nodes' CiliumNodes; a node without one yet has a
// nil cn.
func (d *world) pools(ctx context.Context) ([]poolState, error) {
	var list ciliumv2.CiliumNodeList
	if err := d.cluster.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing CiliumNodes, %w", err)
	}
	var routings enipamv1alpha1.NodeRoutingList
	if err := d.cluster.Client.List(ctx, &routings); err != nil {
		return nil, fmt.Errorf("listing NodeRoutings, %w", err)
	}
	byName := map[string]*ciliumv2.CiliumNode{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	specs := map[string]*enipamv1alpha1.NodeRoutingSpec{}
	for i := range routings.Items {
		specs[routings.Items[i].Name] = &routings.Items[i].Spec
	}
	states := make([]poolState, 0, len(d.nodes))
	for _, n := range d.nodes {
		s := poolState{node: n, cn: byName[n.name]}
		if s.cn != nil {
			spec := specs[n.name]
			if spec == nil {
				spec = &enipamv1alpha1.NodeRoutingSpec{}
			}
			s.enis, _ = ciliumnode.ENIs(s.cn, spec)
			for ip := range s.cn.Status.IPAM.Used {
				if isIPv6(ip) {
					s.used6++
				} else {
					s.used++
				}
			}
			for ip := range s.cn.Spec.IPAM.Pool {
				_, used := s.cn.Status.IPAM.Used[ip]
				_, leaving := s.cn.Status.IPAM.ReleaseIPs[ip]
				if isIPv6(ip) {
					s.pool6++
					if !used && !leaving {
						s.free6++
					}
					continue
				}
				s.pool++
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
// reports no error; on the dual-stack node, for each family.
func (s *poolState) unfilled() string {
	want, want6 := len(s.node.pods)+2, 0
	if s.node.dualStack() {
		want6 = want
	}
	switch {
	case s.cn == nil:
		return "no CiliumNode yet"
	case s.cn.Status.IPAM.OperatorStatus.Error != "":
		return "the operator says: " + s.cn.Status.IPAM.OperatorStatus.Error
	case s.used != want:
		return fmt.Sprintf("status.ipam.used lists %d IPs, want %d (its pods, router and health)", s.used, want)
	case s.free < preAllocate:
		return fmt.Sprintf("%d IPs free in a pool of %d, want %d", s.free, s.pool, preAllocate)
	case s.used6 != want6:
		return fmt.Sprintf("status.ipam.used lists %d IPv6 addresses, want %d", s.used6, want6)
	case want6 > 0 && s.free6 < preAllocate:
		return fmt.Sprintf("%d IPv6 addresses free in a pool of %d, want %d", s.free6, s.pool6, preAllocate)
	}
	for _, entry := range s.cn.Spec.IPAM.Pool {
		if _, listed := s.enis[entry.Resource]; entry.Resource != "" && !listed {
			return fmt.Sprintf("the NodeRouting's spec.enis does not list ENI %s of the pool yet", entry.Resource)
		}
	}
	return ""
}

// policyUnready says why the demo's ENIPolicy name does not yet show
// itself Accepted for its nodes (matching nodes of them), or "".
func (d *world) policyUnready(ctx context.Context, name string, nodes int) string {
	var p enipamv1alpha1.ENIPolicy
	if err := d.cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
		return err.Error()
	}
	c := apimeta.FindStatusCondition(p.Status.Conditions, enipamv1alpha1.ConditionAccepted)
	switch {
	case p.Status.ObservedGeneration != p.Generation || c == nil:
		return "not yet observed by the operator"
	case c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Accepted is %s: %s", c.Status, c.Message)
	case int(p.Status.MatchedNodes) != nodes:
		return fmt.Sprintf("matches %d nodes, want %d", p.Status.MatchedNodes, nodes)
	}
	return ""
}

// waitFilled waits until every pool is filled and each policy shows it
// governs its nodes, within o.wait.
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
		dual := 0
		for _, n := range d.nodes {
			if n.dualStack() {
				dual++
			}
		}
		for _, p := range []struct {
			name  string
			nodes int
		}{{policyName, len(d.nodes) - dual}, {dualStackPolicyName, dual}} {
			if why := d.policyUnready(ctx, p.name, p.nodes); why != "" {
				missing = append(missing, "ENIPolicy "+p.name+": "+why)
			}
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
