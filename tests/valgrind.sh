#!/usr/bin/env bash
# tests/valgrind.sh [BUILD_DIR] [all|quick]: the test suites under valgrind
# memcheck (issue 15), which finds what the ASan+UBSan build cannot: reads
# of uninitialised memory.
#
#   quick (CI): the unit tests and the fuzz corpus replays, each test
#         program run whole under valgrind
#   all:  those, then every integration suite with the daemon under
#         valgrind ($GPROFD_WRAPPER, honoured by the C harness and
#         tests/tools/daemonlog.py); a test fails on any valgrind error in
#         gprofd (exit status 99) as on its own assertions
#
# Errors: invalid reads and writes, uses of uninitialised values, bad frees,
# and definite or indirect leaks. "Still reachable" memory at exit (libuv's
# and NVML's one-time allocations) is not an error.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
mode=${2:-all}
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ -f "$build/build.ninja" ] || { echo "no build in $build: run .ci/build $build first" >&2; exit 2; }
ninja -C "$build" >/dev/null
vg="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect -q"
meson test -C "$build" --suite unit --suite fuzz --wrapper "$vg" --timeout-multiplier 10 \
  --logbase valgrind-quick
[ "$mode" = quick ] && exit 0
GPROFD_WRAPPER="$vg" meson test -C "$build" --suite integration --timeout-multiplier 10 \
  --num-processes 1 --logbase valgrind-integration
