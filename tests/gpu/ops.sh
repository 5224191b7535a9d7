#!/usr/bin/env bash
# tests/gpu/ops.sh: PyTorch operators on the agent path (issue 27) on a GPU
# host, building nothing (prepare with tests/gpu/prepare.sh, carry .devlibs).
#
# Cost: bench/capture_overhead.py in one process per width (2048, 256) and
# round (OPS_ROUNDS, default 6: each torch config in 3): steps before, during and after each window
# (OPS_WINDOW steps, default 120), the agent's configs (OPS_CONFIGS)
# interleaved OPS_REPEAT times, then torch.profiler (OPS_TORCH, default
# "torch-cpu torch-cpu-shapes"), one config per process (round r takes the
# r-th, in turn; OPS_TORCH_PER_ROUND=2 runs both, the first one counted):
# once torch.profiler has run, a process's steps stay slower, so only its
# first window is measured against untraced steps (ops_check.py uses that
# one alone, and prints the lasting cost from a window with nothing after
# it). OPS_TORCH_REPEAT (default 1) repeats the torch windows.
#   none                              nothing (chance drift)
#   agent+GPROF_TORCH_OPS=off         the agent without operators
#   agent+GPROF_TORCH_OPS=observer    operators from the observer (the default;
#                                     build it first: python3 -m gprof_agent.build_ops,
#                                     with the same TORCH_EXTENSIONS_DIR)
#   agent+GPROF_TORCH_OPS=observer+GPROF_TORCH_OPTS=shapes   with input shapes
#   agent+GPROF_TORCH_OPS=kineto-cpu  operators from torch.profiler CPU-only
#   agent+GPROF_TORCH_OPS=legacy      the autograd profiler without Kineto
#                                     (these two only when OPS_CONFIGS names them)
#   torch-cpu, torch-cpu-shapes       torch.profiler CPU+CUDA (+record_shapes), last
# Every window is printed; tests/gpu/ops_check.py prints each config's
# inflation per round and the cost ratio against torch.profiler, and
# validates every agent trace that has operators (cpu_op per step, every
# launch inside an op on its thread, every kernel with its launch), and
# applies HTA's kernel rule to them (tests/tools/hta_rule.py).
# OPS_CPUS pins each process (taskset -c list: a step's time drifts 10-20 %
# between cores and over seconds on these hosts; one core pair steadies it).
# OPS_WIDTHS picks the widths (default "2048 256"); two runs may share a host,
# each on its own GPU (CUDA_VISIBLE_DEVICES) and $OUT.
# Results: $OUT/ops-summary.txt, $OUT/ops.jsonl, two traces ($OUT/ops-*.gz).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gprof-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/.devlibs/lib
B=$root/.devlibs/bin
A=$root/.devlibs/lib/libgprof_agent.so
work=$(mktemp -d)
sock=$work/gprofd.sock
traces=$work/traces
log() { echo "== $*" | tee -a "$OUT/ops-summary.txt"; }

log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
log "$(python3 -c 'import torch; print("torch", torch.__version__)')"
# a Kineto socket name of its own: two of these may run at once (one per GPU)
printf 'kineto:\n  socket_name: gprof-ops-%s\n' "$$" >"$work/gprofd.yaml"
"$B/gprofd" --config "$work/gprofd.yaml" --socket "$sock" --tcp off --metrics off --state-dir "$work/state" -v \
	2>"$OUT/ops-gprofd.log" &
gpid=$!
for i in $(seq 100); do grep -q " running: " "$OUT/ops-gprofd.log" && break; sleep 0.1; done

agent_cfgs=${OPS_CONFIGS:-none,agent+GPROF_TORCH_OPS=off,agent+GPROF_TORCH_OPS=observer,agent+GPROF_TORCH_OPS=observer+GPROF_TORCH_OPTS=shapes}
read -r -a torch_cfgs <<<"${OPS_TORCH:-torch-cpu torch-cpu-shapes}"
rm -f "$OUT/ops.jsonl"
for r in $(seq "${OPS_ROUNDS:-6}"); do
	# this round's torch.profiler configs: the r-th first, in turn
	# (an OPS_CONFIGS that names torch configs itself is run as given)
	cfgs=$agent_cfgs
	case ",$agent_cfgs" in *,torch*) torch_n=0 ;; *) torch_n=${OPS_TORCH_PER_ROUND:-1} ;; esac
	for k in $(seq 0 $((torch_n - 1))); do
		[ "$k" -lt "${#torch_cfgs[@]}" ] || break
		cfgs+=,${torch_cfgs[$(((r - 1 + k) % ${#torch_cfgs[@]}))]}
	done
	for w in ${OPS_WIDTHS:-2048 256}; do
		CUDA_INJECTION64_PATH=$A NVTX_INJECTION64_PATH=$A GPROF_SOCKET=$sock \
			PYTHONPATH=$root/python GPROF_AGENT_TRACE_DIR=$work \
			${OPS_CPUS:+taskset -c "$OPS_CPUS"} python3 "$root/bench/capture_overhead.py" --gprofctl "$B/gprofctl" \
			--out "$OUT/ops.jsonl" --tag "r$r" --width "$w" --window "${OPS_WINDOW:-120}" \
			--repeat "${OPS_REPEAT:-3}" --torch-repeat "${OPS_TORCH_REPEAT:-1}" \
			--configs "$cfgs" 2>&1 | sed "s/^/  r$r w$w /" |
			tee -a "$OUT/ops-summary.txt"
	done
done
# the traces the agent windows left (capture_overhead.py downloads them there)
# (the newest OPS_TRACES, default 8: each holds ~30,000 operators, and
# the two newest are kept in $OUT)
mapfile -t files < <(ls -t /tmp/capture-overhead/*/*.pt.trace.json.gz 2>/dev/null | head -"${OPS_TRACES:-8}")
for f in "${files[@]:0:2}"; do cp "$f" "$OUT/ops-$(basename "$f")"; done
python3 "$root/tests/gpu/ops_check.py" "$OUT/ops.jsonl" "${files[@]}" 2>&1 | tee -a "$OUT/ops-summary.txt"
rc=${PIPESTATUS[0]}
log "ops_check exit status $rc"
# HTA's rule (issue 27): every kernel's launch (cudaLaunchKernel, or the
# driver API's cuLaunchKernelEx of cuBLAS and NCCL) inside a ProfilerStep
python3 "$root/tests/tools/hta_rule.py" "${files[@]}" 2>&1 | tee -a "$OUT/ops-summary.txt"
hta=${PIPESTATUS[0]}
log "hta_rule exit status $hta"
[ "$hta" = 0 ] || rc=1
kill $gpid; wait $gpid
exit "$rc"
