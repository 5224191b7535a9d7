#!/usr/bin/env python3
"""after_burst.py: does a job get its speed back after a burst? (issue 24)

Each loop process times BEFORE steps, then (in "burst" processes) a capture
of WINDOW iterations is asked for while the loop runs on; once gprofctl has
the trace (at once, or with its partner, in "none" processes) the driver
says "over", and the loop times AFTER more steps. A process's own figure is
median(its AFTER steps) / median(its BEFORE steps). Loops:
  torchN   6 x (Linear(N) + GELU), AdamW, batch 256, each step
           synchronised
  cuda     bench/after_burst.cu: 20 empty-kernel launches a step with
           PyTorch's per-op calls around each (>= 10,000 launches/s)
Configurations: "none", "burst", and "burst:K=V[,K=V]" (environment for the
agent in that process, e.g. burst:GPROF_CUPTI_RELEASE=unsubscribe).

How the configurations of a round meet the host's drift (an H100/H200
host here moves a never-traced process's median by up to 15 % between
its two halves, so a lone process cannot resolve 0.5 %):
  (default)    one after the other, order rotated by round;
  --pair       at the same time, one GPU each (--gpus, rotating), told
               "go" and "over" together; the paired figure is
               ratio(burst) / ratio(none) of the round, and "bin by bin"
               the median over wall-clock bins of the two processes' step
               medians, after over before;
  --alternate  the two processes of a pair on the same GPU and the same
               CPUs (--cores), taking turns: one runs BLOCK steps while
               the other waits on its pipe, then the other, and so on.
               Block j of the burst process and block j of its "none"
               partner ran one after the other on the same core and card,
               so the figure, the median over the AFTER blocks of their
               ratio over the same for the BEFORE blocks, cancels whatever
               the host does on a longer time scale than a block. With
               several --gpus (and a --cores set each), pairs run at once,
               one per GPU, rounds shared among them.
The PyTorch child freezes and disables Python's garbage collector after its
warm-up, so a collection's pause lands on neither half. Every round is
printed and written as JSON lines to --out (every step with --series).

  after_burst.py --gprofctl G --socket S --agent LIB [--cuda-bin B]
                 [--loops torch2048,torch256,cuda] [--configs none,burst]
                 [--rounds 4] [--before 2000] [--after 2000] [--out F]
                 [--pair | --alternate] [--gpus 0,1] [--cores '4-9;10-15']
                 [--block-cuda 50] [--block-torch 20] [--series]
"""
import argparse
import gc
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--gprofctl", required=True)
ap.add_argument("--socket", required=True)
ap.add_argument("--agent", required=True)
ap.add_argument("--cuda-bin")
ap.add_argument("--python-dir", default=os.path.join(os.path.dirname(__file__), "..", "python"))
ap.add_argument("--loops", default="torch2048,torch256,cuda")
ap.add_argument("--configs", default="none,burst")
ap.add_argument("--rounds", type=int, default=4)
ap.add_argument("--before", type=int, default=2000)
ap.add_argument("--after", type=int, default=2000)
ap.add_argument("--warm", type=int, default=300, help="steps before the BEFORE steps, not timed")
ap.add_argument("--window", type=int, default=50)
ap.add_argument("--out")
mode = ap.add_mutually_exclusive_group()
mode.add_argument("--pair", action="store_true",
                  help="run the configurations of a round at once, one GPU each (--gpus)")
mode.add_argument("--alternate", action="store_true",
                  help="run the two configurations of a round in turns on one GPU and CPU set")
ap.add_argument("--gpus", default="0,1", help="--pair: a GPU a configuration; --alternate: "
                "a pair at once on each")
ap.add_argument("--cores", help="CPU sets, one per --gpus entry, e.g. '4-9;10-15' (pinned)")
ap.add_argument("--block-cuda", type=int, default=50, help="--alternate: steps a turn, CUDA C")
ap.add_argument("--block-torch", type=int, default=20, help="--alternate: steps a turn, PyTorch")
ap.add_argument("--series", action="store_true", help="keep every step's time in --out")
ap.add_argument("--child", help=argparse.SUPPRESS)
ap.add_argument("--block", type=int, default=0, help=argparse.SUPPRESS)
a = ap.parse_args()


a.gpus = [g for g in a.gpus.split(",") if g] if (a.pair or a.alternate) else [None]
a.cores = a.cores.split(";") if a.cores else None  # taskset -c lists
if a.pair and len(a.gpus) < len(a.configs.split(",")):
    ap.error("--pair needs a GPU for each configuration (--gpus)")
