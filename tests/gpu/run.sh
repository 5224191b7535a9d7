#!/usr/bin/env bash
# tests/gpu/run.sh: every GPU check of gprofd in one call, building nothing
# (prepare with tests/gpu/prepare.sh here, carry .devlibs). Results and
# logs go to $OUT; docs/gpu-validation.md records what a run showed.
#
# Checks now: stock PyTorch with KINETO_USE_DAEMON=1 and no agent, traced
# through gprofd: an iteration trace and a duration trace with gprofctl,
# and a dyno-format setKinetOnDemandRequest over TCP; each trace is
# collected, downloaded and summarised (check_trace.py), with the time
# from request to trace on disk. (The agent's checks join with issue 4.)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gprof-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/.devlibs/lib
B=$root/.devlibs/bin
work=$(mktemp -d)
sock=$work/gprofd.sock
ctl() { "$B/gprofctl" --socket "$sock" "$@"; }
now() { date +%s.%N; }
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
log "$(python3 -c 'import torch; print("torch", torch.__version__)')"

"$B/gprofd" --socket "$sock" --tcp 127.0.0.1:1778 --state-dir "$work/state" -v \
	2>"$OUT/gprofd.log" &
gpid=$!
for i in $(seq 100); do grep -q " running: " "$OUT/gprofd.log" && break; sleep 0.1; done
grep -q "serving Kineto clients" "$OUT/gprofd.log" || { log "FAIL: the Kineto endpoint did not start"; cat "$OUT/gprofd.log"; exit 1; }

# PyTorch with Kineto's daemon client, polling every second
echo "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1" >"$work/kineto.conf"
KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=4242 PYTHONUNBUFFERED=1 \
	python3 "$root/tests/gpu/train.py" --seconds 150 >"$OUT/train.log" 2>&1 &
tpid=$!
t0=$(now)
for i in $(seq 300); do
	ctl --json list --job 4242 2>/dev/null | grep -q '"kind":.*"kineto"' && break
	sleep 0.1
done
log "PyTorch registered as a Kineto client after $(awk "BEGIN{print $(now) - $t0}") s: $(ctl list --job 4242 | tail -n +2)"
grep -q "training started" "$OUT/train.log" || sleep 5

steps_of() { # a trace file: kernels, training steps, ProfilerStep#, kernel span
	python3 - "$1" <<'PY' | tee -a "$OUT/summary.txt"
import collections, gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))["traceEvents"]
ua = collections.Counter(e["name"] for e in ev if e.get("cat") == "user_annotation")
k = [e for e in ev if e.get("cat") == "kernel"]
span = (max(e["ts"] + e["dur"] for e in k) - min(e["ts"] for e in k)) / 1000 if k else 0
print("  kernels %d, steps (Optimizer.step) %d, ProfilerStep# %d, kernel span %.1f ms" % (
    len(k), ua.get("Optimizer.step#SGD.step", 0),
    sum(1 for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")), span))
PY
}

run_trace() { # name, gprofctl trace arguments...
	local name=$1; shift
	local s e
	s=$(now)
	ctl --json trace --job 4242 "$@" --output-dir "$work/out-$name" --timeout 60 >"$OUT/$name.json" 2>"$OUT/$name.err"
	local rc=$?
	e=$(now)
	log "$name: gprofctl exit $rc after $(awk "BEGIN{print $e - $s}") s (request to trace on disk)"
	for f in $(find "$work/out-$name" -name '*.gz'); do
		python3 "$root/tests/gpu/check_trace.py" "$f" >"$OUT/$name-check.json"
		steps_of "$f"
		cp "$f" "$OUT/$name.pt.trace.json.gz" 2>/dev/null
	done
	[ $rc -eq 0 ] || cat "$OUT/$name.json" "$OUT/$name.err"
}
run_trace iterations --iterations 5 --iteration-roundup 1
run_trace duration --duration-ms 500

# The same iteration request to a loop that has imported torch.profiler,
# where PyTorch registers the optimizer-step hook Kineto counts with.
KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=4343 PYTHONUNBUFFERED=1 \
	python3 "$root/tests/gpu/train.py" --seconds 60 --import-profiler >"$OUT/train2.log" 2>&1 &
t2pid=$!
for i in $(seq 300); do
	ctl --json list --job 4343 2>/dev/null | grep -q '"kind":.*"kineto"' && break
	sleep 0.1
done
sleep 2
# Twice: the first request to a fresh process is primed by gprofd (Kineto
# initialises its profiler lazily), the second finds it warm.
for attempt in 1 2; do
	s=$(now)
	ctl --json trace --job 4343 --iterations 5 --iteration-roundup 1 --output-dir "$work/out-it2-$attempt" \
		--timeout 60 >"$OUT/iterations2-$attempt.json" 2>&1
	log "iterations, torch.profiler imported, request $attempt: gprofctl exit $? after $(awk "BEGIN{print $(now) - $s}") s"
	for f in $(find "$work/out-it2-$attempt" -name '*.gz'); do steps_of "$f"; done
done
kill $t2pid 2>/dev/null; wait $t2pid 2>/dev/null

# dyno-format request over TCP, exactly as the dyno client frames it
s=$(now)
python3 - >"$OUT/dyno.txt" 2>&1 <<'PY'
import json, socket, struct
body = ('\n{\n    "fn": "setKinetOnDemandRequest",\n    "config": "ACTIVITIES_LOG_FILE=/tmp/dyno.json\\n'
        'PROFILE_START_TIME=0\\nACTIVITIES_DURATION_MSECS=300",\n    "job_id": 4242,\n'
        '    "pids": [0],\n    "process_limit": 3\n}').encode()
s = socket.create_connection(("127.0.0.1", 1778))
s.sendall(struct.pack("=i", len(body)) + body)
n = struct.unpack("=i", s.recv(4, socket.MSG_WAITALL))[0]
print(s.recv(n, socket.MSG_WAITALL).decode())
PY
log "dyno setKinetOnDemandRequest reply: $(cat "$OUT/dyno.txt")"
tid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("traceId",""))' "$OUT/dyno.txt" 2>/dev/null)
if [ -n "$tid" ]; then
	for i in $(seq 200); do
		ctl fetch "$tid" --output-dir "$work/out-dyno" >/dev/null 2>&1 && break
		sleep 0.1
	done
	log "dyno trace $tid fetched after $(awk "BEGIN{print $(now) - $s}") s"
	for f in $(find "$work/out-dyno" -name '*.gz'); do
		python3 "$root/tests/gpu/check_trace.py" "$f" | tee "$OUT/dyno-check.json" | head -12
	done
fi
ctl status | tee -a "$OUT/summary.txt"
kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
tail -3 "$OUT/train.log" | tee -a "$OUT/summary.txt"
kill $gpid; wait $gpid
log "gprofd exit status $?"
