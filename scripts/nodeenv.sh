#!/usr/bin/env bash
# nodeenv.sh: node_modules for the conformance suite's LangGraph.js writer.
#
# Runs `npm ci` in test/conformance/js, which installs exactly what
# package-lock.json pins (@langchain/langgraph, its PostgreSQL and SQLite
# checkpointers, @langchain/core, langchain, pg, better-sqlite3). Skipped while
# package-lock.json, package.json and the Node major version are unchanged
# and better-sqlite3 loads (stamp: test/conformance/js/node_modules/.historyd-stamp).
#
# better-sqlite3 (the SQLite checkpointer's driver) is a native addon. Its
# install script first tries to download a prebuilt binary from outside the
# npm registry, then falls back to compiling the SQLite source it ships with
# node-gyp. Here it is always compiled (npm_config_build_from_source), against
# the headers of the installed Node (npm_config_nodedir), so nothing is
# fetched from anywhere but the npm registry; that needs make, a C++ compiler
# and python3. package.json's allowScripts approves that one install script,
# which npm 11 would otherwise skip; should an npm skip it all the same,
# `npm rebuild better-sqlite3` builds it. better-sqlite3 stays on 12.x: 13
# needs Node 22 and crashes Node 20.
#
# Needs node (20 or newer) and npm; as root, installs Debian's nodejs and npm,
# and make, g++ and python3, when they are missing.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$REPO/test/conformance/js
STAMP=$DIR/node_modules/.historyd-stamp

die() { echo "nodeenv: $*" >&2; exit 1; }
note() { echo "nodeenv: $*" >&2; }

apt_install() {
  [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || return 1
  note "installing Debian's $*"
  apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >&2
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt_install nodejs npm || die "node and npm are needed (Node 20 or newer); install them"
fi
major=$(node -p 'process.versions.node.split(".")[0]') || die "node does not run"
if (( major < 20 )); then
  note "warning: node $(node --version) is older than the 20 @langchain/core asks for"
fi
[[ -f $DIR/package-lock.json ]] || die "$DIR/package-lock.json is missing"

# native_ok: better-sqlite3 loads and opens a database. Run in a child, so a
# crash (a binary built for another Node) is an answer, not the end of this
# script.
native_ok() {
  (cd "$DIR" && node -e '
    const Database = require("better-sqlite3");
    const db = new Database(":memory:");
    db.prepare("SELECT sqlite_version() AS v").get();
    db.close();' ) >/dev/null 2>&1
}

want=$(cat "$DIR/package.json" "$DIR/package-lock.json" <(echo "node $major") | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]] && native_ok; then
  note "up to date: $DIR/node_modules"
  exit 0
fi

# What node-gyp needs to compile better-sqlite3.
missing=()
for tool in make g++ python3; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if (( ${#missing[@]} )); then
  apt_install make g++ python3 || die "compiling better-sqlite3 needs ${missing[*]}; install them"
fi

# The headers of the Node that runs the tests. node-gyp would otherwise
# download them, which a machine that reaches only the package registries
# cannot do.
nodedir=$(npm config get nodedir 2>/dev/null || true)
if [[ -z $nodedir || $nodedir == undefined || $nodedir == null ]]; then
  nodedir=$(cd "$(dirname "$(readlink -f "$(command -v node)")")/.." && pwd)
fi
if [[ ! -f $nodedir/include/node/node_api.h || ! -f $nodedir/include/node/common.gypi ]]; then
  die "no Node headers under $nodedir/include/node (node_api.h, common.gypi): better-sqlite3 cannot be compiled; install the headers of node $(node --version) (Debian: libnode-dev for Debian's nodejs) or set npm's nodedir"
fi
export npm_config_nodedir=$nodedir
export npm_config_build_from_source=true
export JOBS=${JOBS:-max}

note "npm ci in $DIR (better-sqlite3 compiled against $nodedir/include/node; this takes a few minutes)"
rm -f "$STAMP"
(cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed in $DIR"
if ! native_ok; then
  note "better-sqlite3 was not built by npm ci (its install script skipped?): npm rebuild better-sqlite3"
  (cd "$DIR" && npm rebuild better-sqlite3 --no-audit --no-fund --loglevel=error) >&2 \
    || die "npm rebuild better-sqlite3 failed in $DIR"
fi
if ! native_ok; then
  (cd "$DIR" && node -e 'new (require("better-sqlite3"))(":memory:")') >&2 || true
  die "better-sqlite3 does not load after building it (above)"
fi
echo "$want" >"$STAMP"
note "ready: $DIR/node_modules (better-sqlite3 $(cd "$DIR" && node -p 'require("better-sqlite3/package.json").version'))"
