#!/usr/bin/env python3
"""gprofctl report on small hand-built traces whose every figure is known.

usage: test-report.py GPROFCTL FIXTURES

Two ranks of one job: on device 0, two 100 us gemm kernels (stream 7), a
5 us kernel inside the first (stream 8), an NCCL all-reduce (stream 9:
300 us on rank 0, which waits, 10 us on rank 1, the straggler), a 1 MB
host-to-device copy from pageable memory in 50 us; two iterations of 350
and 450 us; a "forward" range of 150 us whose one launch (correlation id
1) ran the first gemm and the 5 us kernel (105 us on the GPU, though
Kineto's projection spans 300); four CUDA runtime calls, one a 30 us
cudaStreamSynchronize. Every --json output is checked against
docs/report.schema.json (tests/tools/report_check.py).
Rank 0 is gzip with decimal timestamps, rank 1 plain JSON with integers.
Then a truncated file and a malformed one, and two real rank traces of a
DDP job from the H200 host (tests/fixtures/traces: the agent's, rank 1 a
deliberate straggler), checked against figures computed here from the
same files. Then the located findings on a hand-built trace (data loading,
a launch-bound stretch, the idle after a synchronising call, the longest
gaps and where they fall), the HTML page (self-contained, escaped, whole
or not at all), and two real traces of one loop with the usual
bottlenecks from the H200 host (tests/fixtures/traces/bottlenecks:
torch.profiler's and the agent's), their figures computed here too.
"""
import html.parser
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree

GPROFCTL, FIXTURES = sys.argv[1], sys.argv[2]
DDP = os.path.join(FIXTURES, "ddp")
BOTTLENECKS = os.path.join(FIXTURES, "bottlenecks")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import runner  # noqa: E402
import hta_rule  # noqa: E402
import report_check  # noqa: E402


def trace(rank, nccl_dur, decimals):
    def t(v):
        return float(v) if decimals else int(v)
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#10", "pid": 1, "tid": 1,
         "ts": t(0), "dur": t(350)},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#11", "pid": 1, "tid": 1,
         "ts": t(350), "dur": t(450)},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": t(0), "dur": t(10), "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": t(190), "dur": t(10), "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": t(390), "dur": t(10), "args": {"correlation": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1,
         "ts": t(320), "dur": t(30)},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t(0),
         "dur": t(100), "args": {"stream": 7, "grid": [1, 1, 1], "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "small", "pid": 0, "tid": 8, "ts": t(50),
         "dur": t(5), "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t(200),
         "dur": t(100), "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0,
         "tid": 9, "ts": t(400), "dur": t(nccl_dur), "args": {"correlation": 3}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": 7, "ts": t(720), "dur": t(50), "args": {"bytes": 1000000}},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 3, "pid": 0, "tid": 7, "ts": t(400)},
        # a user range on the CPU, and the GPU time of what it launched
        {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1,
         "ts": t(0), "dur": t(150)},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": 0, "tid": 7,
         "ts": t(0), "dur": t(300)},
        # Kineto's copy of an iteration on a GPU row: not an iteration of its own
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#10", "pid": 0, "tid": 7,
         "ts": t(0), "dur": t(300)},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank,
                                                   "world_size": 2},
            "deviceProperties": [{"id": 0, "name": "X"}], "traceEvents": ev,
            "traceName": "x"}


def write(d, name, doc, gz):
    path = os.path.join(d, name)
    text = json.dumps(doc, indent=1).replace('"rank":', '"rank": ')
    with (gzip.open(path, "wt") if gz else open(path, "w")) as f:
        f.write(text)
    return path


def report(*args):
    """gprofctl's answer; any --json output checked against the schema."""
    r = subprocess.run([GPROFCTL] + list(args), capture_output=True, text=True, timeout=60)
    if "--json" in args and r.stdout:
        report_check.validate(r.stdout)
    return r.returncode, r.stdout, r.stderr


def texts(doc):
    """The findings' sentences."""
    return [f["text"] for f in doc["findings"]]


