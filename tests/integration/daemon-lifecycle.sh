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
# root's default file must not leak in from the host running the test
export CONFIGURATION_DIRECTORY=$tmp/etc

"$gprofd" --version | grep -qx "gprofd [0-9.]*" || fail "--version"
set +e
"$gprofd" --no-such-flag 2>"$tmp/usage"; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad flag exited $rc, want 2"
grep -q "usage: gprofd" "$tmp/usage" || fail "bad flag printed no usage"

# --check-config and --dump-config on the embedded defaults
"$gprofd" --check-config | grep -q "configuration OK (embedded defaults; no file at $tmp/etc/gprofd.yaml)" || fail "--check-config"
"$gprofd" --dump-config >"$tmp/dump.yaml" || fail "--dump-config"
"$gprofd" --config "$tmp/dump.yaml" --check-config >/dev/null || fail "the dump does not load back"
printf 'limits:\n  bogus: 1\n' >"$tmp/bad.yaml"
set +e
"$gprofd" --config "$tmp/bad.yaml" --check-config 2>"$tmp/bad.err"; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a bad config exited $rc, want 1"
grep -q "bad.yaml:2: unknown option \"limits.bogus\"" "$tmp/bad.err" || fail "bad config message: $(cat "$tmp/bad.err")"

mkfifo "$tmp/log"
"$gprofd" --socket "$tmp/s.sock" --tcp 127.0.0.1:0 --state-dir "$tmp/state" 2>"$tmp/log" &
pid=$!
exec 3<"$tmp/log"
ready=
while read -r -t 30 -u 3 line; do
  case "$line" in
  "<6>gprofd "*" running: unix $tmp/s.sock, tcp port "*) ready=1; break ;;
  "<"[0-6]">"*) ;;
  *) fail "a log line without a syslog priority prefix: $line" ;;
  esac
done
[ -n "$ready" ] || fail "no start-up line within 30 s"
[ -S "$tmp/s.sock" ] || fail "no socket at $tmp/s.sock"
[ "$(stat -c %a "$tmp/s.sock")" = 666 ] || fail "socket mode $(stat -c %a "$tmp/s.sock"), want 666"
kill -TERM "$pid"
rest=$(cat <&3)
set +e
wait "$pid"; rc=$?
set -e
[ "$rc" -eq 0 ] || fail "exit status $rc after SIGTERM; log: $rest"
grep -q "^<6>signal 15: stopping" <<<"$rest" || fail "no stop line: $rest"
[ ! -e "$tmp/s.sock" ] || fail "the socket file was left behind"

# socket activation: systemd passes the listening socket, gprofd uses it
if command -v systemd-socket-activate >/dev/null; then
  exec 4< <(systemd-socket-activate -l "$tmp/act.sock" "$gprofd" --tcp off \
            --socket "$tmp/unused.sock" --state-dir "$tmp/state2" 2>&1)
  # the tool says when it listens; only then connect
  grep -m1 -q "Listening on" <&4 || fail "systemd-socket-activate did not listen"
  python3 - "$tmp/act.sock" <<'PY' || fail "no reply over the activated socket"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = b'{"fn":"getStatus"}'
s.sendall(struct.pack("<i", len(body)) + body)
s.settimeout(20)
n = struct.unpack("<i", s.recv(4))[0]
assert s.recv(n) == b'{"status":1}'
PY
  grep -m1 -q "using 1 socket passed by systemd" <&4 || fail "the activated daemon did not take the socket"
  pkill -TERM -f "state-dir $tmp/state2" || true
  [ ! -e "$tmp/unused.sock" ] || fail "an activated daemon bound its own socket too"
fi
echo "1 passed, 0 failed"
