#!/usr/bin/env bash
# pyenv.sh: the Python virtualenv the conformance suite's LangGraph writer runs
# in, at .cache/venv (set HISTORYD_VENV to put it elsewhere).
#
# Builds it with Python 3.12 where the machine has one (PYTHON wins when set;
# then pyenv's newest 3.12.x under $PYENV_ROOT or ~/.pyenv; then python3.12 on
# PATH; then python3), installs test/conformance/requirements.txt (every
# package pinned), then the reference implementation: mcp-toolsets-runtime,
# whose turn history the suite compares historyd with, with the pinned
# test/conformance/requirements-reference.txt. It declares Python
# >=3.12,<3.14: there it installs as it is, dependencies checked. Under 3.11
# (no 3.12 on the machine, or PYTHON set to one) its modules the suite needs
# still run, so it is installed with --no-deps --ignore-requires-python.
# Whether it imports, and which way it was installed, is recorded in
# .cache/venv/reference.status ("ok ..." or "unavailable: <why>"); this
# script succeeds either way, and the suite reports the reason.
#
# Nothing is reinstalled while the requirements, the reference pin and the
# Python version are unchanged (stamp: .cache/venv/.historyd-stamp).
#
# Environment: PYTHON (interpreter to build the venv from, 3.11 or newer;
# default: a Python 3.12 as above, else python3), HISTORYD_VENV (venv
# directory).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HISTORYD_VENV:-$REPO/.cache/venv}
REQ=$REPO/test/conformance/requirements.txt
REF_REQ=$REPO/test/conformance/requirements-reference.txt
REFERENCE_PIN=mcp-toolsets-runtime==0.12.0
REFERENCE_MODULES="mcp_agent.history mcp_state.history mcp_state.state"
STAMP=$VENV/.historyd-stamp
STATUS=$VENV/reference.status

die() { echo "pyenv: $*" >&2; exit 1; }
note() { echo "pyenv: $*" >&2; }

# The interpreter: PYTHON, else a 3.12 (what CI uses: the reference and
# deepagents are made for it), else python3.
pick_python() {
  local c
  for c in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python 2>/dev/null | sort -V -r); do
    [[ -x $c ]] && "$c" -c 'import venv, sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null && { echo "$c"; return; }
  done
  if command -v python3.12 >/dev/null && python3.12 -c 'import venv' 2>/dev/null; then
    command -v python3.12
    return
  fi
  echo python3
}
PY=${PYTHON:-$(pick_python)}
command -v "$PY" >/dev/null || {
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    note "$PY not found: installing Debian's python3 and python3-venv"
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-venv >&2 \
      || die "apt-get install python3 python3-venv failed"
  fi
  command -v "$PY" >/dev/null || die "$PY not found; set PYTHON to a Python 3.11+ interpreter"
}
PYVER=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') || die "$PY does not run"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "$PY is Python $PYVER; langchain and deepagents need 3.11 or newer"
if "$PY" -c 'import sys; sys.exit(sys.version_info[:2] == (3, 11))'; then
  REFERENCE_WAY=native
else
  REFERENCE_WAY=workaround
  note "WARNING: building with Python $PYVER ($PY), not 3.12: the reference implementation ($REFERENCE_PIN, Requires-Python >=3.12) is installed with --no-deps --ignore-requires-python; CI uses 3.12"
fi

want=$(cat "$REQ" "$REF_REQ" <(echo "$REFERENCE_PIN $PYVER") | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && $(cat "$STAMP") == "$want" && -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import langgraph' 2>/dev/null; then
  note "up to date: $VENV ($(head -n 1 "$STATUS" 2>/dev/null || echo 'reference status unknown'))"
  exit 0
fi

note "building $VENV with Python $PYVER"
rm -rf -- "$VENV"
mkdir -p "$(dirname "$VENV")"
if ! "$PY" -m venv "$VENV" 2>/tmp/pyenv-venv.$$; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null && grep -qi "ensurepip\|python3.*-venv" /tmp/pyenv-venv.$$; then
    note "the venv module needs Debian's python3-venv: installing it"
    rm -rf -- "$VENV"
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv >&2 \
      || die "apt-get install python3-venv failed"
    "$PY" -m venv "$VENV" || die "python -m venv failed even with python3-venv"
  else
    cat /tmp/pyenv-venv.$$ >&2
    rm -f /tmp/pyenv-venv.$$
    die "python -m venv $VENV failed (above)"
  fi
fi
rm -f /tmp/pyenv-venv.$$

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)
"${PIP[@]}" install -q -r "$REQ" || die "pip install -r $REQ failed"
"${PIP[@]}" check >&2 || die "the pinned requirements are inconsistent (pip check above)"

# The reference implementation: best effort, reason recorded.
reference_status() {
  local log=$VENV/reference-install.log
  if ! "${PIP[@]}" install -q -r "$REF_REQ" >"$log" 2>&1; then
    echo "unavailable: pip install -r test/conformance/requirements-reference.txt failed: $(grep -v '^\s*$' "$log" | tail -n 1)"
    return
  fi
  local how
  if [[ $REFERENCE_WAY == native ]]; then
    how="installed with its dependencies"
    if ! "${PIP[@]}" install -q -r "$REF_REQ" "$REFERENCE_PIN" >>"$log" 2>&1; then
      echo "unavailable: pip install $REFERENCE_PIN failed under Python $PYVER: $(grep -v '^\s*$' "$log" | tail -n 1)"
      return
    fi
    if ! "${PIP[@]}" check >>"$log" 2>&1; then
      echo "unavailable: pip check fails with $REFERENCE_PIN installed: $(grep -v '^\s*$' "$log" | tail -n 1)"
      return
    fi
  else
    how="installed with --no-deps --ignore-requires-python (Python $PYVER is below its >=3.12)"
    if ! "${PIP[@]}" install -q --no-deps --ignore-requires-python "$REFERENCE_PIN" >>"$log" 2>&1; then
      echo "unavailable: pip install --no-deps --ignore-requires-python $REFERENCE_PIN failed: $(grep -v '^\s*$' "$log" | tail -n 1)"
      return
    fi
  fi
  local probe
  if probe=$("$VENV/bin/python" - $REFERENCE_MODULES 2>&1 <<'EOF'
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except SyntaxError as e:
        sys.exit(f"{name}: SyntaxError under Python {sys.version.split()[0]} at {e.filename}:{e.lineno}: {(e.text or '').strip()}")
    except BaseException as e:
        sys.exit(f"{name}: {type(e).__name__}: {e}")
EOF
  ); then
    echo "ok: $REFERENCE_PIN imports ($REFERENCE_MODULES) under Python $PYVER, $how"
  else
    echo "unavailable: $REFERENCE_PIN does not import under Python $PYVER: $(echo "$probe" | tail -n 1)"
  fi
}
reference_status >"$STATUS"
note "reference implementation: $(cat "$STATUS")"

echo "$want" >"$STAMP"
note "ready: $VENV/bin/python"
