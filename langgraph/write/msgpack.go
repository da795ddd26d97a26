package write

import (
	"github.com/historyd/historyd/langgraph/format"

	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file is the writing side: msgpack that Python's JsonPlusSerializer
// reads back as the objects LangGraph itself would have stored. historyd
// never writes to a checkpointer; the encoder exists so that demo data and
// tests can produce checkpoints in the real format without running Python.
//
// The bytes are the ones ormsgpack (the serializer's msgpack library) would
// produce for the same Python value: every integer, string, binary, array,
// map and extension header in its shortest form, every float as a 64-bit
// float (Python floats are doubles), and map entries in the order given, as
// a Python dict keeps them.

// Extension codes of Python's JsonPlusSerializer that the encoder writes.
// Each extension's payload is the msgpack of a (module, class, data) tuple,
// with a fourth element naming a method for ExtMethod and ExtPydanticV2.
const (
	// ExtSingleArg rebuilds a value as module.class(data): UUIDs, Decimals,
	// sets, enums.
	ExtSingleArg int8 = 0
	// ExtPosArgs rebuilds a value as module.class(*data): dates,
	// timedeltas, Send.
	ExtPosArgs int8 = 1
	// ExtKwArgs rebuilds a value as module.class(**data): dataclasses,
	// namedtuples, times.
	ExtKwArgs int8 = 2
	// ExtMethod rebuilds a value as module.class.method(data): datetimes
	// (method "fromisoformat").
	ExtMethod int8 = 3
	// ExtPydanticV1 rebuilds a pydantic v1 model from its field map.
	ExtPydanticV1 int8 = 4
	// ExtPydanticV2 rebuilds a pydantic v2 model, such as every LangChain
	// message, from its model_dump field map.
	ExtPydanticV2 int8 = 5
)

// extDeltaSnapshot is the extension code of a DeltaChannel snapshot, whose
// payload is the value itself rather than a (module, class, data) tuple.
const extDeltaSnapshot int8 = 7

// Map is a map whose entries are written in the order given: format.Map,
// named here too because every value the writers take is built of it.
type Map = format.Map

// Field is one entry of a Map: format.Field.
type Field = format.Field

// Ext is a value of one of Python's extension types, codes 0 to 5: the
// object that Python rebuilds from Module, Class and Data when it loads the
// value. Decode turns it back into Data.
type Ext struct {
	// Code is the extension code, ExtSingleArg to ExtPydanticV2.
	Code int8
	// Module is the Python module defining Class, e.g.
	// "langchain_core.messages.human".
	Module string
	// Class is the class name, e.g. "HumanMessage".
	Class string
	// Data is what the class is rebuilt from: the argument, the argument
	// list, the keyword map or the model's field map.
	Data any
	// Method is the class method to call, required for ExtMethod and
	// ExtPydanticV2 (which the serializer always writes as
	// "model_validate_json") and not allowed for the other codes, so that
	// the payload has the length Python expects.
	Method string
}

// Raw is a value encoded as msgpack already, by EncodeMsgpack or
// otherwise, written into a larger value as it is: a generator that keeps
// each message's encoding need not encode the whole list again for every
// checkpoint. The encoder does not check it.
type Raw []byte

// EncodeMsgpack writes v as the msgpack that JsonPlusSerializer.dumps_typed
// gives for the corresponding Python value (its type is "msgpack"). v may
// be built of:
//
//   - nil, bool, string (valid UTF-8: Python strings cannot hold anything
//     else), []byte (written as bin, Python bytes);
//   - any Go integer type (Python int) and float32 or float64 (Python
//     float, always written as a 64-bit float; NaN and ±Inf included);
//   - Map (a dict in the given order), map[string]any and other maps with
//     string keys (a dict with sorted keys, so the bytes do not depend on Go
//     map iteration order);
//   - []any and any other slice or array (a list);
//   - Ext (a Python object) and time.Time (a datetime, see Datetime);
//   - Raw (msgpack encoded already, written as it is).
//
// Anything else, and nesting deeper than format.DefaultMaxDepth (which only a
// cycle would reach), is an error.
func EncodeMsgpack(v any) ([]byte, error) {
	e := encoder{}
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// encoder appends msgpack to buf.
type encoder struct {
	buf []byte
}

// EncodeError reports a value EncodeMsgpack cannot write.
type EncodeError struct {
	// Path locates the value, e.g. `$["channel_values"][3]`.
	Path string
	// Reason says what is wrong with it.
	Reason string
}

// Error names where the value is and why it was refused.
func (e *EncodeError) Error() string {
	return "write: cannot encode " + e.Path + ": " + e.Reason
}

// pathError wraps an error from a nested value with the step that led to
// it, so the message locates the value in the whole tree.
func pathError(err error, step string) error {
	if ee, ok := err.(*EncodeError); ok {
		return &EncodeError{Path: "$" + step + ee.Path[1:], Reason: ee.Reason}
	}
	return err
}

func encodeError(reason string, args ...any) error {
	return &EncodeError{Path: "$", Reason: fmt.Sprintf(reason, args...)}
}

func (e *encoder) value(v any, depth int) error {
	if depth > format.DefaultMaxDepth {
		return encodeError("nested deeper than %d levels (a cycle?)", format.DefaultMaxDepth)
	}
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, 0xc0)
	case bool:
		e.bool(v)
	case string:
		return e.str(v)
	case []byte:
		e.bin(v)
	case int:
		e.int(int64(v))
	case int8:
		e.int(int64(v))
	case int16:
		e.int(int64(v))
	case int32:
		e.int(int64(v))
	case int64:
		e.int(v)
	case uint:
		e.uint(uint64(v))
	case uint8:
		e.uint(uint64(v))
	case uint16:
		e.uint(uint64(v))
	case uint32:
		e.uint(uint64(v))
	case uint64:
		e.uint(v)
	case float32:
		e.float(float64(v))
	case float64:
		e.float(v)
	case Map:
		return e.orderedMap(v, depth)
	case map[string]any:
		return e.sortedMap(reflect.ValueOf(v), depth)
	case []any:
		e.arrayHeader(len(v))
		for i, x := range v {
			if err := e.value(x, depth+1); err != nil {
				return pathError(err, "["+strconv.Itoa(i)+"]")
			}
		}
	case Raw:
		if len(v) == 0 {
			return encodeError("empty Raw value: not a msgpack value")
		}
		e.buf = append(e.buf, v...)
	case Ext:
		return e.ext(v, depth)
	case *Ext:
		if v == nil {
			e.buf = append(e.buf, 0xc0)
			return nil
		}
		return e.ext(*v, depth)
	case time.Time:
		return e.ext(Datetime(v), depth)
	case Message:
		return e.ext(v.pythonExt(), depth)
	case DeltaSnapshot:
		inner := encoder{}
		if err := inner.value(v.Value, depth+1); err != nil {
			return pathError(err, "<delta snapshot>")
		}
		e.extHeader(extDeltaSnapshot, len(inner.buf))
		e.buf = append(e.buf, inner.buf...)
	default:
		return e.reflected(reflect.ValueOf(v), depth)
	}
	return nil
}

