package service

import (
	"context"
	"log/slog"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ServerOptions returns the interceptor chain every historyd server runs,
// assembled here and nowhere else: request logging outermost, so it records
// the code a recovered panic became, then panic recovery.
func ServerOptions(log *slog.Logger) []grpc.ServerOption {
	if log == nil {
		log = slog.Default()
	}
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		// Request fields (thread ids) are not logged: they name other
		// people's conversations.
	}
	recoverOpts := []recovery.Option{
		recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
			log.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
			return status.Error(codes.Internal, "internal error")
		}),
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(
			logging.UnaryServerInterceptor(slogAdapter(log), logOpts...),
			recovery.UnaryServerInterceptor(recoverOpts...),
		),
		grpc.ChainStreamInterceptor(
			logging.StreamServerInterceptor(slogAdapter(log), logOpts...),
			recovery.StreamServerInterceptor(recoverOpts...),
		),
	}
}

// slogAdapter lets go-grpc-middleware's logging write through slog.
func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
