package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
)

var watchCommand = clientCommand{
	name:    "watch",
	summary: "print each turn of a thread as it ends, until interrupted",
	usage:   "watch THREAD [--after N] [--checkpoints] [--key K]... [--head CHECKPOINT] [flags]",
	min:     1, max: 1,
	flags: func(fs *flag.FlagSet) func(context.Context, *cliContext, []string) int {
		ns := fs.String("ns", "", "checkpoint namespace (default: the root graph)")
		after := fs.Int("after", 0, "skip the turns up to this one (0: every turn, those already ended first)")
		checkpoints := fs.Bool("checkpoints", false, "also print each new checkpoint as it is written")
		channel := fs.String("channel", "", "state channel to watch (default: the server's first --state-channels)")
		var keys multiFlag
		fs.Var(&keys, "key", "print this key of each state (repeatable); with -o json, only these keys (default: every key)")
		head := headFlag(fs)
		return func(ctx context.Context, c *cliContext, args []string) int {
			if *after < 0 {
				return c.usageError("--after %d: must not be negative", *after)
			}
			hc, err := c.dial()
			if err != nil {
				return c.usageError("%v", err)
			}
			defer hc.Close()
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			opts := []client.ReadOption{client.WithAfterTurn(*after), client.WithKeys(keys...), client.WithNamespace(*ns), client.WithChannel(*channel), client.WithHead(*head)}
			if *checkpoints {
				opts = append(opts, client.WithCheckpoints())
			}
			if !c.json {
				fmt.Fprintf(c.stderr, "historyd watch: watching thread %q on %s; ^C to stop\n", args[0], *c.addr)
			}
			for ev, err := range hc.WatchTurns(ctx, args[0], opts...) {
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
						return exitOK
					}
					return c.fail(err)
				}
				if c.json {
					if code := c.printEvent(c.stdout, args[0], ev); code != exitOK {
						return code
					}
					continue
				}
				if ev.Rewound != nil {
					fmt.Fprintf(c.stdout, "%s\n", rewoundText(ev.Rewound))
					continue
				}
				what := fmt.Sprintf("turn %d ended", ev.State.Turn)
				if ev.Checkpoint {
					what = fmt.Sprintf("checkpoint of turn %d", ev.State.Turn)
				}
				fmt.Fprintf(c.stdout, "%s  %-22s  %s  %s  %s\n", timeText(ev.State.EndedAt), what, ev.State.CheckpointID, keysText(len(ev.State.State)), clip(ev.State.Question, 60))
				for _, k := range keys {
					if e, ok := ev.State.State[k]; ok {
						fmt.Fprintf(c.stdout, "    %s = %s\n", k, clip(compact(e.Value), 100))
					}
				}
			}
			return exitOK
		}
	},
}

// rewoundText is the line a watch prints when the thread is rewound.
func rewoundText(r *client.Rewound) string {
	line := fmt.Sprintf("history rewound to turn %d: the turns printed after it belong to an abandoned branch", r.Turn)
	if r.Fork != nil {
		line += fmt.Sprintf(" (from checkpoint %s, newest %s; read it with --head %s)", r.Fork.From, r.Fork.Newest, r.Fork.Newest)
	}
	return line
}

// printEvent writes one watch event as a line of JSON.
func (c *cliContext) printEvent(w io.Writer, thread string, ev *client.WatchEvent) int {
	if r := ev.Rewound; r != nil {
		m := map[string]any{"thread_id": thread, "event": "history_rewound", "turn": r.Turn, "total": ev.Total, "head_checkpoint_id": ev.Head}
		if r.Fork != nil {
			m["fork"] = map[string]any{"from_checkpoint_id": r.Fork.From, "turn": r.Fork.Turn, "questions": r.Fork.Questions, "newest_checkpoint_id": r.Fork.Newest}
		}
		if _, err := fmt.Fprintln(w, compact(m)); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	kind := "turn_ended"
	if ev.Checkpoint {
		kind = "checkpoint"
	}
	state := map[string]any{}
	for k, e := range ev.State.State {
		state[k] = entryJSON(e)
	}
	line := compact(map[string]any{"thread_id": thread, "event": kind, "turn": ev.State.Turn, "total": ev.Total,
		"checkpoint_id": ev.State.CheckpointID, "at": timeJSON(ev.State.EndedAt), "question": ev.State.Question, "state": state})
	if _, err := fmt.Fprintln(w, line); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func keysText(n int) string {
	if n == 1 {
		return "1 key"
	}
	return fmt.Sprintf("%d keys", n)
}