// reflected handles named types and the slices and maps the type switch does
// not list, such as [][]float64 coordinates.
func (e *encoder) reflected(rv reflect.Value, depth int) error {
	switch rv.Kind() {
	case reflect.Bool:
		e.bool(rv.Bool())
	case reflect.String:
		return e.str(rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.int(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.uint(rv.Uint())
	case reflect.Float32, reflect.Float64:
		e.float(rv.Float())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			e.bin(rv.Bytes())
			return nil
		}
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			// A nil slice is still an empty list, as Go's JSON encoder
			// would not make it: Python has no typed nil.
			e.arrayHeader(0)
			return nil
		}
		e.arrayHeader(rv.Len())
		for i := range rv.Len() {
			if err := e.value(rv.Index(i).Interface(), depth+1); err != nil {
				return pathError(err, "["+strconv.Itoa(i)+"]")
			}
		}
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return encodeError("map keyed by %s; only string keys are written", rv.Type().Key())
		}
		return e.sortedMap(rv, depth)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.buf = append(e.buf, 0xc0)
			return nil
		}
		return e.value(rv.Elem().Interface(), depth+1)
	default:
		if !rv.IsValid() {
			e.buf = append(e.buf, 0xc0)
			return nil
		}
		return encodeError("a %s has no Python counterpart", rv.Type())
	}
	return nil
}

