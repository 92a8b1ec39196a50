package ciliumnode

import (
	"net/netip"
	"slices"
	"time"

	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"

	"github.com/enipam/enipam/operator/cloud"
	"github.com/enipam/enipam/operator/pool"
)

// poolView edits the desired spec.ipam.pool and status.ipam.release-ips
// of one node in place (they belong to the reconcile's copy of the
// CiliumNode).
type poolView struct {
	cn *ciliumv2.CiliumNode
	// pendingRelease is how long until excess IPs may be marked.
	pendingRelease time.Duration
}

func newPoolView(cn *ciliumv2.CiliumNode, snap *pool.Node, cfg *pool.Config) *poolView {
	v := &poolView{cn: cn}
	v.addCloudIPs(snap, cfg)
	return v
}

// addCloudIPs puts every address of the node's usable ENIs into the pool:
// the pool follows the cloud, so addresses a crash left assigned but
// unlisted are found again. Addresses on their way out are not re-added,
// and nothing is ever removed here.
func (v *poolView) addCloudIPs(snap *pool.Node, cfg *pool.Config) {
	ipam := &v.cn.Spec.IPAM
	for i := range snap.ENIs {
		eni := &snap.ENIs[i]
		if !pool.Usable(eni, cfg) {
			continue
		}
		add := func(ip netip.Addr) {
			key := ip.String()
			if _, ok := ipam.Pool[key]; ok {
				return
			}
			if _, leaving := v.cn.Status.IPAM.ReleaseIPs[key]; leaving {
				return
			}
			if ipam.Pool == nil {
				ipam.Pool = ipamtypes.AllocationMap{}
			}
			ipam.Pool[key] = ipamtypes.AllocationIP{Resource: eni.ID}
		}
		for _, ip := range eni.IPs {
			add(ip)
		}
		for _, p := range eni.Prefixes {
			for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
				add(ip)
			}
		}
	}
}

// leaving reports whether the agent must not hand the IP out.
func (v *poolView) leaving(ip string) bool {
	switch v.cn.Status.IPAM.ReleaseIPs[ip] {
	case ipamoption.IPAMMarkForRelease, ipamoption.IPAMReadyForRelease, ipamoption.IPAMReleased:
		return true
	}
	return false
}

// counts returns the pool IPs the agent may hand out and the IPs it
// reports used.
func (v *poolView) counts() (available, used int) {
	for ip := range v.cn.Spec.IPAM.Pool {
		if !v.leaving(ip) {
			available++
		}
	}
	return available, len(v.cn.Status.IPAM.Used)
}

// abortRelease takes back every IP marked or acknowledged for release
// (the handshake may be aborted in any state but released) and returns
// how many.
func (v *poolView) abortRelease() int {
	n := 0
	for ip, st := range v.cn.Status.IPAM.ReleaseIPs {
		if st == ipamoption.IPAMMarkForRelease || st == ipamoption.IPAMReadyForRelease {
			delete(v.cn.Status.IPAM.ReleaseIPs, ip)
			n++
		}
	}
	return n
}

// outstanding counts IPs marked or acknowledged but not released yet.
func (v *poolView) outstanding() int {
	n := 0
	for _, st := range v.cn.Status.IPAM.ReleaseIPs {
		if st == ipamoption.IPAMMarkForRelease || st == ipamoption.IPAMReadyForRelease {
			n++
		}
	}
	return n
}

// releaseCandidates picks up to n free addresses to release: unowned,
// unused, not in the handshake, secondary addresses (not prefix members)
// of usable ENIs — from the highest device index down, so later ENIs
// empty first.
func (v *poolView) releaseCandidates(snap *pool.Node, cfg *pool.Config, n int) map[string][]netip.Addr {
	enis := slices.Clone(snap.ENIs)
	slices.SortFunc(enis, func(a, b cloud.ENI) int { return b.DeviceIndex - a.DeviceIndex })
	out := map[string][]netip.Addr{}
	for i := range enis {
		eni := &enis[i]
		if !pool.Usable(eni, cfg) {
			continue
		}
		ips := slices.Clone(eni.IPs)
		slices.SortFunc(ips, func(a, b netip.Addr) int { return b.Compare(a) })
		for _, ip := range ips {
			if n == 0 {
				return out
			}
			key := ip.String()
			entry, inPool := v.cn.Spec.IPAM.Pool[key]
			if !inPool || entry.Owner != "" || entry.Resource != eni.ID {
				continue
			}
			if _, used := v.cn.Status.IPAM.Used[key]; used {
				continue
			}
			if _, inHandshake := v.cn.Status.IPAM.ReleaseIPs[key]; inHandshake {
				continue
			}
			out[eni.ID] = append(out[eni.ID], ip)
			n--
		}
	}
	return out
}
