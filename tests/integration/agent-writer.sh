#!/usr/bin/env bash
# agent-writer.sh BENCH_WRITER VALIDATE_TRACE: the agent's CUPTI-to-trace
# path (gpu.c + writer.c) in CI without a GPU. First a burst while another
# tool holds CUPTI, which must be refused with that tool's name. bench-writer feeds it 2000
# launches from the stand-in libcupti (1600 kernels, 200 copies, 200 sets,
# each with its runtime call); the trace must validate and hold exactly
# those events, each GPU event joined to its launch by a flow.
set -euo pipefail
bench=$1 validate=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# another tool holding CUPTI: the burst is refused with its name
if FAKE_CUPTI_HELD="Nsight Systems" GPROF_SOCKET=$dir/none.sock "$bench" 10 "$dir/x.json.gz" 1 \
	>"$dir/held.txt" 2>&1; then
	echo "agent-writer: a burst started although another tool held CUPTI"; exit 1
fi
grep -q "CUPTI is held by another tool (Nsight Systems)" "$dir/held.txt" ||
	{ echo "agent-writer: the refusal does not name the holder:"; cat "$dir/held.txt"; exit 1; }
GPROF_SOCKET=$dir/none.sock "$bench" 2000 "$dir/t.pt.trace.json.gz" 1 >"$dir/out.txt"
python3 "$validate" "$dir/t.pt.trace.json.gz" --min-kernels 1600 >"$dir/summary.json"
python3 - "$dir/t.pt.trace.json.gz" <<'PY'
import collections, gzip, json, sys
d = json.load(gzip.open(sys.argv[1], "rt"))
ev = d["traceEvents"]
c = collections.Counter(e.get("cat") for e in ev)
want = {"kernel": 1600, "gpu_memcpy": 200, "gpu_memset": 200, "cuda_runtime": 2000, "ac2g": 4000}
bad = {k: (c.get(k, 0), v) for k, v in want.items() if c.get(k, 0) != v}
names = collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime")
if names != {"cudaLaunchKernel": 1600, "cudaMemcpyAsync": 200, "cudaMemsetAsync": 200}:
    bad["runtime names"] = dict(names)
cp = [e for e in ev if e.get("cat") == "gpu_memcpy"][0]
if cp["name"] != "Memcpy HtoD (Pinned -> Device)" or cp["args"]["bytes"] != 1 << 20:
    bad["memcpy"] = cp
if d["gprof_dropped_records"] != 0 or d["gprof_trace_cut"] is not False:
    bad["dropped/cut"] = (d["gprof_dropped_records"], d["gprof_trace_cut"])
if bad:
    print("agent-writer: unexpected trace content: %s" % bad)
    sys.exit(1)
print("agent-writer: 2000 launches -> %d events, all expected" % len(ev))
PY
