#!/usr/bin/env bash
# tests/gpu/run.sh: every GPU check of gprofd in one call, building nothing
# (prepare with tests/gpu/prepare.sh here, carry .devlibs). Results and
# logs go to $OUT; docs/gpu-validation.md records what a run showed.
#
# Sections (by default agent held stress overhead cupti metrics kineto kineto5
# compile graphs; SECTIONS="metrics kineto" picks; "name@2" runs
# one with CUDA_VISIBLE_DEVICES=2, "name&" beside the next ones):
#   agent   libgprof_agent injected: the CUDA C workload (exact events per
#           iteration, flows, latency), a PyTorch loop (kernels per iteration
#           vs torch.profiler, overhead idle/capture/after, torch.profiler
#           working after our bursts); tests/gpu/agent_check.py judges.
#   held    the agent asked for a capture while torch.profiler holds CUPTI
#           (refused, naming the holder), then again after it ended (still
#           refused: PyTorch keeps its CUPTI subscription).
#   metrics NVML values against nvidia-smi, idle and under a matmul loop;
#           an agent-loaded loop's step time as gprofd exports it; the
#           sampling cost with NVML (bench/bench-metrics.py).
#   kineto5 the same loop with Kineto's default 5 s poll interval: first and
#           second iteration requests and a duration request, timed.
#   stress  the agent under random requests (tests/integration/
#           test-stress.py: STRESS_BURSTS each, gaps 0-STRESS_GAP_MS ms,
#           STRESS_ARGS more of its options (--op-budget-s S: a time cap),
#           cancels, concurrent and dyno requests, daemon restarts) to the
#           programs in STRESS_PROGRAMS: cuda (stress.cu, ~15,000
#           iterations/s), torch (stress_train.py, AdamW) and sanitizer
#           (stress.cu under compute-sanitizer); one after the other, or at
#           once with STRESS_PARALLEL=1. Exit status by waitpid, every
#           request delivered or ended as asked, the longest stall.
#   variants the CUDA C stress once per entry of STRESS_VARIANTS
#           ("label;K=V,K=V;activities ..."), to tell which setting a
#           failure needs (CUPTI=wheel: PyTorch's libcupti).
#   repro   the CUDA C stress with the agent in .devlibs/lib-old (an
#           earlier build: OLD_AGENT=... tests/gpu/prepare.sh).
#   overhead in-process step-time inflation of captures (bench/
#           capture_overhead.py): OVERHEAD_CONFIGS interleaved
#           OVERHEAD_REPEAT times in each of OVERHEAD_ROUNDS processes, at
#           width 2048 and 256 (OVERHEAD_SKIP_2048, OVERHEAD_SKIP_256),
#           torch.profiler last (OVERHEAD_TORCH_REPEAT windows of it, each
#           after one with nothing); OVERHEAD_ENVS="- K=V,K=V ..." runs one
#           process per environment set per round; then the idle agent
#           against no agent, IDLE_ROUNDS process pairs.
#   afterburst bench/after_burst.py: a step's median over the 2,000 steps
#           after one capture against the 2,000 before, one process per
#           round and configuration (AB_CONFIGS, e.g. "none,burst,
#           burst:GPROF_CUPTI_RELEASE=teardown"), PyTorch widths 2048 and
#           256 and a CUDA C loop (AB_LOOPS), AB_ROUNDS rounds;
#           AB_MODE=pair runs a round's configurations at once, one GPU
#           each (AB_GPUS, default 0,1), told "over" together;
#           AB_MODE=alternate runs the two on one GPU and CPU set in
#           turns (a pair per AB_GPUS entry at once); AB_CORES="4-9;10-15"
#           pins each slot to its CPUs (bench/after_burst.py says more).
#   twincost what a capture costs during its window, against an identical
#           untraced twin (the agent loaded) taking turns with it on the same
#           GPU and core (bench/after_burst.py --alternate, a pair per
#           configuration): the agent's default without operators, kernel
#           records alone (the floor), with operators, torch.profiler CUDA
#           only and CPU+CUDA; TC_LOOPS (torch256,torch2048; cuda for the
#           CUDA C loop, agent configurations only), TC_CONFIGS (";"
#           between configurations: after_burst.py's names), TC_ROUNDS
#           (4), TC_WINDOW (200 steps), TC_GPUS/TC_CORES (three pairs at
#           once on GPU 0, cores 4, 8, 12).
#   cupti   bench/cupti_cost: what each way of recording with CUPTI costs a
#           launching thread per CUDA call, in a CUDA C loop with no agent
#           (bench/cupti_cost.py: a process per configuration and round;
#           CUPTI_COST_ARGS, default --rounds 5)..
#   ddp     multi-GPU jobs (2 GPUs: device kind nvidia-h200-x2): a DDP loop
#           (tests/gpu/ddp_train.py, NCCL, rank 1 a deliberate straggler)
#           under torchrun with the agent (gprofctl launch run from the
#           build-tree layout in .devlibs), under torchrun with stock
#           Kineto (KINETO_USE_DAEMON=1), and under mp.spawn with the
#           agent: one trace request each, every rank delivered, the
#           launcher left out, tests/gpu/ddp_check.py judges the traces;
#           the same loop sharded with FSDP2 (fully_shard) with the agent
#           and with Kineto (DDP_CASES picks: agent spawn kineto fsdp-agent
#           fsdp-kineto); gprofctl report must name rank 1 the straggler;
#           HTA's breakdowns on each rank directory (.hta carried);
#           DDP_STRESS=N: N back-to-back requests to both ranks of the
#           agent DDP job (tests/gpu/ddp_stress.py) before it stops;
#           DDP_NPROC ranks (default 2: one per GPU) under torchrun.
#   defaultops a plain gprofctl trace (no operator option) to an agent-loaded
#           PyTorch loop (tests/gpu/default_ops.py), before the operator
#           observer is built (no operators, the note says how) and after
#           (every step's operators); both times the job's own torch.profiler
#           still records CUDA afterwards and the losses are an untraced run's.
#   ddpcost what one capture of 200 iterations costs each rank of the DDP
#           job (tests/gpu/ddp_cost.py, from ddp_train.py --block-times:
#           20-step blocks before, inside and after the window): untraced
#           (the agent loaded), the agent, stock Kineto; DDPCOST_ROUNDS
#           rounds, DDPCOST_ARGS more ddp_train.py options (--fsdp);
#           DDPCOST_BEFORE_S, DDPCOST_AFTER_S (5, 6): seconds of steps
#           before and after the request, DDPCOST_NONE_S (0.75) the
#           untraced run's stand-in window (a 200-step window's length).
#   report  real traces of one loop with the usual bottlenecks (tests/gpu/
#           report_train.py: DataLoader, pageable copies, tiny kernels,
#           .item()): torch.profiler's and the agent's, for gprofctl
#           report's fixtures, and what gprofctl report says of them.
#   compile a torch.compile'd loop (tests/gpu/compile_train.py: Inductor's
#           Triton kernels; then mode reduce-overhead, CUDA graphs) with
#           the agent (gprofctl launch) and with stock Kineto: 5
#           iterations each, tests/gpu/compile_check.py judges (Triton
#           kernels, every GPU record with its launch, graph replays).
#   graphs  tests/gpu/graphs_check.py: a torch.compile reduce-overhead loop
#           (CUDA graph replays) through 3 bursts each with the default
#           release and with unsubscribe, idle, the loop without graphs,
#           torch.profiler itself on it; its own gprofd. GRAPHS_VARIANTS
#           picks; graphs-teardown (GPROF_CUPTI_GRAPHS=teardown) is the
#           experiment that died, the reason for the rule (docs/AGENT.md).
#   kineto  stock PyTorch with KINETO_USE_DAEMON=1 and no agent: iteration
#           traces (a training loop, one still starting, one that never
#           steps), a duration trace, a dyno-format request over TCP, each
#           timed from request to trace on disk.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gprof-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/.devlibs/lib
B=$root/.devlibs/bin
# Debian's OpenSSL 3 only where the host has none (prepare.sh)
ldconfig -p | grep -q 'libssl.so.3 ' || LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$root/.devlibs/lib-ssl
if ldd "$B/gprofd" "$B/gprofctl" | grep -q "not found"; then
	echo "== FAIL: libraries missing (run tests/gpu/prepare.sh here and carry .devlibs):" >&2
	ldd "$B/gprofd" "$B/gprofctl" | grep "not found" >&2
	exit 1