def near(a, b):
    return abs(a - b) < 1e-6 * max(1, abs(b))


def test_figures(d):
    """Every figure of both ranks, the comparison and the findings."""
    run = os.path.join(d, "run")
    os.makedirs(run)
    write(run, "h_1_rank0.1.pt.trace.json.gz", trace(0, 300, True), True)
    write(run, "h_2_rank1.1.pt.trace.json", trace(1, 10, False), False)
    open(os.path.join(run, "notes.txt"), "w").write("not a trace")
    code, out, err = report("--json", "report", run)
    assert code == 0, (code, out, err)
    doc = json.loads(out)
    r0, r1 = doc["ranks"]
    assert (r0["rank"], r1["rank"], r0["world_size"]) == (0, 1, 2), (r0["rank"], r1["rank"])
    assert r0["window_us"] == 800 and r0["events"] == 16 and r0["gpu_events"] == 5, r0
    # what "forward" [0, 150] launched (by correlation): launch 1, a gemm
    # [0, 100] and the 5 us kernel [50, 55] (one id, as a graph's); launch 2
    # at 190 is outside it, whatever Kineto's projection [0, 300] spans
    assert r0["ranges"] == [{"name": "forward", "count": 1, "cpu_us": 150, "gpu_us": 105,
                             "gpu_span_us": 100, "gpu_ops": 2}], r0
    # the copy names no launch
    assert (r0["gpu_events"], r0["gpu_records_unlinked"]) == (5, 1), r0
    dev = [g for g in r0["gpus"] if "stream" not in g][0]
    # device busy: [0,100] [200,300] [400,700] [720,770] (the 5 us kernel inside the first)
    assert dev["busy_us"] == 550 and dev["idle_us"] == 250, dev
    # idle gaps: 100, 100 (0.1-1 ms); 20, 30 (10-100 us)
    assert dev["idle_gaps_us"] == [0, 50, 200, 0, 0], dev
    # the sync call [320, 350] began after the GPU went idle at 300: not its gap
    assert dev["sync_gaps"] == 0 and dev["idle_after_sync_us"] == 0, dev
    assert [(g["at_us"], g["length_us"]) for g in dev["longest_gaps"]] == \
        [(100, 100), (300, 100), (770, 30), (700, 20)], dev
    streams = {g["stream"]: g["busy_us"] for g in r0["gpus"] if "stream" in g}
    assert streams == {7: 250, 8: 5, 9: 300}, streams
    it = r0["iterations"]
    assert (it["count"], it["median_us"], it["min_us"], it["max_us"]) == (2, 400, 350, 450), it
    top = r0["top_kernels"]
    assert [k["name"] for k in top] == ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "gemm",
                                        "small"], top
    assert top[1]["count"] == 2 and top[1]["median_us"] == 100 and top[1]["max_us"] == 100
    assert near(top[0]["share"], 300 / 505), top[0]
    assert r0["kernel_us"] == 505 and r0["nccl_us"] == 300 and r0["nccl_us_per_iteration"] == 150
    assert r0["cuda_api_us"] == 60 and r0["sync_us"] == 30 and r0["short_kernels"] == 1, r0
    cp = r0["copies"][0]
    assert cp["name"].startswith("Memcpy HtoD (Pageable") and cp["bytes"] == 1000000, cp
    assert r1["nccl_us"] == 10 and r1["window_us"] == 800, r1
    # both ranks have steps of 350 and 450 us: equal medians, rank 0 first
    assert doc["slowest"] == {"rank": 0, "step_us": 400, "fastest_rank": 0,
                              "fastest_step_us": 400}, doc["slowest"]
    f = texts(doc)
    assert any("rank 1 is the straggler" in x and "0.15 ms" in x for x in f), f
    strag = [x for x in doc["findings"] if x["kind"] == "straggler"][0]
    assert (strag["rank"], strag["severity"], strag["evidence"]) == \
        (1, "high", {"nccl_us_per_iteration": 5, "waiting_rank": 0,
                     "waiting_nccl_us_per_iteration": 150}), strag
    assert any("pageable" in x for x in f), f
    # the text report says the same
    code, text, err = report("report", run)
    assert code == 0, err
    for want in ("rank 0 of 2", "busy 0.550 ms (68.8% of the window)", "iterations: 2, median 0.400 ms",
                 "== across ranks", "rank 1 is the straggler", "1.  "[:2]):
        assert want in text, (want, text)


