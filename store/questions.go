package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/historyd/historyd/langgraph/codec"
	"github.com/historyd/historyd/langgraph/format"
	"github.com/historyd/historyd/store/backend"
	"github.com/historyd/historyd/store/reduce"
)

// scanBatch is how many messages versions one backend read fetches.
const scanBatch = 16

// threadData is what the store learns of one lineage of a thread and never
// has to learn again: its questions, each numbered by message identity in
// a table the checkpoints' Asks index, and what each messages version
// holds. It is shared by the thread's successive indexes.
type threadData struct {
	mu        sync.Mutex
	questions []Question
	byID      map[string]int32
	// versions maps a messages version to what the list holds.
	versions map[string]held
	// tip is the version extend recorded last, the one version whose asks
	// may grow in place (see extend).
	tip string
	// shared holds one map of each set of channel versions the thread's
	// checkpoints have, by versionsKey: the checkpoints of a thread mostly
	// share theirs (a super-step changes one channel or two), and one map
	// for each would be most of what a long thread's index holds.
	shared map[string]map[string]string
	// inputs maps an input checkpoint to its run input's text, once read
	// (see readRunInputs).
	inputs map[string]string
	// size is what the thread data holds in memory, about (see size.go).
	size int64
}

// held is what one messages version's list holds.
type held struct {
	messages  int
	asks      []int32
	synthetic bool
	// partial says the list was rebuilt past a deleted checkpoint: it
	// holds only what was written since, and asks only the questions
	// asked since.
	partial bool
}

func newThreadData() *threadData {
	return &threadData{byID: map[string]int32{}, versions: map[string]held{}, shared: map[string]map[string]string{}, size: threadDataSize}
}

// shareVersions returns a map equal to versions, which checkpoints with
// the same versions share and must not modify.
func (th *threadData) shareVersions(versions map[string]string) map[string]string {
	key := versionsKey(versions)
	th.mu.Lock()
	defer th.mu.Unlock()
	if m, ok := th.shared[key]; ok {
		return m
	}
	th.shared[key] = versions
	th.size += versionsSize(key, versions)
	return versions
}

// bytes returns what the thread data holds in memory, about.
func (th *threadData) bytes() int64 {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.size
}

// table returns the question table as it now stands; later questions are
// appended, so it stays valid for the Asks already handed out.
func (th *threadData) table() []Question {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.questions[:len(th.questions):len(th.questions)]
}

// learn records what a messages version holds, numbering its questions.
// A human message without an id is known by its place among the list's
// questions, which is how counting human messages knows it.
func (th *threadData) learn(version string, count int, list []codec.Message) held {
	return th.learnAs(version, held{messages: count}, list)
}

// learnAs is learn for a list rebuilt from writes, h saying how.
func (th *threadData) learnAs(version string, h held, list []codec.Message) held {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.learnLocked(version, h, 0, list)
}

// extend records what a messages version holds that is the version from
// plus the messages of tail (codec.AppendReader): from's questions, then
// tail's. count is the whole list's length.
func (th *threadData) extend(version, from string, count int, tail []codec.Message) held {
	th.mu.Lock()
	defer th.mu.Unlock()
	base := th.versions[from]
	asks := base.asks
	if from != th.tip {
		// Another version already extends from's questions in place:
		// appending would write into its list.
		asks = slices.Clip(asks)
	}
	h := held{messages: count, asks: asks, synthetic: base.synthetic}
	h = th.learnLocked(version, h, len(base.asks), tail)
	// The versions of a thread mostly extend one another: they share one
	// array of question numbers, each a longer prefix of it, instead of a
	// copy each. Only the newest of them (the tip) may append in place.
	th.tip = version
	return h
}

