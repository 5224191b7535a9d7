# tests/deploy/lib.sh: what the deploy tests share (sourced): the checks
# that say SKIP (77), building the .debs from a copy of the tree, and making
# a Debian 12 root with mmdebstrap. Nothing here sleeps to synchronise:
# each wait reads the daemon's own log through a FIFO.

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# Says SKIP unless root and every named command is here.
need() {
  [ "$(id -u)" -eq 0 ] || skip "not root (mmdebstrap, chroot and unshare need it)"
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null || skip "$c is missing (.ci/deps installs it)"
  done
}

# build_debs SRC OUT: builds the three packages from a copy of SRC (the
# tree as it is, committed or not, less build folders) and leaves the .debs
# and the .changes in OUT; the log is OUT/build.log.
build_debs() {
  local src=$1 out=$2 copy
  copy=$out/src/gprofd
  mkdir -p "$copy"
  tar -C "$src" --exclude='./build*' --exclude='./.git' --exclude='./obj-*' \
      --exclude='./debian/tmp' -cf - . | tar -C "$copy" -xf -
  (cd "$copy" && DEB_BUILD_OPTIONS="noddebs parallel=2" nice dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log" >&2; fail "dpkg-buildpackage failed (log $out/build.log)"; }
  mv "$out"/src/*.deb "$out"/src/*.changes "$out"/src/*.buildinfo "$out"/
}

# deb_deps DEB...: the packages the .debs depend on (first of each
# alternative, versions dropped), less the three built here.
deb_deps() {
  local d
  for d in "$@"; do
    dpkg-deb -f "$d" Depends
  done | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g; /^$/d' |
    grep -vx 'gprofd\|gprofctl\|gprofd-agent' | sort -u | paste -sd, -
}

# make_root DIR INCLUDE: a minbase Debian 12 root in DIR with the packages
# INCLUDE (comma separated), from the mirror apt uses on this host.
make_root() {
  local dir=$1 include=$2 mirror=http://deb.debian.org/debian
  [ -f /etc/apt/sources.list.d/debian.sources ] && mirror=/etc/apt/sources.list.d/debian.sources
  nice mmdebstrap --variant=minbase --include="$include" bookworm "$dir" "$mirror" \
    </dev/null >"$dir.log" 2>&1 ||
    { tail -30 "$dir.log" >&2; fail "mmdebstrap failed (log $dir.log)"; }
}

# root_paths DIR: every path in the root, less what the package manager and
# the shadow tools keep (dpkg's database, logs, caches; the "-" backups of
# the account files that any addgroup or useradd writes, the test's own
# user's included).
root_paths() {
  (cd "$1" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./sys \
      -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache \
      -o -path ./var/lib/apt -o -path ./etc/ld.so.cache \) -prune -o -print |
    grep -vx '\./etc/\(passwd\|group\|shadow\|gshadow\|subuid\|subgid\)-' | sort)
}
