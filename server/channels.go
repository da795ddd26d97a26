package server

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/store/backend"
)

// A messages or state channel that no checkpoint uses changes every
// thread's answers (turns numbered by runs, turns without state), and
// nothing says why. The server samples the channels the
// store's checkpoints hold, at start and on the first threads that hold
// none of the configured ones, and logs a warning naming the channels
// actually there. Backends only answer Newest; what a checkpoint's bytes
// say is lgcodec's.
const (
	// startSample is how many of the store's newest checkpoints New
	// samples.
	startSample = 100
	// threadSample is how many of a thread's newest checkpoints are
	// sampled when its listing showed none of a configured channel.
	threadSample = 50
	// sampleTimeout bounds one sample.
	sampleTimeout = 5 * time.Second
)

// channelCheck knows the configured channels and where to warn.
type channelCheck struct {
	log *slog.Logger
	// channels are the messages channel, then the state channels.
	channels []configured
}

// configured is one configured channel, and what its absence does.
type configured struct {
	name, flag, effect string
}

func newChannelCheck(log *slog.Logger, messages string, states []string) channelCheck {
	c := channelCheck{log: log, channels: []configured{{messages, "--messages-channel",
		"so their turns are numbered by runs (each run a turn, its input the question); if the conversation is kept in another channel, set --messages-channel to it"}}}
	for _, st := range states {
		c.channels = append(c.channels, configured{st, "--state-channels",
			"so their turns have no state entries from it; set --state-channels to the channels holding session state, if these are them"})
	}
	return c
}

// sampled is what a sample of checkpoints held.
type sampled struct {
	checkpoints int
	channels    map[string]int // checkpoints holding a version of each
}

// sample reads the channel versions of up to limit of the newest
// checkpoints, of ref's thread or, with ref nil, of any thread.
func sample(ctx context.Context, b backend.Backend, ref *backend.Ref, limit int) (sampled, error) {
	s := sampled{channels: map[string]int{}}
	err := b.Newest(ctx, ref, limit, func(r backend.Row) error {
		cp, err := codec.ParseCheckpoint(r.Checkpoint.Type, r.Checkpoint.Data, nil)
		if err != nil {
			return nil // a damaged checkpoint says nothing about the configuration
		}
		s.checkpoints++
		for ch := range cp.Versions {
			s.channels[ch]++
		}
		return nil
	})
	return s, err
}