func (e *encoder) bool(b bool) {
	if b {
		e.buf = append(e.buf, 0xc3)
	} else {
		e.buf = append(e.buf, 0xc2)
	}
}

func (e *encoder) int(n int64) {
	if n >= 0 {
		e.uint(uint64(n))
		return
	}
	switch {
	case n >= -32:
		e.buf = append(e.buf, byte(n))
	case n >= math.MinInt8:
		e.buf = append(e.buf, 0xd0, byte(n))
	case n >= math.MinInt16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xd1), uint16(n))
	case n >= math.MinInt32:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xd2), uint32(n))
	default:
		e.buf = binary.BigEndian.AppendUint64(append(e.buf, 0xd3), uint64(n))
	}
}

func (e *encoder) uint(n uint64) {
	switch {
	case n <= 0x7f:
		e.buf = append(e.buf, byte(n))
	case n <= math.MaxUint8:
		e.buf = append(e.buf, 0xcc, byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xce), uint32(n))
	default:
		e.buf = binary.BigEndian.AppendUint64(append(e.buf, 0xcf), n)
	}
}

func (e *encoder) float(f float64) {
	bits := math.Float64bits(f)
	if f != f {
		// Python's float('nan'); Go's math.NaN() sets a different payload
		// bit, and the bytes should not depend on where a NaN came from.
		bits = 0x7ff8000000000000
	}
	e.buf = binary.BigEndian.AppendUint64(append(e.buf, 0xcb), bits)
}

func (e *encoder) str(s string) error {
	if !utf8.ValidString(s) {
		return encodeError("string %q is not valid UTF-8, which a Python str cannot hold", s)
	}
	n := len(s)
	switch {
	case n <= 31:
		e.buf = append(e.buf, 0xa0|byte(n))
	case n <= math.MaxUint8:
		e.buf = append(e.buf, 0xd9, byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xda), uint16(n))
	default:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xdb), uint32(n))
	}
	e.buf = append(e.buf, s...)
	return nil
}

func (e *encoder) bin(b []byte) {
	n := len(b)
	switch {
	case n <= math.MaxUint8:
		e.buf = append(e.buf, 0xc4, byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xc5), uint16(n))
	default:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xc6), uint32(n))
	}
	e.buf = append(e.buf, b...)
}

func (e *encoder) arrayHeader(n int) {
	switch {
	case n <= 15:
		e.buf = append(e.buf, 0x90|byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xdc), uint16(n))
	default:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xdd), uint32(n))
	}
}

func (e *encoder) mapHeader(n int) {
	switch {
	case n <= 15:
		e.buf = append(e.buf, 0x80|byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xde), uint16(n))
	default:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xdf), uint32(n))
	}
}

func (e *encoder) orderedMap(m Map, depth int) error {
	e.mapHeader(len(m))
	for _, f := range m {
		if err := e.str(f.Key); err != nil {
			return err
		}
		if err := e.value(f.Value, depth+1); err != nil {
			return pathError(err, "["+strconv.Quote(f.Key)+"]")
		}
	}
	return nil
}

