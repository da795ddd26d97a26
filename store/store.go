package store

import (
	"context"
	"fmt"

	"github.com/historyd/historyd/store/lgcodec"
)

// Config configures a Store. The zero value of every field but Backend is a
// usable default.
type Config struct {
	// Backend reads the checkpoints. Required.
	Backend Backend
	// MessagesChannel is the channel holding the conversation's messages.
	// Default "messages".
	MessagesChannel string
	// StateChannel is the channel holding session state, key → StateEntry.
	// Default "tool_state".
	StateChannel string
	// Limits bound each decoded value. Default: lgcodec's defaults.
	Limits lgcodec.Limits
}

// Store derives turns from a backend's checkpoints and reads the state each
// turn ended on. It is safe for concurrent use.
type Store struct {
	b        Backend
	messages string
	state    string
	limits   lgcodec.Limits
}

// New returns a Store reading through cfg.Backend.
func New(cfg Config) *Store {
	s := &Store{b: cfg.Backend, messages: cfg.MessagesChannel, state: cfg.StateChannel, limits: cfg.Limits}
	if s.messages == "" {
		s.messages = "messages"
	}
	if s.state == "" {
		s.state = "tool_state"
	}
	return s
}

// Backend returns the backend the store reads through.
func (s *Store) Backend() Backend { return s.b }

// StateChannel returns the name of the channel read as session state.
func (s *Store) StateChannel() string { return s.state }

// History derives the thread's turns. It reads every checkpoint's summary
// and each distinct messages version once; no session state is decoded.
func (s *Store) History(ctx context.Context, ref Ref) (*History, error) {
	cps, err := s.b.Checkpoints(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of thread %q: %w", ref.ThreadID, err)
	}
	// Many checkpoints share one messages version (a super-step that touched
	// only tool_state, say); each version is read and scanned once.
	byVersion := map[string]int{}
	var reps []string
	for _, c := range cps {
		v, ok := c.Versions[s.messages]
		if !ok {
			continue
		}
		if _, seen := byVersion[v]; !seen {
			byVersion[v] = len(reps)
			reps = append(reps, c.ID)
		}
	}
	scans := make([]lgcodec.Messages, len(reps))
	if len(reps) > 0 {
		blobs, err := s.b.Values(ctx, ref, s.messages, reps)
		if err != nil {
			return nil, fmt.Errorf("read %s of thread %q: %w", s.messages, ref.ThreadID, err)
		}
		for i, b := range blobs {
			if b.Type == "empty" {
				continue
			}
			m, err := lgcodec.ScanMessages(b.Type, b.Data, s.limits)
			if err != nil {
				return nil, &DecodeError{Ref: ref, CheckpointID: reps[i], Channel: s.messages, Err: err}
			}
			scans[i] = m
		}
	}
	placed := make([]Placed, 0, len(cps))
	for _, c := range cps {
		p := Placed{ID: c.ID, TS: c.TS}
		if v, ok := c.Versions[s.messages]; ok {
			m := scans[byVersion[v]]
			p.Messages, p.Humans = m.Count, m.Humans
		}
		placed = append(placed, p)
	}
	return Derive(ref, placed), nil
}

// States reads the session state each of the given turns ended on, restricted
// to keys when keys is not empty. Turns must be retained turns of a History
// of ref. The result is in the order of turns.
func (s *Store) States(ctx context.Context, ref Ref, turns []Turn, keys []string) ([]map[string]Entry, error) {
	out := make([]map[string]Entry, len(turns))
	if len(turns) == 0 {
		return out, nil
	}
	at := make([]string, len(turns))
	for i, t := range turns {
		if !t.Retained {
			return nil, fmt.Errorf("turn %d of thread %q is not retained", t.N, ref.ThreadID)
		}
		at[i] = t.End.ID
	}
	blobs, err := s.b.Values(ctx, ref, s.state, at)
	if err != nil {
		return nil, fmt.Errorf("read %s of thread %q: %w", s.state, ref.ThreadID, err)
	}
	for i, b := range blobs {
		v, ok, err := lgcodec.Decode(b.Type, b.Data, s.limits)
		if err != nil {
			return nil, &DecodeError{Ref: ref, CheckpointID: at[i], Channel: s.state, Err: err}
		}
		entries, err := parseState(v, ok, keys)
		if err != nil {
			return nil, &DecodeError{Ref: ref, CheckpointID: at[i], Channel: s.state, Err: err}
		}
		out[i] = entries
	}
	return out, nil
}
