package sqlite

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/historyd/historyd/store"
)

// TracerName is the instrumentation scope of the SQLite backend's spans.
const TracerName = "github.com/historyd/historyd/store/sqlite"

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// noEnd ends a statement that has no span.
func noEnd(error) {}

// statement starts the span of one statement, as otelpgx does for
// PostgreSQL's: named for the statement's operation (SELECT), a client
// span carrying db.system.name sqlite, db.operation.name and the statement
// text, never its arguments (every value is bound, thread ids included).
// The returned func ends it with the statement's error, once its rows have
// been read. Only calls that are traced get one: a health probe, whose
// context has no span, is not traced at every probe.
func (b *Backend) statement(ctx context.Context, q string) (context.Context, func(error)) {
	if b.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noEnd
	}
	op, _, _ := strings.Cut(strings.TrimSpace(q), " ")
	op = strings.ToUpper(op)
	ctx, sp := b.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNameSQLite, semconv.DBOperationName(op), semconv.DBQueryText(q)))
	return ctx, func(err error) {
		if err != nil {
			// The error's text may name the thread (a callback's decode
			// error does); its kind is what the span says.
			kind := store.ErrorKind(err)
			sp.SetStatus(codes.Error, kind)
			sp.SetAttributes(semconv.ErrorTypeKey.String(kind))
		}
		sp.End()
	}
}