fi
work=$(mktemp -d)
sock=$work/gprofd.sock
ctl() { "$B/gprofctl" --socket "$sock" "$@"; }
now() { date +%s.%N; }
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
log "$(python3 -c 'import torch; print("torch", torch.__version__)')"

"$B/gprofd" --socket "$sock" --tcp 127.0.0.1:1778 --metrics 127.0.0.1:0 --state-dir "$work/state" -v \
	2>"$OUT/gprofd.log" &
gpid=$!
for i in $(seq 100); do grep -q " running: " "$OUT/gprofd.log" && break; sleep 0.1; done
grep -q "serving Kineto clients" "$OUT/gprofd.log" || { log "FAIL: the Kineto endpoint did not start"; cat "$OUT/gprofd.log"; exit 1; }


# ---- the agent (issue 4) ----
agent_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so
	local inj="CUDA_INJECTION64_PATH=$A NVTX_INJECTION64_PATH=$A GPROF_SOCKET=$sock"
	local ctl_dir=$work/ctl f f200 s e
	mkdir -p "$ctl_dir"
	first() { find "$1" -name '*.pt.trace.json.gz' | head -1; }
	wait_reg() { for i in $(seq 300); do ctl list --job "$1" 2>/dev/null | grep -q agent && return 0; sleep 0.1; done; return 1; }

	# 1. The CUDA C workload: exact events per iteration ("iteration" ranges)
	# memset beside memcpy allowed (docs/AGENT.md): the check counts both
	env $inj GPROF_JOB_ID=cw GPROF_AGENT_LOG=$OUT/agent-workload.log GPROF_CUPTI_MEMSET_WITH_MEMCPY=1 \
		"$B/workload" 60 >"$OUT/workload.log" 2>&1 &
	local wpid=$!
	wait_reg cw || log "FAIL: the workload did not register"
	s=$(date +%s%N)
	# memset is not a default activity: asked for, as the check counts it
	ctl trace --job cw --iterations 5 --iteration-range iteration --iteration-roundup 1 \
		--activities kernel,memcpy,memset,cuda_runtime,nvtx \
		--output-dir "$work/out-cw" --timeout 60 >"$OUT/cw.txt" 2>&1
	log "workload 5 iterations: gprofctl exit $? after $((($(date +%s%N) - s) / 1000000)) ms"
	f=$(first "$work/out-cw"); cp "$f" "$OUT/workload.pt.trace.json.gz"
	python3 "$root/tests/gpu/agent_check.py" workload "$f" 2>&1 | tee -a "$OUT/summary.txt"
	python3 "$root/tests/tools/validate_trace.py" "$f" >"$OUT/workload-validate.json" 2>&1
	for n in 1 2 3; do
		s=$(date +%s%N)
		ctl trace --job cw --duration-ms 200 --output-dir "$work/out-cwd$n" --timeout 60 >"$OUT/cwd.txt" 2>&1
		e=$(date +%s%N)
		f=$(first "$work/out-cwd$n"); cp "$f" "$OUT/workload-duration$n.pt.trace.json.gz"
		python3 "$root/tests/gpu/agent_check.py" latency "$f" "$s" "$e" 2>&1 | tee -a "$OUT/summary.txt"
	done
	# a later burst in the same process is as exact as the first
	ctl trace --job cw --iterations 5 --iteration-range iteration --iteration-roundup 1 \
		--activities kernel,memcpy,memset,cuda_runtime,nvtx \
		--output-dir "$work/out-cw2" --timeout 60 >"$OUT/cw2.txt" 2>&1
	f=$(first "$work/out-cw2"); cp "$f" "$OUT/workload-again.pt.trace.json.gz"
	python3 "$root/tests/gpu/agent_check.py" workload "$f" 2>&1 | tail -3 | tee -a "$OUT/summary.txt"
	kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
	tail -1 "$OUT/workload.log" | tee -a "$OUT/summary.txt"
	[ -z "${AGENT_WORKLOAD_ONLY:-}" ] || return 0 # the CUDA C workload's checks alone

	# 2. PyTorch: baseline (no agent) and idle agent, interleaved
	for n in 1 2 3; do
		PYTHONPATH=$root/python python3 "$root/tests/gpu/agent_train.py" --width 4096 --only-idle --ctl "$ctl_dir" \
			--out "$OUT" --tag noagent-$n \
			>>"$OUT/agent-train-idle.log" 2>&1
		env $inj PYTHONPATH=$root/python GPROF_JOB_ID=idle$n python3 "$root/tests/gpu/agent_train.py" \
			--width 4096 --only-idle --ctl "$ctl_dir" --out "$OUT" --tag idle-$n >>"$OUT/agent-train-idle.log" 2>&1
	done
	# the phases: traces taken while the loop waits at go1 and go2; once
	# with each policy for giving CUPTI back (unsubscribe is the default)
	for policy in finalize unsubscribe; do
		rm -f "$ctl_dir"/*
		env $inj PYTHONPATH=$root/python GPROF_JOB_ID=pt-$policy RANK=0 WORLD_SIZE=1 \
			GPROF_CUPTI_RELEASE=$policy GPROF_AGENT_LOG=$OUT/agent-train-$policy.log PYTHONUNBUFFERED=1 \
			python3 "$root/tests/gpu/agent_train.py" --width 4096 --ctl "$ctl_dir" --out "$OUT" --tag $policy \
			>"$OUT/agent-train-$policy.out" 2>&1 &
		local ppid=$!
		for i in $(seq 600); do [ -e "$ctl_dir/ready-go1" ] && break; sleep 0.1; done
		s=$(date +%s%N)
		ctl trace --job pt-$policy --iterations 5 --iteration-roundup 1 --output-dir "$work/out-pt5-$policy" \
			--timeout 60 >"$OUT/pt5-$policy.txt" 2>&1
		log "PyTorch 5 iterations ($policy): gprofctl exit $? after $((($(date +%s%N) - s) / 1000000)) ms"
		f=$(first "$work/out-pt5-$policy"); cp "$f" "$OUT/pytorch5-$policy.pt.trace.json.gz"
		touch "$ctl_dir/go1"
		for i in $(seq 600); do [ -e "$ctl_dir/ready-go2" ] && break; sleep 0.1; done
		ctl trace --job pt-$policy --iterations 200 --iteration-roundup 1 --output-dir "$work/out-pt200-$policy" \
			--timeout 120 >"$OUT/pt200-$policy.txt" 2>&1
		log "PyTorch 200 iterations ($policy): gprofctl exit $?"
		f200=$(first "$work/out-pt200-$policy")
		touch "$ctl_dir/go2"
		wait $ppid
		grep "median\|done" "$OUT/agent-train-$policy.out" | tee -a "$OUT/summary.txt"
		python3 "$root/tests/gpu/agent_check.py" compare "$f" "$OUT/torch_cuda.json" 2>&1 | tee -a "$OUT/summary.txt"
		python3 "$root/tests/tools/validate_trace.py" "$f" --steps 5 --rank 0 --quiet 2>&1 | tee -a "$OUT/summary.txt"
		python3 "$root/tests/gpu/agent_check.py" overhead "$OUT" "$f200" $policy 2>&1 | tee -a "$OUT/summary.txt"
	done
	grep -h "refused\|kept\|delivered" "$OUT"/agent-*.log | tail -5 | tee -a "$OUT/summary.txt"
}

# ---- CUPTI held by torch.profiler: the agent refuses and names it ----
held_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so
	local held_py='
import gprof_agent, torch, sys
m = torch.nn.Linear(1024, 1024).cuda(); x = torch.randn(64, 1024, device="cuda")
o = torch.optim.SGD(m.parameters(), lr=1e-3)
def step():
    o.zero_grad(); m(x).sum().backward(); o.step(); torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
    print("profiling", flush=True)
    for i in range(4000): step()
print("released", flush=True)
for i in range(100000): step()
'
	env CUDA_INJECTION64_PATH=$A GPROF_SOCKET=$sock GPROF_JOB_ID=held PYTHONPATH=$root/python \
		GPROF_AGENT_LOG=$OUT/agent-held.log python3 -c "$held_py" >"$OUT/held.out" 2>&1 &
	local hp=$!
	for i in $(seq 300); do grep -q profiling "$OUT/held.out" && break; sleep 0.1; done
	ctl trace --job held --iterations 5 --iteration-roundup 1 --output-dir "$work/out-held" --timeout 30 \
		>"$OUT/held1.txt" 2>&1
	log "while torch.profiler runs: gprofctl exit $?: $(grep -o "CUPTI is held[^;]*" "$OUT/held1.txt" | head -1)"
	for i in $(seq 600); do grep -q released "$OUT/held.out" && break; sleep 0.1; done
	ctl trace --job held --iterations 5 --iteration-roundup 1 --output-dir "$work/out-held2" --timeout 30 \
		>"$OUT/held2.txt" 2>&1
	log "after torch.profiler ended: gprofctl exit $? (Kineto keeps CUPTI: $(grep -c "held by another" "$OUT/held2.txt") refusal)"
	kill $hp 2>/dev/null; wait $hp 2>/dev/null
}

# ---- always-on metrics (issue 6) ----
metrics_checks() {
	local port
	port=$(grep -o "metrics on http://[0-9.]*:[0-9]*" "$OUT/gprofd.log" | grep -o "[0-9]*$")
	python3 "$root/tests/gpu/metrics_check.py" "$port" "$sock" "$root/.devlibs/lib/libgprof_agent.so" \
		"$root/python" 2>&1 | tee -a "$OUT/summary.txt"
	python3 "$root/tests/gpu/nvml_timing.py" 2>&1 | tee -a "$OUT/summary.txt"
	# the cost of sampling with NVML on this host (a second daemon, 45 s each,
	# in the steady state: a 10 s history ring is full after 10 s)
	python3 "$root/bench/bench-metrics.py" "$B/gprofd" --seconds 45 --history 10s 2>&1 | \
		tee -a "$OUT/summary.txt"
	python3 "$root/bench/bench-metrics.py" "$B/gprofd" --seconds 45 --history 10s --nvml /nonexistent 2>&1 | \
		tee -a "$OUT/summary.txt"
}

# ---- stock PyTorch through Kineto's IPC fabric (issue 7) ----
steps_of() { # a trace file: kernels, training steps, ProfilerStep#, kernel span
	python3 - "$1" <<-'PY' | tee -a "$OUT/summary.txt"
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
ask() { # job, name, gprofctl trace arguments...: one timed request, its note and steps
	local job=$1 name=$2 s; shift 2
	s=$(now)
	ctl --json trace --job "$job" "$@" --output-dir "$work/out-$name" >"$OUT/$name.json" 2>&1
	log "$name: gprofctl exit $? after $(awk "BEGIN{print $(now) - $s}") s (asked at $s)"
	grep -o '"note":[^}]*' "$OUT/$name.json" | head -2 | sed 's/^/  /' | tee -a "$OUT/summary.txt"
	for f in $(find "$work/out-$name" -name '*.gz'); do steps_of "$f"; cp "$f" "$OUT/$name.pt.trace.json.gz"; done
}
kineto_checks() {
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
			python3 "$root/tests/tools/validate_trace.py" "$f" --quiet 2>&1 | head -5 | sed 's/^/  /' | tee -a "$OUT/summary.txt"
			cp "$f" "$OUT/$name.pt.trace.json.gz" 2>/dev/null
		done
		[ $rc -eq 0 ] || cat "$OUT/$name.json" "$OUT/$name.err"
	}
	run_trace iterations --iterations 5 --iteration-roundup 1
	run_trace duration --duration-ms 500

	# A second process, asked while it is still starting (importing torch,
	# building the model): it reports no step yet, so gprofd offers the
	# iteration config at each poll until Kineto takes it.
	start_loop() { # job, log, extra arguments
		local job=$1 lg=$2; shift 2
		KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=$job PYTHONUNBUFFERED=1 \
			python3 "$root/tests/gpu/train.py" "$@" >"$OUT/$lg" 2>&1 &
		lpid=$!
		for i in $(seq 300); do
			ctl --json list --job "$job" 2>/dev/null | grep -q '"kind":.*"kineto"' && break
			sleep 0.1
		done
	}
	start_loop 4343 train2.log --seconds 60 --import-profiler
	ask 4343 starting-1 --iterations 5 --iteration-roundup 1 --timeout 90
	grep "training started" "$OUT/train2.log" | sed 's/^/  /' | tee -a "$OUT/summary.txt"
	ask 4343 starting-2 --iterations 5 --iteration-roundup 1 --timeout 60
	kill $lpid 2>/dev/null; wait $lpid 2>/dev/null

	# A process that never steps (inference): the iteration config waits
	# min(kineto.step_wait 30 s, max(timeout - 20 s, timeout / 2)) = 20 s,
	# then Kineto's 500 ms fallback.
	start_loop 4444 infer.log --seconds 90 --forward-only
	grep -q "training started" "$OUT/infer.log" || sleep 5
	ask 4444 never-steps --iterations 5 --timeout 40
	kill $lpid 2>/dev/null; wait $lpid 2>/dev/null

	# dyno-format request over TCP, exactly as the dyno client frames it
	s=$(now)
	python3 - >"$OUT/dyno.txt" 2>&1 <<-'PY'
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
	kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
	tail -3 "$OUT/train.log" | tee -a "$OUT/summary.txt"
}

# ---- real traces for gprofctl report's fixtures (issue 14) ----
report_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so f rpid
	local inj="CUDA_INJECTION64_PATH=$A NVTX_INJECTION64_PATH=$A GPROF_SOCKET=$sock PYTHONPATH=$root/python"
	python3 "$root/tests/gpu/report_train.py" --mode torch --out "$OUT/report-torch.pt.trace.json.gz" \
		2>&1 | tail -2 | tee -a "$OUT/summary.txt"
	env $inj GPROF_JOB_ID=rep python3 "$root/tests/gpu/report_train.py" --mode agent --steps 400 \
		>"$OUT/report-agent.log" 2>&1 &
	rpid=$!
	for i in $(seq 600); do grep -q "training started" "$OUT/report-agent.log" && break; sleep 0.1; done
	ctl trace --job rep --iterations 5 --iteration-roundup 1 --output-dir "$work/out-rep" --timeout 60 \
		>"$OUT/report-trace.txt" 2>&1
	log "agent trace for report: gprofctl exit $?"
	f=$(find "$work/out-rep" -name '*.pt.trace.json.gz' | head -1)
	cp "$f" "$OUT/report-agent.pt.trace.json.gz"
	wait $rpid; log "report_train exit $?: $(tail -1 "$OUT/report-agent.log")"
	for f in torch agent; do
		"$B/gprofctl" report "$OUT/report-$f.pt.trace.json.gz" >"$OUT/report-$f.txt" 2>&1
		log "gprofctl report ($f) exit $?"; grep -A8 "== findings" "$OUT/report-$f.txt" | tee -a "$OUT/summary.txt"
	done
}

# ---- the agent under random requests (issue 12) ----
stress_run() { # label, agent library, extra test-stress.py arguments...
	local label=$1 lib=$2; shift 2
	log "stress $label: $(date -u +%T)"
	python3 "$root/tests/integration/test-stress.py" "$B/gprofd" "$B/gprofctl" none "$lib" none \
		"$root/tests/tools/validate_trace.py" --max-gap-ms "${STRESS_GAP_MS:-500}" ${STRESS_ARGS:-} "$@" \
		>"$OUT/stress-$label.log" 2>&1
	grep -v "^gprof_agent\[" "$OUT/stress-$label.log" | grep -E "^  |^ok|^FAIL|passed|Error|died|bad|^stress: signal" | \
		head -12 | tee -a "$OUT/summary.txt"
}
stress_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so n=${STRESS_BURSTS:-500} p
	local pids=""
	for p in ${STRESS_PROGRAMS:-cuda torch sanitizer}; do
		case $p in
		cuda) stress_run cuda "$A" --bursts "$n" --program "$B/stress" \
			--kernels "inc(float*, float)" & ;;
		torch) PYTHONPATH=$root/python stress_run torch "$A" --bursts "$n" \
			--program "python3 $root/tests/gpu/stress_train.py" & ;;
		# compute-sanitizer (memcheck) around the CUDA C loop, fewer bursts;
		# it holds CUPTI itself: the agent refuses every
		# request, saying so, and the program must live and stay correct
		sanitizer) stress_run sanitizer "$A" --bursts "${SANITIZER_BURSTS:-40}" \
			--program "compute-sanitizer --error-exitcode 9 --print-limit 20 $B/stress" \
			--refused "CUPTI is held by another tool" &
			;;
		esac
		pids="$pids $!"
		[ -n "${STRESS_PARALLEL:-}" ] || wait $!
	done
	wait $pids # not gprofd, also a child of this shell
	grep -h "ERROR SUMMARY" "$OUT/stress-sanitizer.log" 2>/dev/null | head -3 | tee -a "$OUT/summary.txt"
}
# ---- does the job get its speed back after a burst? (issue 24) ----
afterburst_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so
	log "after_burst: $(date -u +%T) loops ${AB_LOOPS:-torch2048,torch256,cuda} configs ${AB_CONFIGS:-none,burst}"
	python3 "$root/bench/after_burst.py" --gprofctl "$B/gprofctl" --socket "$sock" --agent "$A" \
		--cuda-bin "$B/after_burst" --python-dir "$root/python" --loops "${AB_LOOPS:-torch2048,torch256,cuda}" \
		--configs "${AB_CONFIGS:-none,burst}" --rounds "${AB_ROUNDS:-4}" --before "${AB_STEPS:-2000}" --after "${AB_STEPS:-2000}" \
		${AB_MODE:+--$AB_MODE --gpus "${AB_GPUS:-0,1}"} ${AB_CORES:+--cores "$AB_CORES"} --series \
		--out "$OUT/after_burst.jsonl" 2>&1 | tee "$OUT/after_burst.txt" | tail -20 | tee -a "$OUT/summary.txt"
}
# ---- what a capture costs, against an untraced twin in turns (issue 44) ----
twincost_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so
	local loops=${TC_LOOPS:-torch256,torch2048} configs
	configs=${TC_CONFIGS:-none;burst:GPROF_TORCH_OPS=off;burst-kernel:GPROF_TORCH_OPS=off;burst+ops;torch;torch-cpu}
	# the operator observer, for burst+ops (built once per torch version)
	PYTHONPATH=$root/python python3 -m gprof_agent.build_ops >"$OUT/twincost-build.log" 2>&1 ||
		log "twincost: the observer did not build (burst+ops records none): $(tail -2 "$OUT/twincost-build.log")"
	twin() { # LOOPS CONFIGS BLOCK-OPTION
		log "twincost: $(date -u +%T) loops $1 configs $2"
		PYTHONPATH=$root/python python3 "$root/bench/after_burst.py" --gprofctl "$B/gprofctl" --socket "$sock" \
			--agent "$A" --cuda-bin "$B/after_burst" --python-dir "$root/python" --loops "$1" \
			--configs "$2" --rounds "${TC_ROUNDS:-4}" --before "${TC_BEFORE:-400}" --after "${TC_AFTER:-400}" \
			--window "${TC_WINDOW:-200}" --alternate --gpus "${TC_GPUS:-0,0,0}" --cores "${TC_CORES:-4;8;12}" \
			--out "$OUT/twincost.jsonl" 2>&1 | tee -a "$OUT/twincost.txt" |
			grep -E "during the window|\(x-1\)|FAILED" | tee -a "$OUT/summary.txt"
	}
	twin "$loops" "$configs"
	# the CUDA C loop (TC_CUDA=0: not): the agent's configurations only,
	# its window 10 blocks of 50 launches-steps
	[ "${TC_CUDA:-1}" = 0 ] || TC_WINDOW=${TC_WINDOW_CUDA:-500} \
		twin cuda "$(tr ';' '\n' <<<"$configs" | grep -v '^torch' | grep -v '^burst+ops' | paste -sd';')"
}
# STRESS_VARIANTS="label;K=V K2=V2;activities label2;..." (one word each):
# the CUDA C stress under each, to tell which setting a failure needs.
# CUPTI=wheel in the variables means PyTorch's own libcupti.
variants_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so v label envs acts wheel
	wheel=$(python3 -c 'import glob,site; print((glob.glob(site.getsitepackages()[0]+"/nvidia/**/libcupti.so.13", recursive=True) or [""])[0])')
	log "PyTorch's libcupti: $wheel; toolkit's: $(ls /usr/local/cuda/lib64/libcupti.so.13*)"
	for v in $STRESS_VARIANTS; do
		IFS=';' read -r label envs acts <<<"$v"
		envs=${envs//CUPTI=wheel/GPROF_CUPTI_PATH=$wheel}
		(
			for kv in ${envs//,/ }; do [ "$kv" = - ] || export "$kv"; done
			stress_run "$label" "$A" --bursts "${STRESS_BURSTS:-100}" --program "$B/stress" \
				--kernels "inc(float*, float)" ${acts:+--activities "$acts"}
		)
	done
}
repro_checks() {
	[ -f "$root/.devlibs/lib-old/libgprof_agent.so" ] || { log "repro: no .devlibs/lib-old"; return; }
	LD_LIBRARY_PATH=$root/.devlibs/lib-old:$LD_LIBRARY_PATH STRESS_GAP_MS=10 stress_run old-agent \
		"$root/.devlibs/lib-old/libgprof_agent.so" --bursts "${REPRO_BURSTS:-100}" \
		--program "$B/stress" --kernels "inc(float*, float)"
}

# ---- what a capture costs, in one process (issue 12) ----
overhead_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so r
	local inj="CUDA_INJECTION64_PATH=$A NVTX_INJECTION64_PATH=$A GPROF_SOCKET=$sock PYTHONPATH=$root/python"
	local h="python3 $root/bench/capture_overhead.py --gprofctl $B/gprofctl --out $OUT/overhead.jsonl --repeat ${OVERHEAD_REPEAT:-5} --torch-repeat ${OVERHEAD_TORCH_REPEAT:-1}"
	# OVERHEAD_ENVS: one process per set per round, interleaved (sets
	# space-separated, a set's K=V comma-separated, - for none): the
	# agent's knobs that only a whole process can try (GPROF_CUPTI_PINNED)
	local e t
	for r in $(seq "${OVERHEAD_ROUNDS:-3}"); do
		for e in ${OVERHEAD_ENVS:--}; do
			t=$([ "$e" = - ] && echo "r$r" || echo "r$r-${e//,/+}")
			e=$([ "$e" = - ] && echo "" || echo "${e//,/ }")
			[ -n "${OVERHEAD_SKIP_2048:-}" ] || env $inj $e $h --tag "$t" --configs "${OVERHEAD_CONFIGS:-none,agent,agent-kernel,agent-kernel/memcpy/memset/cuda_runtime/sync/overhead/nvtx,torch}" \
				2>&1 | sed "s/^/  $t w2048 /" | tee -a "$OUT/summary.txt"
			[ -n "${OVERHEAD_SKIP_256:-}" ] || env $inj $e $h --tag "$t-w256" --width 256 --configs "${OVERHEAD_CONFIGS_256:-none,agent,agent-kernel,agent-kernel/memcpy/memset/cuda_runtime/sync/overhead/nvtx,torch}" \
				2>&1 | sed "s/^/  $t w256 /" | tee -a "$OUT/summary.txt"
		done
	done
	# the idle agent: loaded and never asked, against no agent (pairs)
	for r in $(seq "${IDLE_ROUNDS:-3}"); do
		python3 "$root/bench/capture_overhead.py" --configs none --tag "idle-none-$r" --out "$OUT/idle.jsonl" \
			2>&1 | sed "s/^/  no agent r$r /" | tee -a "$OUT/summary.txt"
		env $inj python3 "$root/bench/capture_overhead.py" --configs none --tag "idle-agent-$r" \
			--out "$OUT/idle.jsonl" 2>&1 | sed "s/^/  idle agent r$r /" | tee -a "$OUT/summary.txt"
	done
}

