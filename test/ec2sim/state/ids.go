package state

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// idSource makes EC2-shaped identifiers and MAC addresses from a seeded
// generator, so a scenario run twice with the same seed yields the same IDs.
// It is not safe for concurrent use; the State's lock guards it.
type idSource struct {
	rng  *rand.Rand
	seen map[string]struct{}
}

func newIDSource(seed uint64) *idSource {
	return &idSource{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seen: map[string]struct{}{}}
}

// newID returns prefix + "-" + 17 lowercase hex digits, unique for this source.
func (g *idSource) newID(prefix string) string {
	for {
		id := fmt.Sprintf("%s-%x%016x", prefix, g.rng.IntN(16), g.rng.Uint64())
		if _, dup := g.seen[id]; !dup {
			g.seen[id] = struct{}{}
			return id
		}
	}
}

// reserve records an ID chosen by a scenario so that generated ones never
// collide with it.
func (g *idSource) reserve(id string) { g.seen[id] = struct{}{} }

// newMAC returns a locally administered unicast MAC ("02:..") not handed out
// before by this source.
func (g *idSource) newMAC() string {
	for {
		v := g.rng.Uint64()
		mac := fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		if _, dup := g.seen[mac]; !dup {
			g.seen[mac] = struct{}{}
			return mac
		}
	}
}

// hex returns n random lowercase hex digits.
func (g *idSource) hex(n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%016x", g.rng.Uint64())
	}
	return b.String()[:n]
}

// wellFormedID reports whether id is prefix-<8 or 17 lowercase hex digits>,
// the two shapes EC2 has used for resource IDs.
func wellFormedID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	if !ok || (len(rest) != 8 && len(rest) != 17) {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
