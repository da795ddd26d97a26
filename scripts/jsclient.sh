#!/usr/bin/env bash
# jsclient.sh: node_modules for the TypeScript client, client/js.
#
# Runs `npm ci` in client/js, which installs exactly what package-lock.json
# pins (and runs the package's prepare script, which builds dist/): the client's dependencies (@bufbuild/protobuf, @connectrpc/connect,
# @connectrpc/connect-node, re2js) and its build and test tools
# (protoc-gen-es, which `make gen` runs, typescript, @langchain/core,
# @langchain/langgraph, zod). Nothing in it is native or fetched from outside
# the npm registry. Skipped while package.json, package-lock.json and the
# Node major version are unchanged (stamp: client/js/node_modules/.historyd-stamp).
#
# Needs node (20 or newer) and npm; as root, installs Debian's nodejs and npm
# when they are missing.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$REPO/client/js
STAMP=$DIR/node_modules/.historyd-stamp

die() { echo "jsclient: $*" >&2; exit 1; }
note() { echo "jsclient: $*" >&2; }

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    note "installing Debian's nodejs and npm"
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2 || die "apt-get install nodejs npm failed"
  fi
  command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are needed (Node 20 or newer); install them"
fi
major=$(node -p 'process.versions.node.split(".")[0]') || die "node does not run"
(( major >= 20 )) || die "node $(node --version) is too old: the client needs Node 20 or newer"
[[ -f $DIR/package-lock.json ]] || die "$DIR/package-lock.json is missing"

want=$(cat "$DIR/package.json" "$DIR/package-lock.json" <(echo "node $major") | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && $(cat "$STAMP") == "$want" && -x $DIR/node_modules/.bin/protoc-gen-es ]]; then
  note "up to date: $DIR/node_modules"
  exit 0
fi
note "npm ci in $DIR"
rm -f "$STAMP"
(cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed in $DIR"
[[ -x $DIR/node_modules/.bin/protoc-gen-es ]] || die "npm ci left no node_modules/.bin/protoc-gen-es in $DIR"
echo "$want" >"$STAMP"
note "ready: $DIR/node_modules"
