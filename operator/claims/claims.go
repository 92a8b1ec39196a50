// Package claims is what enipam-operator's two controllers share about
// StaticIPClaims: the claim as a node's reconcile sees it (Claim) and the
// cache indexes both look claims and pools up with.
//
// The split: the pool controller (the one writer of every CiliumNode's
// spec.ipam.pool) places, stamps, moves and releases claimed addresses
// as part of each node's pool, and leaves its word on each placement in
// the claim's status.placement (its one field of a claim); the claim
// controller (the writer of the rest of the claims' status) checks what
// users ask for, records where the address is, and applies the reclaim
// policies. They meet through the API only: each reads the other's
// fields from the cache.
package claims

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	enipamv1alpha1 "github.com/enipam/enipam/api/v1alpha1"
)

// Claim is a StaticIPClaim as a node's reconcile needs it.
type Claim struct {
	// Owner is "namespace/name", the owner Cilium's CNI asks for.
	Owner string
	// Addr is spec.address, else the address the operator picked
	// (status.address); invalid while none is chosen.
	Addr netip.Addr
	// Subnet is the address's subnet, or the one asked for a first
	// placement.
	Subnet string
	// Target is spec.nodeName: the node the address must be placed on
	// ("" while no pod was bound).
	Target string
	// Release: the claim is being deleted and holds no Elastic IP any
	// more (status.publicIP is empty); its address goes back to being an
	// ordinary pool address. While the claim controller still releases
	// the Elastic IP, the stamp stays, so no other pod gets an address
	// mapped to a public one.
	Release bool
	// Deleting: the claim is being deleted (metadata.deletionTimestamp),
	// whether or not it still holds an Elastic IP.
	Deleting bool
	// Ready: the claim controller checked the current spec and found it
	// good. Nothing moves for a claim that is not.
	Ready bool
	// Invalid: the claim controller refused the current spec; the
	// address it names is not the claim's.
	Invalid bool
	// Lost: another claim records the same address and precedes this
	// one (Precedes); nothing moves for it, and its stamp goes unless
	// its pod holds the address.
	Lost bool
	// Generation is the claim's metadata.generation as read.
	Generation int64
	// Placement is the pool controller's note as the claim's status holds
	// it (nil: none).
	Placement *enipamv1alpha1.PlacementNote
}

// Records reports whether claim o records addr as its own: asks for it
// (spec.address) or holds it (status.address of a claim not refused).
func Records(o *enipamv1alpha1.StaticIPClaim, addr string) bool {
	return addr != "" && (o.Spec.Address == addr || (o.Status.Address == addr && o.Status.Phase != enipamv1alpha1.ClaimInvalid))
}