// learnLocked adds list's questions to h, the first of them the list's
// question number place (counted from 0), and records h for version.
func (th *threadData) learnLocked(version string, h held, place int, list []codec.Message) held {
	before := h.asks
	for _, m := range list {
		if m.Type != "human" {
			continue
		}
		if m.Synthetic {
			h.synthetic = true
			continue
		}
		id := m.ID
		if id == "" {
			id = fmt.Sprintf("#%d", place)
		}
		place++
		q, ok := th.byID[id]
		if !ok {
			q = int32(len(th.questions))
			th.byID[id] = q
			th.questions = append(th.questions, Question{ID: id, Text: m.Text})
			th.size += questionSize(id, m.Text)
		}
		h.asks = append(h.asks, q)
	}
	if _, known := th.versions[version]; !known {
		th.size += heldSize(version)
	}
	th.size += asksSize(before, h.asks)
	th.versions[version] = h
	return h
}

// knows reports whether a question with message id id is in the table:
// a read of a later messages version need not read its text again.
func (th *threadData) knows(id string) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	_, ok := th.byID[id]
	return ok
}

func (th *threadData) lookup(version string) (held, bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	h, ok := th.versions[version]
	return h, ok
}

// place reads what the messages channel of each checkpoint of cps holds,
// reading and scanning each distinct messages version once, and not at all
// when th knows it. A version with no stored value (a DeltaChannel between
// snapshots) is rebuilt from writes, along parent links through earlier
// (known) and new checkpoints alike. Checkpoints whose messages cannot be
// rebuilt are Unplaced.
//
// It is one function because its batches carry what is known of each
// messages version from one to the next, which a split would have to pass
// around whole.
func (s *Store) place(ctx context.Context, ref backend.Ref, th *threadData, known []Checkpoint, cps []listed) ([]Checkpoint, error) {
	// Every walk below, and derivation's, follows parent links.
	if err := checkLinks(ref, known, cps); err != nil {
		return nil, err
	}
	mode := codec.Humans
	for _, c := range cps {
		if c.delta {
			// Stored lists seed rebuilt ones, which need every message.
			mode = codec.All
			break
		}
	}
	// unread lists a checkpoint of cps for each messages version th does
	// not know, leaving out those skip names.
	unread := func(skip func(c listed, version string) bool) (ids, versions []string) {
		queued := map[string]bool{}
		for _, c := range cps {
			v, ok := c.versions[s.messages]
			if !ok || queued[v] || skip(c, v) || s.shares && foreignVersion(v) {
				// A foreign list is another branch's: the checkpoint's
				// messages are unread, and it belongs to no turn.
				continue
			}
			if _, known := th.lookup(v); known {
				continue
			}
			queued[v] = true
			ids, versions = append(ids, c.id), append(versions, v)
		}
		return ids, versions
	}
	// read: checkpoint ids, one per unknown version; readVer: the versions.
	read, readVer := unread(func(listed, string) bool { return false })
	note(ctx, AttrIndexMessagesRead.Int(len(read)))
	unstored := map[string]bool{} // versions with no stored value
	// Checkpoints deleted since they were listed: left out of the result,
	// which then holds only checkpoints seen to exist (or not yet read),
	// and their versions read at another checkpoint holding them.
	missing := map[string]bool{}
	tried := map[string]bool{}
	// Read in id order, each version mostly the one before plus what was
	// appended: the reader then scans only what was appended.
	versions := &codec.AppendReader{Mode: mode, Known: th.knows, Limits: s.limits}
	lastRead := "" // the version versions read last
	for len(read) > 0 {
		sortTogether(read, readVer)
		// Every messages version holds the whole conversation so far, so
		// a long thread's versions add up to far more than any one of
		// them: they are read a batch at a time, never all at once.
		for start := 0; start < len(read); start += scanBatch {
			end := min(start+scanBatch, len(read))
			err := s.eachValue(ctx, ref, s.messages, read[start:end], func(j int, b backend.Blob) error {
				i := start + j
				tried[read[i]] = true
				switch {
				case b.Missing:
					missing[read[i]] = true
					return nil
				case b.Type == format.TypeEmpty:
					unstored[readVer[i]] = true
					return nil
				}
				m, extends, err := versions.Read(b.Type, b.Data)
				if err != nil {
					return &DecodeError{Ref: ref, CheckpointID: read[i], Channel: s.messages, Err: err}
				}
				if extends {
					th.extend(readVer[i], lastRead, m.Count, m.List)
				} else {
					th.learn(readVer[i], m.Count, m.List)
				}
				lastRead = readVer[i]
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		if len(missing) == 0 {
			break
		}
		read, readVer = unread(func(c listed, v string) bool { return tried[c.id] || unstored[v] })
	}
	if err := s.placeSaved(ctx, ref, th, cps, mode, missing); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		cps = slices.DeleteFunc(slices.Clone(cps), func(c listed) bool { return missing[c.id] })
	}
	if len(unstored) > 0 {
		note(ctx, AttrIndexDeltaRebuild.Bool(true))
		if err := s.rebuildMessages(ctx, ref, th, known, cps, unstored); err != nil {
			return nil, err
		}
	}
	out := make([]Checkpoint, len(cps))
	for i, c := range cps {
		p := Checkpoint{ID: c.id, Parent: c.parent, TS: c.ts, States: c.versions, Between: c.between, Input: c.input, Rest: c.rest}
		if v, _, ok := s.messagesSource(c.versions); ok {
			p.Version = v
			if h, ok := th.lookup(v); ok {
				p.Messages, p.Asks, p.Synthetic, p.Partial = h.messages, h.asks, h.synthetic, h.partial
			} else {
				p.Unplaced = true
			}
		}
		out[i] = p
	}
	return out, nil
}

// sortTogether sorts ids, and vers along with them.
func sortTogether(ids, vers []string) {
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	ids2, vers2 := make([]string, len(ids)), make([]string, len(ids))
	for i, j := range idx {
		ids2[i], vers2[i] = ids[j], vers[j]
	}
	copy(ids, ids2)
	copy(vers, vers2)
}

// rebuiltList is a messages list rebuilt from writes; partial says it was
// rebuilt past a deleted checkpoint and holds only what was written since.
type rebuiltList struct {
	list    []codec.Message
	partial bool
}

// rebuildMessages rebuilds, from writes, the messages versions of cps that
// have no stored value, and records what each holds.
func (s *Store) rebuildMessages(ctx context.Context, ref backend.Ref, th *threadData, known []Checkpoint, cps []listed, unstored map[string]bool) error {
	nodes := make(map[string]listed, len(known)+len(cps))
	for _, c := range known {
		nodes[c.ID] = listed{id: c.ID, parent: c.Parent, versions: c.States, between: c.Between}
	}
	var targets []string
	done := map[string]bool{}
	for _, c := range cps {
		nodes[c.id] = c
		if v := c.versions[s.messages]; unstored[v] && !done[v] {
			done[v] = true
			targets = append(targets, c.id)
		}
	}
	_, err := rebuild(ctx, s, ref, s.messages, nodes, targets, folder[rebuiltList]{
		seed: func(id string, b backend.Blob) (rebuiltList, error) {
			m, err := codec.ReadMessages(b.Type, b.Data, s.limits, codec.All)
			if err != nil {
				return rebuiltList{}, &DecodeError{Ref: ref, CheckpointID: id, Channel: s.messages, Err: err}
			}
			return rebuiltList{list: m.List}, nil
		},
		empty: func() rebuiltList { return rebuiltList{} },
		// Past a deleted checkpoint the list starts over, unknown: what is
		// written since still shows which questions were asked since.
		orphan: func() rebuiltList { return rebuiltList{partial: true} },
		apply: func(id string, base rebuiltList, writes []backend.Write) (rebuiltList, error) {
			ws := make([]codec.MessageWrite, 0, len(writes))
			for _, w := range writes {
				mw, err := codec.ReadMessageWrite(w.Value.Type, w.Value.Data, s.limits)
				if err != nil {
					return rebuiltList{}, &DecodeError{Ref: ref, CheckpointID: id, Channel: s.messages, Err: err}
				}
				ws = append(ws, mw)
			}
			return rebuiltList{list: reduce.Messages(base.list, ws), partial: base.partial && !reduce.Resets(ws)}, nil
		},
		done: func(id string, v rebuiltList) error {
			th.learnAs(nodes[id].versions[s.messages], held{messages: len(v.list), partial: v.partial}, v.list)
			return nil
		},
	})
	return err
}
