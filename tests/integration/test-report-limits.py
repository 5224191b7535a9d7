#!/usr/bin/env python3
"""gprofctl report on the worst inputs we can build (issue 43, items 3, 5, 6).

usage: test-report-limits.py GPROFCTL

Whoever reports on someone else's trace or snapshot pays for reading it, so
the reader must be linear in time and bounded in memory by a stated
multiple of the file (docs/REPORT.md, Limits). The clock and RSS would hold
that only on a quiet machine; what is held here is what gprofctl counts
itself (GPROFCTL_REPORT_COUNTS): hash lookups and probes, "where" lookups,
bytes of tokens cut across the reader's pieces scanned again,
steps walking a snapshot, bytes the snapshot reader allocated, bytes malloc
holds once the traces are read. Each builder of tests/tools/hostile_traces.py
(many devices, streams, threads, names, ranges on many devices, live
allocations among many operators, deep nesting, a long name; pickles of one
value per byte, of lists shared through the memo, of a large shared dict)
is run at n and 2n: the work at 2n must be at most about twice the work at
n, and the memory within the stated multiple. Then the case the attack
measured (60,000 devices: did not finish in 120 s) runs to the end.

Then a hostile trace, snapshot and file name with terminal escapes (window
title, clear screen, colours, C1 controls, a carriage return, DEL, bytes
that are not UTF-8): no control byte may reach stdout, and each shows as
\\xHH.
"""
import os
import pickle
import subprocess
import sys

GPROFCTL = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import runner  # noqa: E402
import hostile_traces  # noqa: E402

# docs/REPORT.md, Limits (and ctl/pickle.h, ctl/report_mem.c)
TRACE_BYTES_PER_BYTE = 16
PICKLE_BYTES_PER_BYTE = 16
STEPS_PER_BYTE = 32
FIXED = 1 << 20


def counts(path):
    """gprofctl report's counts for one file: (exit code, dict, stderr)."""
    r = subprocess.run([GPROFCTL, "report", path], capture_output=True, timeout=300,
                       env=dict(os.environ, GPROFCTL_REPORT_COUNTS="1"))
    err = r.stderr.decode(errors="replace")
    line = [l for l in err.splitlines() if "counts:" in l]
    assert line, "no counts line (GPROFCTL_REPORT_COUNTS): %r" % err[-500:]
    c = dict(kv.split("=") for kv in line[0].split("counts:")[1].split())
    return r.returncode, {k: int(v) for k, v in c.items()}, err


def work(c):
    return c["lookups"] + c["probes"] + c["wheres"] + c["rescanned"] + c["snapshot_steps"]


def held(d, name, build, n, ext):
    sizes, works = [], []
    for k in (n, 2 * n):
        data = build(k)
        path = os.path.join(d, "%s-%d%s" % (name, k, ext))
        with open(path, "wb") as f:
            f.write(data)
        code, c, err = counts(path)
        sizes.append(len(data))
        works.append(work(c))
        if ext == ".json":
            assert code == 0, (name, k, code, err[-300:])
            assert c["heap_bytes"] <= TRACE_BYTES_PER_BYTE * len(data) + FIXED, (name, k, c)
        else:
            assert c["snapshot_peak_bytes"] <= PICKLE_BYTES_PER_BYTE * len(data) + FIXED, \
                (name, k, c)
            # the walk stops at the first step past the bound
            assert c["snapshot_steps"] <= STEPS_PER_BYTE * len(data) + 100000 + 1000, \
                (name, k, c)
        os.unlink(path)
    # the file doubles (or a little more); the work may not grow faster
    ratio = sizes[1] / sizes[0]
    assert works[1] <= 1.1 * ratio * works[0] + 5000, \
        "%s: work %d at %d bytes, %d at %d: not linear" % (name, works[0], sizes[0], works[1],
                                                           sizes[1])
    print("  %-16s %9d -> %9d bytes, work %9d -> %9d" % (name, sizes[0], sizes[1], works[0],
                                                        works[1]))


def test_traces_linear(d):
    for name, build in hostile_traces.TRACES.items():
        # a long name must cross the reader's 256 KiB pieces
        held(d, name, build, 300000 if name == "long_name" else 3000, ".json")


def test_pickles_linear(d):
    for name, build in hostile_traces.PICKLES.items():
        held(d, name, build, 3000, ".pickle")


def test_pickle_refused_early(d):
    """One value per byte under a dict root: refused once it would cost
    16 bytes per byte, before the end of the file; a file whose value is
    not a dict at its first opcode."""
    path = os.path.join(d, "lists.memory.pickle")
    with open(path, "wb") as f:
        f.write(hostile_traces.pickle_lists(1 << 20))
    code, c, err = counts(path)
    assert code != 0 and "bytes of memory" in err, (code, err)
    assert c["snapshot_peak_bytes"] <= PICKLE_BYTES_PER_BYTE * ((1 << 20) + 6) + FIXED, c
    with open(path, "wb") as f:
        f.write(b"\x80\x04" + b"]" * (1 << 20) + b".")
    code, c, err = counts(path)
    assert code != 0 and "its value is not a dict" in err and "at byte 2" in err, (code, err)
    assert c["snapshot_peak_bytes"] < 1 << 18, c


