#!/usr/bin/env bash
# test.sh [go test arguments]: run `go test` with what the PostgreSQL
# integration tests and the LangGraph conformance suite need.
#
#   scripts/test.sh -count=1 ./...
#   scripts/test.sh -count=1 -run TestConformance/python -v ./test/conformance/
#
# - PostgreSQL: when HISTORYD_TEST_DSN is set it is used as is (its user must
#   be able to create schemas and roles, see scripts/pg-test.sh). Otherwise a
#   throwaway cluster is started with scripts/pg-test.sh and stopped again on
#   exit, unless it was already running (or PG_TEST_KEEP=1).
# - The C library's en_US.UTF-8 locale, which tests create databases with:
#   scripts/pg-test.sh locale generates it (Debian's locales package,
#   installed when missing). With HISTORYD_TEST_DSN set, the server it names
#   must have it.
# - PgBouncer: in front of that cluster, scripts/pg-test.sh pooler start
#   (Debian's pgbouncer, installed when missing) provides
#   HISTORYD_TEST_POOLER_TX_DSN, HISTORYD_TEST_POOLER_SESSION_DSN and
#   HISTORYD_TEST_POOLER_ROLE. With HISTORYD_TEST_DSN set, set those too, for
#   a PgBouncer in front of it (see scripts/pg-test.sh); the tests that need
#   them fail without.
# - HISTORYD_TEST_PYTHON: the venv python of scripts/pyenv.sh.
# - HISTORYD_TEST_NODE: test/conformance/js, its node_modules from
#   scripts/nodeenv.sh.
# - HISTORYD_TEST_CLIENT_PYTHON: the client venv python of scripts/pyclient.sh
#   (langchain-core, grpcio, protobuf only), and HISTORYD_TEST_CLIENT_JS:
#   client/js, its node_modules from scripts/jsclient.sh (test/clients).
# - HISTORYD_TEST_CLIENT_PYTHON_OLDEST: the client venv python of the oldest
#   Python the client supports (3.10, scripts/pyclients.sh --venvs), which
#   test/clients installs the client from git with.
# - HISTORYD_TEST_REFERENCE=required when scripts/pyenv.sh found that the
#   reference implementation imports, so that losing it fails the suite
#   instead of only being logged.
# Each is left alone when already set.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

started=
cleanup() {
  if [[ -n $started && ${PG_TEST_KEEP:-} != 1 ]]; then
    scripts/pg-test.sh stop || true
  fi
}
trap cleanup EXIT

if [[ -z ${HISTORYD_TEST_DSN:-} ]]; then
  # Tests create databases under en_US.UTF-8 too; a cluster started before
  # that needed the locale gets it now.
  scripts/pg-test.sh locale
  if ! scripts/pg-test.sh status >/dev/null 2>&1; then
    scripts/pg-test.sh start
    started=1
  fi
  scripts/pg-test.sh pooler start
  eval "$(scripts/pg-test.sh env)"
fi

scripts/pyenv.sh
scripts/nodeenv.sh
scripts/pyclient.sh
HISTORYD_PYTHON_VERSIONS=3.10 scripts/pyclients.sh --venvs
scripts/jsclient.sh

venv=${HISTORYD_VENV:-$REPO/.cache/venv}
export HISTORYD_TEST_DSN
export HISTORYD_TEST_SUPERUSER_DSN=${HISTORYD_TEST_SUPERUSER_DSN:-$HISTORYD_TEST_DSN}
export HISTORYD_TEST_PYTHON=${HISTORYD_TEST_PYTHON:-$venv/bin/python}
export HISTORYD_TEST_NODE=${HISTORYD_TEST_NODE:-$REPO/test/conformance/js}
export HISTORYD_TEST_CLIENT_PYTHON=${HISTORYD_TEST_CLIENT_PYTHON:-${HISTORYD_CLIENT_VENV:-$REPO/.cache/venv-client}/bin/python}
export HISTORYD_TEST_CLIENT_PYTHON_OLDEST=${HISTORYD_TEST_CLIENT_PYTHON_OLDEST:-$REPO/.cache/venv-client-3.10/bin/python}
export HISTORYD_TEST_CLIENT_JS=${HISTORYD_TEST_CLIENT_JS:-$REPO/client/js}
if [[ -z ${HISTORYD_TEST_REFERENCE:-} ]] && grep -q '^ok' "$venv/reference.status" 2>/dev/null; then
  export HISTORYD_TEST_REFERENCE=required
fi

echo "test.sh: go test $*" >&2
${GO:-go} test "$@"
