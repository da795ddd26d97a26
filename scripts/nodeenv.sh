#!/usr/bin/env bash
# nodeenv.sh: node_modules for the conformance suite's LangGraph.js writer.
#
# Runs `npm ci` in test/conformance/js, which installs exactly what
# package-lock.json pins (@langchain/langgraph, its PostgreSQL checkpointer,
# @langchain/core, pg). Skipped while package-lock.json and the Node major
# version are unchanged (stamp: test/conformance/js/node_modules/.historyd-stamp).
#
# Needs node (20 or newer) and npm; as root, installs Debian's nodejs and npm
# when they are missing.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$REPO/test/conformance/js
STAMP=$DIR/node_modules/.historyd-stamp

die() { echo "nodeenv: $*" >&2; exit 1; }
note() { echo "nodeenv: $*" >&2; }

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null \
    || die "node and npm are needed (Node 20 or newer); install them"
  note "node/npm not found: installing Debian's nodejs and npm"
  apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2 \
    || die "apt-get install nodejs npm failed"
fi
major=$(node -p 'process.versions.node.split(".")[0]') || die "node does not run"
if (( major < 20 )); then
  note "warning: node $(node --version) is older than the 20 @langchain/core asks for"
fi
[[ -f $DIR/package-lock.json ]] || die "$DIR/package-lock.json is missing"

want=$(cat "$DIR/package.json" "$DIR/package-lock.json" <(echo "node $major") | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]]; then
  note "up to date: $DIR/node_modules"
  exit 0
fi

note "npm ci in $DIR"
(cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed in $DIR"
echo "$want" >"$STAMP"
note "ready: $DIR/node_modules"
