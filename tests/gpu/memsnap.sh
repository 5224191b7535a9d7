#!/usr/bin/env bash
# tests/gpu/memsnap.sh: memory snapshots on demand (issue 27) with real
# PyTorch on a GPU host. Prepare as for run.sh (tests/gpu/prepare.sh here,
# carry .devlibs); results and logs go to $OUT. It checks, and prints as
# "== ok:" or "== FAIL:" lines:
#  1. gprofctl trace --iterations 5 --memory-snapshot on an agent-loaded
#     training loop (tests/gpu/memsnap_train.py, GPROF_TORCH_STEPS=1) exits 0
#     with one file, named *_rank0.*.memory.pickle;
#  2. PyTorch's own viewer takes that file as it is: python -m
#     torch.cuda._memory_viz trace_plot (an HTML page) and stats;
#  3. gprofctl report on it: peak, reserved and fragmentation equal a replay
#     of the same file in Python; growth 1 MiB per iteration (the job's
#     leak); leaky() among the largest live allocations;
#  4. a torch.profiler trace with profile_memory=True: gprofctl report's
#     peak from its [memory] events equals torch.cuda.max_memory_allocated
#     over the same steps;
#  5. the job still steps after the snapshot (recording is off again);
#  6. gprofctl trace --profile-memory on the same job: [memory] events in
#     the agent's trace, the report's growth 1 MiB per iteration, and per
#     step the same allocations, frees and bytes as torch.profiler's
#     (tests/gpu/memevents_compare.py against step 4's trace).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gprof-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/.devlibs/lib
ldconfig -p | grep -q 'libssl.so.3 ' || LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$root/.devlibs/lib-ssl
B=$root/.devlibs/bin
A=$root/.devlibs/lib/libgprof_agent.so
work=$(mktemp -d)
sock=$work/gprofd.sock
ctl() { "$B/gprofctl" --socket "$sock" "$@"; }
ok() { echo "== ok: $*" | tee -a "$OUT/memsnap-summary.txt"; }
bad() { echo "== FAIL: $*" | tee -a "$OUT/memsnap-summary.txt"; fails=$((fails + 1)); }
fails=0

echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" \
	| tee "$OUT/memsnap-summary.txt"
python3 -c 'import torch; print("== torch", torch.__version__)' | tee -a "$OUT/memsnap-summary.txt"
"$B/gprofd" --socket "$sock" --tcp off --metrics off --state-dir "$work/state" -v \
	2>"$OUT/memsnap-gprofd.log" &
gpid=$!
for i in $(seq 100); do grep -q " running: " "$OUT/memsnap-gprofd.log" && break; sleep 0.1; done

env CUDA_INJECTION64_PATH=$A GPROF_SOCKET=$sock GPROF_JOB_ID=memgpu RANK=0 WORLD_SIZE=1 \
	PYTHONPATH=$root/python GPROF_TORCH_STEPS=1 GPROF_AGENT_LOG=$OUT/memsnap-agent.log \
	python3 "$root/tests/gpu/memsnap_train.py" --seconds 90 >"$OUT/memsnap-train.log" 2>&1 &
jpid=$!
for i in $(seq 600); do
	ctl --json list --job memgpu 2>/dev/null | python3 -c \
		'import json,sys; p=json.load(sys.stdin)["processes"]; sys.exit(0 if p and p[0]["steps"] > 50 else 1)' \
		&& break
	sleep 0.1
done

# 1. the snapshot
ctl --json trace --job memgpu --iterations 5 --iteration-roundup 50 --memory-snapshot --output-dir "$work/out" \
	--timeout 120 >"$OUT/memsnap-trace.json" 2>"$OUT/memsnap-trace.err"
rc=$?
f=$(find "$work/out" -name '*.memory.pickle' | head -1)
if [ $rc -eq 0 ] && [ -n "$f" ] && [[ $(basename "$f") == *_rank0.*.memory.pickle ]]; then
	ok "gprofctl trace --memory-snapshot exit 0: $(basename "$f") ($(stat -c %s "$f") bytes)"
	cp "$f" "$OUT/snapshot.memory.pickle"
else
	bad "gprofctl trace --memory-snapshot exit $rc, file '$f'"; cat "$OUT/memsnap-trace.json" "$OUT/memsnap-trace.err"
fi

# 2. PyTorch's viewer, on the file as it is
if [ -n "$f" ]; then
	if python3 -m torch.cuda._memory_viz trace_plot "$f" -o "$OUT/memsnap.html" \
		&& [ "$(stat -c %s "$OUT/memsnap.html")" -gt 1000 ]; then
		ok "python -m torch.cuda._memory_viz trace_plot: $(stat -c %s "$OUT/memsnap.html") bytes of HTML"
	else
		bad "torch.cuda._memory_viz trace_plot could not open the snapshot"
	fi
	if python3 -m torch.cuda._memory_viz stats "$f" >"$OUT/memsnap-stats.txt" 2>&1; then
		ok "python -m torch.cuda._memory_viz stats: $(grep total_reserved "$OUT/memsnap-stats.txt")"
	else
		bad "torch.cuda._memory_viz stats failed: $(tail -3 "$OUT/memsnap-stats.txt")"
	fi

	# 3. gprofctl report against a replay in Python
	ctl report "$f" >"$OUT/memsnap-report.txt" 2>&1
	ctl --json report "$f" >"$OUT/memsnap-report.json" 2>>"$OUT/memsnap-report.txt"
	python3 - "$f" "$OUT/memsnap-report.json" <<'PY' 2>&1 | tee -a "$OUT/memsnap-summary.txt"
