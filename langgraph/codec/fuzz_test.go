package codec

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz seed corpora from the golden files")

// fuzzLimits are small enough that the fuzzer reaches the depth limit often.
var fuzzLimits = Limits{MaxDepth: 24, MaxBytes: 1 << 20}

// FuzzDecodeMsgpack checks that no msgpack input panics, and that every
// outcome is a documented value or error.
func FuzzDecodeMsgpack(f *testing.F) {
	f.Add([]byte{0x91, 0xc0})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, "msgpack", data)
	})
}

// FuzzDecodeJSON is FuzzDecodeMsgpack for JSON blobs.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`[1, "\ud800", NaN, {"lc":2,"type":"undefined"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, "json", data)
	})
}

// FuzzScanMessages checks that ScanMessages never panics, fails only with
// the documented errors, and agrees with Decode whenever Decode accepts a
// list.
func FuzzScanMessages(f *testing.F) {
	f.Add([]byte{0x91, 0x82, 0xa4, 't', 'y', 'p', 'e', 0xa5, 'h', 'u', 'm', 'a', 'n', 0xa7, 'c', 'o', 'n', 't', 'e', 'n', 't', 0xa1, 'q'}, false)
	f.Add([]byte(`[{"type":"human","content":"q"}]`), true)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		typ := "msgpack"
		if isJSON {
			typ = "json"
		}
		_, err := ScanMessages(typ, data, fuzzLimits)
		checkErrType(t, err)
		_, err = CountMessages(typ, data, fuzzLimits)
		checkErrType(t, err)
		checkScanAgreesWithDecode(t, typ, data, fuzzLimits)
	})
}

func checkDecode(t *testing.T, typ string, data []byte) {
	v, ok, err := Decode(typ, data, fuzzLimits)
	checkErrType(t, err)
	if err != nil {
		return
	}
	if !ok {
		t.Fatal("ok = false without an error")
	}
	if err := checkPlain(v, 0); err != nil {
		t.Fatal(err)
	}
}

func checkErrType(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ue *UnsupportedError
	var me *MalformedError
	var le *LimitError
	if !errors.As(err, &ue) && !errors.As(err, &me) && !errors.As(err, &le) {
		t.Fatalf("error of type %T: %v", err, err)
	}
	if err.Error() == "" {
		t.Fatal("empty error message")
	}
}

// checkPlain verifies that v uses only the documented Go types.
func checkPlain(v any, depth int) error {
	if depth > 1000 {
		return errors.New("value nested beyond any limit")
	}
	switch v := v.(type) {
	case nil, bool, int64, float64, string, []byte:
	case uint64:
		if v <= 1<<63-1 {
			return fmt.Errorf("uint64 %d fits in int64", v)
		}
	case []any:
		for _, e := range v {
			if err := checkPlain(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range v {
			if err := checkPlain(e, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("value of type %T", v)
	}
	return nil
}

// TestFuzzSeeds keeps the checked-in seed corpora in step with the golden
// files; run with -update-fuzz-seeds to rewrite them.
func TestFuzzSeeds(t *testing.T) {
	type seed struct {
		fuzz, name string
		values     []any
	}
	var seeds []seed
	for _, file := range []string{"python_golden.json", "js_golden.json"} {
		prefix := strings.TrimSuffix(file, "_golden.json")
		for _, c := range loadGolden(t, file).Cases {
			name := prefix + "_" + c.Name
			data := c.data(t)
			switch c.Type {
			case "msgpack":
				seeds = append(seeds, seed{"FuzzDecodeMsgpack", name, []any{data}})
			case "json":
				seeds = append(seeds, seed{"FuzzDecodeJSON", name, []any{data}})
			default:
				continue
			}
			if c.Messages != nil || strings.Contains(c.Name, "delta") {
				seeds = append(seeds, seed{"FuzzScanMessages", name, []any{data, c.Type == "json"}})
			}
		}
	}
	for _, s := range seeds {
		path := filepath.Join("testdata", "fuzz", s.fuzz, s.name)
		want := corpusFile(s.values...)
		if *updateSeeds {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s is missing or stale; run go test -run TestFuzzSeeds -update-fuzz-seeds", path)
		}
	}
}

// corpusFile writes values in the format of go test's fuzzing corpus.
func corpusFile(values ...any) []byte {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			b.WriteString("[]byte(" + strconv.Quote(string(v)) + ")\n")
		case bool:
			b.WriteString("bool(" + strconv.FormatBool(v) + ")\n")
		}
	}
	return []byte(b.String())
}
