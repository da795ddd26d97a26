#!/usr/bin/env bash
# bench.sh [--full] [bench run flags]: historyd's benchmark, one table.
#
#   scripts/bench.sh            small mode (under 5 minutes on 2 idle cores)
#   scripts/bench.sh --full     full mode (more threads, turns, repeats, time)
#
# Generates LangGraph threads in Python PostgresSaver's format, serves them
# with a freshly built historyd (a separate process on 127.0.0.1), times the
# reference implementation (mcp-toolsets-runtime's turns_from) on the same
# threads, measures pgbench -S and a no-op gRPC call as ceilings, and prints
# one Markdown table with the floors P1-P7 met or missed. See
# docs/benchmarks.md for what each row measures.
#
# - PostgreSQL: HISTORYD_BENCH_DSN when set (its user must be able to create
#   a database for pgbench, and the checkpoint tables when missing).
#   Otherwise a throwaway cluster is started with scripts/pg-test.sh, with
#   its own env file (HISTORYD_BENCH_PG_ENV, default .cache/bench-pg.env), and
#   stopped on exit unless it was already running or PG_TEST_KEEP=1 (keeping
#   it lets the next run reuse the generated threads). A PgBouncer in
#   transaction mode in front of it (scripts/pg-test.sh pooler start) serves
#   the pooler row; with HISTORYD_BENCH_DSN, HISTORYD_BENCH_POOLER_DSN names
#   one, or that row measures direct connections only.
# - Python: scripts/pyenv.sh's venv (HISTORYD_VENV, default .cache/venv).
# - Output: the table on stdout and in $HISTORYD_BENCH_WORK/table.md;
#   progress in progress.log, every measurement in results.json, historyd's
#   logs in logs/, profiles of missed floors in profiles/. Default work
#   directory: var/bench.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
WORK=${HISTORYD_BENCH_WORK:-$REPO/var/bench}
VENV=${HISTORYD_VENV:-$REPO/.cache/venv}
GO=${GO:-go}
mkdir -p "$WORK"
LOG=$WORK/progress.log
: >"$LOG"

started=
cleanup() {
  local rc=$?
  if [[ -n $started && ${PG_TEST_KEEP:-} != 1 ]]; then
    scripts/pg-test.sh stop >>"$LOG" 2>&1 || echo "bench: could not stop the test cluster (see $LOG)" >&2
  fi
  if [[ $rc -ne 0 ]]; then
    echo "bench: failed; last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2
  fi
}
trap cleanup EXIT

echo "bench: progress in $LOG" >&2
if [[ -z ${HISTORYD_BENCH_DSN:-} ]]; then
  export PG_TEST_ENV_FILE=${HISTORYD_BENCH_PG_ENV:-$REPO/.cache/bench-pg.env}
  if ! scripts/pg-test.sh status >/dev/null 2>&1; then
    scripts/pg-test.sh start >>"$LOG" 2>&1
    started=1
  fi
  scripts/pg-test.sh pooler start >>"$LOG" 2>&1
  eval "$(scripts/pg-test.sh env)"
  HISTORYD_BENCH_DSN=$HISTORYD_TEST_DSN
  export HISTORYD_BENCH_POOLER_DSN=${HISTORYD_BENCH_POOLER_DSN:-$HISTORYD_TEST_POOLER_TX_DSN}
fi

scripts/pyenv.sh >>"$LOG" 2>&1
if ! grep -q '^ok' "$VENV/reference.status" 2>/dev/null; then
  echo "bench: the reference implementation does not import: $(cat "$VENV/reference.status" 2>/dev/null)" >&2
  exit 1
fi

"$GO" build -o "$WORK/bench" ./bench/cmd/bench >>"$LOG" 2>&1

# P7 times a cold read against a build of an earlier commit: by default
# 16c42d4, historyd before its second round of performance work (the
# figures docs/benchmarks.md starts from). HISTORYD_BENCH_BASELINE names
# another commit; "none" leaves P7 without a comparison.
BASELINE=${HISTORYD_BENCH_BASELINE:-16c42d4}
baseline_args=()
if [[ $BASELINE != none ]]; then
  src=$WORK/baseline-src
  rm -rf "$src" && mkdir -p "$src"
  if git -C "$REPO" archive "$BASELINE" | tar -x -C "$src" \
    && (cd "$src" && "$GO" build -o "$WORK/historyd-baseline" ./cmd/historyd) >>"$LOG" 2>&1; then
    baseline_args=(--baseline "$WORK/historyd-baseline" --baseline-name "$(git -C "$REPO" rev-parse --short "$BASELINE")")
  else
    echo "bench: could not build the baseline $BASELINE (see $LOG); HISTORYD_BENCH_BASELINE=none runs without it" >&2
    exit 1
  fi
  rm -rf "$src"
fi

"$WORK/bench" run --dsn "$HISTORYD_BENCH_DSN" --repo "$REPO" --work "$WORK" \
  --python "$VENV/bin/python" --out "$WORK/table.md" "${baseline_args[@]}" "$@" 2>>"$LOG"
