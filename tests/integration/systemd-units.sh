#!/usr/bin/env bash
# The generated systemd units pass `systemd-analyze verify`, with ExecStart
# pointed at the binary just built (verify checks that it exists).
set -euo pipefail
service=$1 socket=$2 gprofd=$(realpath "$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze not installed (.ci/deps installs systemd)"; exit 1; }
sed "s|^ExecStart=.*|ExecStart=$gprofd|" "$service" >"$tmp/gprofd.service"
cp "$socket" "$tmp/gprofd.socket"
grep -q '^Type=notify' "$tmp/gprofd.service"
# ready (and @dynolog bound) before any user's session or job can start
grep -q '^Before=systemd-user-sessions.service' "$tmp/gprofd.service" || {
  echo "FAIL: gprofd.service is not ordered before users' sessions"; exit 1; }
grep -q '^ListenStream=/run/gprofd/gprofd.sock' "$tmp/gprofd.socket"
# --man=no: the page is installed by meson install, not in a build tree;
# that it exists in the source is checked instead.
[ -f "$(dirname "$0")/../../docs/gprofd.8" ] || { echo "FAIL: docs/gprofd.8 is missing"; exit 1; }
out=$(systemd-analyze verify --man=no "$tmp/gprofd.socket" "$tmp/gprofd.service" 2>&1) || {
  echo "FAIL: systemd-analyze verify: $out"; exit 1; }
# verify prints warnings without failing; treat any mention of our units as a failure
if grep -q "gprofd\.\(service\|socket\)" <<<"$out"; then
  echo "FAIL: systemd-analyze verify warned: $out"
  exit 1
fi
echo "1 passed, 0 failed"
