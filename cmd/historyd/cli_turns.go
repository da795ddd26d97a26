package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/historyd/historyd/client"
)

var turnsCommand = clientCommand{
	name:    "turns",
	summary: "list a thread's turns (question, retained or not, end), or with --branches its abandoned branches",
	usage:   "turns THREAD [--keys-written] [--branches] [--head CHECKPOINT] [flags]",
	min:     1, max: 1,
	flags: func(fs *flag.FlagSet) func(context.Context, *cliContext, []string) int {
		ns := fs.String("ns", "", "checkpoint namespace (default: the root graph)")
		written := fs.Bool("keys-written", false, "list the keys each retained turn wrote last (costs the server a read of each turn's state)")
		channel := fs.String("channel", "", "state channel --keys-written reads (default: the server's first --state-channels)")
		branches := fs.Bool("branches", false, "list the branches the thread was rewound from (time travel: a run from an older checkpoint) instead of its turns")
		head := headFlag(fs)
		return func(ctx context.Context, c *cliContext, args []string) int {
			hc, err := c.dial()
			if err != nil {
				return c.usageError("%v", err)
			}
			defer hc.Close()
			opts := []client.ReadOption{client.WithNamespace(*ns), client.WithChannel(*channel), client.WithHead(*head)}
			if *written {
				opts = append(opts, client.WithKeysWritten())
			}
			idx, err := hc.TurnIndex(ctx, args[0], opts...)
			if err != nil {
				return c.fail(err)
			}
			if *branches {
				return c.branches(args[0], idx)
			}
			turns := idx.Turns
			if c.json {
				out := make([]map[string]any, len(turns))
				for i, t := range turns {
					m := map[string]any{"turn": t.Turn, "question": t.Question, "retained": t.Retained}
					if t.Retained {
						m["checkpoint_id"], m["ended_at"] = t.CheckpointID, timeJSON(t.EndedAt)
					}
					if *written {
						m["keys_written"] = nonNilStrings(t.KeysWritten)
					}
					out[i] = m
				}
				return c.printJSON(map[string]any{"thread_id": args[0], "total": len(turns), "numbering": idx.Numbering.String(),
					"head_checkpoint_id": idx.Head, "branches": len(idx.Forks), "turns": out})
			}
			header := []string{"TURN", "RETAINED", "ENDED", "CHECKPOINT", "QUESTION"}
			if *written {
				header = append(header, "KEYS WRITTEN")
			}
			rows := make([][]string, len(turns))
			for i, t := range turns {
				ended, id := "-", "-"
				if t.Retained {
					ended, id = timeText(t.EndedAt), t.CheckpointID
				}
				rows[i] = []string{strconv.Itoa(t.Turn), yesNo(t.Retained), ended, id, clip(t.Question, 60)}
				if *written {
					rows[i] = append(rows[i], strings.Join(t.KeysWritten, " "))
				}
			}
			if len(turns) == 0 {
				fmt.Fprintf(c.stderr, "historyd turns: thread %q has no turns\n", args[0])
				return exitOK
			}
			c.table(header, rows)
			if n := len(idx.Forks); n > 0 {
				fmt.Fprintf(c.stderr, "historyd turns: thread %q was rewound %s; --branches lists the abandoned %s\n", args[0], times(n), plural(n, "branch", "branches"))
			}
			return exitOK
		}
	},
}

