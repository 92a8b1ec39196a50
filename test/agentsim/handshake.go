package agentsim

import (
	ipamoption "github.com/cilium/cilium/pkg/ipam/option"
	ipamtypes "github.com/cilium/cilium/pkg/ipam/types"
)

// The states of Cilium's release handshake in status.ipam.release-ips.
const (
	MarkedForRelease = ipamtypes.IPReleaseStatus(ipamoption.IPAMMarkForRelease)
	ReadyForRelease  = ipamtypes.IPReleaseStatus(ipamoption.IPAMReadyForRelease)
	DoNotRelease     = ipamtypes.IPReleaseStatus(ipamoption.IPAMDoNotRelease)
	Released         = ipamtypes.IPReleaseStatus(ipamoption.IPAMReleased)
)

// inHandshake reports whether ip is being released, so must not be handed
// out: marked, ready or released. do-not-release gives it back.
func inHandshake(release map[string]ipamtypes.IPReleaseStatus, ip string) bool {
	switch release[ip] {
	case MarkedForRelease, ReadyForRelease, Released:
		return true
	}
	return false
}

// answerHandshake plays the agent's part of the release handshake on
// release, in place, and reports whether it changed anything (and so must
// be written). As Cilium's agent does on every CiliumNode update:
//   - marked-for-release becomes ready-for-release if the IP is in the pool
//     and free, do-not-release if it is in use or not in the pool;
//   - released is deleted once the IP has left the pool;
//   - the agent's own earlier answers are left alone.
//
// Nothing is answered while the pool is absent.
func answerHandshake(release map[string]ipamtypes.IPReleaseStatus, pool ipamtypes.AllocationMap, inUse func(ip string) bool) bool {
	if pool == nil {
		return false
	}
	changed := false
	for ip, status := range release {
		_, inPool := pool[ip]
		switch {
		case status == Released && !inPool:
			delete(release, ip)
			changed = true
		case status != MarkedForRelease:
		case !inPool || inUse(ip):
			release[ip] = DoNotRelease
			changed = true
		default:
			release[ip] = ReadyForRelease
			changed = true
		}
	}
	return changed
}