# ---- multi-GPU jobs (issue 13) ----
ddp_wait() { # job, processes that must be in their steady state (100 steps; kineto: registered)
	local i
	for i in $(seq 1200); do
		ctl --json list --job "$1" 2>/dev/null | python3 -c '
import json, sys
ps = json.load(sys.stdin)["processes"]
ok = [p for p in ps if p["role"] == "traced" and (p["steps"] >= 100 or p["kind"] == "kineto")]
sys.exit(0 if len(ok) >= int(sys.argv[1]) else 1)' "$2" && return 0
		sleep 0.1
	done
	return 1
}
ddp_one() { # label, job, slow rank, check flag, command...: start, wait, trace 5 iterations, judge, stop
	local label=$1 job=$2 slow=$3 flag=$4 stop=$work/$1.stop out=$work/$1-out t0 t1 rc jp
	shift 4
	rm -f "$stop"
	PYTHONUNBUFFERED=1 "$@" --stop "$stop" --slow-rank "$slow" --max-s 240 >"$OUT/$label.log" 2>&1 &
	jp=$!
	if ! ddp_wait "$job" "${DDP_NPROC:-2}"; then
		log "FAIL $label: the ranks never showed up stepping"; tail -20 "$OUT/$label.log"
		touch "$stop"; wait $jp; return
	fi
	ctl list --job "$job" | tee "$OUT/$label-list.txt" | sed "s/^/  /" | tee -a "$OUT/summary.txt"
	t0=$(now)
	ctl --json trace --job "$job" --iterations 5 --timeout 120 --output-dir "$out" >"$OUT/$label-trace.json" 2>"$OUT/$label-trace.err"
	rc=$?; t1=$(now)
	log "$label: gprofctl trace exit $rc in $(python3 -c "print(round($t1 - $t0, 2))") s; $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("delivered %d of %d, skipped %d:" % (r["delivered"], r["matched"], r.get("skipped", 0)),
      "; ".join("pid %d rank %s %s%s" % (p["pid"], p["rank"], p["state"],
                (" (" + p["reason"][:90] + ")") if p["state"] == "skipped" else "")
                for h in r["hosts"] for p in h["processes"]))' "$OUT/$label-trace.json" 2>&1)"
	python3 "$root/tests/gpu/ddp_check.py" "$out" --ranks "${DDP_NPROC:-2}" --steps 5 --slow-rank "$slow" --label "$label" $flag \
		2>&1 | tee -a "$OUT/summary.txt"
	# HTA keeps a GPU record only when its launch lies in a ProfilerStep#
	python3 "$root/tests/tools/hta_rule.py" $(find "$out" -name '*.gz') 2>&1 | tail -4 | sed "s/^/  hta_rule $label: /" | tee -a "$OUT/summary.txt"
	# gprofctl report names the deliberately slowed rank
	ctl report "$out" >"$OUT/$label-report.txt" 2>&1 # trace --output-dir: its one trace
	if [ "$slow" -ge 0 ]; then
		if grep -q "rank $slow is the straggler" "$OUT/$label-report.txt"; then
			log "ok $label: report: $(grep -o "rank $slow is the straggler[^;]*" "$OUT/$label-report.txt" | head -1)"
		else
			log "FAIL $label: report does not name rank $slow as the straggler"
			grep -A6 "== findings" "$OUT/$label-report.txt" | sed "s/^/  /"
		fi
	fi
	# HTA itself on the rank directory as it is (.hta carried: tests/gpu/hta_check.py)
	if [ -d "${HTA_HOME:-$root/.hta}" ]; then
		python3 "$root/tests/gpu/hta_check.py" "$out" >"$OUT/$label-hta.txt" 2>&1
		log "$label: hta_check exit status $? ; $(grep -E "temporal breakdown|overlap|communication" "$OUT/$label-hta.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-600)"
	fi
	[ -n "${DDP_STRESS:-}" ] && [ "$label" = ddp-agent ] && ddp_stress "$job"
	for f in $(find "$out" -name '*.gz'); do cp "$f" "$OUT/$label-$(basename "$f")"; done
	touch "$stop"; wait $jp
	rc=$?
	log "$label: job exit status $rc ; $(grep -h '"rank"' "$OUT/$label.log" | tr '\n' ' ')"
	if [ "$rc" != 0 ]; then # what the job and the agents said
		tail -30 "$OUT/$label.log" | sed "s/^/  job: /"
		tail -12 "$OUT/$label-agent.log" 2>/dev/null | sed "s/^/  agent: /"
	fi
}
ddp_checks() {
	local n
	n=$(nvidia-smi -L | wc -l)
	[ "$n" -ge "${DDP_NPROC:-2}" ] || { log "ddp: needs ${DDP_NPROC:-2} GPUs, this host has $n: not run"; return; }
	export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
	local L=$root/.devlibs/ctl/gprofctl T="torchrun --nproc_per_node=${DDP_NPROC:-2} --master_port"
	echo "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1" >"$work/kineto.conf"
	# the agent, through gprofctl launch from the build-tree layout
	local cases=" ${DDP_CASES:-agent spawn kineto fsdp-agent fsdp-kineto} "
	[[ $cases == *" agent "* ]] && GPROF_AGENT_LOG=$OUT/ddp-agent-agent.log ddp_one ddp-agent ddp 1 --same-kernels \
		"$L" --socket "$sock" launch --job ddp -- $T 29510 "$root/tests/gpu/ddp_train.py"
	[[ $cases == *" spawn "* ]] && GPROF_AGENT_LOG=$OUT/ddp-spawn-agent.log ddp_one ddp-spawn spawn -1 --same-kernels \
		"$L" --socket "$sock" launch --job spawn -- python3 "$root/tests/gpu/ddp_train.py" --spawn 2
	# stock PyTorch, no agent
	[[ $cases == *" kineto "* ]] && KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=777 ddp_one ddp-kineto 777 1 "" \
		$T 29520 "$root/tests/gpu/ddp_train.py"
	# FSDP2 (fully_shard): all-gathers and reduce-scatters overlapped with compute
	[[ $cases == *" fsdp-agent "* ]] && GPROF_AGENT_LOG=$OUT/fsdp-agent-agent.log ddp_one fsdp-agent fsdp 1 --same-kernels \
		"$L" --socket "$sock" launch --job fsdp -- $T 29530 "$root/tests/gpu/ddp_train.py" --fsdp
	[[ $cases == *" fsdp-kineto "* ]] && KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=779 ddp_one fsdp-kineto 779 1 "" \
		$T 29540 "$root/tests/gpu/ddp_train.py" --fsdp
}
# back-to-back requests to every rank of the job at once (DDP_STRESS=N)
ddp_stress() { # job
	python3 "$root/tests/gpu/ddp_stress.py" "$B/gprofctl" "$sock" "$1" --requests "$DDP_STRESS" --ranks "${DDP_NPROC:-2}" --budget-s "${DDP_STRESS_S:-120}" \
		--out "$OUT/ddp-stress.jsonl" 2>&1 | tail -8 | sed "s/^/  /" | tee -a "$OUT/summary.txt"
	log "ddp_stress exit status ${PIPESTATUS[0]}"
}

