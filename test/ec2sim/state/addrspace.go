package state

import (
	"math/bits"
	"net/netip"
)

// prefixLen is the only IPv4 prefix size EC2 delegates to an ENI.
const (
	prefixLen  = 28
	prefixSize = 1 << (32 - prefixLen)
)

// addrSpace is the address book of one subnet: a bitmap of taken addresses
// (reserved ones included) and the ENI holding each assigned one. Finding a
// free address or a free aligned /28 walks 64-bit words, never single
// addresses, so a nearly full /16 still answers in microseconds.
type addrSpace struct {
	base   uint32
	size   uint32
	used   []uint64
	owners []*eni
	free   int
	// hint is the lowest word that may hold a free bit.
	hint int
}

// newAddrSpace returns the address book of cidr with EC2's five reserved
// addresses taken: network, router, DNS, future use, and broadcast.
func newAddrSpace(cidr netip.Prefix) *addrSpace {
	size := uint32(1) << (32 - cidr.Bits())
	words := (size + 63) / 64
	a := &addrSpace{
		base:   addrToU32(cidr.Addr()),
		size:   size,
		used:   make([]uint64, words),
		owners: make([]*eni, size),
		free:   int(size),
	}
	// Bits past the end of a small subnet are permanently taken.
	for off := size; off < words*64; off++ {
		a.used[off/64] |= 1 << (off % 64)
	}
	for _, off := range []uint32{0, 1, 2, 3, size - 1} {
		a.set(off)
	}
	return a
}

func addrToU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func u32ToAddr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// offset returns addr's index in the subnet, or false when addr lies outside.
func (a *addrSpace) offset(addr netip.Addr) (uint32, bool) {
	if !addr.Is4() {
		return 0, false
	}
	v := addrToU32(addr)
	if v < a.base || v-a.base >= a.size {
		return 0, false
	}
	return v - a.base, true
}

func (a *addrSpace) addr(off uint32) netip.Addr { return u32ToAddr(a.base + off) }

// reserved reports whether off is one of the five addresses EC2 keeps.
func (a *addrSpace) reserved(off uint32) bool { return off <= 3 || off == a.size-1 }

func (a *addrSpace) taken(off uint32) bool { return a.used[off/64]&(1<<(off%64)) != 0 }

func (a *addrSpace) set(off uint32) {
	a.used[off/64] |= 1 << (off % 64)
	a.free--
}

// owner returns the ENI holding the address at off, nil when none does.
func (a *addrSpace) owner(off uint32) *eni { return a.owners[off] }

// take assigns the free address at off to owner.
func (a *addrSpace) take(off uint32, owner *eni) {
	a.set(off)
	a.owners[off] = owner
}

// reassign moves an address already taken to another owner.
func (a *addrSpace) reassign(off uint32, owner *eni) { a.owners[off] = owner }

// release frees the address at off.
func (a *addrSpace) release(off uint32) {
	w := int(off / 64)
	a.used[w] &^= 1 << (off % 64)
	a.owners[off] = nil
	a.free++
	if w < a.hint {
		a.hint = w
	}
}

// allocate takes the n lowest free addresses for owner, or none and false
// when fewer than n are free.
func (a *addrSpace) allocate(n int, owner *eni) ([]uint32, bool) {
	if n > a.free {
		return nil, false
	}
	out := make([]uint32, 0, n)
	for w := a.hint; w < len(a.used) && len(out) < n; w++ {
		for a.used[w] != ^uint64(0) && len(out) < n {
			off := uint32(w*64 + bits.TrailingZeros64(^a.used[w]))
			a.take(off, owner)
			out = append(out, off)
		}
		if a.used[w] == ^uint64(0) && w == a.hint {
			a.hint = w + 1
		}
	}
	return out, true
}

// allocatePrefix takes the lowest aligned /28 whose sixteen addresses are all
// free, or reports false when the subnet has none (it may still have sixteen
// scattered free addresses: that is fragmentation).
func (a *addrSpace) allocatePrefix(owner *eni) (uint32, bool) {
	for w := a.hint; w < len(a.used); w++ {
		word := a.used[w]
		for lane := 0; lane < 4; lane++ {
			if word>>(16*lane)&0xffff == 0 {
				off := uint32(w*64 + 16*lane)
				a.takePrefix(off, owner)
				return off, true
			}
		}
	}
	return 0, false
}

// prefixFree reports whether the aligned /28 starting at off is wholly free.
func (a *addrSpace) prefixFree(off uint32) bool {
	return off%prefixSize == 0 && off+prefixSize <= a.size && a.used[off/64]>>(off%64)&0xffff == 0
}

// takePrefix assigns the free aligned /28 at off to owner.
func (a *addrSpace) takePrefix(off uint32, owner *eni) {
	for i := uint32(0); i < prefixSize; i++ {
		a.take(off+i, owner)
	}
}

// releasePrefix frees the /28 at off.
func (a *addrSpace) releasePrefix(off uint32) {
	for i := uint32(0); i < prefixSize; i++ {
		a.release(off + i)
	}
}

// available is the subnet's availableIpAddressCount.
func (a *addrSpace) available() int { return a.free }
