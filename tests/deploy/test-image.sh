#!/usr/bin/env bash
# tests/deploy/test-image.sh SRC WORK: the container image (issue 39), run
# the way the DaemonSet runs it. deploy/build-image.sh makes it from the
# .debs (WORK/../packages/debs from test-packages.sh, else built here) on a
# minbase Debian 12 root and imports it into podman (vfs storage). Then:
#   gprofd    host PID namespace, host network (its Kineto socket is an
#             abstract name, which must show in the host's /proc/net/unix),
#             the socket, Kineto trace and state directories from the host,
#             its configuration read-only, only the unit's capabilities
#   agent     the DaemonSet's init container copies the agent out
#   job       another container, its own PID namespace and no network, as
#             another uid, with what deploy/kubernetes/job-example.yaml adds
# The job is listed, traced for 5 steps and reported; gprofd stops on
# SIGTERM with status 0. Where podman cannot run a container here, the same
# root is started with unshare and chroot instead, saying why.
# GPROF_TEST_IMAGE=TAG runs an image already built instead of building one.
# SKIP (77): not root, mmdebstrap or podman missing.
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
. "$src/tests/deploy/lib.sh"
need dpkg-buildpackage dh mmdebstrap podman
# This machine (a VM whose hard limits are nofile 20000, cgroup v1 beside
# a v2 tree with controllers) needs two settings podman's defaults lack:
# its default rlimits exceed the hard limits ("crun: setrlimit
# `RLIMIT_NOFILE`: Operation not permitted"), and crun refuses the hybrid
# cgroup layout ("crun: cgroups in hybrid mode not supported, drop all
# controllers from cgroupv2"); runc runs it. A containers.conf of the test's
# own sets both, for podman run and podman kube play alike (docs/DEPLOY.md).
tmpconf=$(mktemp)
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
cat >"$tmpconf" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
[engine]
runtime = "$(command -v runc >/dev/null && echo runc || echo crun)"
CONF
export CONTAINERS_CONF=$tmpconf
pm=(podman --storage-driver vfs)
tag=localhost/gprofd-test:$$
rm -rf "$work"
mkdir -p "$work"
tmp=$(mktemp -d)
cleanup() {
  local c
  for c in "gprofd-test-$$" "job-test-$$"; do # one at a time: a missing one fails the rest
    "${pm[@]}" rm -f -t 0 "$c" >/dev/null 2>&1 || true
  done
  "${pm[@]}" pod rm -f -t 0 "gprofd-node-$$" >/dev/null 2>&1 || true
  "${pm[@]}" rmi -f "$tag" >/dev/null 2>&1 || true
  rm -rf "$tmp" "$tmpconf"
}
trap cleanup EXIT

if [ -n "${GPROF_TEST_IMAGE:-}" ]; then
  # a developer's shortcut: an image deploy/build-image.sh already made
  "${pm[@]}" tag "$GPROF_TEST_IMAGE" "$tag" || fail "no image $GPROF_TEST_IMAGE"
else
  debdir=$(dirname "$work")/packages/debs
  if ! ls "$debdir"/gprofd_*.deb >/dev/null 2>&1; then
    debdir=$work/debs
    build_debs "$src" "$debdir"
  fi
  bash "$src/deploy/build-image.sh" "$debdir" "$work/gprofd.tar" "$tag" >"$work/image.log" 2>&1 ||
    { tail -30 "$work/image.log" >&2; fail "build-image.sh failed"; }
  grep 'build-image.sh:' "$work/image.log"
fi
"${pm[@]}" image exists "$tag" || fail "the image $tag was not imported"

# the host side of the DaemonSet's volumes
mkdir -p "$tmp/run" "$tmp/kineto" "$tmp/state" "$tmp/etc" "$tmp/agent" "$tmp/traces"
chmod 0755 "$tmp/run"
name=gprofd-test-$$
cat >"$tmp/etc/gprofd.yaml" <<YAML
# as deploy/kubernetes/configmap.yaml, on ports the kernel picks
socket: /run/gprofd/gprofd.sock
tcp: 127.0.0.1:0
metrics: 127.0.0.1:0
state_dir: /var/lib/gprofd
kineto:
  socket_name: $name
YAML

