package state

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Page is the pagination part of a describe request. MaxResults 0 means
// unpaginated: every match in one answer.
type Page struct {
	MaxResults int
	NextToken  string
	// MaxResultsGiven: the request carried MaxResults, even 0 (which EC2
	// refuses as out of bounds).
	MaxResultsGiven bool
}

// paginated reports whether the request asks for pages.
func (p Page) paginated() bool { return p.MaxResults != 0 || p.MaxResultsGiven || p.NextToken != "" }

// checkBounds holds MaxResults to an action's bounds.
func (p Page) checkBounds(lo, hi int) error {
	if (p.MaxResults != 0 || p.MaxResultsGiven) && (p.MaxResults < lo || p.MaxResults > hi) {
		return Errorf(CodeInvalidParameterValue, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", p.MaxResults, lo, hi)
	}
	return nil
}

// start validates the page bounds for an action and decodes a plain token
// (see token) into the creation sequence to resume after.
func (p Page) start(kind string, lo, hi int) (uint64, error) {
	if err := p.checkBounds(lo, hi); err != nil {
		return 0, err
	}
	if p.NextToken == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(p.NextToken)
	if err == nil {
		k, seq, ok := strings.Cut(string(raw), ":")
		if n, perr := strconv.ParseUint(seq, 10, 64); ok && k == kind && perr == nil {
			return n, nil
		}
	}
	return 0, Errorf(CodeInvalidPaginationToken, "Invalid pagination token: %q", p.NextToken)
}

// token encodes where the next page of kind starts; empty when none does.
func token(kind string, seq uint64) string {
	if seq == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d", kind, seq))
}

// EC2's tokens for the describes of VPC resources are bound to the
// request they continue and expire. A token carries its kind, where the
// next page starts, a digest of the request's filters and when it was
// issued: presented with other filters it is InvalidParameterValue
// (EC2's answer to a token it cannot use, "The token is invalid"),
// malformed or older than TimingConfig.TokenTTL it is
// InvalidPaginationToken ("not valid or is expired").

type boundToken struct {
	Kind    string `json:"k"`
	After   uint64 `json:"a"`
	Filters string `json:"f"`
	Issued  int64  `json:"t"`
}

// filterDigest is a digest of filters, in the order given.
func filterDigest(fs []Filter) string {
	h := sha256.New()
	for _, f := range fs {
		binary.Write(h, binary.BigEndian, uint32(len(f.Name)))
		h.Write([]byte(f.Name))
		binary.Write(h, binary.BigEndian, uint32(len(f.Values)))
		for _, v := range f.Values {
			binary.Write(h, binary.BigEndian, uint32(len(v)))
			h.Write([]byte(v))
		}
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// resume validates a page request of kind with filters fs: bounds, and
// the token's kind, filters and age. It returns the sequence to resume
// after.
func (s *State) resume(p Page, kind string, lo, hi int, fs []Filter) (uint64, error) {
	if err := p.checkBounds(lo, hi); err != nil {
		return 0, err
	}
	if p.NextToken == "" {
		return 0, nil
	}
	var t boundToken
	raw, err := base64.RawURLEncoding.DecodeString(p.NextToken)
	if err == nil {
		err = json.Unmarshal(raw, &t)
	}
	if err != nil || t.Kind != kind || t.After == 0 {
		return 0, Errorf(CodeInvalidPaginationToken, "The pagination token %q is not valid or is expired.", p.NextToken)
	}
	if t.Filters != filterDigest(fs) {
		return 0, Errorf(CodeInvalidParameterValue, "Value ( %s ) for parameter NextToken is invalid. The token is invalid.", p.NextToken)
	}
	if ttl := time.Duration(s.timing.TokenTTL); ttl > 0 && s.now().Sub(time.Unix(0, t.Issued)) > ttl {
		return 0, Errorf(CodeInvalidPaginationToken, "The pagination token %q is not valid or is expired.", p.NextToken)
	}
	return t.After, nil
}

// pageToken issues the token of a page of kind that ends at after; empty
// when after is 0 (no further page).
func (s *State) pageToken(kind string, after uint64, fs []Filter) string {
	if after == 0 {
		return ""
	}
	b, _ := json.Marshal(boundToken{Kind: kind, After: after, Filters: filterDigest(fs), Issued: s.now().UnixNano()})
	return base64.RawURLEncoding.EncodeToString(b)
}

// scanPage is how EC2 pages a describe whose filters no index answers:
// a page is the next limit resources in creation order, of which it
// returns those that match, so a page with filters may be short or
// empty and still carry a token; a token is issued whenever the page
// scanned limit resources, even if none follow (the next page is then
// empty and ends the listing). limit <= 0 means all. It returns the
// matches and the seq to continue after, zero when the listing ends.
func scanPage[T resource](list []T, after uint64, limit int, match func(T) bool) ([]T, uint64) {
	if limit <= 0 {
		out, _ := page(list, after, 0, match)
		return out, 0
	}
	var out []T
	scanned := 0
	for _, v := range list[searchAfter(list, after):] {
		if v.base().removed {
			continue
		}
		scanned++
		if match(v) {
			out = append(out, v)
		}
		if scanned == limit {
			return out, v.base().seq
		}
	}
	return out, 0
}
