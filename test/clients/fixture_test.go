package clients_test

import (
	"encoding/base64"
	"fmt"
	"math"
	"strings"

	"github.com/historyd/historyd/client/clienttest"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/storetest"
)

// The fixture's threads besides the demo's ("demo" and "demo-pruned", see
// package demo). Add a thread here when a case needs data the others lack;
// cases refer to threads by id.
const (
	// valuesThread holds values that test every client's rendering where
	// languages differ: JSON escaping, number formatting, key order, path
	// quoting, data: URIs, outlines and excerpts. Turn 2 rewrites
	// values/numbers and first writes values/late; turn 3 writes nothing.
	valuesThread = "values"
	// togetherThread is four turns of which 2 and 3 were asked in one input
	// and answered by one run: both end on that run's state (answered_with).
	togetherThread = "together"
	// summarizedThread was asked five questions; during the third a
	// summary replaced the earlier messages, and every checkpoint up to the
	// third turn's end was pruned. The oldest one left holds the summary,
	// so historyd cannot tell how many questions came before: numbering is
	// ESTIMATED, and the questions left (the third, fourth and fifth) are
	// turns 1 to 3, of which turn 1 is no longer retained.
	summarizedThread = "summarized"
	// filesThread is a deepagents-like thread with two more state channels
	// besides tool_state: files (path → FileData) and todos (a list). Turn 2
	// rewrites /notes.md and adds /thames.md.
	filesThread = "files"
)

// fixtureChannels are the state channels the fixture's server serves
// (--state-channels): tool_state, the default, and filesThread's.
var fixtureChannels = []string{"tool_state", "files", "todos"}

// fixtureThreads returns the conversations written next to the demo's with
// storetest's Builder, one question per turn: thread id → turns. The
// threads needing checkpoints the Builder does not write (two questions in
// one input, a summary, other state channels) are scriptedThreads'.
func fixtureThreads() map[string][]storetest.Turn {
	return map[string][]storetest.Turn{
		valuesThread: {
			{Question: "Collect the awkward values", Writes: map[string]any{
				"values/strings":  awkwardStrings(),
				"values/numbers":  awkwardNumbers(1),
				"values/keys":     awkwardKeys(),
				"values/image":    images(),
				"values/deep":     map[string]any{"a": map[string]any{"b": map[string]any{"c": []any{1, []any{2, []any{3, map[string]any{"d": "deep"}}}}}}, "empty": map[string]any{}, "none": []any{}},
				"values/scalar":   "just one string, at the root",
				"values/reaches":  reaches(80),
				"values/nulls":    nullFirst(900),
				"values/wide":     wide(70),
				"values/longtext": longText(),
			}},
			{Question: "Recount the numbers", Writes: map[string]any{
				"values/numbers": awkwardNumbers(2),
				"values/late":    map[string]any{"written": "in turn 2"},
			}},
			{Question: "Which values changed?"},
		},
	}
}

func awkwardStrings() map[string]any {
	return map[string]any{
		"html":        "<b>Severn & Wye</b>",
		"quote":       `say "hi" \ back`,
		"whitespace":  "line 1\nline 2\ttabbed\r",
		"control":     "\x00\x01\x08\x0c\x1f\x7f",
		"separators":  "a\u2028b\u2029c",
		"emoji":       "Hafren – dalgylch ≈ 🏞️",
		"cjk":         "長江流域",
		"combining":   "e\u0301",
		"empty":       "",
		"long":        strings.Repeat("ab", 30),
		"replacement": "\ufffd",
	}
}

func awkwardNumbers(round int) map[string]any {
	return map[string]any{
		"round":       round,
		"int":         11420,
		"negative":    -3,
		"zero":        0,
		"neg_zero":    math.Copysign(0, -1),
		"sum":         tenths(1) + tenths(2),
		"micro":       0.000001,
		"sub_micro":   0.0000001,
		"small_exp":   1.5e-10,
		"denormal":    5e-324,
		"large":       1e20,
		"larger":      1e21,
		"huge":        1.7976931348623157e308,
		"digits":      123456789.125,
		"max_safe":    int64(1<<53 - 1),
		"beyond_safe": int64(1 << 60),
		"negative_f":  -2.5e-7,
		"flags":       []any{true, false, nil},
	}
}

func awkwardKeys() map[string]any {
	return map[string]any{
		"plain":         1,
		"with space":    2,
		"dotted.key":    3,
		"":              4,
		"ключ":          5,
		"a[0]":          6,
		"1":             7,
		"10":            8,
		"2":             9,
		"Z":             10,
		"é":             11,
		"e\u0301":       12,
		"𝔘nicode":       13,
		"！":             14,
		"under_score-1": 15,
		`quo"te`:        16,
	}
}

