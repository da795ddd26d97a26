package service

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/grpc"
)

// ThreadIDLogging says how a request's thread id appears in logs. Thread
// ids name other people's conversations and often embed user or account
// ids, so they are never logged as sent.
type ThreadIDLogging int

const (
	// ThreadIDsHashed logs the first 12 hex digits of the HMAC-SHA256 of
	// the thread id, keyed with a salt, under "thread". With a configured
	// salt an operator can find a thread's calls
	// (`printf %s "$THREAD" | openssl dgst -sha256 -hmac "$SALT"`, first 12
	// digits); without one the salt is random per process, which still
	// groups one thread's calls within a process's logs. The default.
	ThreadIDsHashed ThreadIDLogging = iota
	// ThreadIDsOmitted logs no trace of the thread.
	ThreadIDsOmitted
)

// ParseThreadIDLogging parses "hash" or "omit".
func ParseThreadIDLogging(s string) (ThreadIDLogging, error) {
	switch s {
	case "hash":
		return ThreadIDsHashed, nil
	case "omit":
		return ThreadIDsOmitted, nil
	}
	return 0, fmt.Errorf("%q: want hash or omit", s)
}

// threadTag is what logs may say about the call's thread: shown, in place
// of raw.
type threadTag struct {
	raw    string
	shown  string
	hashed bool
}

type (
	threadTagKey struct{}
	taggerKey    struct{}
)

// threadTagger computes threadTags with one salt.
type threadTagger struct {
	mode ThreadIDLogging
	salt []byte
}

func newThreadTagger(mode ThreadIDLogging, salt []byte) threadTagger {
	if len(salt) == 0 {
		salt = make([]byte, 32)
		_, _ = rand.Read(salt) // never fails; see crypto/rand.Read
	}
	return threadTagger{mode: mode, salt: salt}
}

func (tt threadTagger) tag(threadID string) threadTag {
	if tt.mode == ThreadIDsOmitted {
		return threadTag{raw: threadID, shown: "<thread>"}
	}
	mac := hmac.New(sha256.New, tt.salt)
	mac.Write([]byte(threadID))
	return threadTag{raw: threadID, shown: hex.EncodeToString(mac.Sum(nil))[:12], hashed: true}
}

// ThreadLabel returns how o's request logs show a thread id: its keyed
// hash, or "<thread>" with thread ids omitted. Other logs use it to name a
// thread the way the request log does; give o a ThreadIDSalt (server.New
// does), since without one every call hashes with a random key of its
// own.
func ThreadLabel(o Frontend) func(threadID string) string {
	tt := newThreadTagger(o.ThreadIDs, o.ThreadIDSalt)
	return func(threadID string) string { return tt.tag(threadID).shown }
}

// threadRequest is every request that names a thread.
type threadRequest interface{ GetThreadId() string }

// tagThreadUnary puts the tagger and the request's threadTag in the
// context. It runs before the logging interceptor so that the request log
// and every record logged with the call's context (see RedactThreadIDs)
// can hide the request's thread id, and any other an error quotes.
func tagThreadUnary(tt threadTagger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(tagCall(ctx, tt, req), req)
	}
}

// tagCall returns ctx with the tagger and, when req names a thread, its
// threadTag.
func tagCall(ctx context.Context, tt threadTagger, req any) context.Context {
	ctx = context.WithValue(ctx, taggerKey{}, tt)
	if r, ok := req.(threadRequest); ok && r.GetThreadId() != "" {
		ctx = context.WithValue(ctx, threadTagKey{}, tt.tag(r.GetThreadId()))
	}
	return ctx
}

func threadTagFrom(ctx context.Context) (threadTag, bool) {
	t, ok := ctx.Value(threadTagKey{}).(threadTag)
	return t, ok
}

// redaction is what a record logged with a call's context, or a call's
// status message, must hide: the thread the request names (raw and
// quoted), and every other thread id an error quotes. Store errors quote
// every thread they name as `thread "…"` (Go-quoted), whichever call they
// arose in: Threads names no thread in its request, but the threads it
// lists are named by what fails in them.
type redaction struct {
	tag       threadTag
	hasTag    bool
	tagger    threadTagger
	hasTagger bool
}

func redactionFrom(ctx context.Context) redaction {
	var r redaction
	r.tag, r.hasTag = threadTagFrom(ctx)
	r.hasTag = r.hasTag && r.tag.raw != ""
	r.tagger, r.hasTagger = ctx.Value(taggerKey{}).(threadTagger)
	return r
}

// any reports whether there is anything to hide.
func (r redaction) any() bool { return r.hasTag || r.hasTagger }

// quotedThread is how store errors name a thread: `thread ` and its id
// Go-quoted.
var quotedThread = regexp.MustCompile(`thread ("(?:[^"\\]|\\.)*")`)

func (r redaction) redact(s string) string {
	if r.hasTag {
		s = r.tag.redact(s)
	}
	if r.hasTagger && strings.Contains(s, `thread "`) {
		s = quotedThread.ReplaceAllStringFunc(s, func(m string) string {
			id, err := strconv.Unquote(m[len("thread "):])
			if err != nil {
				return m
			}
			return "thread " + r.tagger.tag(id).shown
		})
	}
	return s
}

// RedactThreadIDs returns a logger that, for records logged with a call's
// context, replaces the call's thread id in the message and in string,
// error and other printable attribute values with its hash (or
// "<thread>"). Error texts quote thread ids (store errors name the thread
// they failed on), so the quoted form is always replaced, and the bare
// form too when it is at least 8 bytes, short enough ids being too likely
// to match unrelated text; any other thread an error names as
// `thread "…"` (those Threads lists) is replaced by its hash too. Pass the same logger to New and Frontend, so the
// handlers' own error logs are covered as well as the request log.
func RedactThreadIDs(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if _, done := l.Handler().(redactingHandler); done {
		return l
	}
	return slog.New(redactingHandler{l.Handler()})
}

type redactingHandler struct{ inner slog.Handler }

func (h redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return redactingHandler{h.inner.WithAttrs(as)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.inner.WithGroup(name)}
}

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	red := redactionFrom(ctx)
	if !red.any() {
		return h.inner.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, red.redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(red.redactAttr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (t threadTag) redact(s string) string {
	if q := strconv.Quote(t.raw); strings.Contains(s, q) {
		s = strings.ReplaceAll(s, q, t.shown)
	}
	if len(t.raw) >= 8 && strings.Contains(s, t.raw) {
		s = strings.ReplaceAll(s, t.raw, t.shown)
	}
	return s
}

func (r redaction) redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.redact(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = r.redactAttr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		var s string
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(v.Any())
		}
		// Only values that show the id are flattened to text; the rest
		// keep the structure the handler would print.
		if red := r.redact(s); red != s {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
