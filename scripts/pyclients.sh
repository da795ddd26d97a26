#!/usr/bin/env bash
# pyclients.sh: the Python client's unit tests on every Python it supports,
# 3.10 through 3.13, each in a client virtualenv of its own
# (.cache/venv-client-3.N, built by scripts/pyclient.sh with only the pins of
# client/python/requirements-langchain.txt, and kept while they and the
# interpreter are unchanged). `make test-python` runs it; `make test` too.
#
# Each interpreter is the newest pyenv has ($PYENV_ROOT, default ~/.pyenv),
# else python3.N on PATH; with pyenv and neither, the newest 3.N.x pyenv
# knows is installed (`pyenv install` compiles Python, which needs Debian's
# build dependencies; as root they are installed with apt-get). A version
# that cannot be had fails the run, naming it.
#
# With --venvs, only the virtualenvs are built (scripts/test.sh: test/clients
# installs the client with pip on the oldest).
#
# Environment: HISTORYD_PYTHON_VERSIONS (default "3.10 3.11 3.12 3.13").
set -euo pipefail

only_venvs=
if [[ ${1:-} == --venvs ]]; then only_venvs=1; fi

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSIONS=${HISTORYD_PYTHON_VERSIONS:-3.10 3.11 3.12 3.13}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
PYENV=$(command -v pyenv || { [[ -x $PYENV_ROOT/bin/pyenv ]] && echo "$PYENV_ROOT/bin/pyenv"; } || true)

die() { echo "pyclients: $*" >&2; exit 1; }
note() { echo "pyclients: $*" >&2; }

# The Debian packages CPython's build needs (those pyenv's wiki lists).
BUILD_DEPS="build-essential libssl-dev zlib1g-dev libbz2-dev libreadline-dev libsqlite3-dev libncursesw5-dev xz-utils tk-dev libxml2-dev libxmlsec1-dev libffi-dev liblzma-dev"

# interpreter prints the path of a Python $1 (3.N), installing one with
# pyenv when there is none.
interpreter() {
  local v=$1 c
  for c in $(ls -d "$PYENV_ROOT"/versions/"$v".*/bin/python 2>/dev/null | sort -V -r); do
    [[ -x $c ]] && "$c" -c "import sys, venv, ssl; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" 2>/dev/null && { echo "$c"; return; }
  done
  if command -v "python$v" >/dev/null && "python$v" -c 'import venv, ssl' 2>/dev/null; then
    command -v "python$v"
    return
  fi
  [[ -n $PYENV ]] || die "no Python $v: neither pyenv nor python$v on PATH has it; install Python $v (or pyenv), or set HISTORYD_PYTHON_VERSIONS"
  local latest
  latest=$("$PYENV" install --list | sed 's/^ *//' | grep -E "^${v//./\\.}\.[0-9]+$" | sort -V | tail -n 1)
  [[ -n $latest ]] || die "pyenv knows no Python $v.x to install"
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    note "installing the build dependencies of Python $latest"
    # shellcheck disable=SC2086
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y $BUILD_DEPS >&2 || die "apt-get install of Python's build dependencies failed"
  fi
  note "pyenv install $latest (compiles Python: a few minutes)"
  "$PYENV" install --skip-existing "$latest" >&2 || die "pyenv install $latest failed (above)"
  echo "$PYENV_ROOT/versions/$latest/bin/python"
}

failed=()
for v in $VERSIONS; do
  py=$(interpreter "$v")
  venv=$REPO/.cache/venv-client-$v
  PYTHON=$py HISTORYD_CLIENT_VENV=$venv "$REPO/scripts/pyclient.sh"
  [[ -z $only_venvs ]] || continue
  log=$(mktemp)
  rc=0
  (cd "$REPO/client/python/tests" && PYTHONPATH=$REPO/client/python/src "$venv/bin/python" -m unittest discover -s .) >"$log" 2>&1 || rc=$?
  if (( rc == 0 )); then
    note "Python $("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])'): $(grep -E '^Ran [0-9]+ tests' "$log"), OK"
  else
    cat "$log" >&2
    failed+=("$v")
  fi
  rm -f "$log"
done
[[ -z $only_venvs ]] || exit 0
(( ${#failed[@]} == 0 )) || die "the client's unit tests failed on Python ${failed[*]}"
note "the client's unit tests passed on Python $VERSIONS"
