package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactKeepsOtherValues(t *testing.T) {
	var buf bytes.Buffer
	log := RedactThreadIDs(slog.New(slog.NewJSONHandler(&buf, nil)))
	ctx := context.WithValue(context.Background(), threadTagKey{}, threadTag{raw: "t-123456789", shown: "abc"})
	log.InfoContext(ctx, `read "t-123456789"`, "n", 3, "err", errors.New("thread t-123456789 gone"), slog.Group("g", "s", "x t-123456789"))
	got := buf.String()
	for _, want := range []string{`"msg":"read abc"`, `"n":3`, `"err":"thread abc gone"`, `"g":{"s":"x abc"}`} {
		if !strings.Contains(got, want) {
			t.Errorf("log %s lacks %s", got, want)
		}
	}
}