import json, pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))
rep = json.load(open(sys.argv[2]))["memory"][0]
MiB = 1 << 20
for dev in rep["devices"]:
    i = dev["device"]
    segs = [s for s in snap["segments"] if s.get("device", 0) == i]
    a = sum(b["size"] for s in segs for b in s["blocks"] if b["state"].startswith("active"))
    r = sum(s["total_size"] for s in segs)
    ev = snap["device_traces"][i]
    sign = {"alloc": 1, "free_completed": -1}
    rsign = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
    a -= sum(sign.get(e["action"], 0) * e["size"] for e in ev)
    r -= sum(rsign.get(e["action"], 0) * e["size"] for e in ev)
    peak, rp, pr = a, r, r
    for e in ev:
        a += sign.get(e["action"], 0) * e["size"]
        r += rsign.get(e["action"], 0) * e["size"]
        pr = max(pr, r)
        if a > peak:
            peak, rp = a, r
    same = (dev["peak_allocated"], dev["reserved_at_peak"], dev["peak_reserved"]) == (peak, rp, pr)
    print("== %s: GPU %d peak %d reserved %d (report %d %d), peak reserved %d (report %d)" % (
        "ok" if same else "FAIL", i, peak, rp, dev["peak_allocated"], dev["reserved_at_peak"], pr,
        dev["peak_reserved"]))
    g = dev["growth_per_iteration"]
    print("== %s: growth per iteration %s (the job leaks 1 MiB a step); iterations %s" % (
        "ok" if g == MiB else "FAIL", g, [(x["allocations"], x["growth"]) for x in dev["iterations"]]))
    where = [t["where"] for t in dev["top"]]
    print("== %s: largest live at the peak: %s" % (
        "ok" if any("leaky" in w for w in where) else "FAIL (no leaky())", where[:5]))
PY
fi

# 6a. [memory] events on the agent path (gprofctl trace --profile-memory),
# on the same steps of 50 as the snapshot (the leak list is cut at 25)
ctl --json trace --job memgpu --iterations 5 --iteration-roundup 50 --profile-memory \
	--output-dir "$work/out-mem" --timeout 120 >"$OUT/memevents-trace.json" 2>"$OUT/memevents-trace.err"
rc=$?
mf=$(find "$work/out-mem" -name '*.pt.trace.json.gz' | head -1)
if [ $rc -eq 0 ] && [ -n "$mf" ]; then
	ok "gprofctl trace --profile-memory exit 0: $(basename "$mf"), $(zcat "$mf" | grep -o '"\[memory\]"' | wc -l) [memory] events"
	cp "$mf" "$OUT/memevents-agent.pt.trace.json.gz"
	ctl --json report "$mf" >"$OUT/memevents-report.json" 2>&1
	g=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["memory"][0]["devices"][0]["growth_per_iteration"])' \
		"$OUT/memevents-report.json" 2>/dev/null)
	[ "$g" = 1048576 ] && ok "report on the agent's [memory] events: growth $g B per iteration (the job's leak)" \
		|| bad "report on the agent's [memory] events: growth per iteration '$g', want 1048576"
else
	bad "gprofctl trace --profile-memory exit $rc, file '$mf'"; cat "$OUT/memevents-trace.json" "$OUT/memevents-trace.err"
fi

# 5. the job steps on, with recording off again
s1=$(ctl --json list --job memgpu | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["steps"])')
sleep 2
s2=$(ctl --json list --job memgpu | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["steps"])')
[ "$s2" -gt "$s1" ] && ok "the job steps on after the snapshot ($s1 -> $s2)" || bad "the job stopped stepping ($s1 -> $s2)"
kill $jpid 2>/dev/null; wait $jpid 2>/dev/null

# 4. Kineto's [memory] events
peak=$(python3 "$root/tests/gpu/memsnap_train.py" --profile-memory --out "$work/mem.pt.trace.json" \
	2>"$OUT/memsnap-profile.log" | awk '/^peak/ {print $2}')
cp "$work/mem.pt.trace.json" "$OUT/" 2>/dev/null
ctl --json report "$work/mem.pt.trace.json" >"$OUT/memsnap-kineto-report.json" 2>&1
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["memory"][0]["devices"][0]["peak_allocated"])' \
	"$OUT/memsnap-kineto-report.json" 2>/dev/null)
if [ -n "$peak" ] && [ "$got" = "$peak" ]; then
	ok "profile_memory trace: report peak $got = torch.cuda.max_memory_allocated"
else
	bad "profile_memory trace: report peak '$got', torch.cuda.max_memory_allocated '$peak'"
fi
ctl report "$work/mem.pt.trace.json" | sed -n '/== memory/,$p' >>"$OUT/memsnap-report.txt"

# 6b. the agent's [memory] events against torch.profiler's, per step
if [ -n "${mf:-}" ] && [ -f "$work/mem.pt.trace.json" ]; then
	python3 "$root/tests/gpu/memevents_compare.py" "$OUT/memevents-agent.pt.trace.json.gz" \
		"$work/mem.pt.trace.json" >"$OUT/memevents-compare.txt" 2>&1
	r=$?
	sed -n '/^per step/,$p' "$OUT/memevents-compare.txt" | tee -a "$OUT/memsnap-summary.txt"
	[ $r -eq 0 ] || fails=$((fails + 1))
fi

kill $gpid; wait $gpid 2>/dev/null
rm -rf "$work"
echo "== memsnap: $fails failed" | tee -a "$OUT/memsnap-summary.txt"
exit $((fails > 0))
