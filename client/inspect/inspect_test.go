package inspect_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/historyd/historyd/client"
	"github.com/historyd/historyd/client/inspect"
)

// fakeHistory is a ThreadHistory over fixed turns, recording what each
// Snapshot asked for so tests can check projection.
type fakeHistory struct {
	total     int
	questions map[int]string
	turns     map[int]map[string]client.Entry // retained turns only
	answered  map[int][]int                   // turn → the turns asked with it
	numbering client.Numbering

	mu       sync.Mutex
	calls    []string
	channels []string // the channel each Snapshot asked for
}

func (f *fakeHistory) Snapshots(ctx context.Context, threadID string, opts ...client.ReadOption) (*client.History, error) {
	h := &client.History{Total: f.total, Numbering: f.numbering}
	for _, n := range slices.Sorted(maps.Keys(f.turns)) {
		h.Turns = append(h.Turns, client.TurnState{Turn: n, Question: f.questions[n], State: project(f.turns[n], client.NewReadConfig(opts...).Keys),
			AnsweredWith: f.answered[n], Numbering: f.numbering})
	}
	return h, nil
}

func (f *fakeHistory) Snapshot(ctx context.Context, threadID string, turn int, opts ...client.ReadOption) (*client.Snapshot, error) {
	cfg := client.NewReadConfig(opts...)
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%d%v", turn, cfg.Keys))
	f.channels = append(f.channels, cfg.Channel)
	f.mu.Unlock()
	h, _ := f.Snapshots(ctx, threadID, opts...)
	s := h.At(turn)
	if s.Outcome == client.NoLongerRetained {
		s.Question = f.questions[turn]
	}
	return s, nil
}

func project(st map[string]client.Entry, keys []string) map[string]client.Entry {
	if len(keys) == 0 {
		return st
	}
	out := map[string]client.Entry{}
	for _, k := range keys {
		if e, ok := st[k]; ok {
			out[k] = e
		}
	}
	return out
}

// pngURI is an embedded image whose payload is 300 bytes.
var pngURI = "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, 300))

// bigCollection is a GeoJSON-like value too large to return whole.
func bigCollection(name string) map[string]any {
	var features []any
	for i := range 60 {
		features = append(features, map[string]any{
			"type":       "Feature",
			"properties": map[string]any{"name": fmt.Sprintf("%s reach %d", name, i), "order": float64(i)},
			"geometry":   map[string]any{"type": "Point", "coordinates": []any{-2.1 + float64(i)/100, 51.5}},
		})
	}
	return map[string]any{"type": "FeatureCollection", "features": features}
}

func entry(v any, turn, written int) client.Entry {
	return client.Entry{Value: v, Tool: "sketch", Turn: turn, TurnsWritten: written}
}

// demo is a four-turn thread whose first turn has been pruned. "area" was
// written in turns 2 and 3; "notes" first appears in turn 4.
func demo() *fakeHistory {
	t2 := map[string]client.Entry{
		"area": entry(map[string]any{"name": "Severn", "km2": 11420.0}, 2, 1),
	}
	t3 := map[string]client.Entry{
		"area":  entry(map[string]any{"name": "Thames", "km2": 12935.0}, 3, 2),
		"image": entry(map[string]any{"caption": "Thames basin", "src": pngURI}, 3, 1),
		"big":   entry(bigCollection("Thames"), 3, 1),
	}
	t4 := maps.Clone(t3)
	t4["notes"] = entry("compare areas", 4, 1)
	return &fakeHistory{
		total:     4,
		questions: map[int]string{1: "sketch the Wye", 2: "sketch the Severn", 3: "now the Thames", 4: "compare"},
		turns:     map[int]map[string]client.Entry{2: t2, 3: t3, 4: t4},
	}
}

func turn(n int) *int { return &n }

