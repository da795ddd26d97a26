package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// facts is what a direct read of one checkpoint says, from its rows in
// PostgreSQL and nothing of historyd's: how many questions its messages
// hold, the last of them, and its tool_state entries in the canonical form
// answers are compared in.
type facts struct {
	humans   int
	question string
	entries  map[string]string // key → canonical entry
}

// digest is the canonical form of a whole state: its entries in key order.
func (f facts) digest() string { return stateDigest(f.entries) }

func stateDigest(entries map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		fmt.Fprintf(&b, "%q=%s;", k, entries[k])
	}
	return b.String()
}

// canonicalEntry is one tool_state entry as text: its value as JSON (keys
// sorted, numbers as float64 print them) and its bookkeeping fields.
func canonicalEntry(value any, tool string, seq, turn, turnsWritten int64) string {
	v, err := json.Marshal(value)
	if err != nil {
		v = []byte(fmt.Sprintf("unencodable %T", value))
	}
	return fmt.Sprintf("%s|tool=%s|seq=%d|turn=%d|tw=%d", v, tool, seq, turn, turnsWritten)
}

// readFacts reads the facts of the thread's checkpoints with these ids
// (every checkpoint of the thread when ids is nil) directly from
// PostgreSQL: each checkpoint's row, then the messages and tool_state
// blobs of the versions it names, decoded as the JSON LangGraph.js's
// PostgresSaver writes.
func readFacts(ctx context.Context, db *pgxpool.Pool, thread string, ids []string) (map[string]facts, error) {
	rows, err := db.Query(ctx, `SELECT checkpoint_id, coalesce(checkpoint->'channel_versions'->>'messages', ''), coalesce(checkpoint->'channel_versions'->>'tool_state', '')
FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' AND ($2::text[] IS NULL OR checkpoint_id = ANY($2))`, thread, ids)
	if err != nil {
		return nil, fmt.Errorf("read checkpoints of %s: %w", thread, err)
	}
	type versions struct{ messages, state string }
	cps := map[string]versions{}
	var mv, sv []string
	for rows.Next() {
		var id string
		var v versions
		if err := rows.Scan(&id, &v.messages, &v.state); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read checkpoints of %s: %w", thread, err)
		}
		cps[id] = v
		mv = append(mv, v.messages)
		sv = append(sv, v.state)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read checkpoints of %s: %w", thread, err)
	}
	out := make(map[string]facts, len(cps))
	if len(cps) == 0 {
		return out, nil
	}
	blobs := map[[2]string][]byte{}
	rows, err = db.Query(ctx, `SELECT channel, version, coalesce(blob, '') FROM checkpoint_blobs
WHERE thread_id = $1 AND checkpoint_ns = '' AND ((channel = 'messages' AND version = ANY($2)) OR (channel = 'tool_state' AND version = ANY($3)))`, thread, mv, sv)
	if err != nil {
		return nil, fmt.Errorf("read blobs of %s: %w", thread, err)
	}
	for rows.Next() {
		var ch, v string
		var b []byte
		if err := rows.Scan(&ch, &v, &b); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read blobs of %s: %w", thread, err)
		}
		blobs[[2]string{ch, v}] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read blobs of %s: %w", thread, err)
	}
	for id, v := range cps {
		f := facts{entries: map[string]string{}}
		if v.messages != "" {
			b, ok := blobs[[2]string{"messages", v.messages}]
			if !ok {
				return nil, fmt.Errorf("thread %s checkpoint %s: no messages blob of version %s", thread, id, v.messages)
			}
			if f.humans, f.question, err = decodeMessages(b); err != nil {
				return nil, fmt.Errorf("thread %s checkpoint %s: %w", thread, id, err)
			}
		}
		if v.state != "" {
			b, ok := blobs[[2]string{"tool_state", v.state}]
			if !ok {
				return nil, fmt.Errorf("thread %s checkpoint %s: no tool_state blob of version %s", thread, id, v.state)
			}
			if f.entries, err = decodeState(b); err != nil {
				return nil, fmt.Errorf("thread %s checkpoint %s: %w", thread, id, err)
			}
		}
		out[id] = f
	}
	return out, nil
}

// decodeMessages counts the human messages of a serialized LangChain
// message list and returns the last one's content.
func decodeMessages(b []byte) (humans int, last string, err error) {
	var msgs []struct {
		ID     []string `json:"id"`
		Kwargs struct {
			Content any `json:"content"`
		} `json:"kwargs"`
	}
	if err := json.Unmarshal(b, &msgs); err != nil {
		return 0, "", fmt.Errorf("decode messages: %w", err)
	}
	for _, m := range msgs {
		if len(m.ID) > 0 && m.ID[len(m.ID)-1] == "HumanMessage" {
			humans++
			last, _ = m.Kwargs.Content.(string)
		}
	}
	return humans, last, nil
}

// decodeState decodes a tool_state value (key → {value, tool, seq, turn,
// turns_written}) into canonical entries.
func decodeState(b []byte) (map[string]string, error) {
	var st map[string]struct {
		Value        any    `json:"value"`
		Tool         string `json:"tool"`
		Seq          int64  `json:"seq"`
		Turn         int64  `json:"turn"`
		TurnsWritten int64  `json:"turns_written"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("decode tool_state: %w", err)
	}
	out := make(map[string]string, len(st))
	for k, e := range st {
		out[k] = canonicalEntry(e.Value, e.Tool, e.Seq, e.Turn, e.TurnsWritten)
	}
	return out, nil
}
