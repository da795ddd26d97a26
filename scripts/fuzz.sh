#!/usr/bin/env bash
# fuzz.sh [DURATION [REGEXP]]: run every fuzz target in the module, one after
# the other (go test -fuzz takes one target per run), each for DURATION.
#
#   scripts/fuzz.sh              10s per target
#   scripts/fuzz.sh 10m          ten minutes per target (make fuzz FUZZTIME=10m)
#   scripts/fuzz.sh 30 Derive    30s for the targets whose name matches Derive
#
# DURATION is a Go duration or a number of seconds. Targets are found with
# `go test -list '^Fuzz'` in every package whose tests define a Fuzz
# function, so a new target is picked up without editing this script. Each target gets one summary line; the script fails
# when any target finds a failing input, and says where go test wrote it
# (testdata/fuzz/<Target>/ in the target's package: commit it with the fix,
# and it is replayed by every plain `go test` from then on).
#
# Environment: GO (go command), FUZZ_PARALLEL (-parallel, default go's:
# GOMAXPROCS), FUZZ_MINIMIZE (-fuzzminimizetime, default 10s), FUZZ_LOG_DIR
# (keep each target's full output there; default a temporary directory
# removed on success).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
GO=${GO:-go}

die() { echo "fuzz: $*" >&2; exit 2; }

duration=${1:-10}
match=${2:-.}
[[ $duration =~ ^[0-9]+$ ]] && duration=${duration}s
[[ $duration =~ ^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$ ]] \
  || die "duration $duration: want a number of seconds or a Go duration such as 90s or 10m"

keep_logs=${FUZZ_LOG_DIR:-}
logs=${FUZZ_LOG_DIR:-$(mktemp -d /tmp/historyd-fuzz.XXXXXX)}
mkdir -p "$logs"

# Candidates are the packages with a "func Fuzz" in a test file; go test
# -list then says which of those are fuzz targets. Listing only candidates
# keeps discovery quick and keeps it from compiling every test binary.
mapfile -t candidates < <("$GO" list -f '{{$d := .Dir}}{{range .TestGoFiles}}{{$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$d}}/{{.}} {{end}}|{{.ImportPath}}' ./... \
  | while IFS='|' read -r files pkg; do
      [[ -n $files ]] && grep -qs '^func Fuzz' $files && echo "$pkg"
    done) || die "go list failed"
targets=()
for pkg in "${candidates[@]}"; do
  listing=$("$GO" test -list '^Fuzz' "$pkg" 2>&1) || { echo "$listing" >&2; die "go test -list failed for $pkg"; }
  while IFS= read -r n; do
    [[ $n =~ ^Fuzz && $n =~ $match ]] && targets+=("$pkg $n")
  done <<<"$listing"
done
(( ${#targets[@]} > 0 )) || die "no fuzz targets match $match"

flags=(-run '^$' -fuzztime "$duration" -fuzzminimizetime "${FUZZ_MINIMIZE:-10s}")
[[ -n ${FUZZ_PARALLEL:-} ]] && flags+=(-parallel "$FUZZ_PARALLEL")

echo "fuzz: ${#targets[@]} targets, $duration each"
failed=0
for t in "${targets[@]}"; do
  pkg=${t% *}
  name=${t#* }
  log=$logs/$name.log
  start=$SECONDS
  # Go's fuzzing coordinator before Go 1.27 can fail a run that found
  # nothing, reporting only "context deadline exceeded" as -fuzztime ends
  # (go.dev/issue/75804). Such a run is repeated, up to twice; a run that
  # found an input writes it and says so, and is never repeated.
  result=FAIL
  for attempt in 1 2 3; do
    if "$GO" test "${flags[@]}" -fuzz "^$name\$" "$pkg" >"$log" 2>&1; then
      result=ok
      break
    fi
    if grep -q 'Failing input written' "$log" || ! grep -qx '    context deadline exceeded' "$log"; then
      break
    fi
    echo "fuzz: $name: the run ended with Go's fuzztime race (go.dev/issue/75804) and no failing input; running it again" >&2
  done
  [[ $result == ok ]] || failed=$((failed + 1))
  # The last progress line holds the totals.
  progress=$(grep -E '^fuzz: elapsed' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' <<<"$progress")
  interesting=$(sed -n 's/.*new interesting: \([0-9]*\).*/\1/p' <<<"$progress")
  printf 'fuzz: %-4s %-20s %-45s %5ss  %12s execs  %5s new interesting\n' \
    "$result" "$name" "$pkg" "$((SECONDS - start))" "${execs:-?}" "${interesting:-?}"
  if [[ $result == FAIL ]]; then
    grep -v '^fuzz: elapsed' "$log" | tail -n 40 >&2
    input=$(sed -n 's/.*Failing input written to \([^ ]*\).*/\1/p' "$log" | tail -n 1)
    [[ -n $input ]] && echo "fuzz: $name: failing input in $("$GO" list -f '{{.Dir}}' "$pkg")/$input; replay with: go test -run '$name/$(basename "$input")' $pkg" >&2
  fi
done

if (( failed > 0 )); then
  echo "fuzz: $failed of ${#targets[@]} targets failed; full output in $logs" >&2
  exit 1
fi
[[ -z $keep_logs ]] && rm -rf -- "$logs"
echo "fuzz: all ${#targets[@]} targets passed"
