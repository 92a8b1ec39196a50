package ec2

import (
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// parseAddrs parses the addresses EC2 returns in items (text reads one),
// keeping those keep accepts (nil: every one); a malformed entry is
// dropped, never an error. Nil when none is kept.
func parseAddrs[S any](items []S, text func(S) string, keep func(netip.Addr) bool) []netip.Addr {
	var out []netip.Addr
	for _, item := range items {
		if ip, err := netip.ParseAddr(text(item)); err == nil && (keep == nil || keep(ip)) {
			if out == nil {
				out = make([]netip.Addr, 0, len(items))
			}
			out = append(out, ip)
		}
	}
	return out
}

// parsePrefixes is parseAddrs for prefixes.
func parsePrefixes[S any](items []S, text func(S) string, keep func(netip.Prefix) bool) []netip.Prefix {
	var out []netip.Prefix
	for _, item := range items {
		if p, err := netip.ParsePrefix(text(item)); err == nil && (keep == nil || keep(p)) {
			if out == nil {
				out = make([]netip.Prefix, 0, len(items))
			}
			out = append(out, p)
		}
	}
	return out
}

// plain reads a string EC2 returns as itself; ptr one it returns as a
// pointer.
func plain(s string) string { return s }

func ptr(s *string) string { return aws.ToString(s) }

// is6 and prefix6 keep IPv6 alone.
func is6(ip netip.Addr) bool      { return ip.Is6() }
func prefix6(p netip.Prefix) bool { return p.Addr().Is6() }