func TestRead(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		nilH bool
		args inspect.Args
		// want is the whole answer when set; otherwise the answer must
		// contain every string in has and none in hasNot.
		want   string
		has    []string
		hasNot []string
	}{
		{
			name: "current value, key written in two turns",
			args: inspect.Args{Key: "area"},
			want: `{"km2":12935,"name":"Thames"}` + "\n[2 turns of this conversation wrote this key; the value above is the newest, and an earlier turn may have held a different one. Pass turn=<n> (the user's questions, counted from 1) to read the value a turn ended with.]",
		},
		{
			name: "value at a turn",
			args: inspect.Args{Key: "area", Turn: turn(2)},
			want: `{"km2":11420,"name":"Severn"}` + "\n[This is area as it stood at the end of turn 2.]",
		},
		{
			name: "value at a turn never says it is the newest",
			args: inspect.Args{Key: "area", Turn: turn(3)},
			want: `{"km2":12935,"name":"Thames"}` + "\n[This is area as it stood at the end of turn 3.]",
		},
		{
			name: "no such turn past the total",
			args: inspect.Args{Key: "area", Turn: turn(7)},
			want: `{"no_such_turn":7,"turns_so_far":4,"reason":"Turns are the user's questions, counted from 1; this conversation has had 4 so far."}`,
		},
		{
			name: "no such turn below 1",
			args: inspect.Args{Key: "area", Turn: turn(0)},
			has:  []string{`"no_such_turn":0`, `"turns_so_far":4`},
		},
		{
			name:   "turn no longer retained",
			args:   inspect.Args{Key: "area", Turn: turn(1)},
			want:   `{"turn_no_longer_retained":1,"question":"sketch the Wye","retained_turns":[2,3,4],"reason":"That turn happened, but its state has since been pruned and cannot be read. Say that the value it held is no longer available; do not answer from the current value, which may be a different one."}`,
			hasNot: []string{"Thames", "Severn"},
		},
		{
			name: "no turn history",
			nilH: true,
			args: inspect.Args{Key: "area", Turn: turn(2)},
			want: `{"no_turn_history":2,"reason":"This deployment keeps no per-turn history, so only the current value of a key can be read. Call again without turn."}`,
		},
		{
			name:   "key missing at a turn",
			args:   inspect.Args{Key: "notes", Turn: turn(2)},
			want:   `{"unknown_or_empty_key":"notes","at_turn":2,"available_keys":{"area":"object(2 keys: km2, name)"},"reason":"Nothing was stored under this key at the end of turn 2. A later turn may have written it; read it without turn for its current value."}`,
			hasNot: []string{"hint"},
		},
		{
			name:   "key missing now",
			args:   inspect.Args{Key: "nope"},
			has:    []string{`"unknown_or_empty_key":"nope"`, `"area":"object(2 keys: km2, name); written in 2 turns"`, `"notes":"\"compare areas\""`},
			hasNot: []string{"at_turn", "reason"},
		},
		{
			name: "pattern over one key",
			args: inspect.Args{Key: "big", Pattern: `reach 1\d\b`},
			has: []string{
				`10 matches for "reach 1\\d\\b" in big:`,
				`features[10].properties.name = "Thames reach 10"`,
				`features[19].properties.name = "Thames reach 19"`,
			},
			hasNot: []string{"reach 9\"", "reach 20"},
		},
		{
			name: "pattern matches paths case-insensitively",
			args: inspect.Args{Key: "big", Pattern: "FEATURES\\[3\\]\\.GEOMETRY\\.TYPE"},
			want: `1 match for "FEATURES\\[3\\]\\.GEOMETRY\\.TYPE" in big:` + "\n" + `features[3].geometry.type = "Point"`,
		},
		{
			name: "invalid regex is literal text",
			args: inspect.Args{Key: "area", Pattern: "Thames("},
			has:  []string{`No match for "Thames(" in area (2 values searched) (not a valid regular expression, so matched as plain text). Its structure: km2: 12935, name: "Thames"`},
		},
		{
			name: "pattern at a turn ends with the turn",
			args: inspect.Args{Key: "area", Pattern: "name", Turn: turn(2)},
			want: `1 match for "name" in area:` + "\n" + `name = "Severn"` + "\n[This is area as it stood at the end of turn 2.]",
		},
		{
			name: "pattern across all keys",
			args: inspect.Args{Key: "*", Pattern: "^area\\."},
			want: `2 matches for "^area\\." in all keys:` + "\n" + `area.km2 = 12935` + "\n" + `area.name = "Thames"`,
		},
		{
			name: "path into a sub-value",
			args: inspect.Args{Key: "big", Path: "features[2].properties.name"},
			want: `"Thames reach 2"`,
		},
		{
			name: "path repeating the key, at a turn",
			args: inspect.Args{Key: "big", Path: "big.features[2].geometry", Turn: turn(3)},
			want: `{"coordinates":[-2.08,51.5],"type":"Point"}` + "\n[This is big.features[2].geometry as it stood at the end of turn 3.]",
		},
		{
			name: "path with a quoted segment",
			args: inspect.Args{Key: "big", Path: `features[0]["properties"].order`},
			want: `0`,
		},
		{
			name: "bad path lists the keys available there",
			args: inspect.Args{Key: "big", Path: "features[0].props.name"},
			want: `{"path_not_found":"features[0].props.name","key":"big","failed_at":"props","found":"object(3 keys: geometry, properties, type)","available_keys":["geometry","properties","type"]}`,
		},
		{
			name: "index out of range",
			args: inspect.Args{Key: "big", Path: "features[60]"},
			has:  []string{`"failed_at":"60"`, `"reason":"Array indexes run from 0 to 59."`},
		},
		{
			name: "path into a scalar",
			args: inspect.Args{Key: "notes", Path: "x"},
			has:  []string{`"failed_at":"x"`, `"reason":"A string has no parts to read."`},
		},
		{
			name: "malformed path",
			args: inspect.Args{Key: "big", Path: "features[x"},
			has:  []string{`"failed_at":"[x"`, `"reason":"The path cannot be read from here on.`},
		},
		{
			name: "large value becomes an outline",
			args: inspect.Args{Key: "big"},
			has: []string{
				`{"key":"big","size_chars":`,
				`"type":"object"`,
				`"outline":{"features":"array[60] of object(3 keys: geometry, properties, type)","type":"\"FeatureCollection\""}`,
				`"hint":"Too large to return whole. Pass pattern=<regex> to search it, or path=<path> (e.g. a.b[0].c) to read one part."`,
			},
			hasNot: []string{"reach 5"},
		},
		{
			name: "large array sub-value outline shows the first item",
			args: inspect.Args{Key: "big", Path: "features"},
			has: []string{
				`{"key":"big.features","size_chars":`,
				`"type":"array","outline":{"length":60,"items":"object(3 keys: geometry, properties, type)","first":{"geometry":`,
			},
		},
		{
			name:   "data URI redacted",
			args:   inspect.Args{Key: "image"},
			want:   `{"caption":"Thames basin","src":"<data:image/png;base64, 300 bytes>"}`,
			hasNot: []string{"AAAA"},
		},
		{
			name:   "data URI redacted before search",
			args:   inspect.Args{Key: "image", Pattern: "AAAA|base64"},
			want:   `1 match for "AAAA|base64" in image:` + "\n" + `src = "<data:image/png;base64, 300 bytes>"`,
			hasNot: []string{"AAAA\""},
		},
		{
			name: "listing every key",
			args: inspect.Args{Key: "*"},
			want: `{"available_keys":{"area":"object(2 keys: km2, name); written in 2 turns","big":"object(2 keys: features, type)","image":"object(2 keys: caption, src)","notes":"\"compare areas\""}}`,
		},
		{
			name: "listing at a turn names it",
			args: inspect.Args{Key: "", Turn: turn(2)},
			want: `{"at_turn":2,"available_keys":{"area":"object(2 keys: km2, name)"}}`,
		},
		{
			name: "path needs a key",
			args: inspect.Args{Key: "*", Path: "a.b"},
			has:  []string{`{"error":"path needs a specific key","available_keys":{`},
		},
		{
			name: "handle prefix is read as the key",
			args: inspect.Args{Key: "@state:notes"},
			want: `"compare areas"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h client.ThreadHistory
			if !tt.nilH {
				h = demo()
			}
			got, err := inspect.Read(ctx, h, "thread-1", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("answer:\n%s\nwant:\n%s", got, tt.want)
			}
			for _, s := range tt.has {
				if !strings.Contains(got, s) {
					t.Errorf("answer lacks %s:\n%s", s, got)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(got, s) {
					t.Errorf("answer contains %s:\n%s", s, got)
				}
			}
		})
	}
}

func TestReadTurnNotes(t *testing.T) {
	ctx := context.Background()
	together := demo()
	together.answered = map[int][]int{2: {4, 3}, 3: {2, 4}, 4: {2, 3}}
	estimated := demo()
	estimated.numbering = client.NumberingEstimated
	estimated.questions[3] = strings.Repeat("very long question ", 20)
	counted := demo()
	counted.numbering = client.NumberingCounted
	const shared = "Turns 2, 3 and 4 were asked in one message and answered by one run, so each of them shows the state that run ended on."
	const guess = "Turn numbers here are estimated and may be too low: the oldest part of this conversation's saved history was pruned, and what is left does not show how many questions came before it."
	long := strings.Repeat("very long question ", 20)
	quoted := `"` + string([]rune(long)[:inspect.DefaultMaxLineChars]) + fmt.Sprintf(`…(+%d chars)"`, len(long)-inspect.DefaultMaxLineChars)

	for _, tt := range []struct {
		name string
		h    *fakeHistory
		args inspect.Args
		want string
	}{
		{"answered together: the value's turn line names them all", together, inspect.Args{Key: "notes", Turn: turn(4)},
			`"compare areas"` + "\n[This is notes as it stood at the end of turn 4. " + shared + "]"},
		{"answered together: a listing's note", together, inspect.Args{Key: "*", Turn: turn(2)},
			`{"at_turn":2,"available_keys":{"area":"object(2 keys: km2, name)"},"note":"` + shared + `"}`},
		{"answered together: a search over every key", together, inspect.Args{Key: "*", Turn: turn(2), Pattern: "severn"},
			"1 match for \"severn\" in all keys at the end of turn 2:\narea.name = \"Severn\"\n[" + shared + "]"},
		{"answered together: nothing said of the present", together, inspect.Args{Key: "notes"}, `"compare areas"`},
		{"estimated: a found turn quotes its question, capped", estimated, inspect.Args{Key: "area", Turn: turn(3), Path: "km2"},
			"12935\n[This is area.km2 as it stood at the end of turn 3. " + guess + " Turn 3 is the question " + quoted + ".]"},
		{"estimated: no such turn", estimated, inspect.Args{Key: "area", Turn: turn(9)},
			`{"no_such_turn":9,"turns_so_far":4,"reason":"Turns are the user's questions, counted from 1; this conversation has had 4 so far.","note":"` + guess + `"}`},
		{"estimated: no longer retained", estimated, inspect.Args{Key: "area", Turn: turn(1)},
			`{"turn_no_longer_retained":1,"question":"sketch the Wye","retained_turns":[2,3,4],"reason":"That turn happened, but its state has since been pruned and cannot be read. Say that the value it held is no longer available; do not answer from the current value, which may be a different one.","note":"` + guess + `"}`},
		{"estimated: a key missing then", estimated, inspect.Args{Key: "notes", Turn: turn(2)},
			`{"unknown_or_empty_key":"notes","at_turn":2,"available_keys":{"area":"object(2 keys: km2, name)"},"reason":"Nothing was stored under this key at the end of turn 2. A later turn may have written it; read it without turn for its current value.","note":"` + guess + ` Turn 2 is the question \"sketch the Severn\"."}`},
		{"counted: nothing said", counted, inspect.Args{Key: "area", Turn: turn(2), Path: "km2"},
			"11420\n[This is area.km2 as it stood at the end of turn 2.]"},
		{"counted: nothing said of a pruned turn", counted, inspect.Args{Key: "area", Turn: turn(1)},
			`{"turn_no_longer_retained":1,"question":"sketch the Wye","retained_turns":[2,3,4],"reason":"That turn happened, but its state has since been pruned and cannot be read. Say that the value it held is no longer available; do not answer from the current value, which may be a different one."}`},
	} {
		got, err := inspect.Read(ctx, tt.h, "t", tt.args)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestReadChannel(t *testing.T) {
	ctx := context.Background()
	h := demo()
	in := &inspect.Inspector{History: h, Options: []client.ReadOption{client.WithChannel("files")}}
	for _, args := range []inspect.Args{{Key: "area", Turn: turn(2)}, {Key: "nope"}} {
		if _, err := in.Read(ctx, "t", args); err != nil {
			t.Fatal(err)
		}
	}
	// Every read, the present's probe and its second read included.
	if want := []string{"files", "files", "files", "files"}; !slices.Equal(h.channels, want) {
		t.Errorf("channels read = %v (calls %v), want %v", h.channels, h.calls, want)
	}
}

func TestReadProjects(t *testing.T) {
	ctx := context.Background()
	h := demo()
	if _, err := inspect.Read(ctx, h, "t", inspect.Args{Key: "area", Turn: turn(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := inspect.Read(ctx, h, "t", inspect.Args{Key: "area"}); err != nil {
		t.Fatal(err)
	}
	// A miss needs the listing, so it reads the whole turn a second time.
	if _, err := inspect.Read(ctx, h, "t", inspect.Args{Key: "nope", Turn: turn(3)}); err != nil {
		t.Fatal(err)
	}
	// So does a miss of the present, at the same turn the first read found
	// to be the newest.
	if _, err := inspect.Read(ctx, h, "t", inspect.Args{Key: "nope"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"2[area]", "0[area]", "4[area]", "3[nope]", "3[]", "0[nope]", "4[nope]", "4[]"}
	if !slices.Equal(h.calls, want) {
		t.Errorf("snapshot calls = %v, want %v", h.calls, want)
	}
}

func TestReadPresent(t *testing.T) {
	ctx := context.Background()
	live := map[string]client.Entry{
		"area":  {Value: map[string]any{"name": "Thames", "km2": 12935}, TurnsWritten: 2},
		"count": {Value: int64(1) << 60},
	}
	in := &inspect.Inspector{
		Present:      func(context.Context, string) (map[string]client.Entry, error) { return live, nil },
		DeclaredKeys: []string{"river"},
	}
	got, err := in.Read(ctx, "t", inspect.Args{Key: "area"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, `{"km2":12935,"name":"Thames"}`+"\n[2 turns") {
		t.Errorf("present read = %q", got)
	}
	got, _ = in.Read(ctx, "t", inspect.Args{Key: "count"})
	if got != "1152921504606846976" {
		t.Errorf("large integer = %q; want every digit", got)
	}
	got, _ = in.Read(ctx, "t", inspect.Args{Key: "river"})
	if !strings.Contains(got, `"hint":"A tool declares this key`) {
		t.Errorf("declared key miss = %q; want the hint", got)
	}
	got, _ = in.Read(ctx, "t", inspect.Args{Key: "area", Turn: turn(1)})
	if !strings.HasPrefix(got, `{"no_turn_history":1,`) {
		t.Errorf("turn read without history = %q", got)
	}

	if _, err := inspect.Read(ctx, nil, "t", inspect.Args{Key: "area"}); !errors.Is(err, inspect.ErrNoState) {
		t.Errorf("present read with nothing to read = %v; want ErrNoState", err)
	}
	failing := &inspect.Inspector{Present: func(context.Context, string) (map[string]client.Entry, error) {
		return nil, errors.New("boom")
	}}
	if _, err := failing.Read(ctx, "t", inspect.Args{Key: "area"}); err == nil || err.Error() != "boom" {
		t.Errorf("failing Present = %v; want its error", err)
	}
}

