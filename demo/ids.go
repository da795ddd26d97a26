package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// rng is SplitMix64. The demo must come out byte for byte the same on every
// run, machine and Go release, so it carries its own generator instead of
// relying on a library whose stream could change.
type rng struct{ s uint64 }

// newRNG seeds a generator from a name, so each thread has its own stream
// and adding a thread does not shift another's.
func newRNG(name string) *rng {
	h := sha256.Sum256([]byte("historyd demo " + name))
	var s uint64
	for _, b := range h[:8] {
		s = s<<8 | uint64(b)
	}
	return &rng{s}
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float is uniform in [0, 1), built like Python's random.random(): 53
// random bits over 2^53.
func (r *rng) float() float64 {
	return float64(r.next()>>11) / (1 << 53)
}

// between is uniform in [lo, hi).
func (r *rng) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.float()*float64(hi-lo))
}

// intn is uniform in [0, n).
func (r *rng) intn(n int) int {
	return int(r.next() % uint64(n))
}

// uuidText formats 128 bits the way Python's str(uuid) does.
func uuidText(hi, lo uint64) string {
	h := fmt.Sprintf("%016x%016x", hi, lo)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// uuidEpochOffset is the number of 100 ns intervals between the UUID epoch
// (1582-10-15) and the Unix epoch.
const uuidEpochOffset = 0x01b21dd213814000

// checkpointID is the id LangGraph gives a checkpoint: a version 6 UUID of
// the time it was written, whose clock sequence is the step (so -1, the
// first input, gives bfff) and whose node is random. Ids of one thread
// therefore sort as strings in the order they were written.
func checkpointID(t time.Time, step int, node uint64) string {
	ts := uint64(t.UnixNano()/100) + uuidEpochOffset
	hi := ((ts>>12)&0xffffffffffff)<<16 | 0x6000 | ts&0x0fff
	lo := (0x8000|(uint64(step)&0x3fff))<<48 | node&0xffffffffffff
	return uuidText(hi, lo)
}

// uuid4 is a random UUID, as add_messages gives a message without an id.
func (r *rng) uuid4() string {
	hi := r.next()&^0xf000 | 0x4000
	lo := r.next()&^(0xc<<60) | 0x8<<60
	return uuidText(hi, lo)
}

// uuid7 is a version 7 UUID of t, as langchain-core 1.x gives each run.
func (r *rng) uuid7(t time.Time) string {
	hi := uint64(t.UnixMilli())<<16 | 0x7000 | r.next()&0x0fff
	lo := r.next()&^(0xc<<60) | 0x8<<60
	return uuidText(hi, lo)
}

// runMessageID is the id a LangChain chat model gives its message:
// "lc_run-" joined by "-" to the run id, and the generation's index.
func (r *rng) runMessageID(t time.Time) string {
	return "lc_run--" + r.uuid7(t) + "-0"
}

// toolCallID looks like the ids chat model providers give tool calls.
func (r *rng) toolCallID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	b.WriteString("call_")
	for range 24 {
		b.WriteByte(alphabet[r.intn(len(alphabet))])
	}
	return b.String()
}

// taskID stands in for LangGraph's task id, an XXH3-128 hash of the
// checkpoint and the task's path printed as a UUID. LangGraph only matches
// task ids against the tasks it is about to run from a checkpoint; the
// pending writes of a turn's last checkpoint (the one a resumed thread
// starts from) are always empty here, so any stable hash of the same
// inputs serves.
func taskID(checkpointID, path string) string {
	h := sha256.Sum256([]byte(checkpointID + "\x00" + path))
	s := hex.EncodeToString(h[:16])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// channelVersion is SqliteSaver.get_next_version's text for version n with
// the random fraction f: n zero-padded to 32 digits, a dot, and f as
// Python's f"{f:016}" prints it (repr, zero-padded to 16 characters).
func channelVersion(n int, f float64) string {
	return fmt.Sprintf("%032d.%s", n, pythonFloat016(f))
}

// pythonFloat016 is Python's format(f, "016") for a float in [0, 1): the
// shortest repr that reads back as f, zero-padded on the left.
func pythonFloat016(f float64) string {
	var s string
	switch {
	case f == 0:
		s = "0.0"
	case math.Abs(f) < 1e-4:
		// repr switches to exponent form below 1e-4: 5.2e-05.
		s = strconv.FormatFloat(f, 'e', -1, 64)
	default:
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	if len(s) < 16 {
		s = strings.Repeat("0", 16-len(s)) + s
	}
	return s
}
