#!/usr/bin/env bash
# soak.sh [soak flags]: historyd's soak (bench/soak, docs/reliability.md).
#
#   scripts/soak.sh                         1,000,000 calls at concurrency 64
#   SOAK_CALLS=20000 scripts/soak.sh        a short run, to iterate
#
# Starts a throwaway PostgreSQL cluster of its own (scripts/pg-test.sh, env
# file SOAK_PG_ENV, default .cache/soak-pg.env; Debian's postgresql and
# pgbouncer are installed when missing and we are root) with a PgBouncer in
# transaction mode in front of it, builds historyd and the soak, and runs
# it: historyd serves through PgBouncer with --pooler transaction while the
# soak calls, writes, prunes, and restarts PostgreSQL twice and PgBouncer
# once. Stops the cluster on exit (PG_TEST_KEEP=1 keeps it).
#
# - SOAK_CALLS (default 1000000), SOAK_CONCURRENCY (default 64);
#   SOAK_MAX_DURATION (e.g. 70m) stops the calls after that long, however
#   many were made (the report says so).
# - SOAK_WORK: historyd's binary, log and token file, the soak's report
#   (report.md, report.json); default var/soak.
# Exit status: 0 when every check passed, 1 when one failed (the report
# says which), 2 on a setup error.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
GO=${GO:-go}
WORK=${SOAK_WORK:-$REPO/var/soak}
CALLS=${SOAK_CALLS:-1000000}
CONCURRENCY=${SOAK_CONCURRENCY:-64}
export PG_TEST_ENV_FILE=${SOAK_PG_ENV:-$REPO/.cache/soak-pg.env}
mkdir -p "$WORK"

cleanup() {
  if [[ ${PG_TEST_KEEP:-} != 1 ]]; then
    scripts/pg-test.sh stop >>"$WORK/pg-test.log" 2>&1 || echo "soak: could not stop the test cluster (see $WORK/pg-test.log)" >&2
  fi
}
trap cleanup EXIT

: >"$WORK/pg-test.log"
# A cluster of its own, fresh: the soak restarts it.
scripts/pg-test.sh stop >>"$WORK/pg-test.log" 2>&1 || true
scripts/pg-test.sh start >>"$WORK/pg-test.log" 2>&1 || { cat "$WORK/pg-test.log" >&2; exit 2; }
scripts/pg-test.sh pooler start >>"$WORK/pg-test.log" 2>&1 || { cat "$WORK/pg-test.log" >&2; exit 2; }
eval "$(scripts/pg-test.sh env)"
# historyd reaches PostgreSQL through PgBouncer as the pooler's role.
POOLER_DSN=${HISTORYD_TEST_POOLER_TX_DSN/postgres@/$HISTORYD_TEST_POOLER_ROLE@}

"$GO" build -o "$WORK/soak" ./bench/soak || exit 2
echo "soak: $CALLS calls at concurrency $CONCURRENCY; work directory $WORK" >&2
"$WORK/soak" --dsn "$HISTORYD_TEST_DSN" --pooler-dsn "$POOLER_DSN" --role "$HISTORYD_TEST_POOLER_ROLE" \
  --repo "$REPO" --work "$WORK" --calls "$CALLS" --concurrency "$CONCURRENCY" --max-duration "${SOAK_MAX_DURATION:-0}" "$@"
