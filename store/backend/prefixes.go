package backend

import (
	"slices"
	"strings"
)

// prefix another one covers ("a/b/" under "a/"), so that the id ranges
// they name are disjoint and in order. A nil or empty result is no
// restriction: so is a list holding "".
func NormalizePrefixes(prefixes []string) []string {
	ps := slices.Clone(prefixes)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	var out []string
	for _, p := range ps {
		if p == "" {
			return nil
		}
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// PrefixRange is one contiguous range of thread ids, in byte order: the
// ids starting with Prefix from From on (the ids after From unless
// Inclusive).
type PrefixRange struct {
	// Prefix is what every id of the range starts with; "" for every id.
	Prefix string
	// From is where the range starts.
	From string
	// Inclusive says From itself is in the range.
	Inclusive bool
}

// PrefixRanges returns, in byte order, the ranges a walk after after
// visits under prefixes (normalized), for backends whose thread ids sort
// bytewise: the ranges wholly at or before after are left out.
func PrefixRanges(prefixes []string, after string) []PrefixRange {
	if len(prefixes) == 0 {
		return []PrefixRange{{From: after, Inclusive: after == ""}}
	}
	var out []PrefixRange
	for _, p := range prefixes {
		switch {
		case after < p:
			out = append(out, PrefixRange{Prefix: p, From: p, Inclusive: true})
		case strings.HasPrefix(after, p):
			out = append(out, PrefixRange{Prefix: p, From: after})
		}
		// Otherwise after is past every id starting with p.
	}
	return out
}
