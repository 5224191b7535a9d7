#!/usr/bin/env bash
# Integration: the real gprofd starts on its embedded defaults, logs with
# syslog priority prefixes, stops cleanly on SIGTERM (exit 0 means
# uv_loop_close found no handle left open), and rejects bad arguments.
# Synchronisation is by reading the daemon's own log through a FIFO,
# never by sleeping.
set -euo pipefail
gprofd=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$gprofd" --version | grep -qx "gprofd [0-9.]*" || fail "--version"
set +e
"$gprofd" --no-such-flag 2>"$tmp/usage"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad flag exited $rc, want 2"
grep -q "usage: gprofd" "$tmp/usage" || fail "bad flag printed no usage"

mkfifo "$tmp/log"
"$gprofd" 2>"$tmp/log" &
pid=$!
exec 3<"$tmp/log"
read -r -t 30 -u 3 line || fail "no start-up line within 30 s"
case "$line" in
"<6>gprofd "*" running"*) ;;
*) fail "unexpected start-up line: $line" ;;
esac
kill -TERM "$pid"
rest=$(cat <&3)
set +e
wait "$pid"; rc=$?
set -e
[ "$rc" -eq 0 ] || fail "exit status $rc after SIGTERM; log: $rest"
grep -q "^<6>signal 15: stopping" <<<"$rest" || fail "no stop line: $rest"
echo "1 passed, 0 failed"
