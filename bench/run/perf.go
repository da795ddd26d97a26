package run

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/historyd/historyd/bench/load"
	"github.com/historyd/historyd/client"
)

// Floors of the rows in this file.
const (
	p5MaxOverFloor = 3.0
	p7MaxShare     = 0.4
)

// p5 compares a warm Snapshot of one turn of the 1 MB thread, through the
// Go client with values as JSON text (taken as text, and parsed), with
// the floor of any gRPC server on this machine: a trivial server in the
// driver's process sending the same number of bytes, already encoded.
func (r *runner) p5(ctx context.Context) error {
	s, _, err := r.start(ctx, "p5", true)
	if err != nil {
		return err
	}
	defer s.Stop()
	thread, turn := r.name("p1"), r.plan.p1.Turns/2
	// Warm: the turn's state is decoded and cached once.
	if _, err := s.GC.Snapshot(ctx, thread, turn); err != nil {
		return err
	}
	// The size of historyd's answer as JSON text: what the trivial server
	// sends.
	size, err := s.SnapshotRawJSON(ctx, load.Target{Thread: thread, Turn: turn})
	if err != nil {
		return err
	}
	const n = 60
	measure := func(read func(context.Context) error) (load.Result, error) {
		res := load.Drive(ctx, 1, n, 0, func(ctx context.Context, _, _ int) error { return read(ctx) })
		if res.Errors > 0 {
			return res, fmt.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
		}
		return res, nil
	}
	raw, err := measure(func(ctx context.Context) error {
		_, err := s.GC.Snapshot(ctx, thread, turn, client.WithRawValues())
		return err
	})
	if err != nil {
		return fmt.Errorf("P5 JSON text: %w", err)
	}
	parsed, err := measure(func(ctx context.Context) error {
		_, err := s.GC.Snapshot(ctx, thread, turn)
		return err
	})
	if err != nil {
		return fmt.Errorf("P5 JSON parsed: %w", err)
	}
	asValue, err := measure(func(ctx context.Context) error {
		_, err := s.GC.Snapshot(ctx, thread, turn, client.WithValueFormat(client.ProtoValues))
		return err
	})
	if err != nil {
		return fmt.Errorf("P5 Value: %w", err)
	}
	floor, err := trivialFloor(ctx, size, n)
	if err != nil {
		return fmt.Errorf("P5 trivial server: %w", err)
	}
	ratio := float64(raw.P50) / float64(floor.P50)
	r.detail("p5", map[string]any{"json_text": raw, "json_parsed": parsed, "value": asValue, "trivial": floor, "bytes": size})
	r.add(Row{ID: "P5", What: fmt.Sprintf("warm `Snapshot` of one turn of the 50-turn thread (%s answer as JSON text), through the Go client, c=1, %d requests each", mbText(int64(size)), n),
		Historyd: fmt.Sprintf("JSON text p50 %s (p99 %s); parsed into Go values p50 %s; as google.protobuf.Value p50 %s",
			msText(raw.P50), msText(raw.P99), msText(parsed.P50), msText(asValue.P50)),
		Other: fmt.Sprintf("trivial gRPC server sending %s of bytes: p50 %s (p99 %s)", mbText(int64(size)), msText(floor.P50), msText(floor.P99)),
		Ratio: fmt.Sprintf("%.1f× the floor (parsed %.1f×, Value %.1f×)", ratio, float64(parsed.P50)/float64(floor.P50), float64(asValue.P50)/float64(floor.P50)),
		Floor: fmt.Sprintf("≤ %.0f× the floor", p5MaxOverFloor), Verdict: verdict(ratio <= p5MaxOverFloor), Load1: raw.Load1})
	if ratio > p5MaxOverFloor {
		r.misses["P5"] = true
	}
	return nil
}

// trivialMethod is the one method of the trivial server.
const trivialMethod = "/bench.Trivial/Get"

// trivialFloor serves size bytes from a gRPC server that does nothing
// else, in this process on loopback, and times n requests for them taken
// as bytes: the least any gRPC server can take to send such an answer
// here.
func trivialFloor(ctx context.Context, size, n int) (load.Result, error) {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return load.Result{}, err
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(bytesCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		var req []byte
		if err := ss.RecvMsg(&req); err != nil {
			return err
		}
		return ss.SendMsg(&payload)
	}))
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	defer gs.Stop()
	conn, err := load.Dial(lis.Addr().String())
	if err != nil {
		return load.Result{}, err
	}
	defer conn.Close()
	get := func(ctx context.Context) error {
		var out []byte
		in := []byte{}
		if err := conn.Invoke(ctx, trivialMethod, &in, &out, grpc.ForceCodecV2(bytesCodec{})); err != nil {
			return err
		}
		if len(out) != size {
			return fmt.Errorf("trivial server sent %d bytes, want %d", len(out), size)
		}
		return nil
	}
	if err := get(ctx); err != nil {
		return load.Result{}, err
	}
	res := load.Drive(ctx, 1, n, 0, func(ctx context.Context, _, _ int) error { return get(ctx) })
	if res.Errors > 0 {
		return res, fmt.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
	}
	return res, nil
}

