#!/usr/bin/env bash
# tests/stress-repeat.sh: run the `agent-stress` suite RUNS times in a row,
# some of the runs beside a CPU hog, and print one table row per run
# (issue 29: "agent-stress passes 20 runs in a row on the 2-core machine,
# 5 of them alongside a CPU hog"). A manual tool, not part of CI: it takes
# over an hour on the 2-core machine.
#
# usage: tests/stress-repeat.sh [BUILD_DIR] [RUNS] [HOG_EVERY]
#   BUILD_DIR  a built tree (.ci/build build); default build
#   RUNS       how many runs; default 20
#   HOG_EVERY  every HOG_EVERY-th run (4, 8, ...) runs beside the hog;
#              default 4, so 5 of 20
# The hog is one busy shell loop per online CPU, each pinned to its CPU
# (taskset), started before the run and killed by its own pid after it,
# and on exit whatever happens (trap). Every run keeps its meson log as
# BUILD_DIR/meson-logs/stress-run-N.txt; the table (markdown) goes to stdout
# and to BUILD_DIR/stress-repeat.md. Every run is made, failed or not; the
# exit status is 1 if any failed.
set -u
build=${1:-build}
runs=${2:-20}
hog_every=${3:-4}
table="$build/stress-repeat.md"
hogs=()

stop_hog() {
  local p
  for p in "${hogs[@]}"; do
    kill "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  hogs=()
}
trap stop_hog EXIT
trap 'exit 130' INT TERM

start_hog() {
  local cpu
  for cpu in $(seq 0 $(($(nproc) - 1))); do
    taskset -c "$cpu" sh -c 'while :; do :; done' &
    hogs+=($!)
  done
}

[ -f "$build/build.ninja" ] || { echo "$build is not a built tree: run .ci/build $build" >&2; exit 2; }
{
  echo "| run | CPU hog | started (UTC) | load avg (1 min) at start | outcome | duration (s) | requests (nvtx+fake tests) |"
  echo "|---|---|---|---|---|---|---|"
} | tee "$table"
failed=0
for i in $(seq 1 "$runs"); do
  hog=no
  if [ $((i % hog_every)) -eq 0 ]; then
    hog="yes ($(nproc))"
    start_hog
  fi
  start=$(date -u +%H:%M:%S)
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  meson test -C "$build" --logbase "stress-run-$i" agent-stress >/dev/null 2>&1
  rc=$?
  t1=$(date +%s.%N)
  stop_hog
  log="$build/meson-logs/stress-run-$i.txt"
  # meson's own verdict, as it printed it in the log's summary
  outcome=$(grep -Eo '^(Ok|Fail|Timeout|Expected Fail|Unexpected Pass|Skipped): +[1-9][0-9]*' "$log" |
            sed 's/: */ /' | paste -sd, -)
  [ "$rc" -eq 0 ] || { outcome="FAIL rc=$rc ($outcome)"; failed=1; }
  # requests each stress test made ("seed S, N requests in T s")
  reqs=$(grep -Eo '[0-9]+ requests in' "$log" | awk '{s += $1; n++} END {print s " in " n " tests"}')
  printf '| %d | %s | %s | %s | %s | %.0f | %s |\n' "$i" "$hog" "$start" "$load" "$outcome" \
    "$(echo "$t1 - $t0" | bc)" "$reqs" | tee -a "$table"
done
exit $failed