// branches lists the branches that leave a thread's lineage.
func (c *cliContext) branches(thread string, idx *client.TurnIndex) int {
	if c.json {
		out := make([]map[string]any, len(idx.Forks))
		for i, f := range idx.Forks {
			out[i] = map[string]any{"from_checkpoint_id": f.From, "turn": f.Turn, "questions": f.Questions, "newest_checkpoint_id": f.Newest}
		}
		return c.printJSON(map[string]any{"thread_id": thread, "head_checkpoint_id": idx.Head, "branches": out})
	}
	if len(idx.Forks) == 0 {
		fmt.Fprintf(c.stderr, "historyd turns: thread %q has no abandoned branches (head %s)\n", thread, orDash(idx.Head))
		return exitOK
	}
	rows := make([][]string, len(idx.Forks))
	for i, f := range idx.Forks {
		rows[i] = []string{f.From, strconv.Itoa(f.Turn), strconv.Itoa(f.Questions), f.Newest}
	}
	c.table([]string{"FROM CHECKPOINT", "TURN", "QUESTIONS", "NEWEST CHECKPOINT"}, rows)
	fmt.Fprintf(c.stderr, "historyd turns: read a branch with --head NEWEST_CHECKPOINT\n")
	return exitOK
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

var showCommand = clientCommand{
	name:    "show",
	summary: "show the session state a turn of a thread ended on",
	usage:   "show THREAD TURN [--key K]... [--head CHECKPOINT] [flags]",
	min:     2, max: 2,
	flags: func(fs *flag.FlagSet) func(context.Context, *cliContext, []string) int {
		ns := fs.String("ns", "", "checkpoint namespace (default: the root graph)")
		var keys multiFlag
		fs.Var(&keys, "key", "show only this key (repeatable)")
		width := fs.Int("width", 80, "characters of each value a table shows (0: whole)")
		channel := fs.String("channel", "", "state channel to show (default: the server's first --state-channels)")
		head := headFlag(fs)
		return func(ctx context.Context, c *cliContext, args []string) int {
			turn, ok := parseTurn(c, "TURN", args[1])
			if !ok {
				return exitUsage
			}
			hc, err := c.dial()
			if err != nil {
				return c.usageError("%v", err)
			}
			defer hc.Close()
			snap, err := hc.Snapshot(ctx, args[0], turn, client.WithNamespace(*ns), client.WithChannel(*channel), client.WithKeys(keys...), client.WithHead(*head))
			if err != nil {
				return c.fail(err)
			}
			if c.json {
				out := map[string]any{"thread_id": args[0], "turn": turn, "total": snap.Total, "outcome": snap.Outcome.String(),
					"retained_turns": nonNilInts(snap.Retained), "head_checkpoint_id": snap.Head}
				if snap.Question != "" {
					out["question"] = snap.Question
				}
				if snap.Outcome == client.Found {
					state := map[string]any{}
					for k, e := range snap.State {
						state[k] = entryJSON(e)
					}
					out["checkpoint_id"], out["ended_at"], out["state"] = snap.CheckpointID, timeJSON(snap.EndedAt), state
				}
				if code := c.printJSON(out); code != exitOK || snap.Outcome == client.Found {
					return code
				}
				return c.miss(snap.Outcome, turn, snap.Total, snap.Retained)
			}
			if snap.Outcome != client.Found {
				return c.miss(snap.Outcome, turn, snap.Total, snap.Retained)
			}
			fmt.Fprintf(c.stdout, "turn %d of %d, ended %s at checkpoint %s\nquestion: %s\n\n", turn, snap.Total, timeText(snap.EndedAt), snap.CheckpointID, snap.Question)
			names := make([]string, 0, len(snap.State))
			for k := range snap.State {
				names = append(names, k)
			}
			slices.Sort(names)
			rows := make([][]string, len(names))
			for i, k := range names {
				e := snap.State[k]
				v := compact(e.Value)
				if *width > 0 {
					v = clip(v, *width)
				}
				rows[i] = []string{k, turnText(e.Turn), orDash(e.Tool), v}
			}
			if len(names) == 0 {
				fmt.Fprintln(c.stdout, "(no state)")
				return exitOK
			}
			c.table([]string{"KEY", "WRITTEN IN", "TOOL", "VALUE"}, rows)
			return exitOK
		}
	},
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func turnText(n int) string {
	if n == 0 {
		return "-"
	}
	return "turn " + strconv.Itoa(n)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
