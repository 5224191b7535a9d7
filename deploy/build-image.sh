#!/usr/bin/env bash
# deploy/build-image.sh DEBDIR OUT.tar [TAG]: the gprofd container image,
# with no registry: a minimal Debian 12 root made by mmdebstrap (minbase)
# holding the three packages from DEBDIR (dpkg-buildpackage's .debs) and
# deploy/install-agent, written as a tarball OUT.tar; with TAG (default
# localhost/gprofd:0.1.0) and podman present, it is imported as that image.
#   podman --storage-driver vfs import ... (as root, as CI runs it)
# The image runs /usr/sbin/gprofd (the DaemonSet's command); its
# configuration comes from /etc/gprofd (a ConfigMap), its sockets and
# traces from the host paths docs/DEPLOY.md lists.
set -euo pipefail
debdir=$(cd "${1:?usage: build-image.sh DEBDIR OUT.tar [TAG]}" && pwd)
out=${2:?usage: build-image.sh DEBDIR OUT.tar [TAG]}
tag=${3:-localhost/gprofd:0.1.0}
here=$(cd "$(dirname "$0")" && pwd)
debs=("$debdir"/gprofd_*.deb "$debdir"/gprofctl_*.deb "$debdir"/gprofd-agent_*.deb)
for d in "${debs[@]}"; do
  [ -f "$d" ] || { echo "build-image.sh: no $d: build the packages first (dpkg-buildpackage -us -uc -b)" >&2; exit 1; }
done
mirror=http://deb.debian.org/debian
[ -f /etc/apt/sources.list.d/debian.sources ] && mirror=/etc/apt/sources.list.d/debian.sources
# mmdebstrap installs the .debs given by path with their dependencies;
# python3 runs the agent's helper (install-agent copies it, jobs use it).
# Documentation and man pages are left out of the image (dpkg path-exclude).
nice mmdebstrap --variant=minbase \
  --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
  --include="python3,$(IFS=,; echo "${debs[*]}")" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='mkdir -p "$1/usr/share/gprofd/container"' \
  --customize-hook="copy-in $here/install-agent /usr/share/gprofd/container" \
  --customize-hook='rm -f "$1"/etc/gprofd/gprofd.yaml.dpkg-* "$1"/var/log/*.log' \
  bookworm "$out" "$mirror" </dev/null
echo "build-image.sh: $out ($(du -h "$out" | cut -f1))"
if command -v podman >/dev/null; then
  podman --storage-driver vfs import \
    --change 'CMD ["/usr/sbin/gprofd"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV GPROF_SOCKET=/run/gprofd/gprofd.sock' \
    --change 'LABEL org.opencontainers.image.title=gprofd' \
    "$out" "$tag" >/dev/null
  echo "build-image.sh: imported as $tag"
fi
