package demo

import (
	"slices"
	"time"

	"github.com/historyd/historyd/langgraph/saver"
	"github.com/historyd/historyd/langgraph/write"
)

// This file plays the demo conversation through the graph a ReAct agent
// compiles to, the way LangGraph's Pregel loop checkpoints it, and records
// the rows SqliteSaver would store:
//
//	START → agent → (tools → agent)* → END
//
// with the state channels messages (add_messages) and tool_state (a dict
// merge: a later write of a key replaces the entry), and the channels
// LangGraph adds: __start__ for the input, and branch:to:agent and
// branch:to:tools, which trigger the nodes. Every rule below was checked
// against checkpoints written by langgraph 1.2 with
// langgraph-checkpoint-sqlite 3.1, and the demo test replays the same
// conversation through the real packages and compares the rows.

// Channel, node and task names of the graph.
const (
	chanMessages  = "messages"
	chanToolState = "tool_state"
	chanStart     = "__start__"
	chanToAgent   = "branch:to:agent"
	chanToTools   = "branch:to:tools"
	nodeAgent     = "agent"
	nodeTools     = "tools"
	inputTask     = "__input__" // the pseudo-task that writes the input
)

// The run's config metadata, which LangGraph copies into every checkpoint's
// metadata: the mark Write looks for before it replaces a file.
const (
	generatedByKey  = "generated_by"
	generatedByDemo = "historyd demo"
)

// channelOrder is the order of the compiled graph's channels: the state
// keys, then __start__, then the branch channels. Checkpoints list their
// channel_values in this order.
var channelOrder = []string{chanMessages, chanToolState, chanStart, chanToAgent, chanToTools}

// checkpointRow is one checkpoint as the loop hands it to the saver, with
// the writes of the tasks that ran from it.
type checkpointRow struct {
	id     string
	cp     saver.Checkpoint
	humans int // human messages in its messages channel
}

// chanWrite is one (channel, value) a task writes.
type chanWrite struct {
	channel string
	value   any
}

// thread is a thread being played: the channels' values and versions as
// LangGraph's loop holds them, and the rows written so far.
type thread struct {
	id    string
	rng   *rng
	clock time.Time
	step  int // metadata step of the next checkpoint

	versions write.Map // channel → version text, in first-write order
	latest   int       // the highest version number handed out
	seen     write.Map // node → write.Map of trigger → version

	messages  []any     // lgcodec message Ext values
	toolState write.Map // key → entry
	start     any       // __start__'s value, nil when empty
	branches  map[string]bool

	seq          int            // last entry seq handed out
	turnsWritten map[string]int // key → turns that wrote it
	lastTurn     map[string]int // key → turn of its last write

	rows []checkpointRow
	err  error

	// transcript is what the user, the model and the tool said, turn by
	// turn, for replaying the conversation through LangGraph itself.
	transcript []turnRecord
}

// turnRecord is one turn of the transcript.
type turnRecord struct {
	human write.Ext
	steps []stepRecord
}

// stepRecord is one model answer and, when it called the tool, the tool's
// tool_state update and reply.
type stepRecord struct {
	ai     write.Ext
	update write.Map
	reply  *write.Ext
}

// play runs the whole script on a fresh thread starting at base.
func play(id string, base time.Time) (*thread, error) {
	t := &thread{
		id:           id,
		rng:          newRNG(id),
		clock:        base,
		step:         -1,
		branches:     map[string]bool{},
		turnsWritten: map[string]int{},
		lastTurn:     map[string]int{},
	}
	for n, turn := range script {
		if n > 0 {
			t.wait(userPause)
		}
		t.turn(n+1, turn)
	}
	return t, t.err
}

func (t *thread) wait(span [2]time.Duration) {
	// Whole microseconds: the checkpoint's ts has no finer digits, and its
	// id should name the same instant.
	t.clock = t.clock.Add(t.rng.between(span[0], span[1])).Truncate(time.Microsecond)
}

