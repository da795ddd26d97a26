package store

import (
	"cmp"
	"slices"
	"strings"
)

// A channel version names a value within one lineage only. LangGraph
// (Python) versions carry a random part and never repeat, but LangGraph.js
// counts each channel's versions 1, 2, 3, …: a fork from an older
// checkpoint produces again the numbers the branch it abandoned already
// produced, with other values. The store knows a value by its version (a
// messages version is read once, an encoded state is cached by version), so
// a version produced on two branches is told apart by the checkpoint that
// produced it: the first producer, in checkpoint order, keeps the version
// as stored; every later one's becomes the version, versionSep, and its
// producer's id.
//
// Where the storage shares values by version (backend.BlobSharer), the later
// producer's value was never stored: reading it returns the first's. A
// version a checkpoint provably produced (its parent is stored and held
// another) after another branch did is marked foreign (versionSep, "!",
// the producer), and never read as that checkpoint's. A checkpoint whose
// parent is not stored (retention cut the chain) may only have carried on
// its parent's version, which is then no other branch's: it is told apart,
// and marked foreign only where the version is a counter a fork produces
// again (countedVersion), for then nothing tells which it is.

// versionSep separates a stored version from the checkpoint that produced
// it; no saver writes it in a version.
const versionSep = "\x00"

// foreignMark follows versionSep in a foreign version.
const foreignMark = "!"

// countedVersion reports whether v is a bare counter, as LangGraph.js
// numbers versions: a fork produces such a version again with another
// value. A version with a random part (LangGraph's "<counter>.<random>")
// never repeats, so two checkpoints holding it hold one value.
func countedVersion(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// storedVersion returns the version as the saver stored it.
func storedVersion(v string) string {
	if i := strings.Index(v, versionSep); i >= 0 {
		return v[:i]
	}
	return v
}

// foreignVersion reports whether v is a version whose stored value is
// another branch's where the storage shares values by version.
func foreignVersion(v string) bool { return strings.Contains(v, versionSep+foreignMark) }

// distinguish rewrites the versions of cps, checkpoints listed since those
// of known (whose versions are already rewritten), that another branch
// already produced, as above. Rows whose versions change get maps of
// their own, shared through th.
func distinguish(known []Checkpoint, cps []listed, th *threadData) {
	if len(cps) == 0 {
		return
	}
	// produced holds channel, versionSep, stored version for every version
	// a known or already visited checkpoint produced.
	produced := map[string]bool{}
	versions := make(map[string]map[string]string, len(known)+len(cps))
	for _, c := range known {
		versions[c.ID] = c.States
	}
	for _, c := range known {
		pv, ok := versions[c.Parent]
		for ch, v := range c.States {
			if !ok || c.Parent == "" || pv[ch] != v {
				produced[ch+versionSep+storedVersion(v)] = true
			}
		}
	}
	at := make(map[string]int, len(cps))
	for i, c := range cps {
		at[c.id] = i
	}
	order := make([]int, len(cps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(cps[a].id, cps[b].id) })
	done := make([]bool, len(cps))
	visit := func(i int) {
		c := &cps[i]
		done[i] = true
		pv, parentKnown := versions[c.parent]
		parentKnown = parentKnown && c.parent != ""
		var out map[string]string
		for ch, v := range c.versions {
			if parentKnown && storedVersion(pv[ch]) == v {
				if pv[ch] != v {
					// Carried on from a parent whose version was told apart.
					out = rewritten(out, c.versions)
					out[ch] = pv[ch]
				}
				continue
			}
			key := ch + versionSep + v
			if !produced[key] {
				produced[key] = true
				continue
			}
			mark := ""
			if parentKnown || countedVersion(v) {
				mark = foreignMark
			}
			out = rewritten(out, c.versions)
			out[ch] = v + versionSep + mark + c.id
		}
		if out != nil {
			c.versions = th.shareVersions(out)
		}
		versions[c.id] = c.versions
	}
	var chain []int
	for _, i := range order {
		if done[i] {
			continue
		}
		// Unvisited ancestors among cps first (a parent with a later id:
		// clocks disagreeing); links that loop, which the store refuses
		// anyway, end the walk after as many steps as there are rows.
		chain = append(chain[:0], i)
		for j := i; len(chain) <= len(cps); {
			p, ok := at[cps[j].parent]
			if !ok || done[p] || p == j {
				break
			}
			chain, j = append(chain, p), p
		}
		for k := len(chain) - 1; k >= 0; k-- {
			if !done[chain[k]] {
				visit(chain[k])
			}
		}
	}
}

// rewritten returns out, or a copy of versions to rewrite when out is nil.
func rewritten(out, versions map[string]string) map[string]string {
	if out != nil {
		return out
	}
	out = make(map[string]string, len(versions))
	for k, v := range versions {
		out[k] = v
	}
	return out
}