func TestReadEmptyThread(t *testing.T) {
	h := &fakeHistory{turns: map[int]map[string]client.Entry{}}
	got, err := inspect.Read(context.Background(), h, "t", inspect.Args{Key: "area"})
	if err != nil {
		t.Fatal(err)
	}
	if got != `{"unknown_or_empty_key":"area","available_keys":{}}` {
		t.Errorf("read of a thread with no turns = %s", got)
	}
	got, _ = inspect.Read(context.Background(), h, "t", inspect.Args{Key: "area", Turn: turn(1)})
	if !strings.Contains(got, "has had none yet") {
		t.Errorf("turn read of a thread with no turns = %s", got)
	}
}

func TestReadLimits(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("x", 300) + "needle" + strings.Repeat("y", 300)
	in := &inspect.Inspector{
		Present: func(context.Context, string) (map[string]client.Entry, error) {
			return map[string]client.Entry{
				"long":  {Value: long},
				"items": {Value: []any{"a1", "a2", "a3", "a4"}},
			}, nil
		},
		MaxMatches:    2,
		MaxLineChars:  20,
		MaxValueChars: 10,
	}
	got, _ := in.Read(ctx, "t", inspect.Args{Key: "long", Pattern: "needle"})
	if want := "1 match for \"needle\" in long:\n. = …xxxxxxxneedleyyyyyyy…"; got != want {
		t.Errorf("windowed match = %q, want %q", got, want)
	}
	got, _ = in.Read(ctx, "t", inspect.Args{Key: "items", Pattern: "a"})
	if want := "4 matches for \"a\" in items (first 2 shown):\n[0] = \"a1\"\n[1] = \"a2\""; got != want {
		t.Errorf("capped matches = %q, want %q", got, want)
	}
	got, _ = in.Read(ctx, "t", inspect.Args{Key: "long"})
	if !strings.Contains(got, `"outline":"string(606 chars)"`) {
		t.Errorf("long string outline = %q", got)
	}
}