func (e *encoder) sortedMap(rv reflect.Value, depth int) error {
	keys := rv.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int {
		switch x, y := a.String(), b.String(); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	e.mapHeader(len(keys))
	for _, k := range keys {
		if err := e.str(k.String()); err != nil {
			return err
		}
		if err := e.value(rv.MapIndex(k).Interface(), depth+1); err != nil {
			return pathError(err, "["+strconv.Quote(k.String())+"]")
		}
	}
	return nil
}

// ext writes an extension whose payload is the (module, class, data[,
// method]) tuple, encoded on its own as the serializer does.
func (e *encoder) ext(x Ext, depth int) error {
	if x.Code < ExtSingleArg || x.Code > ExtPydanticV2 {
		return encodeError("extension code %d is not one the encoder writes (0 to 5)", x.Code)
	}
	wantMethod := x.Code == ExtMethod || x.Code == ExtPydanticV2
	if wantMethod != (x.Method != "") {
		if wantMethod {
			return encodeError("ext %d (%s.%s) needs a method name", x.Code, x.Module, x.Class)
		}
		return encodeError("ext %d (%s.%s) takes no method name, got %q", x.Code, x.Module, x.Class, x.Method)
	}
	if x.Module == "" || x.Class == "" {
		return encodeError("ext %d needs a module and a class, got %q and %q", x.Code, x.Module, x.Class)
	}
	inner := encoder{}
	n := 3
	if wantMethod {
		n = 4
	}
	inner.arrayHeader(n)
	if err := inner.str(x.Module); err != nil {
		return err
	}
	if err := inner.str(x.Class); err != nil {
		return err
	}
	if err := inner.value(x.Data, depth+1); err != nil {
		return pathError(err, "<"+x.Class+">")
	}
	if wantMethod {
		if err := inner.str(x.Method); err != nil {
			return err
		}
	}
	e.extHeader(x.Code, len(inner.buf))
	e.buf = append(e.buf, inner.buf...)
	return nil
}

func (e *encoder) extHeader(code int8, n int) {
	switch {
	case n == 1:
		e.buf = append(e.buf, 0xd4)
	case n == 2:
		e.buf = append(e.buf, 0xd5)
	case n == 4:
		e.buf = append(e.buf, 0xd6)
	case n == 8:
		e.buf = append(e.buf, 0xd7)
	case n == 16:
		e.buf = append(e.buf, 0xd8)
	case n <= math.MaxUint8:
		e.buf = append(e.buf, 0xc7, byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, 0xc8), uint16(n))
	default:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, 0xc9), uint32(n))
	}
	e.buf = append(e.buf, byte(code))
}

// Datetime is t as the serializer writes a Python datetime: ext 3, rebuilt
// with datetime.fromisoformat from t's ISO-8601 text (see IsoFormat). Go
// times always carry a zone, so the datetime is always timezone-aware.
func Datetime(t time.Time) Ext {
	return Ext{Code: ExtMethod, Module: "datetime", Class: "datetime", Data: IsoFormat(t), Method: "fromisoformat"}
}

// IsoFormat is Python's datetime.isoformat() of the aware datetime t:
// microseconds only when not zero, and the offset as ±HH:MM (+00:00 for
// UTC, never Z), with seconds only when the offset has them. LangGraph
// writes each checkpoint's "ts" this way.
func IsoFormat(t time.Time) string {
	b := t.AppendFormat(nil, "2006-01-02T15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		b = fmt.Appendf(b, ".%06d", us)
	}
	_, off := t.Zone()
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = fmt.Appendf(append(b, sign), "%02d:%02d", off/3600, off/60%60)
	if off%60 != 0 {
		b = fmt.Appendf(b, ":%02d", off%60)
	}
	return string(b)
}

// ToolCall is one tool call of an AIMessage, as LangChain's ToolCall dict.
type ToolCall struct {
	// Name is the tool's name.
	Name string
	// Args are the arguments the model gave, usually a Map or map[string]any.
	Args any
	// ID is the call's id, which the answering ToolMessage repeats.
	ID string
}

// The modules and classes of the LangChain messages the helpers build.
const (
	humanModule  = "langchain_core.messages.human"
	aiModule     = "langchain_core.messages.ai"
	toolModule   = "langchain_core.messages.tool"
	systemModule = "langchain_core.messages.system"
	// pydanticMethod is what the serializer writes as the method of every
	// pydantic v2 model.
	pydanticMethod = "model_validate_json"
)

