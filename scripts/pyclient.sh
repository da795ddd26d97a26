#!/usr/bin/env bash
# pyclient.sh: a client virtualenv, .cache/venv-client (HISTORYD_CLIENT_VENV
# to put it elsewhere): the Python client's dependencies with its [langchain]
# extra and nothing else — grpcio, protobuf, orjson, langchain-core and what
# that pulls in, every one pinned in client/python/requirements-langchain.txt
# (with markers where Python 3.10 needs other versions) — on the machine's
# default Python, or PYTHON, without mcp-toolsets-runtime or LangGraph.
# test/clients runs the shared inspect_state cases in the default one, and
# scripts/pyclients.sh builds one per supported Python (3.10 to 3.13) and
# runs the client's unit tests in each, so what a LangChain host without
# mcp-toolsets-runtime installs is what is tested. The client itself is
# imported from client/python/src (PYTHONPATH), so edits need no reinstall.
#
# Nothing is reinstalled while the requirements and the Python version are
# unchanged (stamp: <venv>/.historyd-stamp).
#
# Environment: PYTHON (interpreter, default python3; 3.10 or newer),
# HISTORYD_CLIENT_VENV (venv directory).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HISTORYD_CLIENT_VENV:-$REPO/.cache/venv-client}
REQ=$REPO/client/python/requirements-langchain.txt
STAMP=$VENV/.historyd-stamp

die() { echo "pyclient: $*" >&2; exit 1; }
note() { echo "pyclient: $*" >&2; }

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || die "$PY not found; set PYTHON to a Python 3.10+ interpreter (scripts/pyenv.sh installs Debian's)"
PYVER=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') || die "$PY does not run"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "$PY is Python $PYVER; the client needs 3.10 or newer"

want=$(cat "$REQ" <(echo "$PYVER") | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && $(cat "$STAMP") == "$want" && -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import grpc, langchain_core, orjson' 2>/dev/null; then
  note "up to date: $VENV (Python $PYVER)"
  exit 0
fi

note "building $VENV with Python $PYVER"
rm -rf -- "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV" || die "python -m venv $VENV failed (scripts/pyenv.sh installs Debian's python3-venv when missing)"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
"${PIP[@]}" install -q --no-deps -r "$REQ" || die "pip install -r $REQ failed"
"${PIP[@]}" check >&2 || die "$REQ is not complete or not consistent (pip check above)"
echo "$want" >"$STAMP"
note "ready: $VENV/bin/python"
