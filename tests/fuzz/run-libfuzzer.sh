#!/usr/bin/env bash
# Runs every fuzz target under libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, RUNS executions each (default 1,000,000),
# starting from the saved corpus, then merges what gained coverage back
# into tests/fuzz/corpus/<target>/ (so CI replays it). Crashes land in
# tests/fuzz/findings/ (git-ignored). Needs clang and libclang-rt-dev:
#   apt-get install clang libclang-rt-dev
# Usage: tests/fuzz/run-libfuzzer.sh [RUNS] [TARGET...]
# FUZZ_FLAGS adds libFuzzer flags (e.g. -entropic=0: about twice the
# inputs per second for fuzz-report, whose feature bookkeeping dominates).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-1000000}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(frame msg dyno kipc)

dir=build-fuzz
if [ ! -f "$dir/meson-private/coredata.dat" ]; then
  CC=clang meson setup "$dir" -Dfuzzing=true -Dbuildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fsanitize=fuzzer-no-link >/dev/null
fi
ninja -C "$dir" >/dev/null
mkdir -p tests/fuzz/findings

for t in "${targets[@]}"; do
  new=$(mktemp -d)
  log=tests/fuzz/findings/$t.log
  echo "== fuzz-$t: $runs runs"
  start=$(date +%s)
  set +e
  dict=()
  [ "$t" = kipc ] || dict=(-dict=tests/fuzz/protocol.dict)
  UBSAN_OPTIONS=halt_on_error=1 "$dir/tests/fuzz/fuzz-$t" -runs="$runs" -max_len=8192 "${dict[@]}" \
    -artifact_prefix="tests/fuzz/findings/$t-" -print_final_stats=1 \
    ${FUZZ_FLAGS:-} "$new" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  echo "   exit $rc, $execs executions in ${secs}s, coverage $cov edges"
  if [ "$rc" -ne 0 ]; then
    echo "   FAILED: see $log and tests/fuzz/findings/$t-*" >&2
    exit 1
  fi
  "$dir/tests/fuzz/fuzz-$t" -merge=1 "tests/fuzz/corpus/$t" "$new" >/dev/null 2>&1
  rm -rf "$new"
done
