package service

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
)

// keySep splits FuzzValidate's keys argument into a projection's keys.
const keySep = "\x1e"

// FuzzValidate drives the request checks with arbitrary text. They must never
// panic; what they accept must be safe to hand to the store (valid UTF-8,
// within the limits, no NUL, thread id present); what they refuse must name
// the first offending field, in request order, and map to InvalidArgument
// with that field in the message and in a BadRequest detail.
//
// keyList is split at U+001E into the projection's keys; pad appends pad%300
// copies of "k" after them, so the MaxKeys limit is reached often.
func FuzzValidate(f *testing.F) {
	f.Add("thread-1", "", "", uint16(0), int32(1))
	f.Add("", "", "a"+keySep+"b", uint16(0), int32(0))
	f.Add("t\x00", "ns", "", uint16(0), int32(-1))
	f.Add(strings.Repeat("é", 256), "", "", uint16(0), int32(3))
	f.Add("t", "\xff", "", uint16(0), int32(2))
	f.Add("t", "", keySep, uint16(255), int32(7))
	f.Fuzz(func(t *testing.T, threadID, ns, keyList string, pad uint16, turn int32) {
		var ks []string
		if keyList != "" {
			ks = strings.Split(keyList, keySep)
		}
		for range pad % 300 {
			ks = append(ks, "k")
		}

		threadErr := checkThread(threadID, ns)
		checkFieldError(t, "checkThread", threadErr)
		switch want := firstBadText(threadID, ns); {
		case threadErr == nil && want != "":
			t.Fatalf("checkThread(%q, %q) accepted a bad %s", threadID, ns, want)
		case threadErr != nil && threadErr.Field != want:
			t.Fatalf("checkThread(%q, %q) blamed %q (%s), want %q", threadID, ns, threadErr.Field, threadErr.Reason, want)
		}
		if threadErr == nil {
			// What reaches the store: spelled out once more, independently.
			if threadID == "" || len(threadID) > MaxThreadIDBytes || !utf8.ValidString(threadID) || strings.ContainsRune(threadID, 0) {
				t.Fatalf("accepted thread_id %q", threadID)
			}
		}

		keysErr := checkKeys(ks)
		checkFieldError(t, "checkKeys", keysErr)
		if want := firstBadKey(ks); keysErr == nil && want != "" {
			t.Fatalf("checkKeys accepted %d keys with a bad %s", len(ks), want)
		} else if keysErr != nil && keysErr.Field != want {
			t.Fatalf("checkKeys blamed %q (%s), want %q", keysErr.Field, keysErr.Reason, want)
		}

		turnErr := checkTurn(turn)
		checkFieldError(t, "checkTurn", turnErr)
		if (turnErr == nil) != (turn >= 0) {
			t.Fatalf("checkTurn(%d) = %v", turn, turnErr)
		}
		if turnErr != nil && turnErr.Field != "turn" {
			t.Fatalf("checkTurn(%d) blamed %q", turn, turnErr.Field)
		}

		// The order Snapshot checks in: thread and namespace, turn, keys.
		err := firstError(threadErr, turnErr, keysErr)
		var want *FieldError
		for _, e := range []*FieldError{threadErr, turnErr, keysErr} {
			if e != nil {
				want = e
				break
			}
		}
		if want == nil {
			if err != nil {
				t.Fatalf("firstError of no errors = %v", err)
			}
			return
		}
		var got *FieldError
		if !errors.As(err, &got) || got != want {
			t.Fatalf("firstError = %v, want %v", err, want)
		}
		st := toStatus(err)
		if st.Code() != codes.InvalidArgument {
			t.Fatalf("toStatus(%v) code = %v, want InvalidArgument", err, st.Code())
		}
		if !strings.HasPrefix(st.Message(), want.Field+": ") {
			t.Fatalf("status message %q does not start with the field %q", st.Message(), want.Field)
		}
		var named bool
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok {
				for _, v := range br.GetFieldViolations() {
					named = named || v.GetField() == want.Field
				}
			}
		}
		if !named {
			t.Fatalf("status details %v do not name the field %q", st.Details(), want.Field)
		}
	})
}

// checkFieldError checks the shape every refusal must have.
func checkFieldError(t *testing.T, check string, e *FieldError) {
	t.Helper()
	if e == nil {
		return
	}
	if e.Field == "" || e.Reason == "" {
		t.Fatalf("%s: error without a field or a reason: %#v", check, e)
	}
	if e.Error() != e.Field+": "+e.Reason {
		t.Fatalf("%s: Error() = %q, want the field then the reason", check, e.Error())
	}
}

// textProblem says what is wrong with a request text field, or "" when
// nothing is. It walks the string rune by rune rather than reusing the
// checks under test.
func textProblem(v string, limit int, required bool) string {
	if v == "" {
		if required {
			return "missing"
		}
		return ""
	}
	if len(v) > limit {
		return "too long"
	}
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			return "not UTF-8"
		}
		if r == 0 {
			return "NUL"
		}
		i += size
	}
	return ""
}

// firstBadText names the first bad field of a thread reference, or "".
func firstBadText(threadID, ns string) string {
	if textProblem(threadID, MaxThreadIDBytes, true) != "" {
		return "thread_id"
	}
	if textProblem(ns, MaxNamespaceBytes, false) != "" {
		return "checkpoint_ns"
	}
	return ""
}

// firstBadKey names the field a projection must be refused for, or "".
func firstBadKey(keys []string) string {
	if len(keys) > MaxKeys {
		return "keys"
	}
	for i, k := range keys {
		if textProblem(k, MaxKeyBytes, true) != "" {
			return "keys[" + strconv.Itoa(i) + "]"
		}
	}
	return ""
}
