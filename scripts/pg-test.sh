#!/usr/bin/env bash
# pg-test.sh: a throwaway PostgreSQL cluster for historyd's tests.
#
#   scripts/pg-test.sh start    create and start the cluster (no-op when it runs)
#   scripts/pg-test.sh stop     stop it and delete its directory (no-op when none)
#   scripts/pg-test.sh env      print the env file (eval-able `export` lines)
#   scripts/pg-test.sh status   say whether it runs; exit 0 only when it does
#   scripts/pg-test.sh psql ... run psql against the test database
#   scripts/pg-test.sh locale   make sure the locale tests need exists (below);
#                               start does this too
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
# In front of and beside a running cluster:
#
#   scripts/pg-test.sh pooler start    PgBouncer (Debian's pgbouncer package,
#                                      installed when missing) on a free port,
#                                      with its stock settings but for the
#                                      listener, files, users and databases:
#                                      pool_mode = transaction; databases
#                                      historyd_test_tx (transaction mode) and
#                                      historyd_test_session (pool_mode =
#                                      session), both the cluster's test
#                                      database; auth_type = trust for the
#                                      users postgres and historyd_pooled (a
#                                      LOGIN role it creates with no grants:
#                                      tests grant it what it may read)
#   scripts/pg-test.sh pooler stop     stop it
#   scripts/pg-test.sh pooler restart  stop it and start it again with the
#                                      same settings, on the same port (its
#                                      clients' connections are cut)
#   scripts/pg-test.sh standby start [--no-hot-standby]
#                                      a hot standby of the cluster:
#                                      pg_basebackup -R into the cluster's
#                                      directory, started read-only on a free
#                                      port, streaming from the cluster; with
#                                      --no-hot-standby it replays but refuses
#                                      connections ("not accepting
#                                      connections", SQLSTATE 57P03) until
#                                      promoted
#   scripts/pg-test.sh standby promote promote it to a primary of its own
#   scripts/pg-test.sh standby stop    stop it and delete its data
#
# `stop` stops both as well. They add these to the env file, and remove them
# again:
#
#   HISTORYD_TEST_POOLER_TX_DSN       the test database through PgBouncer in
#                                     transaction mode, as user postgres
#   HISTORYD_TEST_POOLER_SESSION_DSN  the same in session mode
#   HISTORYD_TEST_POOLER_ROLE         historyd_pooled
#   HISTORYD_TEST_POOLER_PORT
#   HISTORYD_TEST_STANDBY_DSN         the test database on the standby, as
#                                     user postgres
#   HISTORYD_TEST_STANDBY_PORT
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
# The cluster itself is initialized without a locale (C), but tests also
# create databases of their own under other collations: ICU (PostgreSQL's own,
# nothing to install) and libc en_US.UTF-8, which the operating system must
# provide. `start` makes sure it does: run as root on a machine without it, it
# installs Debian's `locales` package when missing and generates en_US.UTF-8
# (uncommented in /etc/locale.gen, so that a later locale-gen keeps it).
#
# PostgreSQL refuses to run as root. Run as root, this script runs the server
# as the `postgres` system user (creating it when absent); run as anyone else,
# as that user. When initdb/pg_ctl are missing and we are root, it installs
# Debian's `postgresql` package.
#
# Environment: PG_TEST_ENV_FILE (env file path), PG_TEST_DB (database name,
# default historyd_test), PG_TEST_BIN (directory holding initdb and pg_ctl),
# PG_TEST_PORT (the port `start` listens on; default a free one, and `start`
# fails when PG_TEST_PORT is taken), PG_TEST_STANDBY_PORT and
# PG_TEST_POOLER_PORT (the same for `standby start` and `pooler start`).
#
# These settings name one cluster. Tests that start clusters of their own
# (test/faults) run this script with an env file and ports of their own and
# none of these inherited, so PG_TEST_PORT may be set for the shared cluster
# scripts/test.sh starts while they run.
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

# The libc locale tests create databases with (see above).
TEST_LOCALE=en_US.UTF-8

# has_locale NAME: the C library has the locale NAME (locale -a spells
# en_US.UTF-8 as en_US.utf8).
has_locale() {
  local want
  want=$(printf %s "$1" | tr '[:upper:]' '[:lower:]' | sed 's/utf-8$/utf8/')
  locale -a 2>/dev/null | tr '[:upper:]' '[:lower:]' | grep -qx -- "$want"
}

