#!/bin/sh
# small-disk.sh GPROFD ARGS...: runs gprofd with its --state-dir on a 1 MiB
# tmpfs, in a private mount namespace (needs root), so tests can fill the
# disk. exec all the way down: the daemon keeps this script's pid.
for a in "$@"; do
  [ "$prev" = "--state-dir" ] && state=$a
  prev=$a
done
mkdir -p "$state"
exec unshare -m sh -c 'mount -t tmpfs -o size=1m,mode=0700 gprofd-test "$0" && exec "$@"' "$state" "$@"
