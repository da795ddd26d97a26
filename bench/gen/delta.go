package gen

// This file writes deepagents-shaped threads: the checkpoints a
// create_deep_agent graph (deepagents 0.7, its default StateBackend) leaves
// in Python's PostgresSaver, where messages and files are DeltaChannels.
//
// The graph's nodes are PatchToolCallsMiddleware.before_agent, model, tools
// and _ParentNotifierMiddleware.after_agent. The model node sends each tool
// call to tools as a Send (the __pregel_tasks channel), so every call of a
// round runs as its own push task in one superstep. A turn with r tool
// rounds is 5 + 2·r checkpoints:
//
//	input    the question arrives on __start__ (metadata source "input")
//	loop     PatchToolCallsMiddleware.before_agent runs (the question appended)
//	loop     model: an AIMessage calling tools, one Send per call  ┐ per tool
//	loop     tools: one push task per call                          ┘ round
//	loop     model: the answer
//	loop     _ParentNotifierMiddleware.after_agent (no writes)
//	loop     the run's last checkpoint
//
// The tools are deepagents' write_file, edit_file and delete (the files
// channel: path → FileData, None deletes) and a host tool, survey_gauge,
// that rewrites one key of a plain tool_state channel.
//
// A DeltaChannel stores its value only at snapshot checkpoints: once the
// channel has been updated in snapshot_frequency supersteps since its last
// snapshot, the checkpoint holds `true` in channel_values for it and a
// checkpoint_blobs row whose msgpack is extension 7 around the whole value.
// Everywhere else the channel has a version and no value, and its changes
// are only in checkpoint_writes. The checkpoint's metadata carries
// counters_since_delta_snapshot: per DeltaChannel, the supersteps that
// updated it and all supersteps since its last snapshot, as [updates,
// supersteps], leaving out channels at [0, 0]. (LangGraph also snapshots
// after DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT, 5000, supersteps; no thread
// written here is that long.)

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
)

// DeepParams shape one deepagents thread.
type DeepParams struct {
	// Turns is the number of user questions.
	Turns int
	// Files is how many files the thread grows to (about a third of the
	// thread's turns in) and then keeps near, writing, editing and
	// deleting.
	Files int
	// FileBytes is the mean size of a file's content.
	FileBytes int
	// SnapshotFrequency is the DeltaChannel snapshot_frequency of messages
	// and files (deepagents declares 50).
	SnapshotFrequency int
	// StateKeys is the number of tool_state keys survey_gauge writes; 0
	// means the thread never calls it.
	StateKeys int
	// Seed makes the plan, contents and ids reproducible.
	Seed uint64
}

// Validate reports the first parameter out of range.
func (p DeepParams) Validate() error {
	switch {
	case p.Turns < 1:
		return fmt.Errorf("turns %d: want at least 1", p.Turns)
	case p.Files < 1:
		return fmt.Errorf("files %d: want at least 1", p.Files)
	case p.FileBytes < 64:
		return fmt.Errorf("file bytes %d: want at least 64", p.FileBytes)
	case p.SnapshotFrequency < 1:
		return fmt.Errorf("snapshot frequency %d: want at least 1", p.SnapshotFrequency)
	case p.StateKeys < 0:
		return fmt.Errorf("state keys %d: want 0 or more", p.StateKeys)
	}
	return nil
}

// Name is a thread id that spells out the parameters.
func (p DeepParams) Name(prefix string) string {
	return fmt.Sprintf("%s-T%d-F%d-B%d-N%d-K%d", prefix, p.Turns, p.Files, p.FileBytes, p.SnapshotFrequency, p.StateKeys)
}

// Checkpoints is how many checkpoints the thread has.
func (p DeepParams) Checkpoints() int {
	n := 0
	for _, t := range p.plan() {
		n += 5 + 2*len(t.rounds)
	}
	return n
}

