#!/usr/bin/env bash
# Integration: where gprofd finds its configuration file and its sockets
# when no flag says (issue 26), and what it does at start with a file
# that may be cut short (issue 23; the reload side is in test-admin.c).
# - A real user other than root (nobody) without XDG_RUNTIME_DIR is told
#   to give --socket (no attempt at root's /run/gprofd), without HOME to
#   give --state-dir (not /tmp/.local/state/gprofd); with them, the
#   daemon runs on $XDG_RUNTIME_DIR/gprofd/gprofd.sock and
#   ~/.local/state/gprofd, reading ~/.config/gprofd/gprofd.yaml (or
#   $XDG_CONFIG_HOME/gprofd/gprofd.yaml) with no --config.
# - An empty file, or one whose last line has no newline, is refused at
#   start with what to do; `{}` means every default.
# Synchronisation is by the daemon's own log, read through a FIFO.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }
# nobody must be able to run it wherever the build tree is
cp "$1" "$tmp/gprofd"
gprofd=$tmp/gprofd
# root's default file must not leak in from the host running the test
export CONFIGURATION_DIRECTORY=$tmp/etc

# ---- a user other than root ----
id -u nobody >/dev/null 2>&1 || fail "no user nobody"
home=$tmp/home
mkdir -p "$home" "$tmp/run"
chown nobody "$home" "$tmp/run"
chmod 700 "$tmp/run"
# setpriv execs (no session process in between, unlike runuser)
as_nobody() {
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
    env -i PATH=/usr/bin:/bin HOME="$home" "$@"
}

# no XDG_RUNTIME_DIR: the error says what to do
set +e
as_nobody "$gprofd" --tcp off --metrics off 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "nobody without XDG_RUNTIME_DIR: exit $rc, want 1: $(cat "$tmp/err")"
grep -q -- "--socket PATH" "$tmp/err" && grep -q "XDG_RUNTIME_DIR" "$tmp/err" ||
  fail "no hint of --socket or XDG_RUNTIME_DIR: $(cat "$tmp/err")"
# no HOME (nor XDG_STATE_HOME): no state directory in a shared place, a hint
set +e
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups env -i PATH=/usr/bin:/bin \
  XDG_RUNTIME_DIR="$tmp/run" "$gprofd" --check-config 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q -- "give --state-dir DIR" "$tmp/err" ||
  fail "nobody without HOME: exit $rc: $(cat "$tmp/err")"
# with --socket it runs (checked here without starting it)
as_nobody "$gprofd" --socket "$home/g.sock" --check-config >/dev/null ||
  fail "nobody with --socket: configuration refused"

# the default file of a user: ~/.config/gprofd/gprofd.yaml
as_nobody mkdir -p "$home/.config/gprofd" "$home/xdg/gprofd"
printf 'tcp: off\nmetrics: off\n' | as_nobody tee "$home/.config/gprofd/gprofd.yaml" >/dev/null
as_nobody XDG_RUNTIME_DIR="$tmp/run" "$gprofd" --dump-config >"$tmp/dump" 2>&1 || fail "--dump-config as nobody: $(cat "$tmp/dump")"
head -1 "$tmp/dump" | grep -q "from $home/.config/gprofd/gprofd.yaml" ||
  fail "--dump-config names no file: $(head -1 "$tmp/dump")"
grep -q "^tcp: 'off'" "$tmp/dump" || fail "the user's file was not applied: $(grep ^tcp "$tmp/dump")"
# ... or $XDG_CONFIG_HOME/gprofd/gprofd.yaml when that is set
printf 'tcp: 127.0.0.1:0\n' | as_nobody tee "$home/xdg/gprofd/gprofd.yaml" >/dev/null
as_nobody XDG_RUNTIME_DIR="$tmp/run" XDG_CONFIG_HOME="$home/xdg" "$gprofd" --dump-config >"$tmp/dump" 2>&1
grep -q "^tcp: '127.0.0.1:0'" "$tmp/dump" || fail "XDG_CONFIG_HOME not read: $(head -1 "$tmp/dump")"

# started with XDG_RUNTIME_DIR: socket and state under the user's own directories
mkfifo "$tmp/log"
# a simple command, not the function: bash execs it, so $! is the daemon
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
  env -i PATH=/usr/bin:/bin HOME="$home" XDG_RUNTIME_DIR="$tmp/run" "$gprofd" 2>"$tmp/log" &
pid=$!
exec 3<"$tmp/log"
ready=
while read -r -t 30 -u 3 line; do
  case "$line" in
  *"configuration from $home/.config/gprofd/gprofd.yaml"*) conf=1 ;;
  *" running: unix $tmp/run/gprofd/gprofd.sock, tcp off, traces in $home/.local/state/gprofd/traces"*)
    ready=1; break ;;
  *" running: "*) fail "not the user's defaults: $line" ;;
  esac
done
[ -n "$ready" ] && [ -n "${conf:-}" ] || fail "no start-up as nobody within 30 s"
[ "$(stat -c %U "$home/.local/state/gprofd/traces")" = nobody ] || fail "state dir not nobody's"
kill -TERM "$pid"
cat <&3 >/dev/null
wait "$pid" || fail "gprofd as nobody exited $? after SIGTERM"
exec 3<&-

# ---- a file that may be cut short is refused at start ----
: >"$tmp/empty.yaml"
set +e
timeout 30 "$gprofd" --config "$tmp/empty.yaml" --socket "$tmp/s.sock" --tcp off --metrics off \
  --state-dir "$tmp/state" 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "an empty file at start: exit $rc, want 1"
grep -q "empty.yaml is empty (cut short, or being written?): nothing applied; to leave every option at its default, write {}" "$tmp/err" ||
  fail "an empty file: $(cat "$tmp/err")"
[ ! -e "$tmp/state" ] || fail "an empty file at start: the store was opened"
printf 'retention:\n  max_age: 300' >"$tmp/cut.yaml" # "300d", cut short
set +e
"$gprofd" --config "$tmp/cut.yaml" --check-config >/dev/null 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a file with no final newline: exit $rc, want 1"
grep -q "cut.yaml: no newline at its end, so it may be cut short" "$tmp/err" ||
  fail "a cut file: $(cat "$tmp/err")"
printf '{}\n' >"$tmp/none.yaml"
"$gprofd" --config "$tmp/none.yaml" --check-config | grep -q "configuration OK: $tmp/none.yaml" ||
  fail "{} is not every default"
echo "1 passed, 0 failed"
