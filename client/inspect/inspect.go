// Package inspect is the model-facing inspect_state tool: it lets a model
// read a session-state key on demand, now or as it stood at the end of an
// earlier turn.
//
// Session state holds one value per key, so a model asked to compare a
// result with one it found earlier reads the key, gets the current value and
// compares it with itself: nothing fails and the answer is wrong. This tool
// closes that gap in two ways. A read of a key that several turns wrote says
// so, and turn=<n> reads the key as it stood at the end of turn n through a
// client.ThreadHistory. A turn read answers in exactly one of three ways and
// never with another turn's value in place of the one asked for:
//
//   - the value, followed by a line naming the turn it belongs to;
//   - no_such_turn, with how many turns the conversation has had;
//   - turn_no_longer_retained, with the turns still retained and a reason
//     telling the model not to answer from the current value.
//
// Two facts about the turn go with the answer when they hold. A turn whose
// question came in one message with others was answered by one run together
// with them, so they all end on the same state: the answer says which turns
// share it. And when the service says the thread's turn numbers are
// estimated (pruning left no checkpoint showing how many questions came
// first), the answer says the numbers may be too low and, for a found turn,
// quotes its question, so the model can tell whether it is the one meant.
// Counted numbering (older checkpoints pruned, earlier questions counted from
// the messages the oldest one left holds) is not mentioned: it is exact
// unless messages were removed without a trace, the same certainty a host
// counting its own human messages has, and retention prunes nearly every
// long thread, so a note there would be on most answers and teach the model
// to skip notes.
//
// Without a history the tool still reads the present, and a turn read
// answers no_turn_history. With a history but no thread id (a host that did
// not pass the run's thread), the tool answers no_thread_id, saying the host
// named no thread, and logs a warning for the host's author: the model can
// do nothing about it, and "no history" would be false.
//
// Answers are plain text meant for the model. A value whose JSON is larger
// than Inspector.MaxValueChars comes back as an outline of its structure,
// with a hint to narrow the read with pattern (a case-insensitive search over
// flattened "path = value" lines) or path (one sub-value, such as
// features[0].properties.name). Embedded data: URIs are replaced by a short
// marker naming their media type and size before anything else looks at a
// value, so the model learns an image exists without receiving its bytes.
//
// ToolName, ToolDescription and ParametersSchema describe the tool to any
// runtime that registers JSON-schema tools; Call parses the model's JSON
// arguments and answers.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/historyd/historyd/client"
)

// Defaults for the zero fields of an Inspector.
const (
	// DefaultMaxValueChars is the largest value, in characters of its JSON,
	// returned whole. Past it a value costs more context than most answers
	// need, and an outline plus a narrowed read costs less.
	DefaultMaxValueChars = 4000
	// DefaultMaxMatches is how many matching lines a search returns.
	DefaultMaxMatches = 50
	// DefaultMaxLineChars caps the value shown on one matching line.
	DefaultMaxLineChars = 160
)

// AllKeys is the key that lists every stored key, or with a pattern,
// searches all of them.
const AllKeys = "*"

// handlePrefix marks a reference to a stored value in hosts that let a
// model pass values by key. A read of "@state:k" can only mean the key k,
// so it is read as k rather than refused.
const handlePrefix = "@state:"

// ErrNoState is returned for a read of the present when the Inspector has no
// way to see the present: no Present function, and no History and thread to
// derive it from. It is a host misconfiguration, not something to tell the
// model, so it is an error rather than an answer.
var ErrNoState = errors.New("inspect: no source of current session state: set Inspector.Present, or History with a thread id")

// Args are the tool's arguments, as the model supplies them.
type Args struct {
	// Key is the state key to read, or AllKeys ("*", or empty) for every
	// key.
	Key string `json:"key"`
	// Turn reads the key as it stood at the end of that turn instead of
	// now; nil reads the present. Turns are the user's questions, counted
	// from 1.
	Turn *int `json:"turn,omitempty"`
	// Pattern narrows the answer to the flattened "path = value" lines it
	// matches, case-insensitively; empty returns the value.
	Pattern string `json:"pattern,omitempty"`
	// Path narrows the read to the sub-value at this path of the key, such
	// as "features[0].properties.name"; empty reads the whole key.
	Path string `json:"path,omitempty"`
}