def test_unrelated_not_compared(d):
    """Files that are not the ranks of one job are not compared (issue 26):
    the same two traces with no rank (a process that had none), or both
    "rank 0 of 1", get no table across ranks, no slowest rank, no straggler
    finding; each is named by its file, and an unknown rank is null."""
    for label, dist in (("none", None), ("0of1", {"backend": "nccl", "rank": 0, "world_size": 1})):
        run = os.path.join(d, label)
        os.makedirs(run)
        for name, nccl in (("a.json", 300), ("b.json", 10)):
            doc = trace(0, nccl, False)
            if dist is None:
                del doc["distributedInfo"]
            else:
                doc["distributedInfo"] = dist
            write(run, name, doc, False)
        code, out, err = report("report", run, "--json")
        assert code == 0, (code, out, err)
        doc = json.loads(out)
        assert doc["compared"] is False and "slowest" not in doc, doc.keys()
        assert not any("straggler" in f for f in texts(doc)), doc["findings"]
        if dist is None:
            assert [r["rank"] for r in doc["ranks"]] == [None, None], doc["ranks"]
            assert [r["world_size"] for r in doc["ranks"]] == [None, None], doc["ranks"]
        code, text, err = report("report", run)
        assert code == 0, err
        assert "== across ranks" not in text and "straggler" not in text, text
        assert "not the ranks of one job" in text and "rank -1" not in text, text
    # the real ranks of one job still are compared
    run = os.path.join(d, "job")
    os.makedirs(run)
    write(run, "r0.json", trace(0, 300, False), False)
    write(run, "r1.json", trace(1, 10, False), False)
    code, out, err = report("report", run, "--json")
    assert code == 0 and json.loads(out)["compared"] is True, (out, err)


