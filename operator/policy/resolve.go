// Package policy decides which ENIPolicy governs a node and what each knob
// resolves to. Precedence, per knob, in one place:
//
//  1. a value set on the CiliumNode itself (spec.ipam.pre-allocate,
//     min-allocate, max-allocate, max-above-watermark when non-zero;
//     spec.eni.subnet-ids, subnet-tags, security-groups,
//     security-group-tags, first-interface-index, exclude-interface-tags,
//     disable-prefix-delegation when set);
//  2. the ENIPolicy that matches the node: among policies whose selector
//     matches the Node's labels, the lowest spec.priority, ties broken by
//     name (the others get a Conflict condition and an event);
//  3. the operator's defaults (its flags; pre-allocate 8 like Cilium).
//
// The operator never writes these knobs into the CiliumNode, so every value
// found there is the user's: the effective first-interface-index and
// exclude-interface-tags reach the node agent through the node's
// NodeRouting spec instead. (Cilium's agent rewrites a CiliumNode's labels
// and annotations on every start, so nothing kept there would last.)
package policy

import (
	"slices"
	"strings"
	"time"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/pool"
)

// Defaults are the operator-wide defaults, the last step of precedence.
type Defaults struct {
	pool.Knobs
	FirstInterfaceIndex int
	PrefixDelegation    bool
	ReleaseExcessIPs    bool
	ReleaseDelay        time.Duration
	Consolidation       Consolidation
	// Adaptive is the default headroom policy: adaptive if true, fixed
	// (pre-allocate) otherwise.
	Adaptive bool
}

// Consolidation is a node's resolved ENIPolicy consolidation.
type Consolidation struct {
	// Enabled: the least-used secondary ENI (or /28) drains first and an
	// ENI left without addresses is deleted.
	Enabled bool
	// Delay is how long a secondary ENI holds no address before it is
	// detached and deleted.
	Delay time.Duration
}

// Config is a node's resolved configuration.
type Config struct {
	pool.Config
	ReleaseExcessIPs bool
	ReleaseDelay     time.Duration
	// Consolidation acts only with ReleaseExcessIPs.
	Consolidation Consolidation
	// Tags go on every ENI created for the node.
	Tags map[string]string
	// Policy names the governing ENIPolicy, "" when none matched.
	Policy string
	// IPv4 and IPv6 are the families the node's pods get (the policy's
	// ipFamilies; IPv4 alone when unset or invalid).
	IPv4, IPv6 bool
}

// Matches reports whether a policy's selector selects a node's labels. A
// policy without selector matches every node; an invalid selector none.
func Matches(p *enipamv1alpha1.ENIPolicy, nodeLabels map[string]string) bool {
	if p.Spec.NodeSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(nodeLabels))
}

// Select returns the policy governing a node and the other matching
// policies it overrides.
func Select(policies []enipamv1alpha1.ENIPolicy, nodeLabels map[string]string) (*enipamv1alpha1.ENIPolicy, []*enipamv1alpha1.ENIPolicy) {
	var matching []*enipamv1alpha1.ENIPolicy
	for i := range policies {
		if p := &policies[i]; p.DeletionTimestamp == nil && Matches(p, nodeLabels) {
			matching = append(matching, p)
		}
	}
	if len(matching) == 0 {
		return nil, nil
	}
	slices.SortFunc(matching, func(a, b *enipamv1alpha1.ENIPolicy) int {
		if a.Spec.Priority != b.Spec.Priority {
			return int(a.Spec.Priority - b.Spec.Priority)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return matching[0], matching[1:]
}

// Resolve applies the precedence to one node.
func Resolve(cn *ciliumv2.CiliumNode, p *enipamv1alpha1.ENIPolicy, d Defaults) Config {
	var ps enipamv1alpha1.ENIPolicySpec
	c := Config{}
	if p != nil {
		ps = p.Spec
		c.Policy = p.Name
	}
	ipam, eni := cn.Spec.IPAM, cn.Spec.ENI

	c.PreAllocate = pick(ipam.PreAllocate, ps.PreAllocate, d.PreAllocate)
	c.MinAllocate = pick(ipam.MinAllocate, ps.MinAllocate, d.MinAllocate)
	c.MaxAllocate = pick(ipam.MaxAllocate, ps.MaxAllocate, d.MaxAllocate)
	c.MaxAboveWatermark = pick(ipam.MaxAboveWatermark, ps.MaxAboveWatermark, d.MaxAboveWatermark)
	c.AgentEndpoints = d.AgentEndpoints

	c.FirstInterfaceIndex = d.FirstInterfaceIndex
	if ps.FirstInterfaceIndex != nil {
		c.FirstInterfaceIndex = int(*ps.FirstInterfaceIndex)
	}
	if v := eni.FirstInterfaceIndex; v != nil {
		c.FirstInterfaceIndex = *v
	}

	c.ExcludeTags = ps.ExcludeInterfaceTags
	if len(eni.ExcludeInterfaceTags) > 0 {
		c.ExcludeTags = eni.ExcludeInterfaceTags
	}

	c.SubnetIDs = firstNonEmpty(eni.SubnetIDs, ids(ps.SubnetIDs))
	c.SubnetTags = firstNonEmptyMap(eni.SubnetTags, ps.SubnetTags)
	c.SecurityGroupIDs = firstNonEmpty(eni.SecurityGroups, ids(ps.SecurityGroupIDs))
	c.SecurityGroupTags = firstNonEmptyMap(eni.SecurityGroupTags, ps.SecurityGroupTags)

	c.PrefixDelegation = d.PrefixDelegation
	if ps.PrefixDelegation != nil {
		c.PrefixDelegation = *ps.PrefixDelegation
	}
	if eni.DisablePrefixDelegation != nil && *eni.DisablePrefixDelegation {
		c.PrefixDelegation = false
	}

	c.Adaptive = d.Adaptive
	if ps.Headroom != nil {
		c.Adaptive = *ps.Headroom == enipamv1alpha1.HeadroomAdaptive
	}

	c.ReleaseExcessIPs, c.ReleaseDelay = d.ReleaseExcessIPs, d.ReleaseDelay
	if ps.ReleaseExcessIPs != nil {
		c.ReleaseExcessIPs = *ps.ReleaseExcessIPs
	}
	if ps.ExcessIPReleaseDelay != nil {
		c.ReleaseDelay = ps.ExcessIPReleaseDelay.Duration
	}
	c.Consolidation = d.Consolidation
	if pc := ps.Consolidation; pc != nil {
		if pc.Enabled != nil {
			c.Consolidation.Enabled = *pc.Enabled
		}
		if pc.Delay != nil {
			c.Consolidation.Delay = pc.Delay.Duration
		}
	}
	c.Tags = ps.Tags
	c.IPv4, c.IPv6 = true, false
	if fs := ps.IPFamilies; len(fs) > 0 && enipamv1alpha1.ValidateIPFamilies(fs) == nil {
		c.IPv4, c.IPv6 = slices.Contains(fs, enipamv1alpha1.IPv4Family), enipamv1alpha1.WantsIPv6(fs)
	}
	return c
}

// pick returns the node's value if set (non-zero), else the policy's,
// else the default.
func pick(node int, policy *int32, def int) int {
	switch {
	case node != 0:
		return node
	case policy != nil:
		return int(*policy)
	}
	return def
}

func ids[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

func firstNonEmpty(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

func firstNonEmptyMap(a, b map[string]string) map[string]string {
	if len(a) > 0 {
		return a
	}
	return b
}
