#!/usr/bin/env bash
# tests/deploy/test-manifests.sh SRC: every manifest of deploy/kubernetes is
# valid against the Kubernetes API schema (kubernetes-models' validators and
# field lists, installed by .ci/deps with npm ci from the lock file in
# tests/deploy/kube-validate: nothing is downloaded here), and the validator
# bites: a misspelt field at the top and deep down, a value of the wrong
# type and a missing required field are each refused with their path.
# SKIP (77): node or the validator's modules missing (.ci/deps installs them).
set -euo pipefail
src=$(cd "$1" && pwd)
val=$src/tests/deploy/kube-validate
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v node >/dev/null || { echo "SKIP: node is missing (.ci/deps installs it)"; exit 77; }
[ -d "$val/node_modules/kubernetes-models" ] ||
  { echo "SKIP: $val/node_modules missing (.ci/deps runs npm ci there)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

files=("$src"/deploy/kubernetes/*.yaml)
docs=$(cat "${files[@]}" | grep -c '^apiVersion:')
node "$val/validate.mjs" "${files[@]}" >"$tmp/out" || { cat "$tmp/out" >&2; fail "a manifest is invalid"; }
ok=$(grep -c ': ok$' "$tmp/out")
[ "$ok" -eq "$docs" ] || { cat "$tmp/out" >&2; fail "$ok of $docs documents checked"; }
for kind in Namespace ServiceAccount ClusterRole ClusterRoleBinding ConfigMap DaemonSet Service ServiceMonitor Pod; do
  grep -q " $kind [a-z-]*: ok$" "$tmp/out" || fail "no $kind checked"
done
echo "manifests: $ok of $docs documents valid (${#files[@]} files)"

# each broken copy is refused, saying where
ds=$src/deploy/kubernetes/daemonset.yaml
refused() { # NAME SED-EXPR FILE WANT
  sed "$2" "$3" >"$tmp/$1.yaml"
  cmp -s "$3" "$tmp/$1.yaml" && fail "$1: the edit changed nothing"
  if node "$val/validate.mjs" "$tmp/$1.yaml" >"$tmp/$1.out"; then
    fail "$1 was accepted: $(cat "$tmp/$1.out")"
  fi
  grep -qF "$4" "$tmp/$1.out" || fail "$1: want '$4', got: $(cat "$tmp/$1.out")"
}
refused top-typo 's/hostPID: true/hostPid: true/' "$ds" '/spec/template/spec/hostPid'
refused deep-typo 's/add: \["DAC_OVERRIDE"/addd: ["DAC_OVERRIDE"/' "$ds" \
  '/spec/template/spec/containers/0/securityContext/capabilities/addd'
refused wrong-type 's/hostNetwork: true/hostNetwork: "yes"/' "$ds" 'hostNetwork must be boolean'
refused no-port '/^      port: 9773$/d' "$src/deploy/kubernetes/service.yaml" '/spec/ports/0 must have required property port'
refused monitor-typo 's/  interval: 15s/  intervall: 15s/' "$src/deploy/kubernetes/servicemonitor.yaml" \
  '/spec/endpoints/0/intervall'
echo "validator: 5 broken copies refused"
