package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/clienttest"
	"github.com/historyd/historyd/client/inspect"
	"github.com/historyd/historyd/server"
	"github.com/historyd/historyd/server/servertest"
	"github.com/historyd/historyd/store"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// startDemo serves historyd (its real server, in process) from memory with two threads: "rivers", whose
// key "area" was written in turns 1 and 2, and "pruned", the same
// conversation after the checkpointer dropped turns 1 and 2. It returns a
// Client and a function that shuts everything down.
func startDemo() (*client.Client, func()) {
	turns := []storetest.Turn{
		{Question: "Sketch the Severn catchment", Writes: map[string]any{"area": map[string]any{"name": "Severn", "km2": 11420.0}}},
		{Question: "Now the Thames", Writes: map[string]any{"area": map[string]any{"name": "Thames", "km2": 12935.0}}},
		{Question: "Which is larger?"},
		{Question: "Thanks"},
	}
	mem := storetest.NewMemory()
	storetest.Build(mem, backend.Ref{ThreadID: "rivers"}, turns)
	written := storetest.Build(mem, backend.Ref{ThreadID: "pruned"}, turns)
	mem.Delete(backend.Ref{ThreadID: "pruned"}, append(written[0].IDs, written[1].IDs...))

	srv, err := servertest.New(context.Background(), server.Config{Store: store.Config{Backend: mem}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(servertest.Target,
		client.WithInsecure(), // in-process; use WithTLS and WithToken against a real deployment
		client.WithDialOptions(srv.Dialer()))
	if err != nil {
		log.Fatal(err)
	}
	return c, func() {
		c.Close()
		if err := srv.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// Snapshot tells a pruned turn from one the thread never had, and never
// hands back another turn's state in place of the one asked for.
func ExampleClient_Snapshot() {
	c, stop := startDemo()
	defer stop()
	ctx := context.Background()

	for _, turn := range []int{0, 1, 3, 5} {
		s, err := c.Snapshot(ctx, "pruned", turn, client.WithKeys("area"))
		if err != nil {
			log.Fatal(err)
		}
		switch s.Outcome {
		case client.Found:
			fmt.Printf("turn %d: %v\n", turn, s.State["area"].Value)
		case client.NoSuchTurn:
			fmt.Printf("turn %d: never happened; the thread has had %d turns\n", turn, s.Total)
		case client.NoLongerRetained:
			fmt.Printf("turn %d (%q): pruned; retained turns are %v\n", turn, s.Question, s.Retained)
		}
	}
	// Output:
	// turn 0: never happened; the thread has had 4 turns
	// turn 1 ("Sketch the Severn catchment"): pruned; retained turns are [3 4]
	// turn 3: map[km2:12935 name:Thames]
	// turn 5: never happened; the thread has had 4 turns
}

// Snapshots returns every retained turn at once, projected here to the one
// key of interest.
func ExampleClient_Snapshots() {
	c, stop := startDemo()
	defer stop()

	h, err := c.Snapshots(context.Background(), "rivers", client.WithKeys("area"))
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range h.Turns {
		e := t.State["area"]
		fmt.Printf("turn %d %-30q area=%v (last written in turn %d, by %s)\n", t.Turn, t.Question, e.Value, e.Turn, e.Tool)
	}
	// Output:
	// turn 1 "Sketch the Severn catchment"  area=map[km2:11420 name:Severn] (last written in turn 1, by tool_area)
	// turn 2 "Now the Thames"               area=map[km2:12935 name:Thames] (last written in turn 2, by tool_area)
	// turn 3 "Which is larger?"             area=map[km2:12935 name:Thames] (last written in turn 2, by tool_area)
	// turn 4 "Thanks"                       area=map[km2:12935 name:Thames] (last written in turn 2, by tool_area)
}

// TurnIndex lists every turn with how sure its number is, and which turns
// one run answered together: here two questions sent in one message, and a
// files channel read with WithChannel.
func ExampleClient_TurnIndex() {
	mem := storetest.NewMemory()
	s := clienttest.NewScript(mem, backend.Ref{ThreadID: "notes"}, "1f0c")
	s.Run(clienttest.Input{Asked: []string{"Sketch the Severn"}, State: map[string]any{"area": 11420.0}})
	s.Run(clienttest.Input{Asked: []string{"Now the Thames", "and write both down"}, State: map[string]any{"area": 12935.0},
		Merge: map[string]map[string]any{"files": {"/notes.md": clienttest.FileData("Severn 11420, Thames 12935", 1, 1)}}})
	srv, err := servertest.New(context.Background(), server.Config{Store: store.Config{Backend: mem, StateChannels: []string{"tool_state", "files"}}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(servertest.Target, client.WithInsecure(), client.WithDialOptions(srv.Dialer()))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	idx, err := c.TurnIndex(ctx, "notes")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d turns, numbering %v\n", idx.Total, idx.Numbering)
	for _, t := range idx.Turns {
		fmt.Printf("turn %d %q answered with %v\n", t.Turn, t.Question, t.AnsweredWith)
	}
	files, err := c.Snapshot(ctx, "notes", 2, client.WithChannel("files"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(files.State["/notes.md"].Value.(map[string]any)["content"])
	// Output:
	// 3 turns, numbering complete
	// turn 1 "Sketch the Severn" answered with []
	// turn 2 "Now the Thames" answered with [3]
	// turn 3 "and write both down" answered with [2]
	// Severn 11420, Thames 12935
}

// Current reads the state the newest turn ended on, which is what a key
// holds now.
func ExampleCurrent() {
	c, stop := startDemo()
	defer stop()

	s, err := client.Current(context.Background(), c, "rivers", client.WithKeys("area"))
	if err != nil {
		log.Fatal(err)
	}
	area := s.State["area"]
	fmt.Printf("now (turn %d): %v; written in %d turns\n", s.Turn, area.Value, area.WrittenInTurns())
	// Output:
	// now (turn 4): map[km2:12935 name:Thames]; written in 2 turns
}

// The inspect_state answers, read through historyd: the present with its
// note that earlier turns wrote the key, a value labelled with its turn, and
// the two misses.
func Example_inspectState() {
	c, stop := startDemo()
	defer stop()
	ctx := context.Background()

	one := 1
	for _, read := range []struct {
		thread string
		args   inspect.Args
	}{
		{"rivers", inspect.Args{Key: "area"}},
		{"rivers", inspect.Args{Key: "area", Turn: &one}},
		{"rivers", inspect.Args{Key: "area", Path: "name", Turn: &one}},
		{"pruned", inspect.Args{Key: "area", Turn: &one}},
	} {
		answer, err := inspect.Read(ctx, c, read.thread, read.args)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(answer)
	}
	// Output:
	// {"km2":12935,"name":"Thames"}
	// [2 turns of this conversation wrote this key; the value above is the newest, and an earlier turn may have held a different one. Pass turn=<n> (the user's questions, counted from 1) to read the value a turn ended with.]
	// {"km2":11420,"name":"Severn"}
	// [This is area as it stood at the end of turn 1.]
	// "Severn"
	// [This is area.name as it stood at the end of turn 1.]
	// {"turn_no_longer_retained":1,"question":"Sketch the Severn catchment","retained_turns":[3,4],"reason":"That turn happened, but its state has since been pruned and cannot be read. Say that the value it held is no longer available; do not answer from the current value, which may be a different one."}
}

// The pieces of a minimal agent loop: a tool declared by JSON Schema, a
// model that answers with text or a tool call, and a transcript.
type (
	toolSpec struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	toolCall struct {
		ID        string
		Name      string
		Arguments string // JSON, as models emit it
	}
	message struct {
		Role       string // "user", "assistant" or "tool"
		Content    string
		ToolCallID string
		Call       *toolCall
	}
	// model stands in for a chat model: given the transcript and the tools
	// on offer, it replies with text or a tool call.
	model func(transcript []message, tools []toolSpec) message
)

// scripted is a model that replays fixed replies, in order.
func scripted(replies ...message) model {
	return func([]message, []toolSpec) message {
		r := replies[0]
		replies = replies[1:]
		return r
	}
}

// inspect_state registered as a JSON-schema tool in an agent loop. The
// scripted model reads the key, sees that two turns wrote it, and reads the
// first turn's value before answering, which is the comparison the tool
// exists to make possible.
func Example_agentLoop() {
	c, stop := startDemo()
	defer stop()
	ctx := context.Background()
	const threadID = "rivers"

	tools := []toolSpec{{Name: inspect.ToolName, Description: inspect.ToolDescription, Parameters: inspect.ParametersSchema}}
	handlers := map[string]func(ctx context.Context, args []byte) (string, error){
		inspect.ToolName: func(ctx context.Context, args []byte) (string, error) {
			return inspect.Call(ctx, c, threadID, args)
		},
	}
	llm := scripted(
		message{Role: "assistant", Call: &toolCall{ID: "call_1", Name: "inspect_state", Arguments: `{"key": "area"}`}},
		message{Role: "assistant", Call: &toolCall{ID: "call_2", Name: "inspect_state", Arguments: `{"key": "area", "turn": 1, "path": "km2"}`}},
		message{Role: "assistant", Content: "The Thames catchment (12935 km²) is larger than the Severn's (11420 km²)."},
	)

	transcript := []message{{Role: "user", Content: "How does the Thames area compare with the first one you sketched?"}}
	for {
		reply := llm(transcript, tools)
		transcript = append(transcript, reply)
		if reply.Call == nil {
			fmt.Println("assistant:", reply.Content)
			break
		}
		result := "error: unknown tool " + reply.Call.Name
		if handle, ok := handlers[reply.Call.Name]; ok {
			out, err := handle(ctx, []byte(reply.Call.Arguments))
			if err != nil {
				// A failure of the history service, not of the model's
				// arguments: report it to the model as a failed call.
				out = "error: " + err.Error()
			}
			result = out
		}
		fmt.Printf("%s(%s) ->\n%s\n", reply.Call.Name, reply.Call.Arguments, result)
		transcript = append(transcript, message{Role: "tool", ToolCallID: reply.Call.ID, Content: result})
	}
	// Output:
	// inspect_state({"key": "area"}) ->
	// {"km2":12935,"name":"Thames"}
	// [2 turns of this conversation wrote this key; the value above is the newest, and an earlier turn may have held a different one. Pass turn=<n> (the user's questions, counted from 1) to read the value a turn ended with.]
	// inspect_state({"key": "area", "turn": 1, "path": "km2"}) ->
	// 11420
	// [This is area.km2 as it stood at the end of turn 1.]
	// assistant: The Thames catchment (12935 km²) is larger than the Severn's (11420 km²).
}