if a.alternate and (len(a.configs.split(",")) != 2 or "none" not in a.configs.split(",")):
    ap.error("--alternate takes two configurations, one of them none")
if a.cores and len(a.cores) < (len(a.gpus) if a.alternate else len(a.configs.split(","))):
    ap.error("--cores needs a CPU set for each process slot")


def torch_child(width):
    """The PyTorch loop, in the child process."""
    import torch
    import gprof_agent  # noqa: F401  (steps counted by its optimizer hook)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, width, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(a.warm):
        step()
    # the collector's pauses would fall on one half or the other at random
    gc.collect()
    gc.freeze()
    gc.disable()
    print("ready", flush=True)
    if a.block:
        res = turns(step)
    else:
        res = free_run(step)
    print(json.dumps(res), flush=True)


def free_run(step):
    """Waits for "go", then steps until AFTER steps past the "over" line
    (read by a thread, whenever it comes)."""
    over = threading.Event()
    sys.stdin.readline()  # "go": every process of the round starts together
    threading.Thread(target=lambda: (sys.stdin.readline(), over.set()), daemon=True).start()
    t0_ns = time.time_ns()
    dur, s, over_at = [], 0, -1
    while over_at < 0 or s < over_at + a.after:
        t0 = time.perf_counter_ns()
        if s == a.before:
            print("trigger", flush=True)
        if s > a.before and over_at < 0 and over.is_set():
            over_at = s
        step()
        dur.append(time.perf_counter_ns() - t0)
        s += 1
    return {"over_at": over_at, "t0_ns": t0_ns, "steps_ns": dur}


def turns(step):
    """--alternate: a block of steps for each "go", then "yield"; an
    "over" line between blocks marks the next step as the first after the
    capture; ends once AFTER steps followed it."""
    dur, s, over_at, over = [], 0, -1, False
    for line in sys.stdin:
        word = line.strip()
        if word == "over":
            over = True
            continue
        if word != "go":
            break
        for _ in range(a.block):
            if s == a.before:
                print("trigger", flush=True)
            if s > a.before and over_at < 0 and over:
                over_at = s
            t0 = time.perf_counter_ns()
            step()
            dur.append(time.perf_counter_ns() - t0)
            s += 1
        if over_at >= 0 and s >= over_at + a.after:
            break
        if over_at < 0 and s > a.before + 50 * a.after:
            break  # the capture never ended: no result rather than no end
        print("yield", flush=True)
    return {"over_at": over_at, "block": a.block, "steps_ns": dur}


if a.child:
    torch_child(int(a.child))
    sys.exit(0)