func (t *thread) turn(n int, turn turnScript) {
	human := write.HumanMessage(t.rng.uuid4(), turn.question)
	t.transcript = append(t.transcript, turnRecord{human: human})
	record := &t.transcript[len(t.transcript)-1]
	t.input(write.Map{{Key: chanMessages, Value: []any{human}}})
	t.wait(stepLatency)
	t.run(chanStart, chanStart, chanWrite{chanMessages, []any{human}}, chanWrite{chanToAgent, nil})
	for i, step := range turn.steps {
		t.wait(modelTime)
		meta, usage := t.modelMetadata(i, step)
		msgID := t.rng.runMessageID(t.clock)
		if step.call == nil {
			ai := write.AIMessageWith(msgID, step.answer, nil, meta, usage)
			record.steps = append(record.steps, stepRecord{ai: ai})
			t.run(nodeAgent, chanToAgent, chanWrite{chanMessages, []any{ai}})
			continue
		}
		call := write.ToolCall{Name: toolName, Args: step.call.arguments(), ID: t.rng.toolCallID()}
		ai := write.AIMessageWith(msgID, "", []write.ToolCall{call}, meta, usage)
		t.run(nodeAgent, chanToAgent, chanWrite{chanMessages, []any{ai}}, chanWrite{chanToTools, nil})
		t.wait(toolTime)
		// ToolNode runs the tool, which answers with a Command updating
		// tool_state and messages, in that order; the edge back to the
		// agent writes the branch channel after them.
		update := t.entries(n, step.call)
		// The tool leaves the message's id unset; add_messages gives it a
		// random one.
		reply := write.ToolMessage(t.rng.uuid4(), step.call.report(), toolName, call.ID)
		record.steps = append(record.steps, stepRecord{ai: ai, update: update, reply: &reply})
		t.run(nodeTools, chanToTools, chanWrite{chanToolState, update}, chanWrite{chanMessages, []any{reply}}, chanWrite{chanToAgent, nil})
	}
}

// modelMetadata is the response and usage metadata of the model's i-th
// answer in a turn, as a chat model reports them: why it stopped, and
// token counts that grow with the conversation.
func (t *thread) modelMetadata(i int, step modelStep) (response, usage write.Map) {
	finish := "stop"
	if step.call != nil {
		finish = "tool_calls"
	}
	in := 380 + 160*len(t.messages)
	out := 24 + 7*i + len(step.answer)/4
	response = write.Map{{Key: "finish_reason", Value: finish}, {Key: "model_name", Value: modelName}}
	usage = write.Map{{Key: "input_tokens", Value: in}, {Key: "output_tokens", Value: out}, {Key: "total_tokens", Value: in + out}}
	return response, usage
}

// entries are the tool_state entries a sketch writes in turn n, in the
// tool_state convention: seq numbers writes across the thread, turn is the
// turn of the write, turns_written counts the turns that wrote the key.
func (t *thread) entries(n int, s *sketch) write.Map {
	var out write.Map
	for _, f := range s.values() {
		t.seq++
		if t.lastTurn[f.Key] != n {
			t.turnsWritten[f.Key]++
			t.lastTurn[f.Key] = n
		}
		out = append(out, write.Field{Key: f.Key, Value: write.Map{
			{Key: "value", Value: f.Value},
			{Key: "tool", Value: toolName},
			{Key: "seq", Value: t.seq},
			{Key: "inputs", Value: s.inputs()},
			{Key: "turn", Value: n},
			{Key: "turns_written", Value: t.turnsWritten[f.Key]},
		}})
	}
	return out
}

// nextVersion is the version every channel changed by one step gets:
// SqliteSaver.get_next_version of the highest version held, one random
// fraction per step.
func (t *thread) nextVersion() string {
	t.latest++
	return channelVersion(t.latest, t.rng.float())
}

// input checkpoints the user's input: the input task writes __start__, and
// no node has run yet.
func (t *thread) input(value any) {
	v := t.nextVersion()
	if _, ok := t.seen.Get(inputTask); !ok {
		t.seen = append(t.seen, write.Field{Key: inputTask, Value: write.Map{}})
	}
	t.start = value
	t.versions = t.versions.Set(chanStart, v)
	t.save("input", []string{chanStart})
}

