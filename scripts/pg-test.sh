#!/usr/bin/env bash
# pg-test.sh: a throwaway PostgreSQL cluster for historyd's tests.
#
#   scripts/pg-test.sh start    create and start the cluster (no-op when it runs)
#   scripts/pg-test.sh stop     stop it and delete its directory (no-op when none)
#   scripts/pg-test.sh env      print the env file (eval-able `export` lines)
#   scripts/pg-test.sh status   say whether it runs; exit 0 only when it does
#   scripts/pg-test.sh psql ... run psql against the test database
#
# For fault-injection tests, which need a cluster of their own (give each its
# own PG_TEST_ENV_FILE):
#
#   scripts/pg-test.sh restart [MODE]  pg_ctl restart with -m MODE (fast by
#                                      default; smart, fast or immediate)
#   scripts/pg-test.sh halt [MODE]     stop the server but keep the cluster, its
#                                      data, port and env file (-m MODE, fast by
#                                      default; immediate is a crash)
#   scripts/pg-test.sh resume          start a halted cluster again, on its port
#
# `start` replaces a cluster whose env file exists but which does not answer,
# halted ones included: use `resume` to bring a halted cluster back.
#
# The cluster lives in a fresh `mktemp -d /tmp/historyd-pg.XXXXXX`, listens on
# a unix socket in that directory and on 127.0.0.1 at a free port, and trusts
# every local connection. It holds one database, historyd_test.
#
# `start` writes an env file, by default .cache/pg-test.env in the repository
# (set PG_TEST_ENV_FILE to put it elsewhere), with:
#
#   HISTORYD_TEST_DSN            postgres://postgres@127.0.0.1:PORT/historyd_test?sslmode=disable
#   HISTORYD_TEST_SUPERUSER_DSN  the same DSN. The DSN's user, postgres, is the
#                                cluster's superuser, so tests may create roles,
#                                schemas and databases with it; the second name
#                                exists so a test that needs superuser rights
#                                says so, and keeps working if the first ever
#                                becomes an unprivileged role.
#   HISTORYD_TEST_PGHOST, HISTORYD_TEST_PGPORT, HISTORYD_TEST_PGDIR
#                                socket directory, port, cluster directory.
#
# PostgreSQL refuses to run as root. Run as root, this script runs the server
# as the `postgres` system user (creating it when absent); run as anyone else,
# as that user. When initdb/pg_ctl are missing and we are root, it installs
# Debian's `postgresql` package.
#
# Environment: PG_TEST_ENV_FILE (env file path), PG_TEST_DB (database name,
# default historyd_test), PG_TEST_BIN (directory holding initdb and pg_ctl),
# PG_TEST_PORT (the port `start` listens on; default a free one, and `start`
# fails when PG_TEST_PORT is taken).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENV_FILE=${PG_TEST_ENV_FILE:-$REPO/.cache/pg-test.env}
DB=${PG_TEST_DB:-historyd_test}
SUPERUSER=postgres

die() { echo "pg-test: $*" >&2; exit 1; }
note() { echo "pg-test: $*" >&2; }

find_bin() {
  if [[ -n ${PG_TEST_BIN:-} ]]; then
    [[ -x $PG_TEST_BIN/initdb && -x $PG_TEST_BIN/pg_ctl ]] \
      || die "PG_TEST_BIN=$PG_TEST_BIN holds no initdb/pg_ctl"
    echo "$PG_TEST_BIN"; return
  fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n $d && -x $d/initdb && -x $d/pg_ctl ]]; then echo "$d"; return; fi
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(command -v initdb)"; return
  fi
  return 1
}

ensure_bin() {
  local bin
  if bin=$(find_bin); then echo "$bin"; return; fi
  [[ $(id -u) -eq 0 ]] || die "initdb/pg_ctl not found and not root: install PostgreSQL (apt-get install postgresql) or set PG_TEST_BIN"
  note "initdb/pg_ctl not found: installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2 || die "apt-get install -y postgresql failed"
  # Debian's package starts its own cluster on 5432; ours does not use it.
  bin=$(find_bin) || die "postgresql installed but initdb/pg_ctl still not found under /usr/lib/postgresql/*/bin"
  echo "$bin"
}

# as_user CMD...: run CMD as the unprivileged server user, from /.
RUN_USER=
as_user() {
  if [[ -n $RUN_USER ]]; then
    (cd / && runuser -u "$RUN_USER" -- "$@")
  else
    (cd / && "$@")
  fi
}