# the init container: the agent copied out for jobs
"${pm[@]}" run --rm --cap-drop=all --read-only -v "$tmp/agent:/opt/gprofd" "$tag" \
  /usr/share/gprofd/container/install-agent /opt/gprofd >"$tmp/init.log" 2>&1 ||
  { cat "$tmp/init.log" >&2; fail "the agent's init container failed"; }
[ -f "$tmp/agent/libgprof_agent.so" ] && [ -f "$tmp/agent/python/gprof_agent/demo.py" ] ||
  fail "install-agent left no agent: $(ls -R "$tmp/agent")"

# gprofd, as the DaemonSet runs it
if ! "${pm[@]}" run -d --name "$name" --pid=host --network=host --read-only \
    --cap-drop=all --cap-add=DAC_OVERRIDE,DAC_READ_SEARCH,SYS_PTRACE,CHOWN,FOWNER \
    --security-opt no-new-privileges \
    -v "$tmp/etc:/etc/gprofd:ro" -v "$tmp/run:/run/gprofd" \
    -v "$tmp/kineto:/tmp/gprofd-kineto" -v "$tmp/state:/var/lib/gprofd" \
    "$tag" /usr/sbin/gprofd >"$tmp/run.log" 2>&1; then
  cat "$tmp/run.log" >&2
  fail "podman could not start the image: $(tail -1 "$tmp/run.log")"
fi
# its log, line by line, until it runs (no sleep: the log says so)
ready=
while read -r -t 120 line; do
  echo "$line" >>"$tmp/daemon.log"
  case "$line" in *" running: unix /run/gprofd/gprofd.sock"*) ready=1; break ;; esac
done < <("${pm[@]}" logs -f "$name" 2>&1)
[ -n "$ready" ] || { cat "$tmp/daemon.log" >&2; fail "gprofd in the container never ran"; }
grep -q "configuration from /etc/gprofd/gprofd.yaml" "$tmp/daemon.log" ||
  fail "gprofd did not read the mounted configuration: $(head -3 "$tmp/daemon.log")"
[ -S "$tmp/run/gprofd.sock" ] || fail "no socket on the host at $tmp/run/gprofd.sock"
# host network: its abstract Kineto socket is in the host's namespace (the
# name ends in a NUL, as Kineto sends to it, which /proc shows as "@")
grep -q " @$name@\?\$" /proc/net/unix || fail "@$name is not bound in the host's network namespace"
echo "gprofd runs in the container; @$name bound on the host"

# a job in another container: own PID namespace, no network, uid 4242
job=job-test-$$
"${pm[@]}" run -d --name "$job" --network=none --user 4242:4242 --cap-drop=all \
  -v "$tmp/run:/run/gprofd" -v "$tmp/agent:/opt/gprofd:ro" -v "$tmp/kineto:/tmp/gprofd-kineto" \
  -e CUDA_INJECTION64_PATH=/opt/gprofd/libgprof_agent.so -e GPROF_SOCKET=/run/gprofd/gprofd.sock \
  -e GPROF_JOB_ID=ctr-demo -e PYTHONPATH=/opt/gprofd/python -e HOME=/tmp \
  "$tag" sh -c 'python3 -m gprof_agent.demo --seconds 600 && exec sleep 600' >"$tmp/job.log" 2>&1 ||
  { cat "$tmp/job.log" >&2; fail "the job's container did not start"; }
registered=
while read -r -t 120 line; do
  echo "$line" >>"$tmp/job.out"
  case "$line" in *"pid "*|*"registered"*) registered=1; break ;; esac
done < <("${pm[@]}" logs -f "$job" 2>&1)
[ -n "$registered" ] || { cat "$tmp/job.out" >&2; fail "the demo job never registered"; }
"${pm[@]}" exec "$name" gprofctl list >"$tmp/list" 2>&1 || { cat "$tmp/list" >&2; fail "gprofctl list"; }
grep -q 'ctr-demo' "$tmp/list" || fail "the job is not listed: $(cat "$tmp/list")"
grep -q '4242' "$tmp/list" || fail "the job's uid 4242 is not shown: $(cat "$tmp/list")"
"${pm[@]}" exec "$name" gprofctl trace --job ctr-demo --iterations 5 --output-dir /var/lib/gprofd/out \
  >"$tmp/trace" 2>&1 || { cat "$tmp/trace" >&2; fail "gprofctl trace through the container failed"; }