// Inspector answers inspect_state reads. The zero value reads nothing;
// set History, Present or both. An Inspector is safe for concurrent use as
// long as its fields are not changed.
type Inspector struct {
	// History answers turn reads, and reads of the present when Present is
	// nil. Nil means the deployment keeps no turn history: turn reads answer
	// no_turn_history.
	History client.ThreadHistory
	// Present returns the thread's live session state, for reads without a
	// turn. When nil, the present is the state the thread's newest turn
	// ended on (see client.Current), which is the live state for a host
	// whose checkpointer has written the latest step; a host holding fresher
	// state in memory should pass it here.
	Present func(ctx context.Context, threadID string) (map[string]client.Entry, error)
	// Options adjust every history read, such as client.WithNamespace for a
	// subgraph's state, or client.WithChannel for another state channel
	// (deepagents' "files"); a read ignores the options that do not apply
	// to it (see client.ReadOption), and the diff mode takes their
	// namespace and channel alone. Key projection is added per read. The
	// channel is the host's choice, not the model's: which channel holds
	// what is deployment configuration, so the tool has no channel
	// argument, and a host that lets a model read two channels registers
	// two Inspectors.
	Options []client.ReadOption
	// DeclaredKeys are keys some tool declares it publishes. A read of one
	// that is not stored yet tells the model to run the producing tool,
	// rather than reporting an unknown key. It only affects reads of the
	// present: at an earlier turn, "run the tool" would be advice about now.
	DeclaredKeys []string
	// MaxValueChars is the largest value returned whole, in characters of
	// its JSON; larger values are outlined. Default DefaultMaxValueChars.
	MaxValueChars int
	// MaxMatches is how many lines a search returns. Default
	// DefaultMaxMatches.
	MaxMatches int
	// MaxLineChars caps the value shown on one matching line. Default
	// DefaultMaxLineChars.
	MaxLineChars int
	// Logger receives what the host's author must fix, such as a call
	// without a thread id. Default slog.Default().
	Logger *slog.Logger
}

func (in *Inspector) maxValueChars() int { return positive(in.MaxValueChars, DefaultMaxValueChars) }
func (in *Inspector) maxMatches() int    { return positive(in.MaxMatches, DefaultMaxMatches) }
func (in *Inspector) maxLineChars() int  { return positive(in.MaxLineChars, DefaultMaxLineChars) }