// run runs one node as a super-step: it records the trigger version the
// node saw, records its writes against the checkpoint it ran from, then
// applies them as apply_writes does and checkpoints the result.
func (t *thread) run(node, trigger string, writes ...chanWrite) {
	if t.err != nil {
		return
	}
	parent := &t.rows[len(t.rows)-1].cp
	trig, _ := t.versions.Get(trigger)
	seen, _ := t.seen.Get(node)
	nodeSeen, _ := seen.(write.Map)
	t.seen = t.seen.Set(node, slices.Clone(nodeSeen).Set(trigger, trig))

	path := "~__pregel_pull, " + node
	task := taskID(parent.ID, path)
	for i, w := range writes {
		parent.Writes = append(parent.Writes, saver.Write{TaskID: task, TaskPath: path, Idx: i, Channel: w.channel, Value: w.value})
	}

	v := t.nextVersion()
	// The trigger was read: an ephemeral channel empties, which changes
	// its version but does not count as an update.
	t.clear(trigger)
	t.versions = t.versions.Set(trigger, v)
	var updated []string
	for _, w := range writes {
		switch w.channel {
		case chanMessages:
			t.messages = addMessages(t.messages, w.value.([]any))
		case chanToolState:
			t.toolState = mergeState(t.toolState, w.value.(write.Map))
		default:
			t.branches[w.channel] = true
		}
		t.versions = t.versions.Set(w.channel, v)
		if !slices.Contains(updated, w.channel) {
			updated = append(updated, w.channel)
		}
	}
	slices.Sort(updated)
	t.save("loop", updated)
}

func (t *thread) clear(channel string) {
	if channel == chanStart {
		t.start = nil
	} else {
		delete(t.branches, channel)
	}
}

// addMessages is add_messages for messages that all carry ids: a message
// whose id is already held replaces it, any other is appended.
func addMessages(held, added []any) []any {
	out := slices.Clone(held)
	for _, m := range added {
		id := messageID(m)
		i := slices.IndexFunc(out, func(h any) bool { return messageID(h) == id })
		if i >= 0 {
			out[i] = m
		} else {
			out = append(out, m)
		}
	}
	return out
}

func messageID(m any) any {
	id, _ := m.(write.Ext).Data.(write.Map).Get("id")
	return id
}

// mergeState is the tool_state reducer: dict(old) updated with new, so a
// rewritten key keeps its place and a new key goes last.
func mergeState(held, update write.Map) write.Map {
	out := slices.Clone(held)
	for _, f := range update {
		out = out.Set(f.Key, f.Value)
	}
	return out
}

// save checkpoints the channels as they now stand, the way
// create_checkpoint and SqliteSaver.put do.
func (t *thread) save(source string, updated []string) {
	if t.err != nil {
		return
	}
	id := checkpointID(t.clock, t.step, t.rng.next())
	var values write.Map
	for _, ch := range channelOrder {
		// A channel appears once it has a version and only while it holds
		// a value: consumed branch and input channels drop out.
		if _, ok := t.versions.Get(ch); !ok {
			continue
		}
		switch {
		case ch == chanMessages:
			values = append(values, write.Field{Key: ch, Value: t.messages})
		case ch == chanToolState:
			values = append(values, write.Field{Key: ch, Value: t.toolState})
		case ch == chanStart && t.start != nil:
			values = append(values, write.Field{Key: ch, Value: t.start})
		case t.branches[ch]:
			values = append(values, write.Field{Key: ch, Value: nil})
		}
	}
	seen := make(write.Map, len(t.seen))
	for i, f := range t.seen {
		seen[i] = write.Field{Key: f.Key, Value: slices.Clone(f.Value.(write.Map))}
	}
	row := checkpointRow{id: id, humans: t.humans(), cp: saver.Checkpoint{
		ID: id, TS: t.clock, Values: values, Versions: slices.Clone(t.versions), VersionsSeen: seen,
		UpdatedChannels: slices.Clone(updated), Metadata: metadata(source, t.step),
	}}
	if n := len(t.rows); n > 0 {
		row.cp.Parent = t.rows[n-1].id
	}
	t.rows = append(t.rows, row)
	t.step++
}

// humans counts the human messages in the messages channel.
func (t *thread) humans() int {
	n := 0
	for _, m := range t.messages {
		if typ, _ := m.(write.Ext).Data.(write.Map).Get("type"); typ == "human" {
			n++
		}
	}
	return n
}

// metadata is the checkpoint's metadata: LangGraph's own keys, then the
// run's config metadata, generated_by, which is how Write recognises a
// file it may rewrite.
func metadata(source string, step int) write.Map {
	return write.Map{{Key: "source", Value: source}, {Key: "step", Value: step}, {Key: "parents", Value: write.Map{}},
		{Key: generatedByKey, Value: generatedByDemo}}
}
