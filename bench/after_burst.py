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
Configurations (NAME[:K=V[,K=V]], the K=V the process's environment, e.g.
burst:GPROF_CUPTI_RELEASE=unsubscribe):
  none         nothing
  burst        gprofctl trace --iterations WINDOW (the agent's defaults)
  burst+ops    the same with --operators
  burst-ACT    the same with --activities ACT (ACT one word: kernel,
               kernel+memcpy; "+" stands for ","), e.g. burst-kernel: the
               floor, kernel records alone
  torch        (PyTorch loops) torch.profiler in the process itself, CUDA
               activities only, over WINDOW steps from step BEFORE
  torch-cpu    the same with CPU and CUDA activities
(--configs separates them with ";" instead of "," where one has several K=V.)
A process's capture cost (issue 44, --alternate only): "during", the
median over the blocks inside the window of its block median over its
partner's, divided by the same over the BEFORE blocks. The window starts
at the block boundary before which gprofctl reported the process
"capturing" (the driver counts the blocks it let each process run), or
at step BEFORE for torch.profiler; its first block and the block before
its end (the capture began up to a block earlier) do not count.

How the configurations of a round meet the host's drift (an H100/H200
host here moves a never-traced process's median by up to 15 % between
its two halves, so a lone process cannot resolve 0.5 %):
  (default)    one after the other, order rotated by round;
  --pair       at the same time, one GPU each (--gpus, rotating), told
               "go" and "over" together; the paired figure is
               ratio(burst) / ratio(none) of the round, and "bin by bin"
               the median over wall-clock bins of the two processes' step
               medians, after over before;
  --alternate  the two processes of a pair (each configuration but none,
               with a "none" partner of its own) on the same GPU and the
               same CPUs (--cores), taking turns: one runs BLOCK steps while
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
ap.add_argument("--torch-prof", default="", help=argparse.SUPPRESS)
ap.add_argument("--device", default="cuda", help="the PyTorch loops' device (cpu: a smoke test "
                "of this driver on a machine without a GPU)")
ap.add_argument("--block", type=int, default=0, help=argparse.SUPPRESS)
a = ap.parse_args()
# configurations are separated by ";" where one has several K=V (joined by ",")
a.config_list = a.configs.split(";") if ";" in a.configs else a.configs.split(",")


a.gpus = [g for g in a.gpus.split(",") if g] if (a.pair or a.alternate) else [None]
a.cores = a.cores.split(";") if a.cores else None  # taskset -c lists
if a.pair and len(a.gpus) < len(a.config_list):
    ap.error("--pair needs a GPU for each configuration (--gpus)")
if a.alternate and (len(a.config_list) < 2 or "none" not in a.config_list):
    ap.error("--alternate takes none and at least one other configuration")
for _c in a.config_list:
    if _c.split(":")[0].startswith("torch") and "cuda" in a.loops.split(","):
        ap.error("%s is for the PyTorch loops only (--loops without cuda)" % _c)
if a.cores and len(a.cores) < (len(a.gpus) if a.alternate else len(a.config_list)):
    ap.error("--cores needs a CPU set for each process slot")


def torch_child(width):
    """The PyTorch loop, in the child process."""
    import torch
    import gprof_agent  # noqa: F401  (steps counted by its optimizer hook)
    torch.manual_seed(0)
    dev = torch.device(a.device)
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
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warm):
        step()
    # the collector's pauses would fall on one half or the other at random
    gc.collect()
    gc.freeze()
    gc.disable()
    print("ready", flush=True)
    prof = TorchWindow(torch) if a.torch_prof else None
    if a.block:
        res = turns(step, prof)
    else:
        res = free_run(step, prof)
    print(json.dumps(res), flush=True)


class TorchWindow:
    """torch.profiler over WINDOW steps from step BEFORE (a "torch"
    configuration): started and stopped between steps, outside their
    timing; "torchdone" once stopped (the driver then says "over")."""

    def __init__(self, torch):
        acts = [torch.profiler.ProfilerActivity.CUDA]
        if a.torch_prof == "cpu":
            acts.insert(0, torch.profiler.ProfilerActivity.CPU)
        self.torch, self.acts, self.p = torch, acts, None

    def at(self, s):
        if s == a.before:
            self.p = self.torch.profiler.profile(activities=self.acts)
            self.p.start()
        elif s == a.before + a.window and self.p is not None:
            self.p.stop()
            n = len(self.p.events())  # what it recorded is read, as a user would
            self.p = None
            print("torchdone %d" % n, flush=True)