func positive(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// Read answers one inspect_state call with the default limits, reading
// through h (which may be nil: the deployment keeps no history). Without a
// turn it reads the present as the newest turn's state; see Inspector.Read.
func Read(ctx context.Context, h client.ThreadHistory, threadID string, args Args) (string, error) {
	return (&Inspector{History: h}).Read(ctx, threadID, args)
}

// Read answers one inspect_state call for the thread. The answer is always
// text for the model, misses included; the error is for failures the host
// must handle, such as the history service being unreachable or ErrNoState.
func (in *Inspector) Read(ctx context.Context, threadID string, args Args) (string, error) {
	key := strings.TrimPrefix(args.Key, handlePrefix)
	if key == "" {
		key = AllKeys
	}
	var project []string
	if key != AllKeys {
		project = []string{key}
	}
	if args.Turn != nil {
		return in.readAt(ctx, threadID, key, *args.Turn, project, args)
	}
	if in.Present == nil && in.History != nil && threadID == "" {
		return in.noThread(ctx, nil, noThreadReason), nil
	}
	st, newest, err := in.present(ctx, threadID, project)
	if err != nil {
		return "", err
	}
	if newest > 0 && project != nil && !populated(st, key) {
		// The projection came back without the key; the listing the miss
		// answers with needs every key of the same turn.
		full, err := in.History.Snapshot(ctx, threadID, newest, in.opts(nil)...)
		if err != nil {
			return "", err
		}
		if full == nil || full.Outcome != client.Found {
			return "", changed(threadID)
		}
		st = full.State
	}
	return in.render(key, st, nil, "", args, "turn"), nil
}

// readAt answers a turn read.
func (in *Inspector) readAt(ctx context.Context, threadID, key string, turn int, project []string, args Args) (string, error) {
	if in.History == nil {
		return dumps(noTurnHistory{
			Turn:   turn,
			Reason: "This deployment keeps no per-turn history, so only the current value of a key can be read. Call again without turn.",
		}), nil
	}
	if threadID == "" {
		return in.noThread(ctx, &turn, noThreadReason), nil
	}
	// A turn no request can carry (negative, past client.MaxTurn) is asked
	// as turn 0, which no thread has: the model's miscount is answered as
	// one, with the total, not refused.
	asked := turn
	if asked < 0 || asked > client.MaxTurn {
		asked = 0
	}
	snap, err := in.History.Snapshot(ctx, threadID, asked, in.opts(project)...)
	if err == nil && snap != nil && snap.Outcome == client.Found && key != AllKeys && !populated(snap.State, key) {
		snap, err = in.History.Snapshot(ctx, threadID, asked, in.opts(nil)...)
	}
	if err != nil {
		return "", err
	}
	if snap == nil {
		return "", status.Errorf(codes.Internal, "inspect: history returned no snapshot of turn %d", turn)
	}
	forks, err := in.forks(ctx, threadID)
	if err != nil {
		return "", err
	}
	note, unit := in.turnNote(turn, snap, forks), unitOf(snap.Numbering)
	switch snap.Outcome {
	case client.Found:
		return in.render(key, snap.State, &turn, note, args, unit), nil
	case client.NoSuchTurn:
		reason := fmt.Sprintf("Turns are the user's questions, counted from 1; this conversation has had %d so far.", snap.Total)
		if snap.Total == 0 {
			reason = "Turns are the user's questions, counted from 1; this conversation has had none yet."
		}
		if unit == "run" {
			reason = fmt.Sprintf("This conversation's turns are its runs (its graph keeps no messages), counted from 1; it has had %d so far.", snap.Total)
			if snap.Total == 0 {
				reason = "This conversation's turns are its runs (its graph keeps no messages), counted from 1; it has had none yet."
			}
		}
		return dumps(noSuchTurn{Turn: turn, TurnsSoFar: snap.Total, Reason: reason, Note: note}), nil
	case client.NoLongerRetained:
		return dumps(noLongerRetained{
			Turn:     turn,
			Question: snap.Question,
			Retained: nonNil(snap.Retained),
			Reason: fmt.Sprintf("That %s happened, but its state has since been pruned and cannot be read. ", unit) +
				"Say that the value it held is no longer available; do not answer from the current value, which may be a different one.",
			Note: note,
		}), nil
	}
	return "", status.Errorf(codes.Internal, "inspect: snapshot of turn %d has no outcome", turn)
}

// noThreadReason is what a read without a thread id tells the model: the
// cause is the host's, and no other call the model could make reads the
// state, so it is told to say so rather than to try again.
const noThreadReason = "The host running this tool did not name this conversation's thread, so its saved state cannot be read, now or at any turn. Calling again will not change that: say that the state could not be read."

// noThread answers a read the host gave no thread id for, and logs why for
// the host's author, who is the one who can pass it.
func (in *Inspector) noThread(ctx context.Context, turn *int, reason string) string {
	logger := in.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.WarnContext(ctx, "inspect_state: called without a thread id, so the history cannot be read; "+
		"the host must pass the conversation's thread id to Inspector.Read (LangGraph: the run's configurable.thread_id)",
		"tool", ToolName)
	return dumps(noThreadID{NoThread: true, Turn: turn, Reason: reason})
}

// estimatedNumbers is what a turn read of a thread whose numbering is
// estimated says. The cause is put in the model's terms, the conversation's
// saved history rather than checkpoints, and in general ones: the two the
// service knows (a summary in the oldest checkpoint kept, a DeltaChannel's
// messages rebuilt past a pruned one) mean the same to the model.
const estimatedNumbers = "Turn numbers here are estimated and may be too low: the oldest part of this conversation's saved history was pruned, and what is left does not show how many questions came before it."

// TurnIndexer is implemented by a client.ThreadHistory that can list a
// thread's turns with its forks, as client.Client does: with it, a turn read
// of a thread that was rewound says so.
type TurnIndexer interface {
	TurnIndex(ctx context.Context, threadID string, opts ...client.ReadOption) (*client.TurnIndex, error)
}

// forks lists the branches that leave the thread's lineage, when the
// History can say (see TurnIndexer). It costs one Turns call, which reads
// no state.
func (in *Inspector) forks(ctx context.Context, threadID string) ([]client.Fork, error) {
	ti, ok := in.History.(TurnIndexer)
	if !ok {
		return nil, nil
	}
	idx, err := ti.TurnIndex(ctx, threadID, in.opts(nil)...)
	if err != nil || idx == nil {
		return nil, err
	}
	return idx.Forks, nil
}

// unitOf is what a turn is called to the model: a "run" when the thread's
// graph keeps no messages and each run is a turn, a "turn" otherwise.
func unitOf(n client.Numbering) string {
	if n == client.NumberingRuns {
		return "run"
	}
	return "turn"
}

// rewound is what a turn read of a thread that was rewound says, once: the
// turns it was rewound to, so that a model asked about "what you found
// before" knows an abandoned branch exists, and that its turns are not
// these.
func rewound(forks []client.Fork, unit string) string {
	var at []int
	for _, f := range forks {
		if !slices.Contains(at, f.Turn) {
			at = append(at, f.Turn)
		}
	}
	if len(at) == 0 {
		return ""
	}
	slices.Sort(at)
	words := make([]string, len(at))
	for i, n := range at {
		words[i] = fmt.Sprintf("%s %d", unit, n)
		if n == 0 {
			words[i] = "its start"
		}
	}
	branch := "branch"
	if len(at) > 1 {
		branch = "branches"
	}
	return fmt.Sprintf("This conversation was rewound at %s and went on from there: what came after on the abandoned %s is not part of these %ss.", prose(words), branch, unit)
}

// turnNote is what a turn read adds about the turn itself, or "": whether
// the conversation was rewound (see rewound), which other turns share its
// state, and whether its number is estimated. The question is quoted only
// for a found turn with estimated numbering, where it is how the model
// tells whether the turn is the one it meant; a no_longer_retained answer
// carries the question already.
func (in *Inspector) turnNote(turn int, snap *client.Snapshot, forks []client.Fork) string {
	var parts []string
	if r := rewound(forks, unitOf(snap.Numbering)); r != "" {
		parts = append(parts, r)
	}
	if snap.Outcome == client.Found && len(snap.AnsweredWith) > 0 {
		together := slices.Sorted(slices.Values(append(slices.Clone(snap.AnsweredWith), turn)))
		parts = append(parts, fmt.Sprintf("Turns %s were asked in one message and answered by one run, so each of them shows the state that run ended on.", and(together)))
	}
	if snap.Numbering == client.NumberingEstimated {
		parts = append(parts, estimatedNumbers)
		if snap.Outcome == client.Found && snap.Question != "" {
			parts = append(parts, fmt.Sprintf("Turn %d is the question %s.", turn, dumps(excerpt(snap.Question, -1, 0, in.maxLineChars()))))
		}
	}
	return strings.Join(parts, " ")
}

// and lists numbers as prose: "2 and 3", "2, 3 and 4".
func and(ns []int) string {
	words := make([]string, len(ns))
	for i, n := range ns {
		words[i] = strconv.Itoa(n)
	}
	return prose(words)
}

// prose lists words as prose: "a and b", "a, b and c".
func prose(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// present returns the current state, projected to keys when the source can.
// When the state came from the history it also returns the number of the
// turn it was read at, so a second read can ask for that same turn.
func (in *Inspector) present(ctx context.Context, threadID string, keys []string) (map[string]client.Entry, int, error) {
	if in.Present != nil {
		st, err := in.Present(ctx, threadID)
		return st, 0, err
	}
	if in.History == nil || threadID == "" {
		return nil, 0, ErrNoState
	}
	snap, err := client.Current(ctx, in.History, threadID, in.opts(keys)...)
	if err != nil {
		return nil, 0, err
	}
	switch snap.Outcome {
	case client.Found:
		return snap.State, snap.Turn, nil
	case client.NoSuchTurn:
		return map[string]client.Entry{}, 0, nil // no turns yet: nothing stored
	}
	return nil, 0, changed(threadID)
}

// changed is the error for a thread whose newest turn vanished mid-read,
// pruned or rewritten. An empty state would claim nothing is stored, so the
// host is asked to retry instead.
func changed(threadID string) error {
	return status.Errorf(codes.Aborted, "inspect: thread %q changed while its current state was read", threadID)
}

func (in *Inspector) opts(keys []string) []client.ReadOption {
	out := slices.Clip(in.Options)
	if len(keys) > 0 {
		out = append(out, client.WithKeys(keys...))
	}
	return out
}

func populated(st map[string]client.Entry, key string) bool {
	e, ok := st[key]
	return ok && e.Value != nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// render answers a read of state, which is the present when asOf is nil and
// the end of turn *asOf otherwise. turnNote (see Inspector.turnNote) goes
// with every answer at a turn: into the line naming the turn after a value
// or search, into a "note" field of an answer that is a JSON object.
//
// unit is what a turn is called ("turn", or "run": see unitOf).
func (in *Inspector) render(key string, stored map[string]client.Entry, asOf *int, turnNote string, args Args, unit string) string {
	// The model reads values, not the bookkeeping around them; a key whose
	// value is null holds nothing to read.
	values := make(map[string]any, len(stored))
	for k, e := range stored {
		if e.Value != nil {
			values[k] = prepare(e.Value)
		}
	}

	if key == AllKeys {
		switch {
		case args.Path != "":
			return dumps(keyListing{Error: "path needs a specific key", AtTurn: asOf, Available: summaries(values, stored), Note: turnNote})
		case args.Pattern != "":
			where := "all keys"
			if asOf != nil {
				where = fmt.Sprintf("all keys at the end of %s %d", unit, *asOf)
			}
			all := func(yield func(pair) bool) {
				for _, k := range sortedKeys(values) {
					if !walk(values[k], pathKey(k), yield) {
						return
					}
				}
			}
			out := in.grep(args.Pattern, where, values, all)
			if turnNote != "" {
				out += "\n[" + turnNote + "]"
			}
			return out
		}
		return dumps(keyListing{AtTurn: asOf, Available: summaries(values, stored), Note: turnNote})
	}

	target, ok := values[key]
	if !ok {
		miss := unknownKey{Key: key, AtTurn: asOf, Available: summaries(values, stored), Note: turnNote}
		if asOf != nil {
			// Absent then is not absent now: the key may have been written
			// later, and advice to produce it would have the model refill a
			// key that is already full.
			miss.Reason = fmt.Sprintf("Nothing was stored under this key at the end of %s %d. A later %s may have written it; read it without turn for its current value.", unit, *asOf, unit)
		} else if slices.Contains(in.DeclaredKeys, key) {
			miss.Hint = "A tool declares this key but has not published it in this conversation yet. Run the tool that produces it, then read it again."
		}
		return dumps(miss)
	}

	sub := ""
	if args.Path != "" {
		if sub = stripKey(args.Path, key); sub != "" {
			segs, bad := parsePath(sub)
			if bad != "" {
				return dumps(pathMiss{Path: args.Path, Key: key, AtTurn: asOf, FailedAt: bad,
					Reason: `The path cannot be read from here on. Write object keys as name or ["quoted name"] and array items as [index], joined by dots.`, Note: turnNote})
			}
			found, failed, ok := resolve(target, segs)
			if !ok {
				return dumps(describeMiss(pathMiss{Path: args.Path, Key: key, AtTurn: asOf, FailedAt: failed, Note: turnNote}, found))
			}
			target = found
		}
	}

	where := key
	if sub != "" {
		where = join(key, sub)
	}
	note := ""
	switch {
	case asOf != nil:
		// Not the "newest" note: the value above is not the newest, and the
		// count an old entry carries is the count as of that turn.
		note = fmt.Sprintf("\n[This is %s as it stood at the end of %s %d.", where, unit, *asOf)
		if turnNote != "" {
			note += " " + turnNote
		}
		note += "]"
	case stored[key].WrittenInTurns() > 1:
		note = fmt.Sprintf("\n[%d turns of this conversation wrote this key; the value above is the newest, and an earlier turn may have held a different one. "+
			"Pass turn=<n> (the user's questions, counted from 1) to read the value a turn ended with.]", stored[key].WrittenInTurns())
	}

	if args.Pattern != "" {
		return in.grep(args.Pattern, where, target, leaves(target, sub)) + note
	}
	text := dumps(target)
	if n := chars(text); n > in.maxValueChars() {
		return dumps(makeOutline(where, target, n)) + note
	}
	return text + note
}

// summaries describes every stored key in one line, calling out the keys
// several turns wrote: the listing is often all a model sees before deciding
// whether the value it holds is the one an earlier answer rested on.
func summaries(values map[string]any, stored map[string]client.Entry) map[string]string {
	out := make(map[string]string, len(values))
	for k, v := range values {
		s := shape(v)
		if n := stored[k].WrittenInTurns(); n > 1 {
			s += fmt.Sprintf("; written in %d turns", n)
		}
		out[k] = s
	}
	return out
}

// describeMiss says where a path stopped and what could follow there.
func describeMiss(m pathMiss, at any) pathMiss {
	m.Found = shape(at)
	switch x := at.(type) {
	case map[string]any:
		keys := sortedKeys(x)
		if len(keys) == 0 {
			m.Reason = "The object is empty."
		}
		if len(keys) > outlineKeys {
			keys = append(keys[:outlineKeys], fmt.Sprintf("… %d more", len(keys)-outlineKeys))
		}
		m.AvailableKeys = keys
	case []any:
		if len(x) == 0 {
			m.Reason = "The array is empty."
		} else {
			m.Reason = fmt.Sprintf("Array indexes run from 0 to %d.", len(x)-1)
		}
	default:
		m.Reason = fmt.Sprintf("A %s has no parts to read.", jsonType(at))
	}
	return m
}

// The answers without a value. Each is a JSON object whose first field names
// the case, so the model cannot mistake one for a value.

type noTurnHistory struct {
	Turn   int    `json:"no_turn_history"`
	Reason string `json:"reason"`
}

type noThreadID struct {
	NoThread bool   `json:"no_thread_id"`
	Turn     *int   `json:"turn,omitempty"`
	Reason   string `json:"reason"`
}

// Note, on each answer at a turn, is Inspector.turnNote's text.

type noSuchTurn struct {
	Turn       int    `json:"no_such_turn"`
	TurnsSoFar int    `json:"turns_so_far"`
	Reason     string `json:"reason"`
	Note       string `json:"note,omitempty"`
}

type noLongerRetained struct {
	Turn     int    `json:"turn_no_longer_retained"`
	Question string `json:"question,omitempty"`
	Retained []int  `json:"retained_turns"`
	Reason   string `json:"reason"`
	Note     string `json:"note,omitempty"`
}

type keyListing struct {
	Error     string            `json:"error,omitempty"`
	AtTurn    *int              `json:"at_turn,omitempty"`
	Available map[string]string `json:"available_keys"`
	Note      string            `json:"note,omitempty"`
}

type unknownKey struct {
	Key       string            `json:"unknown_or_empty_key"`
	AtTurn    *int              `json:"at_turn,omitempty"`
	Available map[string]string `json:"available_keys"`
	Reason    string            `json:"reason,omitempty"`
	Hint      string            `json:"hint,omitempty"`
	Note      string            `json:"note,omitempty"`
}

type pathMiss struct {
	Path          string   `json:"path_not_found"`
	Key           string   `json:"key"`
	AtTurn        *int     `json:"at_turn,omitempty"`
	FailedAt      string   `json:"failed_at"`
	Found         string   `json:"found,omitempty"`
	AvailableKeys []string `json:"available_keys,omitempty"`
	Reason        string   `json:"reason,omitempty"`
	Note          string   `json:"note,omitempty"`
}