func TestCall(t *testing.T) {
	ctx := context.Background()
	h := demo()
	tests := []struct {
		args string
		want string // prefix of the answer
	}{
		{`{"key":"area","turn":2}`, `{"km2":11420`},
		{`{"key":"area","turn":"2"}`, `{"km2":11420`},
		{`{"key":"area","turn":2.0,"pattern":null,"extra":true}`, `{"km2":11420`},
		{`"{\"key\":\"area\",\"turn\":2}"`, `{"km2":11420`},
		{`{"key":"area","turn":null}`, `{"km2":12935`},
		{`{"key":"area","turn":1}`, `{"turn_no_longer_retained":1`},
		{`{"turn":2}`, `{"invalid_arguments":"key is required`},
		{`{"key":7}`, `{"invalid_arguments":"key must be a string, got 7"`},
		{`{"key":"area","turn":2.5}`, `{"invalid_arguments":"turn must be a whole number`},
		{`not json`, `{"invalid_arguments":"the arguments are not a JSON object"`},
		{``, `{"invalid_arguments":"the arguments are not a JSON object"`},
	}
	for _, tt := range tests {
		got, err := inspect.Call(ctx, h, "t", []byte(tt.args))
		if err != nil {
			t.Errorf("Call(%s): %v", tt.args, err)
			continue
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("Call(%s) = %s\nwant prefix %s", tt.args, got, tt.want)
		}
	}
}