// DeepCheckpoint is what the generator wrote at one checkpoint, for checks.
type DeepCheckpoint struct {
	ID     string
	Step   int
	Source string
	// Messages and Humans count the messages channel's messages and the
	// human ones among them.
	Messages, Humans int
	// MessageIDs are the messages' ids in order (KeepDetail only).
	MessageIDs []string
	// Files is the files channel as plain data, path → FileData; nil
	// before the first write (KeepDetail only).
	Files map[string]any
	// ToolState is the tool_state channel as plain data; nil before the
	// first write (KeepDetail only).
	ToolState map[string]any
	// Next names the nodes of the tasks that run from the checkpoint, one
	// per task, in task order.
	Next []string
	// Snapshots lists the DeltaChannels stored whole at the checkpoint.
	Snapshots []string
	// Counters is the metadata's counters_since_delta_snapshot.
	Counters map[string][2]int
	// Writes is the number of checkpoint_writes rows of the checkpoint.
	Writes int
}

// DeepSummary describes a written deepagents thread.
type DeepSummary struct {
	ThreadID    string
	Params      DeepParams
	Checkpoints []DeepCheckpoint // in id order
	// TurnEnds maps each turn to the checkpoint it ends on, by historyd's
	// rules (most messages, then greatest id).
	TurnEnds map[int]string
	// Snapshots counts the snapshot checkpoints of each DeltaChannel.
	Snapshots map[string]int
	// FilesBlobBytes is the size of the largest files snapshot blob.
	FilesBlobBytes int
	// MessagesBlobBytes is the size of the largest messages snapshot blob.
	MessagesBlobBytes int
	// LiveFiles and FileBytes are the files and their content bytes at
	// the end; FilesWritten counts every file ever created.
	LiveFiles, FileBytes, FilesWritten int
	// Calls counts the tool calls by tool name.
	Calls map[string]int
	// TotalBlobBytes is the sum of every blob and write written.
	TotalBlobBytes int64
	// Rows counts rows per table.
	Rows map[string]int
}

