#!/usr/bin/env bash
# tests/deploy/test-packages.sh SRC WORK: the Debian packages, end to end
# (issue 39). Builds gprofd, gprofctl and gprofd-agent with
# dpkg-buildpackage from a copy of SRC; lintian finds nothing beyond the
# overrides debian/ explains; on a clean Debian 12 root (mmdebstrap) with
# only their dependencies the .debs install; gprofd starts as its unit
# starts it (root, /etc/gprofd/gprofd.yaml from the package); a demo job of
# another user is launched, traced for 5 steps and reported; gprofd stops
# on SIGTERM with status 0; purge leaves no path that was not there before
# (the gprofadm group stays: docs/DEPLOY.md, "Removing"). The .debs are
# left in WORK/debs for test-image.sh.
# SKIP (77): not root, or dpkg-buildpackage, debhelper, lintian, mmdebstrap
# missing.
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
. "$src/tests/deploy/lib.sh"
need dpkg-buildpackage dh lintian mmdebstrap unshare chroot ip

rm -rf "$work"
mkdir -p "$work"
tmp=$(mktemp -d)
cleanup() {
  [ -n "${ns_pid:-}" ] && kill -KILL "$ns_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1. build, lintian
build_debs "$src" "$work/debs"
debs=("$work"/debs/*.deb)
[ "${#debs[@]}" -eq 3 ] || fail "want 3 .debs, got: ${debs[*]}"
for p in gprofd gprofctl gprofd-agent; do
  ls "$work/debs/${p}_"*.deb >/dev/null || fail "no $p package"
done
nice lintian --fail-on error,warning \
  "$work"/debs/*.changes >"$work/lintian.log" 2>&1 ||
  { cat "$work/lintian.log" >&2; fail "lintian: tags without an explained override"; }
echo "built: $(cd "$work/debs" && ls *.deb | paste -sd' ' -); lintian: $(grep -c "^[EW]:" "$work/lintian.log" || true) errors and warnings, $(grep -c "^[IPX]:" "$work/lintian.log" || true) other tags"

# 2. a clean root with the packages' dependencies, and what it holds
root=$tmp/root
deps=$(deb_deps "${debs[@]}")
make_root "$root" "$deps,python3,bash-completion"
root_paths "$root" >"$tmp/before"
grep -q '^gprofadm:' "$root/etc/group" && fail "the clean root already has gprofadm"

# 3. install
cp "${debs[@]}" "$root/tmp/"
# /run is a tmpfs on a running system: the maintainer scripts get one too
in_root() { unshare --mount sh -c 'mount -t tmpfs -o mode=0755 tmpfs "$0/run" && exec chroot "$0" "$@"' "$root" "$@"; }
in_root sh -c 'dpkg -i /tmp/*.deb' >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "dpkg -i failed"; }
rm -f "$root"/tmp/*.deb
for f in /usr/sbin/gprofd /usr/bin/gprofctl /etc/gprofd/gprofd.yaml \
         /lib/systemd/system/gprofd.service /lib/systemd/system/gprofd.socket \
         /usr/share/man/man1/gprofctl.1.gz /usr/share/man/man8/gprofd.8.gz \
         /usr/share/bash-completion/completions/gprofctl \
         /usr/share/gprofd/python/gprof_agent/demo.py; do
  [ -e "$root$f" ] || fail "$f not installed"
done
ls "$root"/usr/lib/*/gprofd/libgprof_agent.so >/dev/null || fail "no agent"
grep -q '^gprofadm:' "$root/etc/group" || fail "postinst made no gprofadm group"
[ "$(stat -c %a "$root/var/lib/gprofd")" = 700 ] || fail "/var/lib/gprofd is not 0700"
# the unit as installed starts what the package holds
grep -qx 'ExecStart=/usr/sbin/gprofd' "$root/lib/systemd/system/gprofd.service" ||
  fail "the unit's ExecStart: $(grep ExecStart "$root/lib/systemd/system/gprofd.service")"
chroot "$root" gprofd --check-config >"$tmp/check" 2>&1 || { cat "$tmp/check" >&2; fail "--check-config"; }
grep -q 'configuration OK' "$tmp/check" || fail "check-config said: $(cat "$tmp/check")"
chroot "$root" useradd -m -s /bin/sh alice

# 4. run it as the unit does, in its own mount, pid and network namespaces
# (no systemd in a chroot): root, CONFIGURATION_DIRECTORY, the runtime
# directory made 0755; wait on its log for the running line.
cat >"$root/root/session.sh" <<'SESSION'
#!/bin/sh
# in the chroot: gprofd as gprofd.service runs it, a job of alice's, a trace
set -e
mkdir -p -m 0755 /run/gprofd
CONFIGURATION_DIRECTORY=/etc/gprofd /usr/sbin/gprofd 2>/root/log-fifo &
dpid=$!
read_until() { while read -r line; do echo "$line" >>/root/daemon.log; case "$line" in *"$1"*) return 0;; esac; done; return 1; }
exec 3</root/log-fifo
read_until " running: unix /run/gprofd/gprofd.sock" <&3 || { echo "gprofd never ran" >&2; exit 1; }
# alice's job; root traces it (root sees every user's processes)
(cd /home/alice && setpriv --reuid alice --regid alice --init-groups env HOME=/home/alice \
   gprofctl launch --job demo -- python3 -m gprof_agent.demo --seconds 600) >/root/launch.out 2>&1
gprofctl list >/root/list.out
gprofctl trace --job demo --iterations 5 --output-dir /root/traces >/root/trace.out 2>&1
gprofctl report /root/traces >/root/report.out 2>&1
kill -TERM "$dpid"
cat <&3 >>/root/daemon.log
rc=0
wait "$dpid" || rc=$?
echo "gprofd exit $rc" >/root/pids
SESSION
chmod +x "$root/root/session.sh"
mkfifo "$root/root/log-fifo"
set +e
unshare --mount --pid --net --fork sh -c "
  ip link set lo up && mount -t proc proc '$root/proc' && mount --rbind /dev '$root/dev' &&
  mount -t tmpfs -o mode=0755 tmpfs '$root/run' && exec chroot '$root' /root/session.sh" \
  >"$tmp/session.log" 2>&1 &
ns_pid=$!
wait "$ns_pid"
rc=$?
ns_pid=
set -e
cat "$root/root/daemon.log" 2>/dev/null | head -5
[ "$rc" -eq 0 ] || { cat "$tmp/session.log" "$root"/root/*.out >&2; fail "the session in the root exited $rc"; }
grep -q 'registered' "$root/root/launch.out" || grep -q 'pid' "$root/root/launch.out" ||
  fail "launch said: $(cat "$root/root/launch.out")"
grep -q 'demo' "$root/root/list.out" || fail "gprofctl list shows no demo job: $(cat "$root/root/list.out")"
grep -q '^iterations: 5,' "$root/root/report.out" ||
  fail "the report has no 5 iterations: $(head -20 "$root/root/report.out")"
grep -q 'forward' "$root/root/report.out" || fail "the report has no forward range"
grep -qx 'gprofd exit 0' "$root/root/pids" || fail "gprofd did not stop cleanly: $(cat "$root/root/pids")"
grep -q 'configuration from /etc/gprofd/gprofd.yaml' "$root/root/daemon.log" ||
  fail "gprofd did not read the package's configuration: $(head -3 "$root/root/daemon.log")"
echo "traced in the root: $(grep '^iterations' "$root/root/report.out")"

# 5. purge, and what is left
rm -rf "$root"/root/session.sh "$root"/root/log-fifo "$root"/root/*.out "$root"/root/pids \
       "$root"/root/daemon.log "$root"/root/traces
chroot "$root" userdel -r alice 2>/dev/null
in_root dpkg --purge gprofctl gprofd-agent gprofd >"$tmp/purge.log" 2>&1 ||
  { cat "$tmp/purge.log" >&2; fail "dpkg --purge failed"; }
root_paths "$root" >"$tmp/after"
if ! diff "$tmp/before" "$tmp/after" >"$tmp/left"; then
  cat "$tmp/left" >&2
  fail "purge left these paths (> new, < gone)"
fi
grep -q '^gprofadm:' "$root/etc/group" || fail "purge removed the gprofadm group (kept by design)"
echo "purged: no path left behind ($(wc -l <"$tmp/before") paths before and after); group gprofadm kept"