// bytesCodec sends and receives messages that are plain byte slices, so
// the trivial server does no encoding work at all.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }

func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch b := v.(type) {
	case *[]byte:
		return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
	case proto.Message:
		out, err := proto.Marshal(b)
		return mem.BufferSlice{mem.SliceBuffer(out)}, err
	}
	return nil, fmt.Errorf("bytesCodec: cannot marshal %T", v)
}

func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("bytesCodec: cannot unmarshal into %T", v)
	}
	*b = data.Materialize()
	return nil
}

// p7 times the first Snapshot of the 500-turn thread in a fresh process
// (nothing cached: every messages version is read and scanned) against
// the same request to a baseline build, alternating, three processes
// each, and compares their peak RSS growth.
func (r *runner) p7(ctx context.Context) error {
	thread := r.name("p2long")
	turn := r.plan.p2Long.Turns / 2
	type coldRun struct {
		Seconds float64 `json:"seconds"`
		Growth  int64   `json:"rss_growth_bytes"`
	}
	runs := map[string][]coldRun{}
	bins := [][2]string{{"this build", r.bin}}
	if r.cfg.Baseline != "" {
		bins = append(bins, [2]string{"baseline", r.cfg.Baseline})
	}
	for i := range 3 {
		for _, b := range bins {
			label := fmt.Sprintf("p7-%s-%d", map[string]string{"this build": "new", "baseline": "base"}[b[0]], i)
			s, err := load.Start(ctx, b[1], r.cfg.DSN, filepath.Join(r.cfg.Work, "logs", "historyd-"+label+".log"))
			if err != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond)
			base, err := load.ReadMem(s.Pid)
			if err == nil {
				err = load.ResetPeak(s.Pid)
			}
			if err != nil {
				s.Stop()
				return err
			}
			t0 := time.Now()
			// The bare stub: a baseline build may predate the Go client's
			// value formats, and the server's side is what is compared.
			_, err = s.SnapshotRaw(ctx, load.Target{Thread: thread, Turn: turn})
			d := time.Since(t0)
			g, gerr := growth(s, base)
			s.Stop()
			if err != nil {
				return fmt.Errorf("P7 %s: %w", b[0], err)
			}
			if gerr != nil {
				return gerr
			}
			runs[b[0]] = append(runs[b[0]], coldRun{Seconds: d.Seconds(), Growth: g})
		}
	}
	med := func(rs []coldRun) (time.Duration, int64) {
		ts := make([]float64, len(rs))
		gs := make([]int64, len(rs))
		for i, x := range rs {
			ts[i], gs[i] = x.Seconds, x.Growth
		}
		slices.Sort(ts)
		slices.Sort(gs)
		return time.Duration(ts[len(ts)/2] * float64(time.Second)), gs[len(gs)/2]
	}
	r.detail("p7", runs)
	newT, newG := med(runs["this build"])
	row := Row{ID: "P7", What: fmt.Sprintf("cold first `Snapshot` (turn %d) of the %d-turn thread (%d checkpoints), each in a fresh process, median of 3, alternating with the baseline", turn, r.plan.p2Long.Turns, r.plan.p2Long.Turns*r.plan.p2Long.CheckpointsPerTurn),
		Historyd: fmt.Sprintf("%s, peak RSS +%s", msText(newT), mbText(newG)),
		Floor:    fmt.Sprintf("≤ %.1f × the baseline, peak RSS growth no higher", p7MaxShare), Verdict: "–", Ratio: "–", Other: "no baseline build given (--baseline)"}
	if r.cfg.Baseline != "" {
		baseT, baseG := med(runs["baseline"])
		share := float64(newT) / float64(baseT)
		ok := share <= p7MaxShare && newG <= baseG
		row.Other = fmt.Sprintf("baseline build %s: %s, peak RSS +%s", r.cfg.BaselineName, msText(baseT), mbText(baseG))
		row.Ratio = fmt.Sprintf("%.2f × time, %.2f × RSS growth", share, float64(newG)/float64(max(baseG, 1)))
		row.Verdict = verdict(ok)
		if !ok {
			r.misses["P7"] = true
		}
	}
	row.Load1 = load.LoadAvg()[0]
	r.add(row)
	return nil
}