func images() map[string]any {
	return map[string]any{
		"caption": "Severn basin",
		"png":     "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, 301)),
		"text":    "data:text/plain,hello%20world",
		"bare":    "data:no-comma-here",
		"long":    "data:application/vnd.historyd.a-very-long-media-type+json;charset=utf-8;base64,QUJD",
		"list":    []any{"data:image/gif;base64,R0lGODlhAQABAAAAACw=", "not data: a sentence"},
	}
}

// reaches is a GeoJSON-like collection too large to return whole.
func reaches(n int) map[string]any {
	var features []any
	for i := range n {
		features = append(features, map[string]any{
			"type":       "Feature",
			"properties": map[string]any{"name": fmt.Sprintf("Severn reach %d", i), "order": i, "tidal": i%7 == 0},
			"geometry":   map[string]any{"type": "Point", "coordinates": []any{-2.1 + float64(i)/100, 51.5}},
		})
	}
	return map[string]any{"type": "FeatureCollection", "features": features}
}

// nullFirst is a large array whose first item is null: the outline shows no
// first item rather than a null one.
func nullFirst(n int) []any {
	out := []any{nil}
	for i := 1; i < n; i++ {
		out = append(out, i)
	}
	return out
}

// wide is an object with more keys than an outline lists.
func wide(n int) map[string]any {
	out := map[string]any{}
	for i := range n {
		out[fmt.Sprintf("field_%02d", i)] = map[string]any{"value": i, "label": fmt.Sprintf("Field number %d of the wide object", i)}
	}
	return out
}

// longText is a long string of multi-byte text with one word to find deep
// inside it, so an excerpt's window is placed by characters, not bytes.
func longText() map[string]any {
	return map[string]any{
		"text": strings.Repeat("ä€𝄞 ", 100) + "needle" + strings.Repeat(" ö₤🎵", 100),
		"note": "short",
	}
}

// tenths returns n/10 computed at run time: Go folds constant expressions
// exactly, so 0.1+0.2 written out would be exactly 0.3.
func tenths(n int) float64 { return float64(n) / 10 }

// scriptedThreads writes the threads whose checkpoints clienttest.Script
// lays out one by one: togetherThread, summarizedThread and filesThread.
// They go through the same saver writer as the Builder's, so they are stored
// as LangChain.js's SqliteSaver stores them.
func scriptedThreads(w storetest.Writer) {
	script := func(thread string) *clienttest.Script {
		return clienttest.NewScript(w, backend.Ref{ThreadID: thread}, "1f21")
	}
	together := script(togetherThread)
	together.Run(clienttest.Input{Asked: []string{"sketch a boundary around the Severn and call it Severn"},
		State: map[string]any{"sketch/name": "Severn", "sketch/area_km2": 11420}})
	together.Run(clienttest.Input{Asked: []string{"now sketch one around the Thames", "and colour it blue"},
		State: map[string]any{"sketch/name": "Thames", "sketch/area_km2": 12935, "sketch/colour": "blue"}})
	together.Run(clienttest.Input{Asked: []string{"which of the two is larger?"}})

	summarized := script(summarizedThread)
	summarized.Run(clienttest.Input{Asked: []string{"sketch the Severn"}, State: map[string]any{"sketch/area_km2": 11420}})
	summarized.Run(clienttest.Input{Asked: []string{"now sketch the Thames"}, State: map[string]any{"sketch/area_km2": 12935}})
	summarized.Run(clienttest.Input{Asked: []string{"compare the two areas"},
		Summary: "The user had the Severn (11420 km²) and the Thames (12935 km²) sketched."})
	summarized.Prune() // everything up to the third turn's end
	summarized.Run(clienttest.Input{Asked: []string{"now sketch the Wye"}, State: map[string]any{"sketch/area_km2": 4136}})
	summarized.Run(clienttest.Input{Asked: []string{"which of the three is smallest?"}})

	files := script(filesThread)
	files.Run(clienttest.Input{Asked: []string{"take notes on the Severn"},
		State:   map[string]any{"sketch/area_km2": 11420},
		Merge:   map[string]map[string]any{"files": {"/notes.md": clienttest.FileData("# Severn\n11420 km²\n", 0, 0)}},
		Replace: map[string]any{"todos": []any{clienttest.Todo("sketch the Severn", "completed"), clienttest.Todo("sketch the Thames", "pending")}}})
	files.Run(clienttest.Input{Asked: []string{"add the Thames to the notes"},
		State: map[string]any{"sketch/area_km2": 12935},
		Merge: map[string]map[string]any{"files": {
			"/notes.md":  clienttest.FileData("# Severn\n11420 km²\n# Thames\n12935 km²\n", 0, 1),
			"/thames.md": clienttest.FileData("The Thames basin, sketched in turn 2.", 1, 1),
		}},
		Replace: map[string]any{"todos": []any{clienttest.Todo("sketch the Severn", "completed"), clienttest.Todo("sketch the Thames", "completed")}}})
}