def free_run(step, prof=None):
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
        if prof:
            prof.at(s)
            t0 = time.perf_counter_ns()
        step()
        dur.append(time.perf_counter_ns() - t0)
        s += 1
    return {"over_at": over_at, "t0_ns": t0_ns, "steps_ns": dur}


def turns(step, prof=None):
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
            if prof:
                prof.at(s)
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
            base = config.split(":")[0]
            cmd = [sys.executable, __file__, "--child", loop[len("torch"):],
                   "--before", str(a.before), "--after", str(a.after), "--warm", str(a.warm),
                   "--block", str(block), "--window", str(a.window), "--device", a.device,
                   "--torch-prof", {"torch": "cuda", "torch-cpu": "cpu"}.get(base, ""),
                   "--gprofctl", a.gprofctl, "--socket", a.socket, "--agent", a.agent]
        if cores:
            cmd = ["taskset", "-c", cores] + cmd
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.ready = threading.Event()
        self.triggered = threading.Event()
        self.torchdone = threading.Event()
        self.torch_events = None
        self.capturing = threading.Event()  # gprofctl said "capturing"
        self.sent = 0        # blocks this process was told to run
        self.mark_at = None  # the step from which its window surely ran
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
            elif line.startswith("torchdone"):
                self.torch_events = int(line.split()[1])
                self.torchdone.set()
            elif line == "yield":
                self.turn.put("yield")
            elif line.startswith("{"):
                self.result = json.loads(line)
                self.p.stdin.close()
        # a child that died never says so: nobody waits for ever
        self.ready.set()
        self.triggered.set()
        self.torchdone.set()
        self.turn.put("end")

    def say(self, word):
        if word == "go":
            self.sent += 1
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
        if self.torch_events is not None:
            r["torch_events"] = self.torch_events
        if self.mark_at is not None:
            r["mark_at"] = self.mark_at
        return r


