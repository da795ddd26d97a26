package run

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/historyd/historyd/bench/load"
)

// cpuSnap is the CPU time used so far by the three parties of a run:
// historyd, the PostgreSQL backends serving it (application_name
// "historyd"), and the bench process itself (the driver and its client).
type cpuSnap struct {
	historyd, postgres, driver time.Duration
}

// CPUShare is the CPU time per request of each party.
type CPUShare struct {
	Historyd time.Duration `json:"historyd_ns"`
	Postgres time.Duration `json:"postgres_ns"`
	Driver   time.Duration `json:"driver_ns"`
}

// Total is the machine's CPU time per request.
func (c CPUShare) Total() time.Duration { return c.Historyd + c.Postgres + c.Driver }

// Ceiling is the request rate at which the machine's CPUs would be busy
// with nothing else.
func (c CPUShare) Ceiling() float64 {
	if c.Total() <= 0 {
		return 0
	}
	return float64(runtime.NumCPU()) / c.Total().Seconds()
}

func (c CPUShare) String() string {
	return fmt.Sprintf("CPU per request: historyd %s + PostgreSQL %s + driver %s = %s, so %d CPUs cap it at %.0f req/s",
		msText(c.Historyd), msText(c.Postgres), msText(c.Driver), msText(c.Total()), runtime.NumCPU(), c.Ceiling())
}

func (r *runner) cpuNow(ctx context.Context, s *load.Server) (cpuSnap, error) {
	var snap cpuSnap
	var err error
	if snap.historyd, err = load.CPUTime(s.Pid); err != nil {
		return snap, err
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return snap, err
	}
	snap.driver = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	conn, err := pgx.Connect(ctx, r.cfg.DSN)
	if err != nil {
		return snap, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'historyd' AND datname = current_database()`)
	if err != nil {
		return snap, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return snap, err
	}
	for _, pid := range pids {
		// A backend of another machine's server cannot be read; then the
		// PostgreSQL share is simply unknown (zero).
		if t, err := load.CPUTime(int(pid)); err == nil {
			snap.postgres += t
		}
	}
	return snap, nil
}

func share(a, b cpuSnap, requests int) CPUShare {
	if requests <= 0 {
		return CPUShare{}
	}
	n := time.Duration(requests)
	return CPUShare{Historyd: (b.historyd - a.historyd) / n, Postgres: (b.postgres - a.postgres) / n, Driver: (b.driver - a.driver) / n}
}