pick_user() {
  if [[ $(id -u) -ne 0 ]]; then RUN_USER=; return; fi
  RUN_USER=postgres
  if ! id -u "$RUN_USER" >/dev/null 2>&1; then
    note "creating system user $RUN_USER"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$RUN_USER" || die "could not create user $RUN_USER"
  fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
  local p i
  for i in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    if ! port_in_use "$p"; then echo "$p"; return; fi
  done
  die "no free TCP port found on 127.0.0.1"
}

# load_env: read the env file's settings, if any, into PGDIR/PGPORT_/BIN.
load_env() {
  PGDIR_= PGPORT_= PGBIN_=
  [[ -f $ENV_FILE ]] || return 1
  PGDIR_=$(sed -n 's/^export HISTORYD_TEST_PGDIR=//p' "$ENV_FILE" | tr -d "'\"")
  PGPORT_=$(sed -n 's/^export HISTORYD_TEST_PGPORT=//p' "$ENV_FILE" | tr -d "'\"")
  PGBIN_=$(sed -n 's/^# bin=//p' "$ENV_FILE")
  [[ -n $PGDIR_ && -n $PGPORT_ ]]
}

running() {
  load_env || return 1
  [[ -d $PGDIR_/data ]] || return 1
  local isready=${PGBIN_:-}/pg_isready
  [[ -x $isready ]] || isready=$(find_bin 2>/dev/null)/pg_isready
  [[ -x $isready ]] || return 1
  "$isready" -q -h "$PGDIR_" -p "$PGPORT_" -d "$DB" -U "$SUPERUSER" -t 3
}

cleanup_dir() {
  local dir=$1 bin=$2
  [[ -n $dir && $dir == /tmp/historyd-pg.* ]] || return 0
  if [[ -f $dir/data/postmaster.pid && -x $bin/pg_ctl ]]; then
    pick_user
    as_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  rm -rf -- "$dir"
}

cmd_start() {
  if running; then
    note "already running in $PGDIR_ on port $PGPORT_ (env: $ENV_FILE)"
    return 0
  fi
  if load_env; then
    note "stale env file $ENV_FILE (cluster $PGDIR_ not answering): replacing it"
    cleanup_dir "$PGDIR_" "${PGBIN_:-/nonexistent}"
    rm -f -- "$ENV_FILE"
  fi
  local bin dir port attempt log
  bin=$(ensure_bin)
  pick_user
  dir=$(mktemp -d /tmp/historyd-pg.XXXXXX)
  [[ -n $RUN_USER ]] && chown "$RUN_USER:" "$dir"
  chmod 700 "$dir"
  log=$dir/postgres.log
  if ! as_user "$bin/initdb" -D "$dir/data" -U "$SUPERUSER" --auth=trust \
      -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    rm -rf -- "$dir"
    die "initdb failed (output above)"
  fi
  for attempt in 1 2 3 4 5; do
    if [[ -n ${PG_TEST_PORT:-} ]]; then
      port=$PG_TEST_PORT
      if port_in_use "$port"; then
        cleanup_dir "$dir" "$bin"
        die "PG_TEST_PORT=$port: something already listens on 127.0.0.1:$port"
      fi
    else
      port=$(free_port)
    fi
    cat >>"$dir/data/postgresql.conf" <<EOF
# historyd test cluster (attempt $attempt)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
log_min_messages = warning
EOF
    if as_user "$bin/pg_ctl" -D "$dir/data" -l "$log" -w -t 60 start >/dev/null 2>&1; then
      break
    fi
    if [[ -z ${PG_TEST_PORT:-} ]] && grep -q -i "could not bind\|address already in use\|could not create any TCP/IP sockets" "$log" 2>/dev/null; then
      note "port $port taken meanwhile; trying another"
      port=
      continue
    fi
    tail -n 30 "$log" >&2 2>/dev/null || true
    cleanup_dir "$dir" "$bin"
    die "pg_ctl start failed (log above)"
  done
  if [[ -z $port ]]; then
    cleanup_dir "$dir" "$bin"
    die "could not bind a free port after 5 attempts"
  fi
  if ! "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U "$SUPERUSER" -d postgres \
      -c "CREATE DATABASE \"$DB\"" >/dev/null; then
    cleanup_dir "$dir" "$bin"
    die "CREATE DATABASE $DB failed"
  fi
  local dsn="postgres://$SUPERUSER@127.0.0.1:$port/$DB?sslmode=disable"
  mkdir -p "$(dirname "$ENV_FILE")"
  cat >"$ENV_FILE.tmp" <<EOF
# Written by scripts/pg-test.sh start; removed by scripts/pg-test.sh stop.
# bin=$bin
export HISTORYD_TEST_DSN='$dsn'
export HISTORYD_TEST_SUPERUSER_DSN='$dsn'
export HISTORYD_TEST_PGHOST='$dir'
export HISTORYD_TEST_PGPORT='$port'
export HISTORYD_TEST_PGDIR='$dir'
EOF
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
  note "started in $dir on 127.0.0.1:$port; env file $ENV_FILE"
}

