package poolcontroller

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
	"github.com/enipam/enipam/operator/claims"
	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/inventory"
	"github.com/enipam/enipam/operator/pool"
)

// The facts the pool's and the static addresses' passes decide on are
// read here, beforehand, into plain values: the pods of the claims whose
// address may leave the node, the pools that list the addresses the node
// may take, where EC2 has the claimed addresses and whether the cache's
// word on an address is trusted. The passes then make no call.

// readStaticFacts fills in the facts of the static addresses' pass that
// live outside the claims: the pods, the other pools, the inventory, and
// the node agent's answers.
func (s *nodeSync) readStaticFacts(ctx context.Context, in *staticInputs) {
	in.cluster = s.r.opts.Cluster
	in.report = s.routed
	in.describesTrusted = !s.r.now().Before(s.r.inv.TrustFrom())
	in.absent = map[string]bool{}
	for ip := range s.mem.asked {
		if s.endpointGone(ip) {
			in.absent[ip] = true
		}
	}

	// The claimed addresses that must be on this node and that its ENIs
	// do not hold: they come from EC2 or wait for another pool
	// (claimHere, backStamp, fromEC2).
	in.pooledElsewhere = map[string]bool{}
	in.located = map[netip.Addr]inventory.Location{}
	in.subnets = map[netip.Addr]cloud.Subnet{}
	in.ourInstances = map[string]bool{}
	in.liveTargets = map[string]string{}
	for _, owner := range slices.Sorted(maps.Keys(in.claims)) {
		c := in.claims[owner]
		if !c.Addr.IsValid() || c.Release || in.target(c) != in.node || holder(&s.snap, &s.cfg.Config, c.Addr) != nil {
			continue
		}
		key := c.Addr.String()
		if _, done := in.pooledElsewhere[key]; done {
			// Another claim asks for the same address: its facts are
			// read; this claim's own target is read too.
			if in.located[c.Addr].Found {
				s.readLiveTarget(ctx, in, owner)
			}
			continue
		}
		in.pooledElsewhere[key] = s.pooledElsewhere(ctx, key)
		loc := s.r.inv.Locate(c.Addr)
		in.located[c.Addr] = loc
		if loc.Found {
			s.readLiveTarget(ctx, in, owner)
		}
		if id := loc.ENI.InstanceID; loc.Found && id != "" && loc.ENI.Tags[cloud.TagCluster] != in.cluster {
			if _, done := in.ourInstances[id]; !done {
				var nodes ciliumv2.CiliumNodeList
				err := s.r.client.List(ctx, &nodes, client.MatchingFields{claims.IndexInstance: id}, client.UnsafeDisableDeepCopy)
				in.ourInstances[id] = err == nil && len(nodes.Items) > 0
			}
		}
		if sub, ok := s.r.inv.SubnetOf(c.Addr); ok {
			in.subnets[c.Addr] = sub
		}
	}

	// The pods of stamped addresses that may move away: an address
	// leaves only once its pod is not bound here (read uncached).
	in.podNodes = map[string]string{}
	for key, e := range s.cn.Spec.IPAM.Pool {
		c := in.claims[e.Owner]
		if e.Owner == "" || c == nil || c.Release || !c.Ready || in.target(c) == in.node ||
			s.cn.Status.IPAM.ReleaseIPs[key] == ipamoption.IPAMReleased {
			continue
		}
		if _, done := in.podNodes[e.Owner]; done {
			continue
		}
		in.podNodes[e.Owner] = s.podNode(ctx, e.Owner)
	}
}

// readLiveTarget records owner's claim's live target in in.liveTargets
// (nothing when it cannot be read: no reassignment then).
func (s *nodeSync) readLiveTarget(ctx context.Context, in *staticInputs, owner string) {
	if target, ok := s.liveTarget(ctx, owner); ok {
		in.liveTargets[owner] = target
	}
}

// liveTarget reads owner's claim from the apiserver, not the cache, and
// returns its spec.nodeName; ok is false when it cannot be read or is
// being deleted.
func (s *nodeSync) liveTarget(ctx context.Context, owner string) (target string, ok bool) {
	ns, name, _ := strings.Cut(owner, "/")
	c := &enipamv1alpha1.StaticIPClaim{}
	if err := s.r.pods().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil || c.DeletionTimestamp != nil {
		return "", false
	}
	return c.Spec.NodeName, true
}

// podNode returns the node the pod owner ("namespace/name") is bound to,
// "" when there is no such pod or it is not bound; the node itself when
// the pod cannot be read (nothing moves on a guess).
func (s *nodeSync) podNode(ctx context.Context, owner string) string {
	ns, name, _ := strings.Cut(owner, "/")
	pod := &corev1.Pod{}
	if err := s.r.pods().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return s.cn.Name
		}
		return ""
	}
	return pod.Spec.NodeName
}

// pooledElsewhere reports whether another node's pool lists ip; true
// when the pools cannot be read.
func (s *nodeSync) pooledElsewhere(ctx context.Context, ip string) bool {
	nodes, err := claims.PoolNodes(ctx, s.r.client, ip)
	if err != nil {
		return true
	}
	return slices.ContainsFunc(nodes, func(cn *ciliumv2.CiliumNode) bool { return cn.Name != s.cn.Name })
}