def test_bad_input(d):
    """A truncated file and a malformed one: a clear error with the
    position, exit 1, and what could be read is still reported."""
    good = json.dumps(trace(0, 300, True))
    cut = os.path.join(d, "cut.json")
    with open(cut, "w") as f:
        f.write(good[:len(good) * 2 // 3])
    code, out, err = report("--json", "report", cut)
    assert code == 1 and "ends early" in err, (code, err)
    assert json.loads(out)["ranks"][0]["events"] > 0, out
    bad = os.path.join(d, "bad.json.gz")
    with gzip.open(bad, "wt") as f:
        f.write('{"traceEvents": [{"name": "a", "ph": "X", "ts": 1, "dur": 2}, {"name": ]}')
    code, out, err = report("report", bad)
    assert code == 1 and "not valid JSON at byte" in err, (code, err)
    assert "2 events" not in out and "1 events" in out, out
    code, out, err = report("report", os.path.join(d, "missing"))
    assert code == 3 and "missing" in err, (code, err)
    code, out, err = report("report", "--top", "0", cut)
    assert code == 3 and "--top" in err, (code, err)


def test_older_kineto_names(d):
    """Older Kineto wrote "Kernel", "Memcpy", "Runtime" as categories, and
    integer microseconds: read the same."""
    doc = {"traceEvents": [
        {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 20},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0,
         "tid": 7, "ts": 40, "dur": 10, "args": {"bytes": 100}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5, "ts": 0,
         "dur": 8}]}
    path = write(d, "old.json", doc, False)
    code, out, err = report("--json", "report", path)
    assert code == 0, err
    r = json.loads(out)["ranks"][0]
    assert (r["gpu_events"], r["kernel_us"], r["cuda_api_us"], r["window_us"]) == (2, 20, 8, 50), r
    assert r["rank"] is None and r["copies"][0]["bytes"] == 100, r


def test_relative_timestamps(d):
    """Newer Kineto writes timestamps relative to baseTimeNanoseconds, older
    ones absolute: every figure is the same either way."""
    rel = trace(0, 300, True)
    rel["baseTimeNanoseconds"] = 1790857026000000000
    ab = json.loads(json.dumps(rel))
    for e in ab["traceEvents"]:
        if "ts" in e:
            e["ts"] += 1790857026000000.0
    outs = []
    for name, doc in (("rel.json", rel), ("abs.json", ab)):
        code, out, err = report("--json", "report", write(d, name, doc, False))
        assert code == 0, err
        r = json.loads(out)
        r["ranks"][0].pop("file")
        for f in r["findings"]:
            f.pop("file")
        outs.append(r)
    assert outs[0] == outs[1], outs


def test_real_ddp(d):
    """The H200 DDP traces: every figure equals what this test computes
    from the files with Python's json; the straggler is named."""
    code, out, err = report("--json", "report", "--top", "1000", DDP)
    assert code == 0, (code, err)
    doc = json.loads(out)
    files = sorted(os.path.join(DDP, f) for f in os.listdir(DDP))
    assert len(files) == 2, files
    assert [r["rank"] for r in doc["ranks"]] == [0, 1], doc["ranks"]
    for r, path in zip(doc["ranks"], files):
        ev = json.load(gzip.open(path, "rt"))["traceEvents"]
        x = [e for e in ev if e.get("ph") == "X"]
        kern = [e for e in x if e.get("cat") == "kernel"]
        nccl = sum(e["dur"] for e in kern if "nccl" in e["name"].lower())
        steps = sorted(e["dur"] for e in x if e["name"].startswith("ProfilerStep#"))
        assert r["events"] == len(ev), (r["events"], len(ev))
        assert r["gpu_events"] == sum(1 for e in x if e.get("cat") in
                                      ("kernel", "gpu_memcpy", "gpu_memset")), r
        assert sum(k["count"] for k in r["top_kernels"]) == len(kern), r
        assert near(r["nccl_us"], nccl) and near(r["kernel_us"], sum(e["dur"] for e in kern)), r
        assert r["iterations"]["count"] == len(steps) == 5, r["iterations"]
        # recorded with driver-API launches (issue 27): every NCCL kernel has
        # its cuLaunchKernelEx, so HTA keeps them all
        assert not hta_rule.dropped(ev), [e["name"][:40] for e in hta_rule.dropped(ev)]
        assert sum(1 for e in kern if "nccl" in e["name"].lower()) == 10, path
        assert abs(r["iterations"]["max_us"] - steps[-1]) < 0.01, (r["iterations"], steps)
        t0 = min(e["ts"] for e in x)
        t1 = max(e["ts"] + e["dur"] for e in x)
        assert abs(r["window_us"] - (t1 - t0)) < 0.01, (r["window_us"], t1 - t0)
    # rank 1 sleeps in its steps; rank 0 waits for it in NCCL: rank 1 is slowest
    steps = [statistics.median(e["dur"] for e in json.load(gzip.open(f, "rt"))["traceEvents"]
                               if e.get("name", "").startswith("ProfilerStep#")) for f in files]
    slow = max(range(2), key=lambda i: steps[i])
    assert doc["slowest"]["rank"] == slow and \
        abs(doc["slowest"]["step_us"] - steps[slow]) < 0.01, (doc["slowest"], steps)
    code, text, err = report("report", DDP)
    assert "slowest: rank %d, median step %.3f ms" % (slow, steps[slow] / 1000) in text, text
    assert doc["ranks"][0]["nccl_us_per_iteration"] > 5000 > 200 > \
        doc["ranks"][1]["nccl_us_per_iteration"], doc["ranks"]
    assert any(f.startswith("rank 1 is the straggler") for f in texts(doc)), doc["findings"]


def located():
    """The hand-built trace of test_located (its docstring has the numbers)."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
         "ts": 0, "dur": 2000},
        {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#x", "pid": 1,
         "tid": 1, "ts": 0, "dur": 600},
        {"ph": "X", "cat": "kernel", "name": "big", "pid": 0, "tid": 7, "ts": 600, "dur": 200},
        {"ph": "X", "cat": "user_annotation", "name": "post", "pid": 1, "tid": 1, "ts": 800,
         "dur": 500},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "post", "pid": 0, "tid": 7, "ts": 810,
         "dur": 392},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1,
         "ts": 1150, "dur": 60},
        {"ph": "X", "cat": "kernel", "name": "after", "pid": 0, "tid": 7, "ts": 1702, "dur": 100},
    ]
    ev += [{"ph": "X", "cat": "kernel", "name": "tiny", "pid": 0, "tid": 7, "ts": 810 + 10 * i,
            "dur": 2, "args": {"correlation": 100 + i}} for i in range(40)]
    ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": 801 + 8 * i, "dur": 1, "args": {"correlation": 100 + i}} for i in range(40)]
    return {"traceEvents": ev}


def test_located(d):
    """Where the time goes: a DataLoader range [0, 600] with the GPU idle,
    a 200 us kernel, a range "post" whose 40 kernels of 2 us run 10 us
    apart [810, 1202] (a launch-bound stretch: 80 us busy, 312 idle), a
    cudaStreamSynchronize [1150, 1210] that waits for them and returns in
    the gap [1202, 1702] that follows, a last kernel, iteration [0, 2000]."""
    path = write(d, "located.json", located(), False)
    code, out, err = report("--json", "report", path)
    assert code == 0, (code, err)
    doc = json.loads(out)
    r = doc["ranks"][0]
    dev = r["gpus"][0]
    assert "stream" not in dev and dev["busy_us"] == 380, dev
    assert dev["idle_gaps_us"] == [312, 10, 1298, 0, 0], dev
    assert (dev["idle_after_sync_us"], dev["sync_gaps"]) == (500, 1), dev
    assert dev["longest_gaps"][:3] == [
        {"at_us": 0, "length_us": 600, "where": "in 'enumerate(DataLoader)#x', ProfilerStep#3"},
        {"at_us": 1202, "length_us": 500, "where": "in ProfilerStep#3, outside any range"},
        {"at_us": 1802, "length_us": 198, "where": "in ProfilerStep#3, outside any range"}], dev
    assert r["launch_bound_stretches"] == [
        {"device": 0, "at_us": 810, "length_us": 392, "busy_us": 80, "operations": 40,
         "where": "in 'post', ProfilerStep#3"}], r["launch_bound_stretches"]
    assert r["launch_bound_idle_us"] == 312, r
    assert (r["data_loading_cpu_us"], r["data_loading_gpu_idle_us"], r["data_loading_calls"]) \
        == (600, 600, 1), r
    post = [x for x in r["ranges"] if x["name"] == "post"][0]
    # its 40 launches ran 40 x 2 us, from 810 to 1202
    assert (post["cpu_us"], post["gpu_us"], post["gpu_span_us"], post["gpu_ops"]) == \
        (500, 80, 392, 40), post
    assert r["iterations"]["in_order_us"] == [2000], r["iterations"]
    assert r["syncs"][0]["name"] == "cudaStreamSynchronize", r["syncs"]
    f = texts(doc)
    for want in ("the GPU is idle 81% of the window; the longest gaps: 0.60 ms at +0.00 ms "
                 "(the CPU in 'enumerate(DataLoader)#x'",
                 "data loading stalls the GPU: 0.60 ms per iteration",
                 "the loop is launch-bound: the GPU waits on kernel launches 0.31 ms",
                 "in 'post', ProfilerStep#3",
                 "synchronisation: the GPU sits idle 0.50 ms (25% of the window) in 1 gaps"):
        assert any(want in x for x in f), (want, f)
    code, text, err = report("report", path)
    assert code == 0 and "40 operations in 0.392 ms at +0.810 ms, GPU busy 20%, in 'post'" in text, \
        text
    # without the sync call, no gap is put down to one
    doc2 = located()
    doc2["traceEvents"] = [e for e in doc2["traceEvents"] if "Synchronize" not in e["name"]]
    code, out, err = report("--json", "report", write(d, "nosync.json", doc2, False))
    dev = json.loads(out)["ranks"][0]["gpus"][0]
    assert code == 0 and (dev["idle_after_sync_us"], dev["sync_gaps"]) == (0, 0), dev


class Tags(html.parser.HTMLParser):
    """Checks that every element opened is closed in order; counts tags."""
    VOID = {"meta", "rect", "line", "polyline", "br"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.count, self.findings = [], [], {}, 0

    def handle_starttag(self, tag, attrs):
        self.count[tag] = self.count.get(tag, 0) + 1
        if tag == "li" and self.stack[-1:] == ["ol"]:
            self.findings += 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append((tag, self.stack[-3:]))
        else:
            self.stack.pop()


def test_html(d):
    """--html: one page, nothing fetched, every trace name escaped, the
    charts there, as many findings as --json says; written whole or not
    at all."""
    doc = trace(0, 300, True)
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "<script>alert('x')</script>&",
                               "pid": 0, "tid": 7, "ts": 780, "dur": 10})
    run = os.path.join(d, "run")
    os.makedirs(run)
    write(run, "a_rank0.json", doc, False)
    write(run, "b_rank1.json.gz", trace(1, 10, False), True)
    page = os.path.join(d, "report.html")
    code, out, err = report("report", run, "--html", page)
    assert code == 0 and "wrote " + page in err, (code, err)
    text = open(page).read()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>"), text[-200:]
    assert "<script>" not in text and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;" in text
    for banned in ("http://", "https://", "src=", "<link", "@import"):
        assert banned not in text, banned
    p = Tags()
    p.feed(text)
    assert not p.errors and not p.stack, (p.errors, p.stack)
    # the busy timeline, the step-time chart and a kernel chart per rank,
    # each well-formed XML as well (an SVG viewer can take it out)
    assert p.count.get("svg") == 4 and p.count.get("polyline") == 2, p.count
    for svg in re.findall(r"<svg.*?</svg>", text, re.S):
        xml.etree.ElementTree.fromstring(svg)
    code, out, err = report("--json", "report", run)
    assert p.findings == len(json.loads(out)["findings"]) > 0, (p.findings, out)
    code, out, err = report("report", run, "--html", "-")
    assert code == 0 and out.startswith("<!DOCTYPE html>"), out[:100]
    # a path that cannot be written: exit 1, no page, no temporary file left
    os.makedirs(os.path.join(d, "taken"))
    code, out, err = report("report", run, "--html", os.path.join(d, "taken"))
    assert code == 1 and "cannot write" in err, (code, err)
    assert sorted(os.listdir(d)) == ["report.html", "run", "taken"], os.listdir(d)


def merged(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def busy_in(m, a, b):
    return sum(max(0, min(z, b) - max(x, a)) for x, z in m)


def test_real_bottlenecks(d):
    """The loop of tests/gpu/report_train.py (a slow DataLoader, pageable
    copies, 60 tiny kernels in "postprocess", .item() each step) traced
    by torch.profiler and by the agent on the H200: busy time, data
    loading, the ranges' GPU time and the launch-bound stretches equal
    what this test computes from the files; the findings name each
    bottleneck."""
    for name, wants in (("h200-torch-profiler", ["data loading stalls the GPU",
                                                  "launch-bound", "in 'postprocess'", "pageable",
                                                  "synchronisation"]),
                        ("h200-agent-bottlenecks", ["launch-bound", "pageable",
                                                     "synchronisation"])):
        path = os.path.join(BOTTLENECKS, name + ".pt.trace.json.gz")
        code, out, err = report("--json", "report", "--top", "1000", path)
        assert code == 0, (code, err)
        doc = json.loads(out)
        r = doc["ranks"][0]
        ev = [e for e in json.load(gzip.open(path, "rt"))["traceEvents"] if e.get("ph") == "X"]
        gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        m = merged([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
        dev = [g for g in r["gpus"] if "stream" not in g]
        assert len(dev) == 1 and abs(dev[0]["busy_us"] - busy_in(m, -1e30, 1e30)) < 0.01, dev
        data = [e for e in ev if e.get("cat") == "user_annotation" and "DataLoader" in e["name"]]
        assert abs(r["data_loading_cpu_us"] - sum(e["dur"] for e in data)) < 0.01, r
        idle = sum(e["dur"] - busy_in(m, e["ts"], e["ts"] + e["dur"]) for e in data)
        assert abs(r["data_loading_gpu_idle_us"] - idle) < 0.01, r
        # the ranges' GPU work, by correlation, as report_check computes it
        want = report_check.ranges_reference(ev)
        for rg in r["ranges"]:
            gpu_us, ops, span = want[rg["name"]]
            assert abs(rg["gpu_us"] - gpu_us) < 0.01 and rg["gpu_ops"] == ops and \
                abs(rg["gpu_span_us"] - span) < 0.01, (rg, want[rg["name"]])
        # each kernel's median (a selection, not a sort, in gprofctl)
        for k in r["top_kernels"]:
            durs = [e["dur"] for e in gpu if e.get("cat") == "kernel" and e["name"] == k["name"]]
            assert len(durs) == k["count"] and \
                abs(statistics.median(durs) - k["median_us"]) < 1e-3, (k, statistics.median(durs))
        t0 = min(e["ts"] for e in ev)
        assert r["launch_bound_stretches"], r
        for s in r["launch_bound_stretches"]:
            a, b = t0 + s["at_us"], t0 + s["at_us"] + s["length_us"]
            ops = [e for e in gpu if a - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= b + 1e-3]
            assert len(ops) == s["operations"] >= 32, (s, len(ops))
            assert all(e["dur"] < 20 for e in ops), s
            assert abs(busy_in(m, a, b) - s["busy_us"]) < 0.01 and \
                s["busy_us"] < 0.6 * s["length_us"], s
        for want in wants:
            assert any(want in f for f in texts(doc)), (name, want, doc["findings"])


def test_output_dir(d):
    """gprofctl trace --output-dir D writes D/TRACE_ID/: report D reads the
    one trace there; with two it names them and reads neither (two traces'
    ranks mixed would invent a straggler); with none it says so."""
    import shutil
    out = os.path.join(d, "out")
    one = os.path.join(out, "20261128T125627Z-baccb3")
    os.makedirs(one)
    for f in os.listdir(DDP):
        shutil.copy(os.path.join(DDP, f), one)
    code, text, err = report("--json", "report", out)
    assert code == 0, (code, err)
    doc = json.loads(text)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1], doc["ranks"]
    assert any(f.startswith("rank 1 is the straggler") for f in texts(doc)), doc["findings"]
    two = os.path.join(out, "20261128T130000Z-aaaaaa")
    os.makedirs(two)
    write(two, "x_rank0.pt.trace.json", trace(0, 300, False), False)
    os.utime(two, (2e9, 2e9))
    code, text, err = report("report", out)
    assert code == 3 and "holds 2 traces" in err and "report " + two + " (the newest)" in err, \
        (code, err)
    assert text == "", text
    empty = os.path.join(d, "empty")
    os.makedirs(os.path.join(empty, "sub"))
    code, text, err = report("report", empty)
    assert code == 3 and "no trace file" in err, (code, err)


if __name__ == "__main__":
    code = (runner.run([test_figures, test_unrelated_not_compared, test_bad_input, test_older_kineto_names,
                         test_relative_timestamps, test_real_ddp,
                         test_located, test_html, test_real_bottlenecks, test_output_dir], "gprof-report-"))
    if code == 0 and report_check.SCHEMA_MISSING:
        print("SKIP: python3 jsonschema is missing, so the JSON was not validated")
        code = 77
    sys.exit(code)