ensure_locale() {
  has_locale "$TEST_LOCALE" && return 0
  [[ $(id -u) -eq 0 ]] || die "the C library has no locale $TEST_LOCALE and we are not root: generate it (Debian: uncomment it in /etc/locale.gen and run locale-gen)"
  if ! command -v locale-gen >/dev/null || [[ ! -f /usr/share/i18n/SUPPORTED ]]; then
    note "locale-gen not found: installing Debian's locales package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2 || die "apt-get update failed"
    apt-get install -y locales >&2 || die "apt-get install -y locales failed"
  fi
  note "generating the locale $TEST_LOCALE"
  local line="$TEST_LOCALE UTF-8"
  if grep -qE "^# *$line\$" /etc/locale.gen 2>/dev/null; then
    sed -i -E "s/^# *($line)\$/\1/" /etc/locale.gen
  elif ! grep -qx "$line" /etc/locale.gen 2>/dev/null; then
    echo "$line" >>/etc/locale.gen
  fi
  locale-gen >&2 || die "locale-gen failed"
  has_locale "$TEST_LOCALE" || die "locale-gen ran but locale -a lists no $TEST_LOCALE"
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

# free_port: a port the kernel picks for a listener on 127.0.0.1:0, free
# once that listener closes (a server that then fails to bind it is retried
# on another).
free_port() {
  local p=
  if command -v perl >/dev/null; then
    p=$(perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Proto => "tcp", Listen => 1) or die "$!\n"; print $s->sockport, "\n"') || p=
  elif command -v python3 >/dev/null; then
    p=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || p=
  fi
  [[ -n $p ]] || die "no free TCP port on 127.0.0.1 (perl or python3 asks the kernel for one): set PG_TEST_PORT"
  echo "$p"
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
  local dir=$1 bin=$2 d
  [[ -n $dir && $dir == /tmp/historyd-pg.* ]] || return 0
  kill_pidfile "$dir/pgbouncer/pgbouncer.pid"
  for d in "$dir/standby" "$dir/data"; do
    if [[ -f $d/postmaster.pid && -x $bin/pg_ctl ]]; then
      pick_user
      as_user "$bin/pg_ctl" -D "$d" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
  done
  rm -rf -- "$dir"
}

# kill_pidfile FILE: stop the process whose id FILE holds, if it runs, and
# wait for it to exit.
kill_pidfile() {
  local pid i
  [[ -f $1 ]] || return 0
  pid=$(cat "$1" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# env_set PREFIX [LINES]: replace the env file's lines that start with
# "export PREFIX" by LINES (by nothing when LINES is empty).
env_set() {
  local prefix=$1 lines=${2:-}
  grep -v "^export $prefix" "$ENV_FILE" >"$ENV_FILE.tmp" || true
  if [[ -n $lines ]]; then printf '%s\n' "$lines" >>"$ENV_FILE.tmp"; fi
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
}

wait_port() {
  local i
  for i in $(seq 1 100); do
    port_in_use "$1" && return 0
    sleep 0.1
  done
  return 1
}

POOLER_ROLE=historyd_pooled

ensure_pgbouncer() {
  local b
  for b in "${PG_TEST_PGBOUNCER:-}" /usr/sbin/pgbouncer "$(command -v pgbouncer 2>/dev/null || true)"; do
    if [[ -n $b && -x $b ]]; then echo "$b"; return; fi
  done
  [[ $(id -u) -eq 0 ]] || die "pgbouncer not found and not root: install it (apt-get install pgbouncer) or set PG_TEST_PGBOUNCER"
  note "pgbouncer not found: installing Debian's pgbouncer package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2 || die "apt-get update failed"
  apt-get install -y pgbouncer >&2 || die "apt-get install -y pgbouncer failed"
  [[ -x /usr/sbin/pgbouncer ]] || die "pgbouncer installed but /usr/sbin/pgbouncer is missing"
  echo /usr/sbin/pgbouncer
}

pooler_running() {
  load_env || return 1
  local pid
  pid=$(cat "$PGDIR_/pgbouncer/pgbouncer.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

cmd_pooler_start() {
  running || die "no running test cluster (env file $ENV_FILE): run scripts/pg-test.sh start"
  if pooler_running; then
    note "pooler already running (env: $ENV_FILE)"
    return 0
  fi
  local bin pgb dir=$PGDIR_/pgbouncer port attempt
  bin=$(cluster_bin)
  pgb=$(ensure_pgbouncer)
  pick_user
  "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$PGDIR_" -p "$PGPORT_" -U "$SUPERUSER" -d postgres -c \
    "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$POOLER_ROLE') THEN CREATE ROLE $POOLER_ROLE LOGIN; END IF; END \$\$" >/dev/null \
    || die "could not create role $POOLER_ROLE"
  rm -rf -- "$dir"
  mkdir -p "$dir"
  printf '"%s" ""\n"%s" ""\n' "$SUPERUSER" "$POOLER_ROLE" >"$dir/userlist.txt"
  for attempt in 1 2 3 4 5; do
    if [[ -n ${PG_TEST_POOLER_PORT:-} ]]; then
      port=$PG_TEST_POOLER_PORT
      if port_in_use "$port"; then die "PG_TEST_POOLER_PORT=$port: something already listens on 127.0.0.1:$port"; fi
    else
      port=$(free_port)
    fi
    # Stock PgBouncer but for where it listens, logs and finds its users
    # and databases: nothing here accommodates historyd (no
    # ignore_startup_parameters, no max_prepared_statements).
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
${DB}_tx = host=$PGDIR_ port=$PGPORT_ dbname=$DB
${DB}_session = host=$PGDIR_ port=$PGPORT_ dbname=$DB pool_mode=session

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    if [[ -n $RUN_USER ]]; then chown -R "$RUN_USER:" "$dir"; fi
    if as_user "$pgb" -d -q "$dir/pgbouncer.ini" && wait_port "$port"; then
      break
    fi
    kill_pidfile "$dir/pgbouncer.pid"
    if [[ $attempt -eq 5 || -n ${PG_TEST_POOLER_PORT:-} ]]; then
      tail -n 20 "$dir/pgbouncer.log" >&2 2>/dev/null || true
      die "pgbouncer did not start (log above)"
    fi
    note "pgbouncer did not listen on $port; trying another port"
  done
  env_set HISTORYD_TEST_POOLER_ "export HISTORYD_TEST_POOLER_TX_DSN='postgres://$SUPERUSER@127.0.0.1:$port/${DB}_tx?sslmode=disable'
export HISTORYD_TEST_POOLER_SESSION_DSN='postgres://$SUPERUSER@127.0.0.1:$port/${DB}_session?sslmode=disable'
export HISTORYD_TEST_POOLER_ROLE='$POOLER_ROLE'
export HISTORYD_TEST_POOLER_PORT='$port'"
  note "$("$pgb" --version 2>/dev/null | head -n 1) on 127.0.0.1:$port in front of $PGDIR_"
}

cmd_pooler_restart() {
  load_env || die "no test cluster (env file $ENV_FILE)"
  local dir=$PGDIR_/pgbouncer pgb i
  [[ -f $dir/pgbouncer.ini ]] || die "no pooler in $dir: scripts/pg-test.sh pooler start"
  local port
  port=$(sed -n 's/^listen_port = //p' "$dir/pgbouncer.ini")
  pgb=$(ensure_pgbouncer)
  pick_user
  kill_pidfile "$dir/pgbouncer.pid"
  # The port may linger for a moment after the old process exits.
  for i in $(seq 1 50); do
    if as_user "$pgb" -d -q "$dir/pgbouncer.ini" && wait_port "$port"; then
      note "restarted pgbouncer on 127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$dir/pgbouncer.log" >&2 2>/dev/null || true
  die "pgbouncer did not start again on $port (log above)"
}

pooler_stop() {
  [[ -n ${PGDIR_:-} && -d $PGDIR_/pgbouncer ]] || return 0
  kill_pidfile "$PGDIR_/pgbouncer/pgbouncer.pid"
  rm -rf -- "$PGDIR_/pgbouncer"
  if [[ -f $ENV_FILE ]]; then env_set HISTORYD_TEST_POOLER_; fi
  note "stopped pgbouncer of $PGDIR_"
}

cmd_standby_start() {
  local hot=on
  case ${1:-} in
    "") ;;
    --no-hot-standby) hot=off ;;
    *) die "standby start: unknown option $1" ;;
  esac
  running || die "no running test cluster (env file $ENV_FILE): run scripts/pg-test.sh start"
  local bin sdir=$PGDIR_/standby port
  bin=$(cluster_bin)
  [[ ! -d $sdir ]] || die "a standby exists in $sdir: scripts/pg-test.sh standby stop first"
  pick_user
  if ! as_user "$bin/pg_basebackup" -h "$PGDIR_" -p "$PGPORT_" -U "$SUPERUSER" -D "$sdir" -R -X stream -c fast --no-sync \
      >"$PGDIR_/standby-basebackup.log" 2>&1; then
    cat "$PGDIR_/standby-basebackup.log" >&2
    rm -rf -- "$sdir"
    die "pg_basebackup failed (output above)"
  fi
  if [[ -n ${PG_TEST_STANDBY_PORT:-} ]]; then
    port=$PG_TEST_STANDBY_PORT
    if port_in_use "$port"; then
      rm -rf -- "$sdir"
      die "PG_TEST_STANDBY_PORT=$port: something already listens on 127.0.0.1:$port"
    fi
  else
    port=$(free_port)
  fi
  cat >>"$sdir/postgresql.conf" <<CONF
# historyd test standby
port = $port
hot_standby = $hot
CONF
  if ! as_user "$bin/pg_ctl" -D "$sdir" -l "$PGDIR_/standby.log" -w -t 60 start >/dev/null 2>&1; then
    tail -n 30 "$PGDIR_/standby.log" >&2 2>/dev/null || true
    die "pg_ctl start failed for the standby (log above)"
  fi
  env_set HISTORYD_TEST_STANDBY_ "export HISTORYD_TEST_STANDBY_DSN='postgres://$SUPERUSER@127.0.0.1:$port/$DB?sslmode=disable'
export HISTORYD_TEST_STANDBY_PORT='$port'"
  note "standby (hot_standby = $hot) of $PGDIR_ on 127.0.0.1:$port"
}

cmd_standby_promote() {
  load_env || die "no test cluster (env file $ENV_FILE)"
  [[ -f $PGDIR_/standby/postmaster.pid ]] || die "no standby running in $PGDIR_/standby"
  local bin
  bin=$(cluster_bin)
  pick_user
  as_user "$bin/pg_ctl" -D "$PGDIR_/standby" -w -t 60 promote >/dev/null \
    || die "pg_ctl promote failed (see $PGDIR_/standby.log)"
  note "promoted the standby of $PGDIR_"
}

standby_stop() {
  local bin=$1
  [[ -n ${PGDIR_:-} && -d $PGDIR_/standby ]] || return 0
  if [[ -f $PGDIR_/standby/postmaster.pid ]]; then
    pick_user
    as_user "$bin/pg_ctl" -D "$PGDIR_/standby" -m fast -w -t 60 stop >/dev/null 2>&1 \
      || as_user "$bin/pg_ctl" -D "$PGDIR_/standby" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  rm -rf -- "$PGDIR_/standby"
  if [[ -f $ENV_FILE ]]; then env_set HISTORYD_TEST_STANDBY_; fi
  note "stopped the standby of $PGDIR_"
}

cmd_start() {
  # Before anything else, so that a cluster started before the locale was
  # needed gets it too: the server loads a locale when a database using it
  # is created or connected to.
  ensure_locale
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
  pooler_stop
  standby_stop "$bin"
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
  locale) ensure_locale ;;
  restart) cmd_restart "${2:-fast}" ;;
  halt) cmd_halt "${2:-fast}" ;;
  resume) cmd_resume ;;
  pooler)
    case ${2:-} in
      start) cmd_pooler_start ;;
      stop) load_env || die "no test cluster (env file $ENV_FILE)"; pooler_stop ;;
      restart) cmd_pooler_restart ;;
      *) die "usage: $0 pooler start|stop|restart" ;;
    esac ;;
  standby)
    case ${2:-} in
      start) cmd_standby_start "${3:-}" ;;
      promote) cmd_standby_promote ;;
      stop) load_env || die "no test cluster (env file $ENV_FILE)"; standby_stop "$(cluster_bin)" ;;
      *) die "usage: $0 standby start [--no-hot-standby]|promote|stop" ;;
    esac ;;
  *) echo "usage: $0 start|stop|env|status|psql [args]|locale|restart [MODE]|halt [MODE]|resume|pooler start|stop|restart|standby start|promote|stop" >&2; exit 2 ;;
esac
