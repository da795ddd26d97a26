package service

import (
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc/codes"
)

// One successful call in every is logged at info, from the first; failures
// keep their level.
func TestSampledLevel(t *testing.T) {
	level := sampledLevel(3)
	var info int
	for i := range 9 {
		switch l := level(codes.OK); l {
		case logging.LevelInfo:
			info++
			if i%3 != 0 {
				t.Errorf("call %d logged at info", i)
			}
		case logging.LevelDebug:
		default:
			t.Errorf("call %d at %v", i, l)
		}
	}
	if info != 3 {
		t.Errorf("%d of 9 successful calls at info, want 3", info)
	}
	if l := level(codes.Unavailable); l != logging.LevelWarn {
		t.Errorf("a failed call at %v, want warn", l)
	}
	if l := level(codes.Internal); l != logging.LevelError {
		t.Errorf("an internal error at %v, want error", l)
	}
}
