package ec2sim

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Page is the pagination part of a describe request. MaxResults 0 means
// unpaginated: every match in one answer.
type Page struct {
	MaxResults int
	NextToken  string
}

// paginated reports whether the request asks for pages.
func (p Page) paginated() bool { return p.MaxResults != 0 || p.NextToken != "" }

// start validates the page bounds for an action and decodes the token into
// the creation sequence to resume after.
func (p Page) start(kind string, lo, hi int) (uint64, error) {
	if p.MaxResults != 0 && (p.MaxResults < lo || p.MaxResults > hi) {
		return 0, apiErr(codeInvalidParameterValue, "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", p.MaxResults, lo, hi)
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
	return 0, apiErr(codeInvalidPaginationToken, "Invalid pagination token: %q", p.NextToken)
}

// token encodes where the next page of kind starts; empty when none does.
func token(kind string, seq uint64) string {
	if seq == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d", kind, seq))
}
