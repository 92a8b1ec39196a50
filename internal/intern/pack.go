package intern

import "strings"

// Packer gathers strings that live and die together (those of one
// cached object) and gives them one backing array (Pack): one allocation
// instead of one per string. A decoded object's strings are each an
// allocation of their own (16 to 48 bytes), spread over the heap's spans
// among the decoder's short-lived allocations; those the object keeps
// hold their spans in use long after the rest is collected, so the heap
// in use grows past the live heap. Values never change: each string is
// replaced by an equal one.
type Packer struct {
	ps []*string
	n  int
}

// Add gathers the string p points to (an empty one is left as it is).
func (k *Packer) Add(p *string) {
	if len(*p) == 0 {
		return
	}
	k.ps = append(k.ps, p)
	k.n += len(*p)
}

// AddAll gathers each string of l, in place: l's array is written, so it
// must be the object's own.
func (k *Packer) AddAll(l []string) {
	for i := range l {
		k.Add(&l[i])
	}
}

// Pack replaces every string gathered by an equal one in a single
// backing array, and forgets them.
func (k *Packer) Pack() {
	if len(k.ps) > 1 {
		var b strings.Builder
		b.Grow(k.n)
		for _, p := range k.ps {
			b.WriteString(*p)
		}
		all, off := b.String(), 0
		for _, p := range k.ps {
			l := len(*p)
			*p = all[off : off+l]
			off += l
		}
	}
	k.ps, k.n = k.ps[:0], 0
}
