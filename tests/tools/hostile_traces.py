"""The worst inputs for gprofctl report that we know how to build (issue 43).

Each builder takes a count n and returns the file's bytes; the file grows
linearly with n. They aim at what a reader of someone else's trace pays
for: a lookup keyed by a value the file chooses (devices, streams,
threads, correlation ids, names), a walk that meets the same value again
(device histories, frames and dicts shared through a pickle's memo), an
output that asks where each of many devices idled, a value per byte.

Used by tests/integration/test-report-limits.py (counts held linear) and
bench/report_worst.py (time and memory per input byte).
"""
import json
import struct


def _trace(events, extra=None):
    doc = {"traceEvents": events}
    doc.update(extra or {})
    return json.dumps(doc, separators=(",", ":")).encode()


def _x(cat, name, pid, tid, ts, dur, args=None):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def devices(n):
    """n GPU devices, one kernel each (the case the attack measured)."""
    return _trace([_x("kernel", "k", d, 7, d * 10, 5) for d in range(n)])


def streams(n):
    """One device, n streams."""
    return _trace([_x("kernel", "k", 0, s, s * 10, 5) for s in range(n)])


def threads(n):
    """n CPU threads, each with an operator and a CUDA call (report_ops)."""
    ev = []
    for t in range(n):
        ev.append(_x("cpu_op", "aten::mm", 1, t, t * 10, 8))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", 1, t, t * 10 + 1, 2,
                     {"correlation": t}))
        ev.append(_x("kernel", "k", 0, 7, t * 10 + 2, 3, {"correlation": t}))
    return _trace(ev)


def names(n):
    """n distinct kernel, range, operator and call names."""
    ev = []
    for i in range(n):
        ev.append(_x("kernel", "k%d" % i, 0, 7, i * 10, 5))
        ev.append(_x("user_annotation", "r%d" % i, 1, 1, i * 10, 6))
        ev.append(_x("cpu_op", "op%d" % i, 1, 1, i * 10, 4))
        ev.append(_x("cuda_runtime", "call%d" % i, 1, 1, i * 10 + 1, 1))
    return _trace(ev)


def deep_ops(n):
    """n operators nested in one another, then n launches inside the
    outermost only, after the inner ones ended: each launch's operator, and
    each operator's scope, was found a parent at a time (n steps each)."""
    ev = [_x("cpu_op", "aten::x", 1, 1, k, 2 * n - 2 * k) for k in range(n)]
    for c in range(n):
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", 1, 1, 2 * n - 0.5, 0.001,
                     {"correlation": c}))
        ev.append(_x("kernel", "k", 0, 7, 3 * n + c, 1, {"correlation": c}))
    return _trace(ev)


def gpu_ranges(n):
    """n devices, each with a range's GPU projection and a data-loading
    range on the CPU (spans times devices, before)."""
    ev = []
    for d in range(n):
        ev.append(_x("kernel", "k", d, 7, d * 10, 5))
        ev.append(_x("gpu_user_annotation", "fwd", d, 7, d * 10, 5))
        ev.append(_x("user_annotation", "DataLoader", 1, 1, d * 10, 5))
    return _trace(ev)


def gaps(n):
    """n devices each idle in gaps, and n ranges: where each device's gaps
    fall is asked of every range (the outputs' lookups)."""
    ev = []
    for d in range(n):
        ev.append(_x("kernel", "k", d, 7, d * 10, 1))
        ev.append(_x("kernel", "k", d, 7, d * 10 + 5, 1))
        ev.append(_x("user_annotation", "r", 1, 1, d * 10, 9))
    return _trace(ev)


def memory(n):
    """n GPU allocations live at the peak, and n operators around them
    (each allocation's operator was looked for among all)."""
    ev = []
    for i in range(n):
        ev.append(_x("cpu_op", "op%d" % (i % 50), 1, 1, i * 10, 8))
        ev.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": i * 10 + 1,
                   "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096 * (i + 1),
                            "Bytes": 512, "Total Allocated": 512 * (i + 1),
                            "Total Reserved": 1 << 30}})
    return _trace(ev)


def nesting(n):
    """Arrays n deep inside an event's args."""
    return (b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":0,'
            b'"dur":1,"args":{"x":' + b"[" * n + b"]" * n + b"}}]}")


def long_name(n):
    """One kernel whose name is n bytes."""
    return _trace([_x("kernel", "k" * n, 0, 7, 0, 1)])


# ---- pickles: what a memory snapshot's reader meets ----

def _p_str(s):
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b if len(b) < 256 else b"X" + struct.pack("<I", len(b)) + b


def pickle_lists(n):
    """A dict root, then n empty lists: the most values per byte."""
    return b"\x80\x04}(" + b"]" * n + b"l."


def pickle_shared(n):
    """A snapshot whose segments name one segment n times (its n blocks
    walked each time) and whose device_traces name one history of n
    events 200 times, through the memo: a walk that follows every
    reference meets the same lists again and again."""
    blocks = b"](" + b"".join(
        b"}(" + _p_str("state") + _p_str("active_allocated") + _p_str("size") + b"K\x01" +
        _p_str("address") + b"J" + struct.pack("<i", (4096 * i) & 0x7fffffff) + b"u" for i in range(n)) + b"e"
    seg = b"}(" + _p_str("device") + b"K\x00" + _p_str("blocks") + blocks + b"u"
    events = b"](" + b"".join(
        b"}(" + _p_str("action") + _p_str("alloc") + _p_str("addr") + b"J" +
        struct.pack("<i", (4096 * i) & 0x7fffffff) + _p_str("size") + b"K\x01u" for i in range(n)) + b"e"
    return (b"\x80\x04}(" + _p_str("segments") + b"](" + seg + b"q\x01" + b"h\x01" * n +
            b"e" + _p_str("device_traces") + b"](" + events + b"q\x02" + b"h\x02" * 200 +
            b"eu.")


def pickle_big_dict(n):
    """One history event whose dict has n keys, named n times in the
    history: each lookup in it scans its keys."""
    d = (b"}(" + b"".join(_p_str("k%d" % i) + b"K\x01" for i in range(n)) +
         _p_str("action") + _p_str("alloc") + b"u")
    return (b"\x80\x04}(" + _p_str("segments") + b"]" + _p_str("device_traces") + b"](](" +
            d + b"q\x01" + b"h\x01" * n + b"eeu.")


TRACES = {"devices": devices, "streams": streams, "threads": threads, "names": names,
          "deep_ops": deep_ops, "gpu_ranges": gpu_ranges, "gaps": gaps, "memory": memory, "nesting": nesting,
          "long_name": long_name}
PICKLES = {"pickle_lists": pickle_lists, "pickle_shared": pickle_shared,
           "pickle_big_dict": pickle_big_dict}
