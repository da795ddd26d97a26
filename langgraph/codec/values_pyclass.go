package codec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// pyClass names a Python class as LangGraph's serializer records it in an
// extension value: the module and the class name.
type pyClass struct{ module, name string }

// pyRenderings renders the values of the Python classes that a Python
// host's own JSON tools (pydantic's to_jsonable_python, which FastAPI and
// LangGraph's API server build on) show otherwise than as the data the
// serializer stored: each takes that data, as decoded (the extension's
// argument, argument list or keyword map), and returns the value served,
// or false to serve the data as it is. Hosts compare what historyd serves
// with what they stored, so the rendering is theirs. Classes not listed
// are served as their data (see the package doc).
var pyRenderings = map[pyClass]func(data any) (any, bool){
	{"datetime", "datetime"}:  renderDatetime,
	{"datetime", "date"}:      renderDate,
	{"datetime", "time"}:      renderTime,
	{"datetime", "timedelta"}: renderTimedelta,
	{"datetime", "timezone"}:  renderTimezone,
	{"uuid", "UUID"}:          renderUUID,
	{"re", "compile"}:         renderPattern,
}

func init() {
	for _, module := range []string{"pathlib", "pathlib._local"} {
		pyRenderings[pyClass{module, "Path"}] = renderPath("/")
		pyRenderings[pyClass{module, "PosixPath"}] = renderPath("/")
		pyRenderings[pyClass{module, "WindowsPath"}] = renderPath(`\`)
	}
}

// renderPython returns the value served for an extension value of class
// module.name holding data.
func renderPython(module, name, data any) any {
	m, _ := module.(string)
	n, _ := name.(string)
	if render, ok := pyRenderings[pyClass{m, n}]; ok {
		if out, ok := render(data); ok {
			return out
		}
	}
	return data
}

// secretMask is what pydantic shows of a secret: asterisks, or nothing for
// an empty one. The secret itself, which the serializer stores in clear,
// is never served.
func secretMask(secret any) any {
	switch s := secret.(type) {
	case string:
		if s == "" {
			return ""
		}
	case []byte:
		if len(s) == 0 {
			return ""
		}
	}
	return "**********"
}

// ints returns l as n integers.
func ints(l any, n int) ([]int64, bool) {
	list, ok := l.([]any)
	if !ok || len(list) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, e := range list {
		if out[i], ok = e.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// renderDate renders (year, month, day) as ISO-8601: "2026-03-14".
func renderDate(data any) (any, bool) {
	d, ok := ints(data, 3)
	if !ok {
		return nil, false
	}
	return fmt.Sprintf("%04d-%02d-%02d", d[0], d[1], d[2]), true
}

// pyOffset is a UTC offset as pydantic writes one after a time of day:
// "Z" for none, else ±HH:MM, seconds dropped.
func pyOffset(seconds int64) string {
	if seconds == 0 {
		return "Z"
	}
	mins := seconds / 60 // toward zero, as pydantic truncates
	sign := "+"
	if mins < 0 {
		sign, mins = "-", -mins
	}
	return fmt.Sprintf("%s%02d:%02d", sign, mins/60, mins%60)
}

// isoOffset matches a UTC offset as Python's isoformat writes one:
// ±HH:MM, and :SS and .ffffff when not zero.
var isoOffset = regexp.MustCompile(`^([+-])(\d\d):(\d\d)(?::(\d\d)(?:\.(\d{6}))?)?$`)

// offsetSeconds reads an isoOffset, dropping fractions of a second.
func offsetSeconds(s string) (int64, bool) {
	m := isoOffset.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	h, _ := strconv.ParseInt(m[2], 10, 64)
	mi, _ := strconv.ParseInt(m[3], 10, 64)
	sec, _ := strconv.ParseInt(m[4], 10, 64) // "" when absent: 0
	total := h*3600 + mi*60 + sec
	if m[1] == "-" {
		total = -total
	}
	return total, true
}

// isoTime matches the time of day Python's isoformat writes, and the
// offset after it, if any.
var isoTime = regexp.MustCompile(`^(\d\d:\d\d:\d\d(?:\.\d{6})?)(.*)$`)

// renderDatetime renders a datetime's isoformat() text as pydantic does:
// the same but for the offset, "Z" for UTC and ±HH:MM otherwise
// ("2026-03-14T09:28:27.577701Z"); a naive datetime has none.
func renderDatetime(data any) (any, bool) {
	s, ok := data.(string)
	if !ok {
		return nil, false
	}
	date, clock, ok := strings.Cut(s, "T")
	if !ok || len(date) != 10 {
		return nil, false
	}
	m := isoTime.FindStringSubmatch(clock)
	if m == nil {
		return nil, false
	}
	if m[2] == "" {
		return s, true
	}
	off, ok := offsetSeconds(m[2])
	if !ok {
		return nil, false
	}
	return date + "T" + m[1] + pyOffset(off), true
}

// renderTime renders a time's fields as pydantic does: "09:28:27", with
// ".ffffff" when there are microseconds, and the offset of a fixed-offset
// tzinfo ("Z", "+02:00"). A time whose tzinfo is a ZoneInfo has no offset
// (Python's utcoffset() is None without a date), so none is written;
// fold changes nothing.
func renderTime(data any) (any, bool) {
	m, ok := data.(map[string]any)
	if !ok {
		return nil, false
	}
	var f [4]int64
	for i, k := range []string{"hour", "minute", "second", "microsecond"} {
		if f[i], ok = m[k].(int64); !ok {
			return nil, false
		}
	}
	out := fmt.Sprintf("%02d:%02d:%02d", f[0], f[1], f[2])
	if f[3] != 0 {
		out += fmt.Sprintf(".%06d", f[3])
	}
	// tzinfo was rendered already: a timezone as its isoformat offset, a
	// ZoneInfo as its key.
	if tz, ok := m["tzinfo"].(string); ok {
		if off, ok := offsetSeconds(tz); ok {
			out += pyOffset(off)
		}
	}
	return out, true
}

// renderTimedelta renders (days, seconds, microseconds) as the ISO-8601
// duration pydantic writes: a sign, then years of 365 days, days, hours,
// minutes and seconds with their fraction, each only when not zero
// ("P1DT5S", "-PT23H", "P1Y36DT2H1M1.5S", "PT0S").
func renderTimedelta(data any) (any, bool) {
	d, ok := ints(data, 3)
	if !ok {
		return nil, false
	}
	days, secs, micros := d[0], d[1], d[2]
	if secs < 0 || secs >= 86400 || micros < 0 || micros >= 1e6 {
		return nil, false // not the normalized form timedelta keeps
	}
	return isoDuration(days, secs, micros), true
}

// isoDuration writes the duration Python normalizes to (days, seconds,
// microseconds), seconds and microseconds never negative, as a sign and a
// magnitude, as pydantic does.
func isoDuration(days, secs, micros int64) string {
	var b strings.Builder
	if days < 0 {
		b.WriteByte('-')
		if micros != 0 {
			secs++
			micros = 1e6 - micros
		}
		if secs != 0 {
			days++
			secs = 86400 - secs
		}
		days = -days
	}
	b.WriteByte('P')
	if y := days / 365; y != 0 {
		fmt.Fprintf(&b, "%dY", y)
	}
	if dd := days % 365; dd != 0 {
		fmt.Fprintf(&b, "%dD", dd)
	}
	if secs != 0 || micros != 0 {
		b.WriteByte('T')
		if h := secs / 3600; h != 0 {
			fmt.Fprintf(&b, "%dH", h)
		}
		if m := secs % 3600 / 60; m != 0 {
			fmt.Fprintf(&b, "%dM", m)
		}
		if s := secs % 60; s != 0 || micros != 0 {
			fmt.Fprintf(&b, "%d", s)
			if micros != 0 {
				b.WriteString("." + strings.TrimRight(fmt.Sprintf("%06d", micros), "0"))
			}
			b.WriteByte('S')
		}
	}
	if days == 0 && secs == 0 && micros == 0 {
		b.WriteString("T0S")
	}
	return b.String()
}

// isoDurationText matches what isoDuration writes.
var isoDurationText = regexp.MustCompile(`^(-?)P(?:(\d+)Y)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,6}))?S)?)?$`)

// durationSeconds reads back what isoDuration wrote, in whole seconds
// (fractions toward zero).
func durationSeconds(s string) (int64, bool) {
	m := isoDurationText.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
	total := (n(2)*365+n(3))*86400 + n(4)*3600 + n(5)*60 + n(6)
	if m[1] == "-" {
		total = -total
	}
	return total, true
}

// renderTimezone renders a fixed-offset timezone, which pydantic cannot
// render at all, as the offset Python's isoformat appends for it:
// "+02:00", "-03:30", "+00:00" for UTC. Its name, if it has one, is
// dropped. The argument list is (offset[, name]), the offset a timedelta
// rendered already.
func renderTimezone(data any) (any, bool) {
	args, ok := data.([]any)
	if !ok || len(args) < 1 || len(args) > 2 {
		return nil, false
	}
	iso, ok := args[0].(string)
	if !ok {
		return nil, false
	}
	secs, ok := durationSeconds(iso)
	if !ok {
		return nil, false
	}
	sign := "+"
	if secs < 0 {
		sign, secs = "-", -secs
	}
	out := fmt.Sprintf("%s%02d:%02d", sign, secs/3600, secs%3600/60)
	if s := secs % 60; s != 0 {
		out += fmt.Sprintf(":%02d", s)
	}
	return out, true
}

// renderUUID renders a UUID in its canonical form,
// "12345678-1234-5678-1234-567812345678", from the 32 hex digits the
// msgpack serializer stores (or the dashed text old JSON records hold).
func renderUUID(data any) (any, bool) {
	s, ok := data.(string)
	if !ok {
		return nil, false
	}
	h := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	if len(h) != 32 || strings.Trim(h, "0123456789abcdef") != "" {
		return nil, false
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}

// renderPattern renders a compiled regular expression, stored as
// (pattern, flags), as pydantic does: its pattern.
func renderPattern(data any) (any, bool) {
	args, ok := data.([]any)
	if !ok || len(args) != 2 {
		return nil, false
	}
	p, ok := args[0].(string)
	return p, ok
}

// renderPath renders a path, stored as its parts, as its text, the way
// str() joins them with sep: ("/", "tmp", "x") is "/tmp/x", ("a", "b")
// "a/b", () ".", and for Windows paths ("C:\\", "x") "C:\\x".
func renderPath(sep string) func(data any) (any, bool) {
	return func(data any) (any, bool) {
		list, ok := data.([]any)
		if !ok {
			return nil, false
		}
		parts := make([]string, len(list))
		for i, e := range list {
			if parts[i], ok = e.(string); !ok {
				return nil, false
			}
		}
		switch {
		case len(parts) == 0:
			return ".", true
		case strings.HasSuffix(parts[0], sep) || strings.HasSuffix(parts[0], "/") || sep == `\` && strings.HasSuffix(parts[0], ":"):
			// The anchor (root, drive) carries its own separator.
			return parts[0] + strings.Join(parts[1:], sep), true
		}
		return strings.Join(parts, sep), true
	}
}