class Child:
    """One loop process: its lines read by a thread into events."""

    def __init__(self, loop, config, rnd, gpu, cores, block=0):
        env = dict(os.environ)
        self.loop, self.config = loop, config
        self.job = "ab-%s-%s-%d-%d-%s" % (loop, config.split(":")[0], rnd, os.getpid(), gpu)
        env.update(CUDA_INJECTION64_PATH=a.agent, NVTX_INJECTION64_PATH=a.agent,
                   GPROF_SOCKET=a.socket, GPROF_JOB_ID=self.job, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.path.abspath(a.python_dir))
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        if ":" in config:
            for kv in config.split(":", 1)[1].split(","):
                k, v = kv.split("=", 1)
                env[k] = v
        if loop == "cuda":
            cmd = [a.cuda_bin, str(a.before), str(a.after), "20", str(block)]
        else:
            cmd = [sys.executable, __file__, "--child", loop[len("torch"):],
                   "--before", str(a.before), "--after", str(a.after), "--warm", str(a.warm),
                   "--block", str(block),
                   "--gprofctl", a.gprofctl, "--socket", a.socket, "--agent", a.agent]
        if cores:
            cmd = ["taskset", "-c", cores] + cmd
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.ready = threading.Event()
        self.triggered = threading.Event()
        self.turn = queue.Queue()  # "yield", or "end" (result or death)
        self.result = None
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            line = line.strip()
            if line == "ready":
                self.ready.set()
            elif line == "trigger":
                self.triggered.set()
            elif line == "yield":
                self.turn.put("yield")
            elif line.startswith("{"):
                self.result = json.loads(line)
                self.p.stdin.close()
        # a child that died never says so: nobody waits for ever
        self.ready.set()
        self.triggered.set()
        self.turn.put("end")

    def say(self, word):
        try:
            self.p.stdin.write(word + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def finish(self, rnd, gpu, ctl_rc, ctl_out):
        self.reader.join()
        err = self.p.stderr.read()
        rc = self.p.wait()
        r = {"loop": self.loop, "config": self.config, "round": rnd, "gpu": gpu, "rc": rc}
        if rc != 0 or self.result is None or self.result["over_at"] < 0:
            r["error"] = err[-2000:] or "no result"
            return r
        d, k = self.result["steps_ns"], self.result["over_at"]
        before = statistics.median(d[:a.before])
        after = statistics.median(d[k:])
        r.update(ctl_rc=ctl_rc, burst_steps=k - a.before, before_us=before / 1e3,
                 after_us=after / 1e3, ratio=after / before,
                 ctl=ctl_out[-300:] if ctl_rc else "", t0_ns=self.result.get("t0_ns"),
                 block=self.result.get("block"), steps_ns=d, over_at=k)
        return r


def capture(k, ctl):
    """Asks for the burst process's capture; records gprofctl's outcome."""
    r = subprocess.run([a.gprofctl, "--socket", a.socket, "trace", "--job", k.job,
                        "--iterations", str(a.window), "--output-dir",
                        "/tmp/after-burst-traces", "--timeout", "60"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ctl[k.job] = (r.returncode, r.stdout)


def run_set(loop, configs, rnd, gpus, cores):
    """Runs configs at once, one process each (on its own GPU and cores
    with --pair), and tells every one the capture is over at the same
    moment: when the burst's gprofctl returned (at once if none asks)."""
    kids = []
    for i, config in enumerate(configs):
        kids.append((Child(loop, config, rnd, gpus[i], cores[i] if cores else None), gpus[i]))
    for k, _ in kids:
        k.ready.wait()
    for k, _ in kids:
        k.say("go")
    for k, _ in kids:
        k.triggered.wait()
    ctl = {}
    for k, _ in kids:
        if k.config.startswith("burst") and k.p.poll() is None:
            capture(k, ctl)
    for k, _ in kids:
        k.say("over")
    return [k.finish(rnd, gpu, *ctl.get(k.job, (None, ""))) for k, gpu in kids]


def run_turns(loop, configs, rnd, gpu, cores):
    """--alternate: the two processes on one GPU and CPU set, a block each
    in turn; the capture is asked for (in a thread: the burst process must
    step for it) once both passed BEFORE, and "over" goes to both before
    the same turn once gprofctl returned."""
    block = a.block_cuda if loop == "cuda" else a.block_torch
    kids = [Child(loop, c, rnd, gpu, cores, block) for c in configs]
    for k in kids:
        k.ready.wait()
    ctl, asker, over = {}, None, False
    alive = list(kids)
    while alive:
        if asker is None and all(k.triggered.is_set() for k in kids):
            burst = [k for k in kids if k.config.startswith("burst") and k.p.poll() is None]
            asker = threading.Thread(target=lambda: [capture(k, ctl) for k in burst])
            asker.start()
        say_over = asker is not None and not over and not asker.is_alive()
        over = over or say_over
        for k in list(alive):
            if say_over:
                k.say("over")
            k.say("go")
            if k.turn.get() != "yield":
                alive.remove(k)
    if asker is not None:
        asker.join()
    return [k.finish(rnd, gpu, *ctl.get(k.job, (None, ""))) for k in kids]


def block_ratio(b, n):
    """--alternate: block j of each process ran in the same turn of the
    pair; the median over the AFTER blocks of b's block median over n's,
    divided by the same over the BEFORE blocks."""
    K = b["block"]

    def meds(r):
        d = r["steps_ns"]
        return [statistics.median(d[j * K:(j + 1) * K]) for j in range(len(d) // K)]
    mb, mn = meds(b), meds(n)
    both = min(len(mb), len(mn))
    start = max(b["over_at"], n["over_at"])
    before = [mb[j] / mn[j] for j in range(both) if (j + 1) * K <= a.before]
    after = [mb[j] / mn[j] for j in range(both) if j * K >= start]
    if len(before) < 5 or len(after) < 5:
        return None
    return statistics.median(after) / statistics.median(before)


def binned(b, n):
    """--pair: the burst process against its "none" partner moment by
    moment: both processes' steps put into wall-clock bins (25 steps of
    the partner's before-half median wide); per bin the ratio of the two
    medians; the figure is the median of the AFTER bins' ratios over the
    BEFORE bins'. Drift that both see at the same moment cancels bin by
    bin."""
    def starts(r):
        t, out = r["t0_ns"], []
        for d in r["steps_ns"]:
            out.append(t)
            t += d
        return out
    width = 25 * statistics.median(n["steps_ns"][:a.before])
    half = {}
    for r in (b, n):
        st, k = starts(r), r["over_at"]
        bins = {}
        for i, (t, d) in enumerate(zip(st, r["steps_ns"])):
            if a.before <= i < k:
                continue
            bins.setdefault(int(t // width), []).append(d)
        half[id(r)] = ({x: statistics.median(v) for x, v in bins.items() if len(v) >= 5},
                       st[a.before - 1], st[k])
    (bb, b_end, b_over), (nb, n_end, n_over) = half[id(b)], half[id(n)]
    both = sorted(set(bb) & set(nb))
    before = [bb[x] / nb[x] for x in both if (x + 1) * width <= min(b_end, n_end)]
    after = [bb[x] / nb[x] for x in both if x * width >= max(b_over, n_over)]
    if len(before) < 5 or len(after) < 5:
        return None
    return statistics.median(after) / statistics.median(before)


def pair_up(got):
    """The paired figures of one round's processes, on the non-none ones."""
    base = [r for r in got if r["config"] == "none"]
    if not base or not all("ratio" in r for r in got):
        return
    n = base[0]
    for r in got:
        if r is n:
            continue
        r["paired"] = r["ratio"] / n["ratio"]
        v = block_ratio(r, n) if a.alternate else binned(r, n) if a.pair else None
        if v is not None:
            r["paired_fine"] = v
        print("round %d %-9s %-40s paired with none: %.4f, %s %s" % (
            r["round"], r["loop"], r["config"], r["paired"],
            "turn by turn" if a.alternate else "bin by bin",
            "%.4f" % v if v is not None else "-"), flush=True)


def show(r):
    if "ratio" in r:
        print("round %d %-9s %-40s gpu %-4s before %8.1f us after %8.1f us ratio %.4f%s" % (
            r["round"], r["loop"], r["config"], r["gpu"], r["before_us"], r["after_us"],
            r["ratio"], "" if not r["ctl_rc"] else "  (gprofctl exit %s)" % r["ctl_rc"]),
            flush=True)
    else:
        print("round %d %-9s %-40s FAILED rc %s: %s" % (r["round"], r["loop"], r["config"],
                                                        r["rc"], r["error"][-500:]), flush=True)


def rounds_of(loop, rnd, slot):
    """One round of one loop on process slot `slot` (a GPU and CPU set)."""
    configs = a.configs.split(",")
    order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
    if a.alternate:
        return run_turns(loop, order, rnd, a.gpus[slot], a.cores[slot] if a.cores else None)
    if a.pair:
        # each config on its own GPU; the GPUs rotate with the order
        return run_set(loop, order, rnd, a.gpus, a.cores)
    got = []
    for c in order:
        got += run_set(loop, [c], rnd, [None], [a.cores[0]] if a.cores else None)
    return got


def main():
    loops = a.loops.split(",")
    configs = a.configs.split(",")
    rows, lock = [], threading.Lock()
    out = open(a.out, "a") if a.out else None
    work = queue.Queue()
    for rnd in range(a.rounds):
        for loop in loops:
            work.put((loop, rnd))

    def worker(slot):
        while True:
            try:
                loop, rnd = work.get_nowait()
            except queue.Empty:
                return
            got = rounds_of(loop, rnd, slot)
            with lock:
                for r in got:
                    show(r)
                pair_up(got)
                for r in got:
                    rows.append(r)
                    if out:  # a round at a time: a run cut short keeps what it measured
                        keep = r if a.series else {k: v for k, v in r.items()
                                                   if k != "steps_ns"}
                        out.write(json.dumps(keep) + "\n")
                if out:
                    out.flush()

    slots = len(a.gpus) if a.alternate else 1
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("\nmedians over rounds (every round above):")
    fine = "turn by turn" if a.alternate else "bin by bin"
    for loop in loops:
        for config in configs:
            for key, what in (("ratio", "after/before"),
                              ("paired", "paired with none, after/before of each"),
                              ("paired_fine", "paired with none, " + fine)):
                v = [r[key] for r in rows if r["loop"] == loop and r["config"] == config
                     and key in r]
                if v:
                    print("  %-9s %-36s %-40s %.4f  (%d: %s)" % (
                        loop, config, what, statistics.median(v), len(v),
                        " ".join("%.4f" % x for x in v)))
    return 0 if all("ratio" in r for r in rows) else 1


sys.exit(main())