def test_sixty_thousand_devices(d):
    """The attack's case: 60,000 devices (540 KB then) did not finish in
    120 s; held to the same counts as any other file."""
    data = hostile_traces.devices(60000)
    path = os.path.join(d, "devices.json")
    with open(path, "wb") as f:
        f.write(data)
    code, c, err = counts(path)
    assert code == 0, err
    # 3 lookups per event, each about 2 probes in a table at most half full
    assert work(c) <= 12 * 60000, c
    assert c["heap_bytes"] <= TRACE_BYTES_PER_BYTE * len(data) + FIXED, c


def control_free(out):
    """Raises unless out is UTF-8 with no control character but newlines."""
    text = out.decode("utf-8")  # strict: bytes that are not UTF-8 must not pass
    bad = [hex(ord(ch)) for ch in text
           if (ord(ch) < 0x20 and ch != "\n") or 0x7f <= ord(ch) <= 0x9f]
    assert not bad, "control characters reached the terminal: %s" % bad[:10]
    return text


HOSTILE = ["\x1b]0;pwned\x07title", "\x1b[2Jcleared", "\x1b[31mred\x1b[0m",
           "c1\u009b2Jcsi", "cr\rover", "del\x7fete", "BADUTF8"]


def test_escapes(d):
    """Names from the trace, a snapshot's frames and the file's own name,
    with escapes in each: the text report shows them as \\xHH."""
    ev = []
    for i, name in enumerate(HOSTILE):
        ev.append({"ph": "X", "cat": "kernel", "name": "k" + name, "pid": 0, "tid": 7,
                   "ts": i * 100, "dur": 10})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "r" + name, "pid": 1,
                   "tid": 1, "ts": i * 100, "dur": 50})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "op" + name, "pid": 1, "tid": 1,
                   "ts": i * 100 + 1, "dur": 40})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "call" + name, "pid": 1,
                   "tid": 1, "ts": i * 100 + 2, "dur": 5})
        ev.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": i * 100 + 3,
                   "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 * (i + 1),
                            "Bytes": 1000 + i, "Total Allocated": 1000 * (i + 1),
                            "Total Reserved": 1 << 20}})
    import json
    data = json.dumps({"traceEvents": ev}).encode()
    data = data.replace(b"BADUTF8", b"bad\xff\xfe\xc3")  # raw, not UTF-8
    name = os.path.join(d, "t\x1b]0;file\x07.json")
    with open(name, "wb") as f:
        f.write(data)
    snap = {"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 4096 * (i + 1), "size": 100 + i,
         "frames": [{"filename": "x%s.py" % h, "name": "f" + h, "line": 1}]}
        for i, h in enumerate(HOSTILE)]]}
    snapfile = os.path.join(d, "s\x1b[2J_rank0.memory.pickle")
    with open(snapfile, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    r = subprocess.run([GPROFCTL, "report", "--top", "50", name, snapfile], capture_output=True,
                       timeout=60, env=dict(os.environ, GPROFCTL_REPORT_COUNTS="1"))
    assert r.returncode == 0, r.stderr
    text = control_free(r.stdout)
    for shown in ("\\x1b]0;pwned\\x07title", "\\x1b[2Jcleared", "\\xc2\\x9b2Jcsi",
                  "cr\\x0dover", "del\\x7fete", "bad\\xff\\xfe\\xc3", "t\\x1b]0;file\\x07.json",
                  "s\\x1b[2J_rank0"):
        assert shown in text, (shown, text[:3000])
    # each kind of name was printed (and escaped)
    for prefix in ("k\\x1b[2J", "r\\x1b[2J", "op\\x1b[2J", "call\\x1b[2J", "f\\x1b[2J",
                   "x\\x1b[2J"):
        assert prefix in text, (prefix, text[:3000])
    escaped = int(r.stderr.decode().split("escaped=")[1].split()[0])
    assert escaped > 0
    # what report says on stderr names the file: escaped there too
    r = subprocess.run([GPROFCTL, "report", name + ".gone"], capture_output=True, timeout=60)
    assert r.returncode != 0 and r.stdout == b"", r
    assert b"\\x1b]0;file\\x07" in r.stderr and control_free(r.stderr), r.stderr


if __name__ == "__main__":
    sys.exit(runner.run([test_traces_linear, test_pickles_linear, test_pickle_refused_early,
                         test_sixty_thousand_devices, test_escapes], "gprof-report-limits-"))