"${pm[@]}" exec "$name" gprofctl report /var/lib/gprofd/out >"$tmp/report" 2>&1 ||
  { cat "$tmp/report" >&2; fail "gprofctl report"; }
grep -q '^iterations: 5,' "$tmp/report" || fail "no 5 iterations: $(head "$tmp/report")"
echo "traced the job's container: $(grep '^iterations' "$tmp/report")"

"${pm[@]}" rm -f -t 0 "$job" >/dev/null
"${pm[@]}" stop -t 30 "$name" >/dev/null
rc=$("${pm[@]}" inspect -f '{{.State.ExitCode}}' "$name")
"${pm[@]}" logs "$name" >"$tmp/daemon.all" 2>&1 || true
[ "$rc" = 0 ] || { tail "$tmp/daemon.all" >&2; fail "gprofd exited $rc on podman stop (SIGTERM)"; }
grep -q "signal 15: stopping" "$tmp/daemon.all" || fail "no stop line in the log"
echo "gprofd stopped with status 0"

# the DaemonSet's pod template itself, with podman kube play: its init
# container copies the agent, its gprofd runs on the host's PID namespace
# and network with the ConfigMap's configuration
kv=$src/tests/deploy/kube-validate
if [ -d "$kv/node_modules/yaml" ] && command -v node >/dev/null; then
  pfx=$tmp/node
  pod=gprofd-node-$$
  POD_NAME=$pod node "$kv/podify.mjs" "$src/deploy/kubernetes/daemonset.yaml" \
    "$src/deploy/kubernetes/configmap.yaml" "$pfx" "$tag" "$tmp/kube"
  mkdir -p "$pfx"
  "${pm[@]}" kube play --configmap "$tmp/kube.configmap.yaml" "$tmp/kube.pod.yaml" \
    >"$tmp/play.log" 2>&1 || { cat "$tmp/play.log" >&2; fail "podman kube play failed"; }
  ready=
  while read -r -t 120 line; do
    echo "$line" >>"$tmp/play.daemon"
    case "$line" in *" running: unix /run/gprofd/gprofd.sock"*) ready=1; break ;; esac
  done < <("${pm[@]}" logs -f "$pod-gprofd" 2>&1)
  [ -n "$ready" ] || { cat "$tmp/play.log" "$tmp/play.daemon" >&2; fail "the pod's gprofd never ran"; }
  [ -S "$pfx/run/gprofd/gprofd.sock" ] || fail "the pod's socket is not in the hostPath"
  [ -S "$pfx/run/gprofd/kineto/dynolog" ] || fail "no Kineto socket file in the hostPath: $(ls -R "$pfx/run/gprofd")"
  [ -f "$pfx/opt/gprofd/libgprof_agent.so" ] || fail "the init container copied no agent"
  # the namespaces themselves, as the kernel names them, inside and here
  inside=$("${pm[@]}" exec "$pod-gprofd" /usr/bin/readlink /proc/self/ns/pid /proc/self/ns/net | paste -sd' ')
  here=$(readlink /proc/self/ns/pid /proc/self/ns/net | paste -sd' ')
  [ "${inside#* }" = "${here#* }" ] ||
    fail "the pod's gprofd is not in the host's network namespace: $inside, here $here"
  # Debian 12's podman (4.3) plays hostPID: true as a PID namespace of the
  # pod's own (seen here: pid:[4026532184] inside, pid:[4026531836] here);
  # the run above (--pid=host) is the DaemonSet's PID namespace, traced
  if [ "${inside%% *}" = "${here%% *}" ]; then
    pidns="host PID namespace"
  else
    pidns="PID namespace of its own (podman $(podman --version | awk '{print $3}') ignores hostPID)"
  fi
  "${pm[@]}" kube down "$tmp/kube.pod.yaml" >/dev/null 2>&1
  echo "podman kube play: the DaemonSet's pod ran (init container, hostPaths, host network, $pidns)"
else
  echo "podman kube play: not run (tests/deploy/kube-validate has no node modules: .ci/deps)"
fi