// Precedes reports whether claim a keeps addr before claim b when both
// record it (Records): the one holding it already (status.address, not
// refused) first, then the older (creationTimestamp), then by
// namespace/name and uid. It is a strict order: of two claims recording
// one address exactly one precedes the other.
func Precedes(a, b *enipamv1alpha1.StaticIPClaim, addr string) bool {
	holds := func(c *enipamv1alpha1.StaticIPClaim) bool {
		return c.Status.Address == addr && c.Status.Phase != enipamv1alpha1.ClaimInvalid
	}
	if ha, hb := holds(a), holds(b); ha != hb {
		return ha
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Owner() != b.Owner() {
		return a.Owner() < b.Owner()
	}
	return a.UID < b.UID
}

// FromObject converts a claim object.
func FromObject(c *enipamv1alpha1.StaticIPClaim) *Claim {
	out := &Claim{Owner: c.Owner(), Target: c.Spec.NodeName, Subnet: c.Spec.SubnetID, Release: c.DeletionTimestamp != nil && c.Status.PublicIP == nil,
		Deleting:   c.DeletionTimestamp != nil,
		Generation: c.Generation, Placement: c.Status.Placement.DeepCopy()}
	addr := c.Spec.Address
	if addr == "" {
		addr = c.Status.Address
	}
	out.Addr, _ = netip.ParseAddr(addr)
	if c.Status.SubnetID != "" {
		out.Subnet = c.Status.SubnetID
	}
	checked := c.Status.ObservedGeneration == c.Generation && c.Status.Phase != ""
	out.Ready = checked && c.Status.Phase != enipamv1alpha1.ClaimInvalid
	out.Invalid = checked && c.Status.Phase == enipamv1alpha1.ClaimInvalid
	return out
}

// RecordedAddress is the address claim c records as read: spec.address,
// else status.address; "" while none is chosen.
func RecordedAddress(c *enipamv1alpha1.StaticIPClaim) string {
	if c.Spec.Address != "" {
		return c.Spec.Address
	}
	return c.Status.Address
}

// CurrentNote returns the pool controller's note on c (status.placement)
// when it is about c as it is: written in term (the operator's current
// term), for c's generation and for the address c records, or for its
// first placement (a note with no address: the claim recorded none then,
// and records since the address that placement chose). Otherwise nil: the
// note is about a claim since changed, or was written by controllers
// since gone, and may describe what no longer holds (an address taken by
// a pod since deleted).
func CurrentNote(c *enipamv1alpha1.StaticIPClaim, term string) *enipamv1alpha1.PlacementNote {
	n := c.Status.Placement
	if n == nil || n.Term != term || n.ObservedGeneration != c.Generation {
		return nil
	}
	if rec := RecordedAddress(c); n.Address != "" && n.Address != rec {
		a, errA := netip.ParseAddr(n.Address)
		b, errB := netip.ParseAddr(rec)
		if errA != nil || errB != nil || a != b {
			return nil
		}
	}
	return n
}

// Index names of the cache indexes (register them with Indexes).
const (
	// IndexClaimNode indexes claims by spec.nodeName and status.nodeName.
	IndexClaimNode = "enipam.io/claim-node"
	// IndexClaimAddress indexes claims by spec.address and status.address.
	IndexClaimAddress = "enipam.io/claim-address"
	// IndexPoolBlock indexes CiliumNodes by the blocks (PoolBlock) of the
	// addresses of spec.ipam.pool; PoolNodes looks an address up.
	IndexPoolBlock = "enipam.io/pool-block"
	// IndexPoolOwner indexes CiliumNodes by the owners stamped in
	// spec.ipam.pool.
	IndexPoolOwner = "enipam.io/pool-owner"
	// IndexInstance indexes CiliumNodes by spec.instance-id.
	IndexInstance = "enipam.io/instance"
)

// Index is one field index of the cache.
type Index struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// Indexes returns every index the controllers look up.
func Indexes() []Index {
	return []Index{
		{&enipamv1alpha1.StaticIPClaim{}, IndexClaimNode, func(o client.Object) []string {
			c := o.(*enipamv1alpha1.StaticIPClaim)
			return nonEmpty(c.Spec.NodeName, c.Status.NodeName)
		}},
		{&enipamv1alpha1.StaticIPClaim{}, IndexClaimAddress, func(o client.Object) []string {
			c := o.(*enipamv1alpha1.StaticIPClaim)
			return nonEmpty(c.Spec.Address, c.Status.Address)
		}},
		{&ciliumv2.CiliumNode{}, IndexPoolBlock, func(o client.Object) []string {
			var out []string
			for ip := range o.(*ciliumv2.CiliumNode).Spec.IPAM.Pool {
				if b := PoolBlock(ip); !slices.Contains(out, b) {
					out = append(out, b)
				}
			}
			return out
		}},
		{&ciliumv2.CiliumNode{}, IndexPoolOwner, func(o client.Object) []string {
			var out []string
			for _, e := range o.(*ciliumv2.CiliumNode).Spec.IPAM.Pool {
				if e.Owner != "" {
					out = append(out, e.Owner)
				}
			}
			return out
		}},
		{&ciliumv2.CiliumNode{}, IndexInstance, func(o client.Object) []string {
			return nonEmpty(o.(*ciliumv2.CiliumNode).Spec.InstanceID)
		}},
	}
}

// Register adds every index of Indexes to a manager's cache, once per
// manager, before the controllers are set up.
func Register(ctx context.Context, fi client.FieldIndexer) error {
	for _, idx := range Indexes() {
		if err := fi.IndexField(ctx, idx.Object, idx.Field, idx.Extract); err != nil {
			return fmt.Errorf("indexing %s, %w", idx.Field, err)
		}
	}
	return nil
}

// PoolBlock is the index value of a pool address: the /24 (IPv6: /120)
// holding it, or the key itself when it is no address. An index entry per
// address (a set of node names each) cost 24 MiB at 90 000 pool
// addresses; a node's addresses share a few blocks, as its ENIs' addresses
// are mostly contiguous in their subnet.
func PoolBlock(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	bits := 24
	if a.Is6() && !a.Is4In6() {
		bits = 120
	}
	p, _ := a.Prefix(bits)
	return p.String()
}

// PoolNodes returns the cached CiliumNodes whose spec.ipam.pool lists ip
// (a canonical address, as pool keys are), shared with the cache: the
// caller must not change them.
func PoolNodes(ctx context.Context, c client.Reader, ip string) ([]*ciliumv2.CiliumNode, error) {
	block, err := BlockNodes(ctx, c, PoolBlock(ip))
	if err != nil {
		return nil, err
	}
	var out []*ciliumv2.CiliumNode
	for i := range block {
		if _, ok := block[i].Spec.IPAM.Pool[ip]; ok {
			out = append(out, &block[i])
		}
	}
	return out, nil
}

// BlockNodes returns the cached CiliumNodes whose spec.ipam.pool lists an
// address of block (a PoolBlock value), shared with the cache: the caller
// must not change them. One list answers for every address of the block.
func BlockNodes(ctx context.Context, c client.Reader, block string) ([]ciliumv2.CiliumNode, error) {
	var list ciliumv2.CiliumNodeList
	if err := c.List(ctx, &list, client.MatchingFields{IndexPoolBlock: block}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func nonEmpty(vals ...string) []string {
	var out []string
	for _, v := range vals {
		if v != "" && (len(out) == 0 || out[0] != v) {
			out = append(out, v)
		}
	}
	return out
}