cmd_stop() {
  if ! load_env; then
    note "not running (no env file $ENV_FILE)"
    return 0
  fi
  local bin=${PGBIN_:-}
  [[ -x $bin/pg_ctl ]] || bin=$(find_bin 2>/dev/null || echo /nonexistent)
  if [[ -f $PGDIR_/data/postmaster.pid ]]; then
    pick_user
    as_user "$bin/pg_ctl" -D "$PGDIR_/data" -m fast -w -t 60 stop >/dev/null \
      || die "pg_ctl stop failed for $PGDIR_ (see $PGDIR_/postgres.log)"
  fi
  cleanup_dir "$PGDIR_" "$bin"
  rm -f -- "$ENV_FILE"
  note "stopped and removed $PGDIR_"
}

cmd_env() {
  running || die "no running test cluster (env file $ENV_FILE): run scripts/pg-test.sh start"
  grep '^export ' "$ENV_FILE"
}

cmd_status() {
  if running; then
    echo "running: $PGDIR_ on 127.0.0.1:$PGPORT_ (env file $ENV_FILE)"
  else
    echo "not running"
    return 1
  fi
}

cmd_psql() {
  running || die "no running test cluster: run scripts/pg-test.sh start"
  local bin=${PGBIN_:-}
  [[ -x $bin/psql ]] || bin=$(find_bin)
  exec "$bin/psql" -X -h "$PGDIR_" -p "$PGPORT_" -U "$SUPERUSER" -d "$DB" "$@"
}

# cluster_bin: the bin directory of the cluster load_env read.
cluster_bin() {
  local bin=${PGBIN_:-}
  [[ -x $bin/pg_ctl ]] || bin=$(find_bin) || die "initdb/pg_ctl not found"
  echo "$bin"
}

check_mode() {
  case $1 in
    smart|fast|immediate) ;;
    *) die "shutdown mode $1: want smart, fast or immediate" ;;
  esac
}

cmd_restart() {
  local mode=${1:-fast} bin
  check_mode "$mode"
  running || die "no running test cluster (env file $ENV_FILE)"
  bin=$(cluster_bin)
  pick_user
  as_user "$bin/pg_ctl" -D "$PGDIR_/data" -l "$PGDIR_/postgres.log" -m "$mode" -w -t 60 restart >/dev/null \
    || die "pg_ctl restart failed for $PGDIR_ (see $PGDIR_/postgres.log)"
  note "restarted ($mode) $PGDIR_ on port $PGPORT_"
}

cmd_halt() {
  local mode=${1:-fast} bin
  check_mode "$mode"
  load_env || die "no test cluster (env file $ENV_FILE)"
  if [[ ! -f $PGDIR_/data/postmaster.pid ]]; then
    note "already halted: $PGDIR_"
    return 0
  fi
  bin=$(cluster_bin)
  pick_user
  as_user "$bin/pg_ctl" -D "$PGDIR_/data" -m "$mode" -w -t 60 stop >/dev/null \
    || die "pg_ctl stop failed for $PGDIR_ (see $PGDIR_/postgres.log)"
  note "halted ($mode) $PGDIR_; port $PGPORT_ is free until resume"
}

cmd_resume() {
  local bin
  load_env || die "no test cluster (env file $ENV_FILE)"
  if running; then
    note "already running in $PGDIR_ on port $PGPORT_"
    return 0
  fi
  [[ -d $PGDIR_/data ]] || die "cluster directory $PGDIR_/data is gone; run start for a new cluster"
  bin=$(cluster_bin)
  pick_user
  as_user "$bin/pg_ctl" -D "$PGDIR_/data" -l "$PGDIR_/postgres.log" -w -t 60 start >/dev/null \
    || { tail -n 20 "$PGDIR_/postgres.log" >&2 2>/dev/null || true; die "pg_ctl start failed for $PGDIR_ (log above)"; }
  note "resumed $PGDIR_ on port $PGPORT_"
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  env) cmd_env ;;
  status) cmd_status ;;
  psql) shift; cmd_psql "$@" ;;
  restart) cmd_restart "${2:-fast}" ;;
  halt) cmd_halt "${2:-fast}" ;;
  resume) cmd_resume ;;
  *) echo "usage: $0 start|stop|env|status|psql [args]|restart [MODE]|halt [MODE]|resume" >&2; exit 2 ;;
esac