// held lists the sampled channels, the most used first, with how many
// checkpoints hold each: "files (100), todos (80)".
func (s sampled) held() string {
	names := make([]string, 0, len(s.channels))
	for ch := range s.channels {
		names = append(names, ch)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.channels[b], s.channels[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, ch := range names {
		parts[i] = fmt.Sprintf("%s (%d)", ch, s.channels[ch])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// internal reports whether a channel is one LangGraph keeps for itself
// (__start__, branch:to:node, ...): a thread holding only those has not
// run a step yet.
func internal(ch string) bool {
	return strings.HasPrefix(ch, "__") || strings.HasPrefix(ch, "branch:") || strings.HasPrefix(ch, "start:")
}

// ran reports whether the sample holds a channel of the graph's own.
func (s sampled) ran() bool {
	for ch := range s.channels {
		if !internal(ch) {
			return true
		}
	}
	return false
}

// warnMissing logs a warning for each configured channel the sample
// lacks, unless want says that one is no longer checked; where says what
// was sampled. It returns which it warned about, in the order of
// c.channels. A sample holding LangGraph's own channels only (a thread
// whose first step has not run) says nothing yet, and a state channel is
// only missed when the sample holds a channel that could be holding the
// state instead.
func (c channelCheck) warnMissing(ctx context.Context, s sampled, where string, want []bool, attrs ...any) []bool {
	warned := make([]bool, len(c.channels))
	if s.checkpoints == 0 || !s.ran() {
		return warned
	}
	for i, ch := range c.channels {
		if !want[i] || s.channels[ch.name] > 0 {
			continue
		}
		if i > 0 && !c.elsewhere(s) {
			// No state written anywhere yet (no tool has run, or the
			// graph keeps none): that is not a misnamed channel.
			continue
		}
		c.log.WarnContext(ctx, fmt.Sprintf("%s hold no channel %q (%s), %s", where, ch.name, ch.flag, ch.effect),
			append([]any{"channel", ch.name, "sampled", s.checkpoints, "channels_held", s.held()}, attrs...)...)
		warned[i] = true
	}
	return warned
}

// elsewhere reports whether the sample holds a channel of the graph's own
// that is none of the configured ones: where session state might be kept
// under another name.
func (c channelCheck) elsewhere(s sampled) bool {
	for ch := range s.channels {
		if !internal(ch) && !slices.ContainsFunc(c.channels, func(k configured) bool { return k.name == ch }) {
			return true
		}
	}
	return false
}

// all is a want of every channel.
func (c channelCheck) all() []bool {
	want := make([]bool, len(c.channels))
	for i := range want {
		want[i] = true
	}
	return want
}

// checkAtStart samples the store's newest checkpoints and warns about the
// configured channels none of them holds.
func (c channelCheck) checkAtStart(ctx context.Context, b backend.Backend) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	s, err := sample(ctx, b, nil, startSample)
	if err != nil {
		c.log.Info("could not sample the channels the checkpoints hold", "err", err)
		return
	}
	c.warnMissing(ctx, s, fmt.Sprintf("the %d newest checkpoints sampled", s.checkpoints), c.all())
}

// channelWatch is a backend.Backend that notices a thread listed whole whose
// checkpoints hold none of a configured channel, and then samples the
// thread's channels and warns, once per channel for the process.
type channelWatch struct {
	backend.Backend
	check channelCheck
	// warned says, per configured channel, that the warning was given.
	warned []atomic.Bool
	// busy is held while a thread is sampled: one at a time.
	busy atomic.Bool
}

func newChannelWatch(b backend.Backend, c channelCheck) *channelWatch {
	return &channelWatch{Backend: b, check: c, warned: make([]atomic.Bool, len(c.channels))}
}

// pending says, per configured channel, whether its warning is still to
// be given; none says none is.
func (w *channelWatch) pending() (want []bool, none bool) {
	want = make([]bool, len(w.warned))
	none = true
	for i := range w.warned {
		want[i] = !w.warned[i].Load()
		none = none && !want[i]
	}
	return want, none
}

// List implements backend.Backend, looking at whole listings for the
// configured channels' names: a checkpoint holding a channel's version
// holds its name, so a listing none of whose rows does holds none of the
// channel, or (a name escaped in JSON text) is sampled to be sure.
func (w *channelWatch) List(ctx context.Context, ref backend.Ref, q backend.Query, fn func(backend.Row) error) (backend.Census, error) {
	want, none := w.pending()
	if q.After != "" || none {
		return w.Backend.List(ctx, ref, q, fn)
	}
	var rows int
	census, err := w.Backend.List(ctx, ref, q, func(r backend.Row) error {
		rows++
		for i, ch := range w.check.channels {
			if want[i] && bytes.Contains(r.Checkpoint.Data, []byte(ch.name)) {
				want[i] = false
			}
		}
		return fn(r)
	})
	if err == nil && rows > 0 && slices.Contains(want, true) && w.busy.CompareAndSwap(false, true) {
		// Off the call's path, with its values (the thread's log tag)
		// but not its deadline.
		go w.confirm(context.WithoutCancel(ctx), ref, want)
	}
	return census, err
}

// confirm samples the thread's channels and warns about those of want it
// holds none of.
func (w *channelWatch) confirm(ctx context.Context, ref backend.Ref, want []bool) {
	defer w.busy.Store(false)
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	s, err := sample(ctx, w.Backend, &ref, threadSample)
	if err != nil {
		return
	}
	for i := range want {
		want[i] = want[i] && !w.warned[i].Load()
	}
	// The thread id is quoted, so the logger shows its hash instead.
	warned := w.check.warnMissing(ctx, s, fmt.Sprintf("the %d newest checkpoints of a thread", s.checkpoints), want,
		"thread", strconv.Quote(ref.ThreadID))
	for i, did := range warned {
		if did {
			w.warned[i].Store(true)
		}
	}
}

// SharesBlobs implements backend.BlobSharer, as the watched backend does.
func (w *channelWatch) SharesBlobs() bool { return backend.SharesBlobs(w.Backend) }
