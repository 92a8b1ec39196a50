package state

import (
	"strings"
)

// Filter is one EC2 filter: a resource passes when its Name field matches
// any of Values. Values may hold the wildcards * (any run) and ? (any one
// character); \ escapes them. A request's filters must all pass.
type Filter struct {
	Name   string
	Values []string
}

// field reports whether any of a resource's values of one field satisfies
// match.
type field[T any] func(r T, match func(string) bool) bool

// one adapts a single-valued field.
func one[T any](get func(T) string) field[T] {
	return func(r T, match func(string) bool) bool { return match(get(r)) }
}

// maxFilterValues is EC2's limit on filter values in one request.
const maxFilterValues = 200

// compileFilters turns filters into predicates using fields, the filter
// names a resource kind understands. tag:<key>, tag-key and tag-value work
// for every kind with tags.
func compileFilters[T resource](fs []Filter, fields map[string]field[T]) ([]func(T) bool, error) {
	return compileFiltersTagged(fs, fields, func(r T) []Tag { return r.base().tags })
}

// compileFiltersTagged is compileFilters for kinds that are not resources;
// tagsOf nil means the kind has no tags.
func compileFiltersTagged[T any](fs []Filter, fields map[string]field[T], tagsOf func(T) []Tag) ([]func(T) bool, error) {
	var out []func(T) bool
	total := 0
	for _, f := range fs {
		if len(f.Values) == 0 {
			return nil, Errorf(CodeMissingParameter, "The filter '%s' has no values.", f.Name)
		}
		total += len(f.Values)
		if total > maxFilterValues {
			return nil, Errorf("FilterLimitExceeded", "The maximum number of filter values specified on a single call is %d", maxFilterValues)
		}
		match := valueMatcher(f.Values)
		var pred func(T) bool
		switch {
		case tagsOf != nil && strings.HasPrefix(f.Name, "tag:") && len(f.Name) > 4:
			key := f.Name[4:]
			pred = func(r T) bool {
				v, ok := tagValue(tagsOf(r), key)
				return ok && match(v)
			}
		case tagsOf != nil && f.Name == "tag-key":
			pred = func(r T) bool {
				for _, t := range tagsOf(r) {
					if match(t.Key) {
						return true
					}
				}
				return false
			}
		case tagsOf != nil && f.Name == "tag-value":
			pred = func(r T) bool {
				for _, t := range tagsOf(r) {
					if match(t.Value) {
						return true
					}
				}
				return false
			}
		default:
			fl, ok := fields[f.Name]
			if !ok {
				return nil, Errorf(CodeInvalidParameterValue, "The filter '%s' is invalid", f.Name)
			}
			pred = func(r T) bool { return fl(r, match) }
		}
		out = append(out, pred)
	}
	return out, nil
}

// all reports whether r passes every predicate.
func all[T any](preds []func(T) bool, r T) bool {
	for _, p := range preds {
		if !p(r) {
			return false
		}
	}
	return true
}

// valueMatcher ORs the patterns of one filter.
func valueMatcher(values []string) func(string) bool {
	exact := map[string]bool{}
	var globs []string
	for _, v := range values {
		if strings.ContainsAny(v, `*?\`) {
			globs = append(globs, v)
		} else {
			exact[v] = true
		}
	}
	return func(s string) bool {
		if exact[s] {
			return true
		}
		for _, g := range globs {
			if globMatch(g, s) {
				return true
			}
		}
		return false
	}
}

// globMatch matches s against pattern with * and ? wildcards and \ escapes,
// in linear time (greedy with one backtrack point).
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == '?':
			p++
			i++
		case p+1 < len(pattern) && pattern[p] == '\\' && pattern[p+1] == s[i]:
			p += 2
			i++
		case p < len(pattern) && pattern[p] != '\\' && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// exactValues returns the filter's values when none uses a wildcard, so an
// index can answer it; ok is false otherwise.
func exactValues(fs []Filter, name string) (vals []string, ok bool) {
	for _, f := range fs {
		if f.Name != name {
			continue
		}
		for _, v := range f.Values {
			if strings.ContainsAny(v, `*?\`) {
				return nil, false
			}
		}
		return f.Values, true
	}
	return nil, false
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