// baseMessage is the field map every LangChain message's model_dump starts
// with, in langchain-core 1.x's declaration order.
func baseMessage(typ string, content any, id string) Map {
	return Map{
		{Key: "content", Value: content},
		{Key: "additional_kwargs", Value: Map{}},
		{Key: "response_metadata", Value: Map{}},
		{Key: "type", Value: typ},
		{Key: "name", Value: nil},
		{Key: "id", Value: optional(id)},
	}
}

// optional maps an empty id or name to None, as LangChain leaves them unset.
func optional(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func message(module, class string, fields Map) Ext {
	return Ext{Code: ExtPydanticV2, Module: module, Class: class, Data: fields, Method: pydanticMethod}
}

// HumanMessage is a LangChain HumanMessage as the serializer writes it:
// content (a string, or a list of content blocks), an id (empty for none)
// and every other field at its default.
func HumanMessage(id string, content any) Ext {
	return message(humanModule, "HumanMessage", baseMessage("human", content, id))
}

// SystemMessage is a LangChain SystemMessage, like HumanMessage.
func SystemMessage(id string, content any) Ext {
	return message(systemModule, "SystemMessage", baseMessage("system", content, id))
}

// AIMessage is a LangChain AIMessage with the given tool calls, no
// response metadata and no usage. Use AIMessageWith for those.
func AIMessage(id string, content any, calls ...ToolCall) Ext {
	return AIMessageWith(id, content, calls, nil, nil)
}

// AIMessageWith is a LangChain AIMessage with response metadata (nil for
// none, written as an empty dict) and usage metadata (nil for none, written
// as None), as a chat model returns it.
func AIMessageWith(id string, content any, calls []ToolCall, responseMetadata Map, usage Map) Ext {
	fields := baseMessage("ai", content, id)
	if responseMetadata != nil {
		fields = fields.Set("response_metadata", responseMetadata)
	}
	tc := make([]any, len(calls))
	for i, c := range calls {
		args := c.Args
		if args == nil {
			args = Map{}
		}
		tc[i] = Map{{Key: "name", Value: c.Name}, {Key: "args", Value: args}, {Key: "id", Value: optional(c.ID)}, {Key: "type", Value: "tool_call"}}
	}
	var u any
	if usage != nil {
		u = usage
	}
	fields = append(fields,
		Field{Key: "tool_calls", Value: tc},
		Field{Key: "invalid_tool_calls", Value: []any{}},
		Field{Key: "usage_metadata", Value: u},
	)
	return message(aiModule, "AIMessage", fields)
}

// RemoveMessage is a LangChain RemoveMessage of the message id (format.RemoveAll
// for every message).
func RemoveMessage(id string) Ext {
	return message("langchain_core.messages.modifier", "RemoveMessage", baseMessage("remove", "", id))
}

// pythonExt is m as the serializer writes it.
func (m Message) pythonExt() Ext {
	var x Ext
	switch m.Type {
	case "human":
		x = HumanMessage(m.ID, m.Content)
	case "ai":
		x = AIMessage(m.ID, m.Content, m.ToolCalls...)
	case "tool":
		x = ToolMessage(m.ID, m.Content, m.Name, m.ToolCallID)
	case "system":
		x = SystemMessage(m.ID, m.Content)
	case "remove":
		x = RemoveMessage(m.ID)
	default:
		return Ext{Code: -1, Module: "langchain_core.messages", Class: m.Type}
	}
	fields := x.Data.(Map)
	if m.Name != "" && m.Type != "tool" {
		fields = fields.Set("name", m.Name)
	}
	if m.AdditionalKwargs != nil {
		fields = fields.Set("additional_kwargs", m.AdditionalKwargs)
	}
	x.Data = fields
	return x
}

// ToolMessage is a LangChain ToolMessage answering the call toolCallID of
// the tool name, with status "success" and no artifact.
func ToolMessage(id string, content any, name, toolCallID string) Ext {
	fields := baseMessage("tool", content, id).Set("name", optional(name))
	fields = append(fields,
		Field{Key: "tool_call_id", Value: toolCallID},
		Field{Key: "artifact", Value: nil},
		Field{Key: "status", Value: "success"},
	)
	return message(toolModule, "ToolMessage", fields)
}
