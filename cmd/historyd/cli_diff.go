package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/historyd/historyd/client"
)

var diffCommand = clientCommand{
	name:    "diff",
	summary: "show what changed in a thread's state between two turns (A-1 and A, or A and B)",
	usage:   "diff THREAD A [B] [--key K]... [--all] [--head CHECKPOINT] [flags]",
	min:     2, max: 3,
	flags: func(fs *flag.FlagSet) func(context.Context, *cliContext, []string) int {
		ns := fs.String("ns", "", "checkpoint namespace (default: the root graph)")
		var keys multiFlag
		fs.Var(&keys, "key", "compare only this key (repeatable)")
		all := fs.Bool("all", false, "list the unchanged keys too")
		width := fs.Int("width", 100, "characters of each change a table shows (0: whole)")
		channel := fs.String("channel", "", "state channel to compare (default: the server's first --state-channels)")
		head := headFlag(fs)
		return func(ctx context.Context, c *cliContext, args []string) int {
			a, ok := parseTurn(c, "A", args[1])
			if !ok {
				return exitUsage
			}
			opts := []client.ReadOption{client.WithKeys(keys...), client.WithNamespace(*ns), client.WithChannel(*channel), client.WithHead(*head)}
			if *all {
				opts = append(opts, client.WithIncludeUnchanged())
			}
			from, to := 0, a
			if len(args) == 3 {
				b, ok := parseTurn(c, "B", args[2])
				if !ok {
					return exitUsage
				}
				from, to = a, b
			} else if a == 1 {
				return c.usageError("turn 1 has no turn before it: give two turns, A and B")
			}
			hc, err := c.dial()
			if err != nil {
				return c.usageError("%v", err)
			}
			defer hc.Close()
			d, err := hc.Diff(ctx, args[0], from, to, opts...)
			if err != nil {
				return c.fail(err)
			}
			if c.json {
				end := func(e client.DiffEnd) map[string]any {
					m := map[string]any{"turn": e.Turn, "outcome": e.Outcome.String()}
					if e.Question != "" {
						m["question"] = e.Question
					}
					if e.Outcome == client.Found {
						m["checkpoint_id"], m["ended_at"] = e.CheckpointID, timeJSON(e.EndedAt)
					}
					return m
				}
				changes := make([]map[string]any, len(d.Changes))
				for i, ch := range d.Changes {
					m := map[string]any{"key": ch.Key, "change": ch.Kind.String()}
					if ch.From != nil {
						m["from"] = entryJSON(*ch.From)
					}
					if ch.To != nil {
						m["to"] = entryJSON(*ch.To)
					}
					if ch.Kind == client.Changed {
						m["patch"] = nonNilPatch(ch.Patch)
					}
					changes[i] = m
				}
				code := c.printJSON(map[string]any{"thread_id": args[0], "from": end(d.From), "to": end(d.To), "total": d.Total, "head_checkpoint_id": d.Head,
					"retained_turns": nonNilInts(d.Retained), "changes": changes})
				if code != exitOK {
					return code
				}
				return diffMisses(c, d)
			}
			if code := diffMisses(c, d); code != exitOK {
				return code
			}
			fmt.Fprintf(c.stdout, "turn %d → turn %d (of %d)\n", d.From.Turn, d.To.Turn, d.Total)
			if len(d.Changes) == 0 {
				fmt.Fprintln(c.stdout, "no key changed")
				return exitOK
			}
			fmt.Fprintln(c.stdout)
			rows := make([][]string, len(d.Changes))
			for i, ch := range d.Changes {
				what := ""
				switch ch.Kind {
				case client.Added:
					what = "= " + compact(ch.To.Value)
				case client.Removed:
					what = "was " + compact(ch.From.Value)
				case client.Changed:
					if len(ch.Patch) == 0 {
						what = "written again, same value"
					} else {
						ops := make([]string, len(ch.Patch))
						for j, op := range ch.Patch {
							ops[j] = patchText(op)
						}
						what = strings.Join(ops, "; ")
					}
				case client.Unchanged:
					what = "= " + compact(ch.To.Value)
				}
				if *width > 0 {
					what = clip(what, *width)
				}
				rows[i] = []string{ch.Key, ch.Kind.String(), what}
			}
			c.table([]string{"KEY", "CHANGE", "WHAT"}, rows)
			return exitOK
		}
	},
}

// diffMisses reports an end of a diff that was not found.
func diffMisses(c *cliContext, d *client.Diff) int {
	for _, e := range []client.DiffEnd{d.From, d.To} {
		if e.Outcome != client.Found {
			return c.miss(e.Outcome, e.Turn, d.Total, d.Retained)
		}
	}
	return exitOK
}

// patchText is one patch operation for a table: "replace /name "Thames"".
func patchText(op client.PatchOp) string {
	path := op.Path
	if path == "" {
		path = "(value)"
	}
	if op.Op == "remove" {
		return "remove " + path
	}
	return op.Op + " " + path + " " + compact(op.Value)
}

func nonNilPatch(p []client.PatchOp) []client.PatchOp {
	if p == nil {
		return []client.PatchOp{}
	}
	return p
}
