package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"unicode/utf8"

	"github.com/historyd/historyd/store/backend"
)

// threadsSQL walks one range of thread ids with a loose scan of the
// primary key's index (each step the smallest thread_id after the last),
// then counts and reads the oldest and newest checkpoint of each visited
// thread in the namespace. %s is the start's comparison (> or >=). ?1 is
// the start, ?2 the prefix, ?3 its length in characters (substr counts
// characters), ?4 the most ids visited, ?5 the namespace. Thread ids are
// TEXT compared with SQLite's BINARY collation: byte order, so every
// prefix is one range.
const threadsSQL = `WITH RECURSIVE walk(tid, k) AS (
  SELECT (SELECT thread_id FROM checkpoints WHERE thread_id %s ?1 ORDER BY thread_id LIMIT 1), 1
  UNION ALL
  SELECT (SELECT thread_id FROM checkpoints WHERE thread_id > walk.tid ORDER BY thread_id LIMIT 1), walk.k + 1
  FROM walk WHERE walk.tid IS NOT NULL AND substr(walk.tid, 1, ?3) = ?2 AND walk.k < ?4
), visited AS (
  SELECT walk.tid AS tid, walk.k AS k,
    (SELECT count(*) FROM checkpoints c WHERE c.thread_id = walk.tid AND c.checkpoint_ns = ?5) AS n,
    (SELECT min(checkpoint_id) FROM checkpoints c WHERE c.thread_id = walk.tid AND c.checkpoint_ns = ?5) AS lo,
    (SELECT max(checkpoint_id) FROM checkpoints c WHERE c.thread_id = walk.tid AND c.checkpoint_ns = ?5) AS hi
  FROM walk WHERE walk.tid IS NOT NULL AND substr(walk.tid, 1, ?3) = ?2
)
SELECT v.tid, v.n, f.checkpoint_id, f.type, f.checkpoint, f.metadata, l.checkpoint_id, l.type, l.checkpoint, l.metadata
FROM visited v
LEFT JOIN checkpoints f ON f.thread_id = v.tid AND f.checkpoint_ns = ?5 AND f.checkpoint_id = v.lo
LEFT JOIN checkpoints l ON l.thread_id = v.tid AND l.checkpoint_ns = ?5 AND l.checkpoint_id = v.hi
ORDER BY v.k`

// Threads implements backend.Backend. The oldest and newest checkpoints are
// handed over whole, as List hands rows, straight from the driver's
// buffer: SqliteSaver keeps a checkpoint's time inside its serialized
// checkpoint, with its channel values.
func (b *Backend) Threads(ctx context.Context, q backend.ThreadQuery, fn func(backend.ThreadRow) error) (backend.ThreadWalk, error) {
	db, err := b.pool()
	if err != nil {
		return backend.ThreadWalk{}, err
	}
	var w backend.ThreadWalk
	left := q.Limit
	for _, r := range backend.PrefixRanges(q.Prefixes, q.After) {
		if left == 0 {
			w.More = true
			break
		}
		op := ">"
		if r.Inclusive {
			op = ">="
		}
		err := b.query(ctx, db, fmt.Sprintf(threadsSQL, op), []any{r.From, r.Prefix, utf8.RuneCountInString(r.Prefix), left, q.Namespace}, func(rows *sql.Rows) error {
			var (
				tid                 string
				n                   int64
				firstID, lastID     *string
				firstType, lastType *string
				first, last         sql.RawBytes
				firstMD, lastMD     sql.RawBytes
			)
			if err := rows.Scan(&tid, &n, &firstID, &firstType, &first, &firstMD, &lastID, &lastType, &last, &lastMD); err != nil {
				return b.classify(ctx, err)
			}
			w.Last = tid
			left--
			if n == 0 || firstID == nil || lastID == nil {
				return nil
			}
			return fn(backend.ThreadRow{ThreadID: tid, Count: n,
				First: backend.Row{ID: *firstID, Checkpoint: backend.Blob{Type: blobType(firstType), Data: first}, Metadata: backend.Blob{Data: firstMD}},
				Last:  backend.Row{ID: *lastID, Checkpoint: backend.Blob{Type: blobType(lastType), Data: last}, Metadata: backend.Blob{Data: lastMD}},
			})
		})
		if err != nil {
			return w, err
		}
	}
	if left == 0 {
		w.More = true
	}
	return w, nil
}
