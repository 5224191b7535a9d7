#!/usr/bin/env bash
# tests/gpu/kineto_beside.sh: runs tests/gpu/kineto_beside.py with a gprofd
# of its own and the CUPTI spy (bench/cupti_spy.c, built by prepare.sh into
# .devlibs/lib), printing which CUPTI calls torch.profiler CPU-only made
# while the agent's burst held CUPTI.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$root/.devlibs/lib
B=$root/.devlibs/bin A=$root/.devlibs/lib/libgprof_agent.so
work=$(mktemp -d) sock=$(mktemp -d)/gprofd.sock
"$B/gprofd" --socket "$sock" --state-dir "$work/state" 2>"$work/gprofd.log" &
g=$!
for i in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
CUPTI_SPY_LIB=$(python3 -c 'import torch,glob,os;print((glob.glob(os.path.dirname(torch.__file__)+"/../nvidia/**/libcupti.so*",recursive=True)+[""])[0])')
export CUPTI_SPY_LIB
CUDA_INJECTION64_PATH=$A GPROF_SOCKET=$sock PYTHONPATH=$root/python GPROF_TORCH_STEPS=1 \
	LD_PRELOAD=$root/.devlibs/lib/cupti_spy.so python3 "$root/tests/gpu/kineto_beside.py" \
	"$B/gprofctl" "$sock" "$work/out" 2>"$work/err.txt"
echo "rc $?"
grep -E '^(mode|cupti-spy)' "$work/err.txt" | uniq -c | head -40
grep -v -E '^(mode|cupti-spy)' "$work/err.txt" | tail -15
kill $g; wait $g