func TestSchema(t *testing.T) {
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(inspect.ParametersSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || !slices.Equal(schema.Required, []string{"key"}) {
		t.Errorf("schema = %+v", schema)
	}
	// Every argument Args reads is declared, and nothing else.
	got := slices.Sorted(maps.Keys(schema.Properties))
	if want := []string{"key", "path", "pattern", "turn"}; !slices.Equal(got, want) {
		t.Errorf("schema properties = %v, want %v", got, want)
	}
	if inspect.ToolName != "inspect_state" || !strings.Contains(inspect.ToolDescription, "turn=<n>") {
		t.Errorf("tool name/description not as expected")
	}
}

// A host that passes no thread id has a history the tool cannot read: the
// answer says the host named no thread (not that the deployment keeps no
// history, which would be false), whether the read is of a turn or of the
// present, and the host's author reads why in the log.
func TestReadWithoutThread(t *testing.T) {
	ctx := context.Background()
	var logs strings.Builder
	h := demo()
	in := &inspect.Inspector{History: h, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	const reason = `"reason":"The host running this tool did not name this conversation's thread, so its saved state cannot be read, now or at any turn. Calling again will not change that: say that the state could not be read."}`
	for _, tt := range []struct {
		args inspect.Args
		want string
	}{
		{inspect.Args{Key: "area", Turn: turn(2)}, `{"no_thread_id":true,"turn":2,` + reason},
		{inspect.Args{Key: "area"}, `{"no_thread_id":true,` + reason},
		{inspect.Args{Key: "*", Turn: turn(1)}, `{"no_thread_id":true,"turn":1,` + reason},
	} {
		got, err := in.Read(ctx, "", tt.args)
		if err != nil {
			t.Fatalf("%+v: %v", tt.args, err)
		}
		if got != tt.want {
			t.Errorf("%+v:\n got: %s\nwant: %s", tt.args, got, tt.want)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"inspect_state: called without a thread id"); n != 3 {
		t.Errorf("%d warnings for 3 calls without a thread id; log:\n%s", n, logs.String())
	}
	if len(h.calls) != 0 {
		t.Errorf("the history was read: %v", h.calls)
	}

	// Without a history, "no per-turn history" is the truth, thread or not.
	got, _ := (&inspect.Inspector{}).Read(ctx, "", inspect.Args{Key: "area", Turn: turn(2)})
	if !strings.HasPrefix(got, `{"no_turn_history":2,`) {
		t.Errorf("no history, no thread: %s", got)
	}
	// A host holding the present itself still answers present reads.
	live := &inspect.Inspector{History: demo(), Present: func(context.Context, string) (map[string]client.Entry, error) {
		return map[string]client.Entry{"k": {Value: 1.0}}, nil
	}, Logger: slog.New(slog.DiscardHandler)}
	if got, _ := live.Read(ctx, "", inspect.Args{Key: "k"}); got != "1" {
		t.Errorf("present read from Present without a thread: %s", got)
	}

	d, err := in.Diff(ctx, "", inspect.DiffArgs{Key: "area"})
	if err != nil || !strings.HasPrefix(d, `{"no_thread_id":true,"reason":"The host running this tool did not name this conversation's thread, so`) {
		t.Errorf("diff without a thread: %s, %v", d, err)
	}
}