// DeepExists reports whether the thread already holds exactly the
// checkpoints WriteDeep would give it.
func DeepExists(ctx context.Context, conn *pgx.Conn, threadID string, p DeepParams) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = ''`, threadID).Scan(&n)
	if err != nil {
		return false, err
	}
	return n == p.Checkpoints(), nil
}

// WriteDeep replaces the thread threadID with a generated deepagents
// thread, in one transaction, and returns what it wrote.
func WriteDeep(ctx context.Context, conn *pgx.Conn, threadID string, p DeepParams, opt Options) (*DeepSummary, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var sum *DeepSummary
	err := replace(ctx, conn, threadID, func(w *writer) (err error) {
		sum, err = buildDeep(ctx, threadID, p, opt, w.row)
		return err
	})
	return sum, err
}

// The graph's node and trigger channel names.
const (
	patchNode   = "PatchToolCallsMiddleware.before_agent"
	modelNode   = "model"
	toolsNode   = "tools"
	notifyNode  = "_ParentNotifierMiddleware.after_agent"
	toPatch     = "branch:to:" + patchNode
	toModel     = "branch:to:" + modelNode
	toNotify    = "branch:to:" + notifyNode
	tasksChan   = "__pregel_tasks"
	filesChan   = "files"
	msgsChan    = "messages"
	stateChan   = "tool_state"
	surveyTool  = "survey_gauge"
	statusLabel = "status: "
)

// deltaChannels are the thread's DeltaChannels, as LangGraph keeps their
// counters.
var deltaChannels = []string{filesChan, msgsChan}

// The tool calls a plan is made of.
type callKind int

const (
	writeNew callKind = iota
	overwrite
	edit
	remove
	survey
)

type call struct {
	kind callKind
	path string // files
	key  string // survey: the tool_state key
}

type turnPlan struct{ rounds [][]call }

// plan decides every turn's tool rounds and calls: which files are
// created, edited, overwritten and deleted, and which tool_state keys are
// rewritten. It depends on the parameters only, so that the number of
// checkpoints is known without writing the thread.
func (p DeepParams) plan() []turnPlan {
	rng := mrand.New(mrand.NewPCG(p.Seed, 0x5eed_f11e))
	var live []string
	made := 0
	dirs := []string{"notes", "drafts", "data", "reports"}
	pick := func(used map[string]bool) (string, int, bool) {
		for range 8 {
			if len(live) == 0 {
				return "", 0, false
			}
			i := rng.IntN(len(live))
			if !used[live[i]] {
				return live[i], i, true
			}
		}
		return "", 0, false
	}
	out := make([]turnPlan, p.Turns)
	for n := range out {
		filling := len(live) < p.Files
		rounds := 1 + rng.IntN(3)
		if !filling && rng.IntN(10) == 0 {
			rounds = 0 // a question answered without tools
		}
		for range rounds {
			k := 1 + rng.IntN(3)
			if filling {
				k = 2 + rng.IntN(3)
			}
			used := map[string]bool{}
			var round []call
			for range k {
				r := rng.Float64()
				kind := edit
				switch {
				case filling && r < 0.8:
					kind = writeNew
				case filling && r < 0.95:
					kind = edit
				case filling:
					kind = survey
				case r < 0.15:
					kind = writeNew
				case r < 0.6:
					kind = edit
				case r < 0.7:
					kind = overwrite
				case r < 0.85:
					kind = remove
				default:
					kind = survey
				}
				if kind == writeNew && !filling && len(live) > p.Files+p.Files/20 {
					kind = edit
				}
				if kind == survey {
					if p.StateKeys == 0 {
						kind = edit
					} else {
						key := surveyKey(rng.IntN(p.StateKeys))
						if used[key] {
							continue
						}
						used[key] = true
						round = append(round, call{kind: survey, key: key})
						continue
					}
				}
				if kind != writeNew {
					path, i, ok := pick(used)
					if !ok {
						kind = writeNew
					} else {
						used[path] = true
						round = append(round, call{kind: kind, path: path})
						if kind == remove {
							live[i] = live[len(live)-1]
							live = live[:len(live)-1]
						}
						continue
					}
				}
				made++
				path := fmt.Sprintf("/%s/topic-%04d.md", dirs[made%len(dirs)], made)
				used[path] = true
				live = append(live, path)
				round = append(round, call{kind: writeNew, path: path})
			}
			if len(round) > 0 {
				out[n].rounds = append(out[n].rounds, round)
			}
		}
	}
	return out
}

func surveyKey(i int) string { return fmt.Sprintf("survey-ops/survey_gauge/gauge_%02d", i) }

// deepFile is one file as the thread holds it.
type deepFile struct {
	content string
	status  string // the file's one status line, what edit_file replaces
	rev     int
	created string
	enc     []byte         // the FileData's msgpack
	plain   map[string]any // KeepDetail only
}

// deepThread is the state of generating one deepagents thread. It reuses
// the plain generator's ids, versions, versions_seen, messages and
// checkpoint writing (put).
type deepThread struct {
	*thread
	dp       DeepParams
	counters map[string][2]int

	msgIDs []string

	fileOrder []string // the files dict's order, as Python keeps it
	files     map[string]*deepFile

	stateOrder []string
	entries    map[string][]byte
	plainState map[string]any
	written    map[string]int
	lastTurn   map[string]int
	seq        int

	deep *DeepSummary
}

func buildDeep(ctx context.Context, threadID string, p DeepParams, opt Options, rows saver.Rows) (*DeepSummary, error) {
	plan := p.plan()
	base, err := newThread(ctx, threadID, opt, p.Turns, p.Seed, uint64(p.Turns)<<32|uint64(p.Files), rows)
	if err != nil {
		return nil, err
	}
	d := &deepThread{
		thread: base, dp: p,
		counters: map[string][2]int{},
		files:    map[string]*deepFile{},
		entries:  map[string][]byte{}, plainState: map[string]any{}, written: map[string]int{}, lastTurn: map[string]int{},
		deep: &DeepSummary{ThreadID: threadID, Params: p, TurnEnds: map[int]string{}, Snapshots: map[string]int{}, Calls: map[string]int{}},
	}
	for n, tp := range plan {
		if err := d.turn(n+1, tp); err != nil {
			return nil, err
		}
	}
	d.deep.Rows = base.sum.Rows
	d.deep.TotalBlobBytes = base.sum.TotalBlobBytes
	d.deep.LiveFiles = len(d.fileOrder)
	for _, f := range d.files {
		d.deep.FileBytes += len(f.content)
	}
	if base.err != nil {
		return nil, base.err
	}
	d.deep.FilesBlobBytes = base.blobMax[filesChan]
	d.deep.MessagesBlobBytes = base.blobMax[msgsChan]
	return d.deep, nil
}

// advance is one superstep's effect on the channel versions: the channels
// it updated (the next checkpoint's updated_channels) and the trigger
// channels its tasks consumed all get one new version.
func (d *deepThread) advance(updated []string, consumed ...string) string {
	v := d.nextVersion()
	for _, c := range updated {
		d.versions[c] = v
	}
	for _, c := range consumed {
		d.versions[c] = v
	}
	d.updated = slices.Clone(updated)
	return v
}

func (d *deepThread) turn(n int, tp turnPlan) error {
	d.now = d.now.Add(45 * time.Second)
	hid := d.uuid4()
	human, err := write.EncodeMsgpack(write.HumanMessage(hid, fmt.Sprintf("Turn %d: keep the project notes up to date with what you find.", n)))
	if err != nil {
		return err
	}
	// input: the question arrives on __start__; its task appends it.
	d.advance([]string{"__start__"})
	d.blob("__start__", concat(mapHeader(1), mustEncode(msgsChan), arrayHeader(1), human))
	d.emitDeep("input", nil, []task{{"~__pregel_pull, __start__", []pendingWrite{
		{msgsChan, concat(arrayHeader(1), human)},
		{toPatch, nil},
	}}}, []string{"__start__"})
	if n > 1 {
		// The input checkpoint holds the previous turn's messages and a
		// greater id than its last step: by the rules it is where the
		// previous turn ends.
		d.deep.TurnEnds[n-1] = d.lastID
	}

	// before_agent runs; the question is in messages.
	d.seen["__start__"] = map[string]string{"__start__": d.versions["__start__"]}
	d.addMessage("human", hid, human)
	d.advance([]string{toPatch, msgsChan}, "__start__")
	d.emitDeep("loop", none(toPatch), []task{{"~__pregel_pull, " + patchNode, []pendingWrite{
		{toModel, nil},
	}}}, []string{patchNode})
	d.seen[patchNode] = map[string]string{toPatch: d.versions[toPatch]}
	d.advance([]string{toModel}, toPatch)

	for r, round := range tp.rounds {
		// model calls the round's tools.
		aid := "lc_run--" + d.uuid4()
		var calls []write.ToolCall
		var sends [][]byte
		results := make([]*toolResult, len(round))
		for i, c := range round {
			id := fmt.Sprintf("call_%d_%d_%d_%s", n, r, i, d.hex(4))
			res, err := d.prepare(n, c, id)
			if err != nil {
				return err
			}
			results[i] = res
			tc := write.ToolCall{Name: res.tool, Args: res.args, ID: id}
			calls = append(calls, tc)
			send, err := write.EncodeMsgpack(write.Ext{Code: write.ExtPosArgs, Module: "langgraph.types", Class: "Send",
				Data: []any{toolsNode, []any{write.Map{{Key: "name", Value: tc.Name}, {Key: "args", Value: tc.Args}, {Key: "id", Value: id}, {Key: "type", Value: "tool_call"}}}}})
			if err != nil {
				return err
			}
			sends = append(sends, send)
			d.deep.Calls[res.tool]++
		}
		ai, err := write.EncodeMsgpack(write.AIMessageWith(aid, "", calls,
			write.Map{{Key: "model_name", Value: "bench-model"}, {Key: "finish_reason", Value: "tool_calls"}},
			write.Map{{Key: "input_tokens", Value: 2000 + 60*n}, {Key: "output_tokens", Value: 40 * len(calls)}, {Key: "total_tokens", Value: 2000 + 60*n + 40*len(calls)}}))
		if err != nil {
			return err
		}
		modelWrites := []pendingWrite{{msgsChan, concat(arrayHeader(1), ai)}}
		for _, s := range sends {
			modelWrites = append(modelWrites, pendingWrite{tasksChan, s})
		}
		d.emitDeep("loop", none(toModel), []task{{"~__pregel_pull, " + modelNode, modelWrites}}, []string{modelNode})

		// tools: one push task per Send.
		d.seen[modelNode] = map[string]string{toModel: d.versions[toModel]}
		d.addMessage("ai", aid, ai)
		d.advance([]string{tasksChan, msgsChan}, toModel)
		list := arrayHeader(len(sends))
		for _, s := range sends {
			list = append(list, s...)
		}
		d.blob(tasksChan, list)
		d.now = d.now.Add(time.Duration(20+d.rng.IntN(200)) * time.Millisecond)
		var tasks []task
		next := make([]string, len(round))
		for i, res := range results {
			if err := res.finish(d.now); err != nil {
				return err
			}
			tasks = append(tasks, task{fmt.Sprintf("~__pregel_push, %010d, 0000000000", i), []pendingWrite{
				{res.channel, res.update},
				{msgsChan, concat(arrayHeader(1), res.message)},
				{toModel, nil},
			}})
			next[i] = toolsNode
		}
		d.emitDeep("loop", nil, tasks, next)

		// model runs again, after the tools' writes.
		if _, ok := d.seen[toolsNode]; !ok {
			d.seen[toolsNode] = map[string]string{}
		}
		updated := []string{toModel, msgsChan}
		for _, res := range results {
			d.addMessage("tool", res.messageID, res.message)
			res.apply()
			if !slices.Contains(updated, res.channel) {
				updated = append(updated, res.channel)
			}
		}
		slices.Sort(updated)
		d.advance(updated, tasksChan)
		d.blob(tasksChan, arrayHeader(0))
		if slices.Contains(updated, stateChan) {
			d.blob(stateChan, d.stateBlob())
		}
	}

	// model answers.
	aid := "lc_run--" + d.uuid4()
	answer, err := write.EncodeMsgpack(write.AIMessageWith(aid,
		fmt.Sprintf("Turn %d: done; the workspace holds %d files.", n, len(d.fileOrder)), nil,
		write.Map{{Key: "model_name", Value: "bench-model"}, {Key: "finish_reason", Value: "stop"}},
		write.Map{{Key: "input_tokens", Value: 2100 + 60*n}, {Key: "output_tokens", Value: 30}, {Key: "total_tokens", Value: 2130 + 60*n}}))
	if err != nil {
		return err
	}
	d.emitDeep("loop", none(toModel), []task{{"~__pregel_pull, " + modelNode, []pendingWrite{
		{msgsChan, concat(arrayHeader(1), answer)},
		{toNotify, nil},
	}}}, []string{modelNode})
	d.seen[modelNode] = map[string]string{toModel: d.versions[toModel]}
	d.addMessage("ai", aid, answer)
	d.advance([]string{toNotify, msgsChan}, toModel)
	d.emitDeep("loop", none(toNotify), []task{{"~__pregel_pull, " + notifyNode, []pendingWrite{
		{"__no_writes__", nil},
	}}}, []string{notifyNode})
	d.seen[notifyNode] = map[string]string{toNotify: d.versions[toNotify]}
	d.advance(nil, toNotify)
	d.emitDeep("loop", nil, nil, nil)
	d.deep.TurnEnds[n] = d.lastID
	return nil
}

func (d *deepThread) addMessage(typ, id string, enc []byte) {
	d.appendMessage(typ, enc)
	d.msgIDs = append(d.msgIDs, id)
}

// toolResult is one tool call's effect: the update its task writes, its
// ToolMessage, and the change to the thread's state once applied.
type toolResult struct {
	tool      string
	args      write.Map
	channel   string
	update    []byte
	messageID string
	message   []byte
	// finish encodes update and message at the time the tool runs.
	finish func(now time.Time) error
	apply  func()
}

// prepare builds the tool call c makes in turn n: its arguments now (the
// model's message carries them), its writes once the tool runs.
func (d *deepThread) prepare(n int, c call, callID string) (*toolResult, error) {
	res := &toolResult{channel: filesChan, messageID: d.uuid4()}
	var content, text string
	var next *deepFile
	old := d.files[c.path]
	switch c.kind {
	case writeNew, overwrite:
		res.tool = "write_file"
		rev := 1
		if old != nil {
			rev = old.rev + 1
		}
		next = &deepFile{rev: rev}
		next.content, next.status = d.fileContent(c.path, n, rev)
		content = next.content
		res.args = write.Map{{Key: "file_path", Value: c.path}, {Key: "content", Value: content}}
		text = "Updated file " + c.path
	case edit:
		res.tool = "edit_file"
		next = &deepFile{rev: old.rev + 1, created: old.created}
		next.status = fmt.Sprintf("%srevision %d, turn %d, checked %s", statusLabel, next.rev, n, d.hex(3))
		next.content = strings.Replace(old.content, old.status, next.status, 1)
		res.args = write.Map{{Key: "file_path", Value: c.path}, {Key: "old_string", Value: old.status}, {Key: "new_string", Value: next.status}}
		text = fmt.Sprintf("Successfully replaced 1 instance(s) of the string in '%s'", c.path)
	case remove:
		res.tool = "delete"
		res.args = write.Map{{Key: "file_path", Value: c.path}}
		text = "Deleted " + c.path
	case survey:
		res.tool, res.channel = surveyTool, stateChan
		res.args = write.Map{{Key: "gauge", Value: c.key[strings.LastIndexByte(c.key, '/')+1:]}}
		text = "[state updated: " + c.key + "]"
	}
	res.finish = func(now time.Time) error {
		var err error
		if res.message, err = write.EncodeMsgpack(write.ToolMessage(res.messageID, text, res.tool, callID)); err != nil {
			return err
		}
		switch {
		case c.kind == survey:
			res.update, res.apply, err = d.surveyUpdate(n, c.key)
			return err
		case next == nil: // delete: None removes the path
			res.update = concat(mapHeader(1), mustEncode(c.path), []byte{0xc0})
			res.apply = func() { d.dropFile(c.path) }
			return nil
		}
		ts := write.IsoFormat(now)
		if next.created == "" {
			next.created = ts
			if old != nil { // write_file over a file keeps its creation time
				next.created = old.created
			}
		}
		fd := write.Map{{Key: "content", Value: next.content}, {Key: "encoding", Value: "utf-8"}, {Key: "created_at", Value: next.created}, {Key: "modified_at", Value: ts}}
		if next.enc, err = write.EncodeMsgpack(fd); err != nil {
			return err
		}
		if d.opt.KeepDetail {
			next.plain = map[string]any{"content": next.content, "encoding": "utf-8", "created_at": next.created, "modified_at": ts}
		}
		res.update = concat(mapHeader(1), mustEncode(c.path), next.enc)
		res.apply = func() { d.putFile(c.path, next) }
		return nil
	}
	return res, nil
}

// fileContent is a file's text: a title, paragraphs of words near
// FileBytes long in all, and one status line that edits replace.
func (d *deepThread) fileContent(path string, n, rev int) (content, status string) {
	words := []string{"catchment", "gauge", "flow", "reach", "tributary", "survey", "basin", "weir", "estimate", "rainfall", "outline", "sketch", "compare", "earlier", "levels", "upstream"}
	size := d.dp.FileBytes/2 + d.rng.IntN(d.dp.FileBytes+1)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nWritten in turn %d (revision %d).\n\n", path, n, rev)
	for b.Len() < size {
		line := 0
		for line < 72 {
			w := words[d.rng.IntN(len(words))]
			b.WriteString(w)
			b.WriteByte(' ')
			line += len(w) + 1
		}
		b.WriteString("\n")
	}
	status = fmt.Sprintf("%srevision %d, turn %d, checked %s", statusLabel, rev, n, d.hex(3))
	b.WriteString("\n" + status + "\n")
	return b.String(), status
}

func (d *deepThread) putFile(path string, f *deepFile) {
	if _, ok := d.files[path]; !ok {
		d.fileOrder = append(d.fileOrder, path)
		d.deep.FilesWritten++
	}
	d.files[path] = f
}

func (d *deepThread) dropFile(path string) {
	delete(d.files, path)
	if i := slices.Index(d.fileOrder, path); i >= 0 {
		d.fileOrder = slices.Delete(d.fileOrder, i, i+1)
	}
}

// surveyUpdate is survey_gauge's tool_state update of key in turn n, in
// the mcp-toolsets-runtime convention, and the function applying it.
func (d *deepThread) surveyUpdate(n int, key string) ([]byte, func(), error) {
	seq := d.seq + 1
	turns := d.written[key]
	if d.lastTurn[key] != n {
		turns++
	}
	readings := make([]any, 24)
	for i := range readings {
		readings[i] = round7(0.5 + 2*d.rng.Float64())
	}
	gauge := key[strings.LastIndexByte(key, '/')+1:]
	value := write.Map{{Key: "gauge", Value: gauge}, {Key: "level_m", Value: readings[len(readings)-1]}, {Key: "readings", Value: readings}}
	entry := write.Map{
		{Key: "value", Value: value},
		{Key: "tool", Value: surveyTool},
		{Key: "seq", Value: seq},
		{Key: "inputs", Value: write.Map{{Key: "gauge", Value: "model"}}},
		{Key: "turn", Value: n},
		{Key: "turns_written", Value: turns},
	}
	enc, err := write.EncodeMsgpack(entry)
	if err != nil {
		return nil, nil, err
	}
	var plain map[string]any
	if d.opt.KeepDetail {
		plain = map[string]any{"value": map[string]any{"gauge": gauge, "level_m": readings[len(readings)-1], "readings": readings},
			"tool": surveyTool, "seq": seq, "inputs": map[string]any{"gauge": "model"}, "turn": n, "turns_written": turns}
	}
	upd := concat(mapHeader(1), mustEncode(key), enc)
	return upd, func() {
		d.seq = seq
		if _, ok := d.entries[key]; !ok {
			d.stateOrder = append(d.stateOrder, key)
		}
		d.entries[key], d.written[key], d.lastTurn[key] = enc, turns, n
		if plain != nil {
			d.plainState[key] = plain
		}
	}, nil
}

// stateBlob is the whole tool_state map, keys in first-write order.
func (d *deepThread) stateBlob() []byte {
	b := mapHeader(len(d.stateOrder))
	for _, k := range d.stateOrder {
		b = append(b, mustEncode(k)...)
		b = append(b, d.entries[k]...)
	}
	return b
}

// deltaValue is the DeltaChannel's whole value, encoded.
func (d *deepThread) deltaValue(channel string) []byte {
	if channel == msgsChan {
		return d.messagesValue()
	}
	b := mapHeader(len(d.fileOrder))
	for _, p := range d.fileOrder {
		b = append(b, mustEncode(p)...)
		b = append(b, d.files[p].enc...)
	}
	return b
}

func (d *deepThread) messagesValue() []byte {
	size := 5
	for _, m := range d.msgs {
		size += len(m)
	}
	b := make([]byte, 0, size)
	b = append(b, arrayHeader(len(d.msgs))...)
	for _, m := range d.msgs {
		b = append(b, m...)
	}
	return b
}

// emitDeep writes one checkpoint: the DeltaChannels' counters advanced by
// the superstep before it (and a snapshot of each that reached the
// frequency), the current versions, its metadata, and the writes of the
// tasks that run from it.
func (d *deepThread) emitDeep(source string, inline write.Map, tasks []task, next []string) {
	values := slices.Clone(inline)
	var snaps []string
	for _, ch := range deltaChannels {
		c := d.counters[ch]
		c[1]++
		if slices.Contains(d.updated, ch) {
			c[0]++
		}
		if _, has := d.versions[ch]; has && c[0] >= d.dp.SnapshotFrequency {
			values = append(values, write.Field{Key: ch, Value: write.DeltaSnapshot{Value: write.Raw(d.deltaValue(ch))}})
			snaps = append(snaps, ch)
			d.deep.Snapshots[ch]++
			c = [2]int{}
		}
		d.counters[ch] = c
	}
	counters := map[string][2]int{}
	for ch, c := range d.counters {
		if c != [2]int{} {
			counters[ch] = c
		}
	}
	meta := write.Map{{Key: "ls_integration", Value: "deepagents"}}
	if len(counters) > 0 {
		meta = append(meta, write.Field{Key: "counters_since_delta_snapshot", Value: counters})
	}
	id, step := d.put(source, values, meta, tasks)
	writes := 0
	for _, tk := range tasks {
		writes += len(tk.writes)
	}
	c := DeepCheckpoint{ID: id, Step: step, Source: source, Messages: len(d.msgs), Humans: d.humans,
		Next: next, Snapshots: snaps, Counters: counters, Writes: writes}
	if d.opt.KeepDetail {
		c.MessageIDs = slices.Clone(d.msgIDs)
		if _, ok := d.versions[filesChan]; ok {
			c.Files = map[string]any{}
			for p, f := range d.files {
				c.Files[p] = f.plain
			}
		}
		if len(d.stateOrder) > 0 {
			c.ToolState = map[string]any{}
			for k, v := range d.plainState {
				c.ToolState[k] = v
			}
		}
	}
	d.deep.Checkpoints = append(d.deep.Checkpoints, c)
}

// PlanDeep is what WriteDeep would write for p, without writing it: the
// counts, sizes and snapshots of the thread (its ids and times differ from
// any written copy's).
func PlanDeep(threadID string, p DeepParams) (*DeepSummary, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return buildDeep(context.Background(), threadID, p, Options{}, nil)
}
