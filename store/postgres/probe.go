package postgres

import (
	"context"
	"fmt"

	"github.com/historyd/historyd/store/backend"
)

// probeManySQL answers many threads' freshness probes in one statement, hence
// one snapshot: per thread ($1 ids, $2 namespaces, $3 the newest id known),
// its smallest checkpoint id and whether it has a newer one (index probes
// on the primary key), and which of the checked ids exist ($4 the index of
// the thread each id in $5 belongs to). Every subquery is a primary-key
// lookup, so the generic plan suits any batch and it is prepared once per
// connection.
func (b *Backend) probeManySQL() string {
	checkpoints := table(b.schema, "checkpoints")
	return `SELECT t.i::int,
 (SELECT min(c.checkpoint_id) FROM ` + checkpoints + ` c WHERE c.thread_id = t.thread AND c.checkpoint_ns = t.ns),
 EXISTS (SELECT 1 FROM ` + checkpoints + ` c WHERE c.thread_id = t.thread AND c.checkpoint_ns = t.ns AND c.checkpoint_id > t.after),
 (SELECT array_agg(v.id) FROM unnest($4::int[], $5::text[]) AS v(owner, id)
   WHERE v.owner = t.i AND EXISTS (SELECT 1 FROM ` + checkpoints + ` p
     WHERE p.thread_id = t.thread AND p.checkpoint_ns = t.ns AND p.checkpoint_id = v.id))
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(thread, ns, after, i)`
}

// probe answers backend.Backend.Probe: every probe of the batch in one
// statement, one round trip however many reads share it.
func (b *Backend) probe(ctx context.Context, ps []backend.Probe) ([]backend.ProbeResult, error) {
	threads := make([]string, len(ps))
	namespaces := make([]string, len(ps))
	after := make([]string, len(ps))
	var owners []int32
	var ids []string
	for i, p := range ps {
		threads[i], namespaces[i], after[i] = p.Ref.ThreadID, p.Ref.Namespace, p.After
		for _, id := range p.Verify {
			owners = append(owners, int32(i+1)) // WITH ORDINALITY counts from 1
			ids = append(ids, id)
		}
	}
	if ids == nil {
		owners, ids = []int32{}, []string{}
	}
	rows, err := b.pool.Query(ctx, b.probeManySQL(), threads, namespaces, after, owners, ids)
	if err != nil {
		return nil, b.classify(ctx, err)
	}
	defer rows.Close()
	out := make([]backend.ProbeResult, len(ps))
	seen := 0
	for rows.Next() {
		var (
			i       int32
			lo      *string
			newer   bool
			present []string
		)
		if err := rows.Scan(&i, &lo, &newer, &present); err != nil {
			return nil, b.classify(ctx, err)
		}
		if i < 1 || int(i) > len(ps) {
			return nil, fmt.Errorf("postgres: probe row %d of %d threads", i, len(ps))
		}
		r := &out[i-1]
		if lo != nil {
			r.MinID = *lo
		}
		r.Newer, r.Present = newer, present
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, b.classify(ctx, err)
	}
	if seen != len(ps) {
		return nil, fmt.Errorf("postgres: probe of %d threads answered %d", len(ps), seen)
	}
	return out, nil
}