# ---- what one capture costs every rank (issue 28): ddp_train.py's own clock ----
ddpcost_one() { # label, job, trace|none, command...: 5 s, a 200-iteration capture (or none), 6 s, stop
	local label=$1 job=$2 mode=$3 stop=$work/$1.stop out=$work/$1-out jp w0 w1 rc
	shift 3
	rm -f "$stop"
	PYTHONUNBUFFERED=1 "$@" --stop "$stop" --max-s 100 --block-times "$work/$label-blocks-%r.json" \
		>"$OUT/$label.log" 2>&1 &
	jp=$!
	if ! ddp_wait "$job" 2; then
		log "FAIL $label: the ranks never showed up"; touch "$stop"; wait $jp; return
	fi
	sleep "${DDPCOST_BEFORE_S:-5}" # pacing, not synchronisation: the steps before the window
	if [ "$mode" = trace ]; then
		ctl --json trace --job "$job" --iterations 200 --timeout 90 --output-dir "$out" \
			>"$OUT/$label-trace.json" 2>"$OUT/$label-trace.err"
		log "$label: gprofctl trace exit $?"
	else
		w0=$(now); sleep "${DDPCOST_NONE_S:-0.75}"; w1=$(now) # where a window would have been
	fi
	sleep "${DDPCOST_AFTER_S:-6}" # the steps after it
	touch "$stop"; wait $jp; rc=$?
	log "$label: job exit status $rc"
	if [ "$mode" = trace ]; then
		python3 "$root/tests/gpu/ddp_cost.py" "$label" "$work/$label-blocks-*.json" --trace-dir "$out"
	else
		python3 "$root/tests/gpu/ddp_cost.py" "$label" "$work/$label-blocks-*.json" --window "$w0" "$w1"
	fi 2>&1 | tee -a "$OUT/summary.txt"
}
ddpcost_checks() {
	local n r L=$root/.devlibs/ctl/gprofctl T="torchrun --nproc_per_node=2 --master_port"
	n=$(nvidia-smi -L | wc -l)
	[ "$n" -ge 2 ] || { log "ddpcost: needs 2 GPUs, this host has $n: not run"; return; }
	export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
	echo "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1" >"$work/kineto.conf"
	for r in $(seq "${DDPCOST_ROUNDS:-1}"); do
		ddpcost_one "cost-none-$r" cnone$r none "$L" --socket "$sock" launch --job cnone$r -- \
			$T $((29550 + 10 * r)) "$root/tests/gpu/ddp_train.py" ${DDPCOST_ARGS:-}
		ddpcost_one "cost-agent-$r" cagent$r trace "$L" --socket "$sock" launch --job cagent$r -- \
			$T $((29551 + 10 * r)) "$root/tests/gpu/ddp_train.py" ${DDPCOST_ARGS:-}
		KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=78$r ddpcost_one "cost-kineto-$r" 78$r trace \
			$T $((29552 + 10 * r)) "$root/tests/gpu/ddp_train.py" ${DDPCOST_ARGS:-}
	done
}

