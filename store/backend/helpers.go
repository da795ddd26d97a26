package backend

import "context"

// SharesBlobs reports whether b's checkpoints share stored values by
// version (BlobSharer); false for a backend that does not say.
func SharesBlobs(b Backend) bool {
	bs, ok := b.(BlobSharer)
	return ok && bs.SharesBlobs()
}

// Values collects channel's values at the checkpoints of ids, in the order
// of ids, each copied out of the backend's buffers: a convenience for
// tests and tools; the store streams.
func Values(ctx context.Context, b Backend, ref Ref, channel string, ids []string) ([]Blob, error) {
	out := make([]Blob, len(ids))
	err := b.EachValue(ctx, ref, channel, ids, func(i int, v Blob) error {
		v.Data = append([]byte(nil), v.Data...)
		out[i] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ProbeEach answers probes one thread at a time through List: the Probe
// method of a backend for which one statement per thread costs little (an
// embedded database, memory).
func ProbeEach(ctx context.Context, b Backend, ps []Probe) ([]ProbeResult, error) {
	out := make([]ProbeResult, len(ps))
	for i, p := range ps {
		census, err := b.List(ctx, p.Ref, Query{After: p.After, Verify: p.Verify}, func(Row) error {
			out[i].Newer = true
			return nil
		})
		if err != nil {
			return nil, err
		}
		out[i].MinID, out[i].Present = census.MinID, census.Present
	}
	return out, nil
}