def capture(k, ctl):
    """Asks for the burst process's capture (its options from the
    configuration's name); records gprofctl's outcome. A torch process
    captures itself: this waits for its "torchdone"."""
    base = k.config.split(":")[0]
    if base.startswith("torch"):
        k.torchdone.wait()
        ctl[k.job] = (0 if k.torch_events else 1, "torch.profiler: %s events" % k.torch_events)
        return
    opts = []
    if base.startswith("burst+ops"):
        opts.append("--operators")
    if "-" in base:
        opts += ["--activities", base.split("-", 1)[1].replace("+", ",")]
    p = subprocess.Popen([a.gprofctl, "--socket", a.socket, "trace", "--job", k.job,
                          "--iterations", str(a.window), "--output-dir",
                          "/tmp/after-burst-traces", "--timeout", "60"] + opts,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []
    for line in p.stderr:  # the progress lines: "...: capturing" once it began
        said.append(line)
        if ": capturing" in line:
            k.capturing.set()
    out = p.stdout.read()
    ctl[k.job] = (p.wait(), out + "".join(said[-5:]))


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
        if k.config != "none" and k.p.poll() is None:
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
            burst = [k for k in kids if k.config != "none" and k.p.poll() is None]
            asker = threading.Thread(target=lambda: [capture(k, ctl) for k in burst])
            asker.start()
        say_over = asker is not None and not over and not asker.is_alive()
        over = over or say_over
        for k in list(alive):
            if say_over:
                k.say("over")
            if k.mark_at is None and k.config.startswith("torch"):
                k.mark_at = a.before
            elif k.mark_at is None and k.capturing.is_set():
                k.mark_at = k.sent * block  # the capture began in a block already run
            k.say("go")
            if k.turn.get() != "yield":
                alive.remove(k)
    if asker is not None:
        asker.join()
    return [k.finish(rnd, gpu, *ctl.get(k.job, (None, ""))) for k in kids]


def block_ratio(b, n, during=False):
    """--alternate: block j of each process ran in the same turn of the
    pair; the median over the AFTER blocks (with during, the blocks inside
    the window: from two blocks past the trigger to BEFORE + WINDOW) of b's
    block median over n's, divided by the same over the BEFORE blocks."""
    K = b["block"]

    def meds(r):
        d = r["steps_ns"]
        return [statistics.median(d[j * K:(j + 1) * K]) for j in range(len(d) // K)]
    mb, mn = meds(b), meds(n)
    both = min(len(mb), len(mn))
    start = max(b["over_at"], n["over_at"])
    before = [mb[j] / mn[j] for j in range(both) if (j + 1) * K <= a.before]
    if during:
        m = b.get("mark_at")
        if m is None:
            return None
        after = [mb[j] / mn[j] for j in range(both)
                 if j * K >= m + K and (j + 1) * K <= m + a.window - K]
    else:
        after = [mb[j] / mn[j] for j in range(both) if j * K >= start]
    if len(before) < 5 or len(after) < (3 if during else 5):
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
        w = block_ratio(r, n, during=True) if a.alternate else None
        if w is not None:
            r["during"] = w
        print("round %d %-9s %-40s paired with none: %.4f, %s %s%s" % (
            r["round"], r["loop"], r["config"], r["paired"],
            "turn by turn" if a.alternate else "bin by bin",
            "%.4f" % v if v is not None else "-",
            ", during the window %.4f" % w if w is not None else ""), flush=True)


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
    configs = a.config_list
    order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
    if a.alternate:
        # a pair per configuration but none, each with a partner of its own,
        # which of the two goes first alternating by round
        return [run_turns(loop, [c, "none"] if rnd % 2 == 0 else ["none", c], rnd,
                          a.gpus[slot], a.cores[slot] if a.cores else None)
                for c in order if c != "none"]
    if a.pair:
        # each config on its own GPU; the GPUs rotate with the order
        return [run_set(loop, order, rnd, a.gpus, a.cores)]
    got = []
    for c in order:
        got += run_set(loop, [c], rnd, [None], [a.cores[0]] if a.cores else None)
    return [got]


def main():
    loops = a.loops.split(",")
    configs = a.config_list
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
            groups = rounds_of(loop, rnd, slot)
            with lock:
                for got in groups:
                    for r in got:
                        show(r)
                    pair_up(got)
                for r in (r for got in groups for r in got):
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
                              ("paired_fine", "paired with none, " + fine),
                              ("during", "paired with none, during the window")):
                v = [r[key] for r in rows if r["loop"] == loop and r["config"] == config
                     and key in r]
                if v:
                    print("  %-9s %-36s %-40s %.4f  (%d: %s)" % (
                        loop, config, what, statistics.median(v), len(v),
                        " ".join("%.4f" % x for x in v)))
    cost_ratios(loops, configs, rows)
    return 0 if all("ratio" in r for r in rows) else 1


def cost_ratios(loops, configs, rows):
    """Issue 44's figure: each agent configuration's capture cost over
    torch.profiler's, (during - 1) / (during_torch - 1), on the medians
    over rounds."""
    def med(loop, config):
        v = [r["during"] for r in rows if r["loop"] == loop and r["config"] == config
             and "during" in r]
        return statistics.median(v) if v else None
    torches = [c for c in configs if c.split(":")[0].startswith("torch")]
    floor = [c for c in configs if c.split(":")[0] == "burst-kernel"]
    lines = []
    for loop in loops:
        for c in configs:
            x = med(loop, c)
            if c == "none" or c in torches or x is None:
                continue
            for t in torches + floor:
                y = med(loop, t)
                if t != c and y is not None and y != 1:
                    lines.append("  %-9s %-28s / %-14s (x-1)/(y-1) = %.2f  (%.4f, %.4f)" % (
                        loop, c, t, (x - 1) / (y - 1), x, y))
    if lines:
        print("\ncapture cost against torch.profiler and the kernel-record floor "
              "(medians of the during figures):")
        print("\n".join(lines))


sys.exit(main())
