package service

import (
	"strings"
	"testing"
)

// Go clients cannot send invalid UTF-8 in a string field (protobuf refuses to
// marshal it), so the check is exercised directly.
func TestCheckTextUTF8(t *testing.T) {
	err := checkThread("t", "\xff")
	if err == nil || err.Field != "checkpoint_ns" || !strings.Contains(err.Reason, "UTF-8") {
		t.Errorf("checkThread with invalid UTF-8 = %v", err)
	}
}