// readPoolInputs gathers what the pool's reconcile decides on, for the
// snapshot as it stands: the agent's report, the addresses the cache's
// word cannot be trusted for yet, the instances holding pool addresses
// missing from their ENI, and the addresses ready to enter the pool that
// another pool lists.
func (s *nodeSync) readPoolInputs(ctx context.Context) *poolInputs {
	in := &poolInputs{
		snap: &s.snap, cfg: &s.cfg.Config, routed: s.routed, static: s.static,
		missing: s.mem.missing, now: s.r.now(), grace: s.r.opts.ConsistencyGrace,
		cluster: s.r.opts.Cluster, backoff: s.mem.repairs,
	}
	ipam, st := &s.cn.Spec.IPAM, &s.cn.Status.IPAM
	var gone []netip.Addr
	for key, entry := range ipam.Pool {
		if _, used := st.Used[key]; entry.Owner != "" || used || inHandshake(s.cn, key) {
			continue
		}
		ip, err := netip.ParseAddr(key)
		if err != nil || ip.Is6() || onENI(&s.snap, entry.Resource, ip) {
			continue
		}
		gone = append(gone, ip)
	}
	if len(gone) > 0 {
		slices.SortFunc(gone, netip.Addr.Compare)
		in.holders = s.r.inv.Holders(gone)
	}
	if s.static != nil {
		in.pooledElsewhere = map[string]bool{}
	}
	// One cache list per /24 of the addresses ready (a node's new ENI
	// brings up to 49 at once), not one per address.
	blocks := map[string][]ciliumv2.CiliumNode{}
	elsewhere := func(key string) bool {
		block := claims.PoolBlock(key)
		nodes, ok := blocks[block]
		if !ok {
			var err error
			if nodes, err = claims.BlockNodes(ctx, s.r.client, block); err != nil {
				return true
			}
			blocks[block] = nodes
		}
		for i := range nodes {
			if _, listed := nodes[i].Spec.IPAM.Pool[key]; listed && nodes[i].Name != s.cn.Name {
				return true
			}
		}
		return false
	}
	s.readyUnpooled(func(eni *cloud.ENI, ip netip.Addr) {
		if !s.r.inv.Trusted(eni.ID, ip) {
			if in.untrusted == nil {
				in.untrusted = map[netip.Addr]bool{}
			}
			in.untrusted[ip] = true
		}
		if in.pooledElsewhere != nil {
			in.pooledElsewhere[ip.String()] = elsewhere(ip.String())
		}
	})
	// The addresses the agent's answers may land on the node's ENIs
	// (decideLandings) may enter the pool with them.
	for ip := range s.remapMoves {
		if _, read := in.pooledElsewhere[ip.String()]; in.pooledElsewhere != nil && !read {
			in.pooledElsewhere[ip.String()] = elsewhere(ip.String())
		}
	}
	return in
}

// readyUnpooled calls f with each address of the node's usable, attached
// ENIs that its agent reports routed and that the pool lacks (or lists
// released): those the pool's reconcile may take in.
func (s *nodeSync) readyUnpooled(f func(eni *cloud.ENI, ip netip.Addr)) {
	if s.routed == nil {
		return
	}
	ipam, st := &s.cn.Spec.IPAM, &s.cn.Status.IPAM
	for i := range s.snap.ENIs {
		eni := &s.snap.ENIs[i]
		if !pool.Usable(eni, &s.cfg.Config) || eni.AttachmentStatus != cloud.AttachmentAttached {
			continue
		}
		check := func(ip netip.Addr) {
			key := ip.String()
			if _, ok := ipam.Pool[key]; (ok && st.ReleaseIPs[key] != ipamoption.IPAMReleased) || !s.routed(eni.ID, ip) {
				return
			}
			f(eni, ip)
		}
		for _, ip := range eni.IPs {
			check(ip)
		}
		for _, p := range eni.Prefixes {
			for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
				check(ip)
			}
		}
	}
}

// podOn returns the node the pod of owner is bound to, "" when there is
// no such pod or it is not bound; an owner whose pod was not read counts
// as bound here.
func (in *staticInputs) podOn(owner string) string {
	if n, ok := in.podNodes[owner]; ok {
		return n
	}
	return in.node
}

// elsewhere reports whether another node's pool lists ip; an address
// whose pools were not read counts as listed.
func (in *staticInputs) elsewhere(ip string) bool {
	listed, ok := in.pooledElsewhere[ip]
	return listed || !ok
}

// locate finds where EC2 has a claimed address (the inventory's word as
// read).
func (in *staticInputs) locate(ip netip.Addr) inventory.Location {
	return in.located[ip]
}

// ours reports whether an ENI holding a claimed address may give it up
// to a reassignment: an ENI of this cluster's nodes.
func (in *staticInputs) ours(e *cloud.ENI) bool {
	if e.Tags[cloud.TagCluster] == in.cluster {
		return true
	}
	return e.InstanceID != "" && in.ourInstances[e.InstanceID]
}

// subnetOf returns the subnet of a claimed address.
func (in *staticInputs) subnetOf(ip netip.Addr) (cloud.Subnet, bool) {
	sub, ok := in.subnets[ip]
	return sub, ok
}

// routed reports whether the node's agent has routed ip on the ENI.
func (in *staticInputs) routed(eniID string, ip netip.Addr) bool {
	return in.report != nil && in.report(eniID, ip)
}

// endpointGone reports whether the node's agent, answering a query this
// process made after it saw the address's pod gone from the node, found
// no endpoint holding ip (staticfast.go).
func (in *staticInputs) endpointGone(ip string) bool {
	return in.absent[ip]
}