compile_one() { # label, job, compile_check.py flags, command...: start, wait, trace 5 iterations, judge, stop
	local label=$1 job=$2 flags=$3 stop=$work/$1.stop out=$work/$1-out jp rc i f
	shift 3
	rm -f "$stop"
	PYTHONUNBUFFERED=1 "$@" --stop "$stop" --max-s 240 >"$OUT/$label.log" 2>&1 &
	jp=$!
	for i in $(seq 1800); do # Inductor's compile first (tens of seconds)
		grep -q '^compiled' "$OUT/$label.log" && break
		kill -0 $jp 2>/dev/null || break
		sleep 0.1
	done
	if ! ddp_wait "$job" 1; then
		log "FAIL $label: never seen stepping"; tail -20 "$OUT/$label.log"
		touch "$stop"; wait $jp; return
	fi
	ctl --json trace --job "$job" --iterations 5 --timeout 120 --output-dir "$out" >"$OUT/$label-trace.json" 2>"$OUT/$label-trace.err"
	log "$label: gprofctl trace exit $?"
	# the largest: Inductor's compile workers import torch with the job's
	# environment, so under KINETO_USE_DAEMON they register as clients of
	# the job too and deliver a trace with no step (gprofd notes why)
	f=$(find "$out" -name '*.gz' -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
	[ -n "$f" ] && cp "$f" "$OUT/$label.pt.trace.json.gz"
	# shellcheck disable=SC2086 # the flags are words
	python3 "$root/tests/gpu/compile_check.py" "$label" 5 "$OUT/$label.pt.trace.json.gz" $flags 2>&1 | tee -a "$OUT/summary.txt"
	touch "$stop"; wait $jp
	rc=$?
	log "$label: job exit status $rc; $(tail -1 "$OUT/$label.log")"
}
compile_checks() {
	local L=$root/.devlibs/ctl/gprofctl
	echo "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1" >"$work/kineto.conf"
	compile_one compile-agent cagent "" "$L" --socket "$sock" launch --job cagent -- \
		python3 "$root/tests/gpu/compile_train.py"
	compile_one compile-graphs cgraph --graphs "$L" --socket "$sock" launch --job cgraph -- \
		python3 "$root/tests/gpu/compile_train.py" --mode reduce-overhead
	KINETO_USE_DAEMON=1 KINETO_CONFIG=$work/kineto.conf SLURM_JOB_ID=778 compile_one compile-kineto 778 \
		"--kineto --same-as $OUT/compile-agent.pt.trace.json.gz" python3 "$root/tests/gpu/compile_train.py"
}

# ---- operators by default: a plain request, before and after the observer is built ----
defaultops_checks() {
	local A=$root/.devlibs/lib/libgprof_agent.so ext=$work/defaultops-ext r
	local inj="CUDA_INJECTION64_PATH=$A GPROF_SOCKET=$sock PYTHONPATH=$root/python GPROF_AGENT_TRACE_DIR=$work TORCH_EXTENSIONS_DIR=$ext"
	# shellcheck disable=SC2086 # word splitting wanted
	env $inj python3 "$root/tests/gpu/default_ops.py" --gprofctl "$B/gprofctl" --expect none \
		--out "$work/defaultops-none" >"$OUT/defaultops.txt" 2>&1
	r=$?
	log "default_ops, observer not built: exit status $r"
	env TORCH_EXTENSIONS_DIR="$ext" PYTHONPATH="$root/python" python3 -m gprof_agent.build_ops \
		>>"$OUT/defaultops.txt" 2>&1
	log "build_ops exit status $?"
	# shellcheck disable=SC2086
	env $inj python3 "$root/tests/gpu/default_ops.py" --gprofctl "$B/gprofctl" --expect built \
		--out "$work/defaultops-built" >>"$OUT/defaultops.txt" 2>&1
	r=$?
	log "default_ops, observer built: exit status $r"
	grep '^{' "$OUT/defaultops.txt" | cut -c1-700 | tee -a "$OUT/summary.txt"
}

# ---- CUDA graphs through bursts (the agent never finalizes beside them) ----
graphs_checks() {
	GPROF_AGENT_LOG=$OUT/graphs-agent.log python3 "$root/tests/gpu/graphs_check.py" "$B" "$OUT" \
		--variants "${GRAPHS_VARIANTS:-graphs,graphs-unsub,graphs-idle,eager,torch-profiler}" \
		2>&1 | tee "$OUT/graphs.txt" | grep -E "^(ok|FAIL)" | tee -a "$OUT/summary.txt"
	log "graphs_check exit status ${PIPESTATUS[0]}"
}

# ---- the cost of each way of recording with CUPTI, no agent ----
cupti_checks() {
	# shellcheck disable=SC2086 # word splitting wanted
	python3 "$root/bench/cupti_cost.py" "$B/cupti_cost" ${CUPTI_COST_ARGS:---rounds 5} \
		--jsonl "$OUT/cupti_cost.jsonl" >"$OUT/cupti_cost.txt" 2>&1
	log "cupti_cost exit status $?"
	sed -n '/^configuration/,$p' "$OUT/cupti_cost.txt" | tee -a "$OUT/summary.txt"
}

# ---- the same with Kineto's default poll interval (5 s): what a stock job sees ----
kineto5_checks() {
	KINETO_USE_DAEMON=1 SLURM_JOB_ID=4545 PYTHONUNBUFFERED=1 \
		python3 "$root/tests/gpu/train.py" --seconds 120 >"$OUT/train5.log" 2>&1 &
	local p5=$! i
	for i in $(seq 300); do grep -q "training started" "$OUT/train5.log" && break; sleep 0.1; done
	ask 4545 kineto5-first --iterations 5 --iteration-roundup 1 --timeout 90
	ask 4545 kineto5-second --iterations 5 --iteration-roundup 1 --timeout 90
	ask 4545 kineto5-duration --duration-ms 500 --timeout 90
	kill $p5 2>/dev/null; wait $p5 2>/dev/null
}

# SECTIONS entries: NAME, NAME@GPUS (CUDA_VISIBLE_DEVICES=GPUS for it) and
# a trailing & to run it beside the next ones (on other GPUs): all share
# this gprofd; the run waits for every one
bg=""
for entry in ${SECTIONS:-agent held stress overhead cupti metrics kineto kineto5 compile graphs}; do
	section=${entry%&}
	gpus=""
	[[ $section == *@* ]] && gpus=${section#*@} section=${section%@*}
	log "---- $section${gpus:+ (GPUs $gpus)}"
	if [[ $entry == *'&' ]]; then
		( [ -n "$gpus" ] && export CUDA_VISIBLE_DEVICES=$gpus; "${section}_checks" ) &
		bg="$bg $!"
	elif [ -n "$gpus" ]; then
		( export CUDA_VISIBLE_DEVICES=$gpus; "${section}_checks" )
	else
		"${section}_checks"
	fi
done
[ -z "$bg" ] || wait $bg
ctl status | tee -a "$OUT/summary.txt"
kill $gpid; wait $gpid
log "gprofd exit status $?"
