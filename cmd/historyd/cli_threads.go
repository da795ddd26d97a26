package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
)

var threadsCommand = clientCommand{
	name:    "threads",
	summary: "list the threads of a running historyd",
	usage:   "threads [--prefix P] [--newest] [--since D] [--before T] [--turns] [--limit N] [flags]",
	min:     0, max: 0,
	flags: func(fs *flag.FlagSet) func(context.Context, *cliContext, []string) int {
		prefix := fs.String("prefix", "", "list only thread ids starting with this")
		ns := fs.String("ns", "", "checkpoint namespace (default: the root graph)")
		newest := fs.Bool("newest", false, "newest activity first (the server refuses past 10,000 threads under the prefix) instead of by thread id")
		since := fs.String("since", "", "only threads active after this: a duration back from now (1h, 30m) or an RFC 3339 time")
		before := fs.String("before", "", "only threads last active before this: a duration back from now or an RFC 3339 time")
		turns := fs.Bool("turns", false, "count each thread's turns (costs the server a derivation per thread; pages of at most 100)")
		limit := fs.Int("limit", 100, "stop after this many threads (0: list them all)")
		pageSize := fs.Int("page-size", 0, "threads per call (default: the server's, 100)")
		token := fs.String("page-token", "", "continue a listing from the next_page_token a -o json listing printed")
		return func(ctx context.Context, c *cliContext, _ []string) int {
			opts := []client.ReadOption{client.WithPrefix(*prefix), client.WithNamespace(*ns)}
			if *newest {
				opts = append(opts, client.WithNewestFirst())
			}
			if *turns {
				opts = append(opts, client.WithIncludeTurns())
			}
			activeAfter, err := sinceTime(*since)
			if err != nil {
				return c.usageError("--since: %v", err)
			}
			activeBefore, err := sinceTime(*before)
			if err != nil {
				return c.usageError("--before: %v", err)
			}
			opts = append(opts, client.WithActiveAfter(activeAfter), client.WithActiveBefore(activeBefore))
			if *limit < 0 {
				return c.usageError("--limit %d: must not be negative", *limit)
			}
			hc, err := c.dial()
			if err != nil {
				return c.usageError("%v", err)
			}
			defer hc.Close()
			var threads []client.Thread
			next, pageToken, perPage := "", *token, *pageSize
			size := perPage
			if size == 0 {
				size = 100 // the server's default
			}
			for {
				if *limit > 0 {
					// Never more than the limit: the token of the last page
					// then continues exactly after it.
					perPage = min(size, *limit-len(threads))
				}
				page, err := hc.Threads(ctx, append(slices.Clip(opts), client.WithPageSize(perPage), client.WithPageToken(pageToken))...)
				if err != nil {
					return c.fail(err)
				}
				threads = append(threads, page.Threads...)
				next = page.NextPageToken
				if next == "" || *limit > 0 && len(threads) >= *limit {
					break
				}
				pageToken = next
			}
			if c.json {
				out := make([]map[string]any, len(threads))
				for i, t := range threads {
					m := map[string]any{"thread_id": t.ID, "checkpoints": t.Checkpoints, "first_checkpoint_at": timeJSON(t.FirstAt),
						"last_checkpoint_at": timeJSON(t.LastAt), "last_checkpoint_id": t.LastCheckpointID}
					if t.Turns >= 0 {
						m["turns"] = t.Turns
					}
					if t.Err != nil {
						st := status.Convert(t.Err)
						m["error"] = map[string]any{"code": st.Code().String(), "message": st.Message()}
					}
					out[i] = m
				}
				return c.printJSON(map[string]any{"threads": out, "next_page_token": next})
			}
			header := []string{"THREAD", "CHECKPOINTS", "FIRST", "LAST ACTIVITY"}
			if *turns {
				header = append(header, "TURNS")
			}
			rows := make([][]string, len(threads))
			for i, t := range threads {
				rows[i] = []string{t.ID, strconv.FormatInt(t.Checkpoints, 10), timeText(t.FirstAt), timeText(t.LastAt)}
				if *turns {
					rows[i] = append(rows[i], strconv.Itoa(t.Turns))
				}
			}
			c.table(header, rows)
			for _, t := range threads {
				if t.Err != nil {
					st := status.Convert(t.Err)
					fmt.Fprintf(c.stderr, "historyd threads: %s could not be read in full: %s: %s\n", t.ID, st.Code(), st.Message())
				}
			}
			if next != "" {
				fmt.Fprintf(c.stderr, "historyd threads: more threads follow (--limit %d); --limit 0 lists them all\n", *limit)
			}
			return exitOK
		}
	},
}

// sinceTime reads --since and --before: empty, a duration back from now,
// or an RFC 3339 time.
func sinceTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration back from now must not be negative", s)
		}
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want a duration (1h, 30m) or an RFC 3339 time (2026-11-30T10:00:00Z)", s)
	}
	return t, nil
}
