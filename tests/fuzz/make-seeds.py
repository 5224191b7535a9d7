#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into corpus/<target>/.

Seeds are valid inputs (so the fuzzer starts from deep paths) plus a few
broken ones. The native-message seeds come from tests/unit/msg-samples.h,
the same canonical texts the unit tests round-trip. Run it again after
changing the protocol; libFuzzer's minimised finds are added beside these
by run-libfuzzer.sh.
"""
import os
import pickle
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def samples():
    text = open(os.path.join(HERE, "..", "unit", "msg-samples.h")).read()
    for lit in re.findall(r'^\t"(.*)",$', text, re.M):
        yield bytes(lit, "ascii").decode("unicode_escape").encode()


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(js):
    return struct.pack("<I", len(js)) + js


def chunk(transfer, offset, data):
    return struct.pack("<IIIQ", 0x80000000 | (16 + len(data)), transfer, 0, offset) + data


GPUTRACE = (b'\n{\n    "fn": "setKinetOnDemandRequest",\n'
            b'    "config": "ACTIVITIES_LOG_FILE=/tmp/t.json\\nPROFILE_START_TIME=0\\n'
            b'ACTIVITIES_DURATION_MSECS=500",\n    "job_id": 1234,\n'
            b'    "pids": [0],\n    "process_limit": 3\n}')

msgs = list(samples())
for i, m in enumerate(msgs):
    write("msg", "sample-%02d.json" % i, m)
write("msg", "bad-utf8.json", b'{"type":"heartbeat","x":"\xff"}')
write("msg", "deep.json", b'{"type":"heartbeat","x":' + b"[" * 20 + b"]" * 20 + b"}")

write("frame", "three-frames", b"\x05" + frame(msgs[0]) + chunk(3, 0, b"abc") + frame(msgs[7]))
write("frame", "dyno", b"\x01" + frame(GPUTRACE))
write("frame", "oversize", b"\x02" + struct.pack("<I", 5000) + b"{}")
write("frame", "zero", b"\x03" + struct.pack("<I", 0))

write("dyno", "gputrace.json", GPUTRACE)
write("dyno", "status.json", b'{"fn":"getStatus"}')
write("dyno", "version.json", b'{"fn":"getVersion"}')
write("dyno", "pause.json", b'{"fn":"dcgmProfPause","duration_s":300}')
write("dyno", "unknown.json", b'{"fn":"reboot"}')
write("dyno", "missing-pids.json", b'{"fn":"setKinetOnDemandRequest","config":"A=1"}')

req = struct.pack("<Q32siiq6i", 40, b"req", 3, 6, 1234, 5000, 4999, 4000, 300, 20, 1)
write("kipc", "req-observed", req)
write("kipc", "req-heartbeat", struct.pack("<Q32siiqi", 20, b"req", 0, 1, 0, 42))
write("kipc", "ctxt", struct.pack("<Q32siiq", 16, b"ctxt", 0, 42, 7))
write("kipc", "short", req[:30])
write("kconfig", "dyno-duration", GPUTRACE.split(b'"config": "')[1].split(b'",')[0].replace(b"\\n", b"\n"))
write("kconfig", "iterations", b"PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=10\nACTIVITIES_ITERATIONS=5\nREQUEST_TRACE_ID=x\n")
write("kconfig", "two-equals", b"A=B=C\n")
write("kconfig", "options", b"PROFILE_REPORT_INPUT_SHAPES=true\nPROFILE_PROFILE_MEMORY=True\n"
      b"PROFILE_MEMORY=1\nPROFILE_WITH_STACK=y\nPROFILE_WITH_FLOPS=no\nPROFILE_WITH_MODULES=T\n")
write("kconfig", "options-both-ways", b"PYTHON_STACK_TRACE=1\nPROFILE_WITH_STACK=false\n"
      b"CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION=maybe\n")
write("config", "full", b"tcp: 127.0.0.1:1778\nstate_dir: /var/lib/gprofd\nlog_level: debug\n"
      b"limits:\n  connections: 10\n  frame_bytes: 2M\nretention:\n  max_age: 3d\n"
      b"kineto:\n  enabled: false\n  expiry: 30s\n")
write("config", "bad-key", b"limits:\n  bogus: 1\n")
write("config", "dup", b"tcp: off\ntcp: off\n")
write("config", "flow", b"{tcp: off, limits: {connections: 5}}\n")
# the /proc parsers: first byte picks the parser (fuzz-proc.c)
fixture = os.path.join(HERE, "..", "fixtures", "host-a", "proc")
for i, name in enumerate(["stat", "meminfo", "loadavg", "net/dev", "diskstats"]):
    with open(os.path.join(fixture, name), "rb") as f:
        write("proc", "host-" + name.replace("/", "-"), bytes([i]) + f.read())
write("proc", "environ", b"\x05PATH=/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0SLURM_JOB_ID=77\0"
      b"GPROF_JOB_ID=job-1\0")
write("proc", "environ-cut", b"\x05RANK=3\0WORLD_SIZE=8")
write("proc", "stat-line", b"\x06" + b"4242 (python3 (x) y) S 4100 4242 4100 0 -1 4194560 13 0 0 0\n")
write("proc", "unix-line", b"\x07" + b"0000000000000000: 00000002 00000000 00000000 0002 01 31337 "
      b"@dynolog@\n")
write("proc", "tcp-line", b"\x08" + b"   0: 0100007F:06F2 00000000:0000 0A 00000000:00000000 "
      b"00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0\n")
# gprofctl report: small traces cut from the real ones in tests/fixtures (each
# category's first events, under libFuzzer's 8 KB input limit), and broken ones
import gzip  # noqa: E402
import json  # noqa: E402
traces = os.path.join(HERE, "..", "fixtures", "traces")
for sub in sorted(os.listdir(traces)):
    for name in sorted(os.listdir(os.path.join(traces, sub))):
        with (gzip.open if name.endswith(".gz") else open)(os.path.join(traces, sub, name),
                                                          "rb") as f:
            t = json.load(f)
        for per in (2, 4):
            seen, keep = {}, []
            for e in t["traceEvents"]:
                k = (e.get("cat"), e.get("ph"))
                if seen.get(k, 0) < per:
                    seen[k] = seen.get(k, 0) + 1
                    keep.append(e)
            small = {k: v for k, v in t.items() if k != "traceEvents" and k != "deviceProperties"}
            small["traceEvents"] = keep
            data = json.dumps(small, separators=(",", ":")).encode()
            while len(data) > 8000 and keep:
                keep.pop()
                data = json.dumps(small, separators=(",", ":")).encode()
            write("report", "%s-%d" % (name.split(".")[0], per), data)
write("report", "empty-events", b'{"traceEvents":[]}')
write("report", "cut", b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":')
write("report", "not-json", b"hello")
# names with terminal escapes, C1 controls and bytes that are not UTF-8
# (issue 43: the text report must show them as \\xHH)
write("report", "escapes", b'{"traceEvents":[' + b",".join(
    b'{"ph":"X","cat":"%s","name":"%s","pid":%d,"tid":7,"ts":%d,"dur":5}' % (c, n, p, t)
    for t, (c, n, p) in enumerate([
        (b"kernel", b"k\\u001b]0;title\\u0007", 0), (b"user_annotation", b"r\\u001b[2J", 1),
        (b"kernel", b"c1\xc2\x9bx", 0), (b"cpu_op", b"bad\xff\xfe", 1),
        (b"cuda_runtime", b"cr\\r\\u007f", 1)])) + b"]}")
# the operator table's torch.profiler rules: a list-of-tensors argument, a
# CUPTI overhead record (pid -1), an unlinked call on another thread, an
# operator merged into its parent of the same name, one left out
write("report", "ops-torch-rules", json.dumps({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
     "dur": 1000, "args": {"External id": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 1, "tid": 1, "ts": 100,
     "dur": 200, "args": {"External id": 2, "Input Dims": [[[2, 3], [4]], [5], []]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 1, "tid": 1, "ts": 110,
     "dur": 180, "args": {"External id": 3, "Input Dims": [[2]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 120,
     "dur": 20, "args": {"External id": 3, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 400, "dur": 50,
     "args": {"External id": 3, "correlation": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::is_leaf", "pid": 1, "tid": 1, "ts": 400,
     "dur": 10},
    {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0,
     "ts": 500, "dur": 100},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 2,
     "ts": 700, "dur": 20, "args": {"correlation": 3}}]}, separators=(",", ":")).encode())
# agent/ops.c: PyTorch operator files as the job's profiler exports them
# (the stand-in torch's shapes: Kineto with the base after the events, the
# absolute-microsecond form, the legacy array) and broken ones
OPS_EV = ('{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 9, "tid": 77, '
          '"ts": 10.500, "dur": 5.250, "args": {"External id": 1, "Input Dims": [[128], '
          '[32, 64], [64, 128], [], []], "Input type": ["float", "float", "float", "Scalar", '
          '"Scalar"], "Sequence number": 4, "Fwd thread id": 0}}, {"ph": "X", "cat": '
          '"user_annotation", "name": "nn.Module: Linear_0", "pid": 9, "tid": 77, "ts": 9, '
          '"dur": 8}, {"ph": "s", "id": 4, "pid": 9, "tid": 77, "ts": 11.0, "cat": "fwdbwd", '
          '"name": "fwdbwd"}, {"ph": "f", "id": 4, "pid": 9, "tid": 78, "ts": 30.125, "cat": '
          '"fwdbwd", "name": "fwdbwd", "bp": "e"}')
write("ops", "kineto", ('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [%s], '
                        '"traceName": "x", "baseTimeNanoseconds": 1000}' % OPS_EV).encode())
write("ops", "base-first", ('{"baseTimeNanoseconds": 0, "traceEvents": [%s]}' % OPS_EV).encode())
write("ops", "absolute", b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "tid": 5, '
      b'"ts": 1764081234567890.123, "dur": 0.001}]}')
write("ops", "legacy", b'[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 3, "ts": 7, '
      b'"dur": 2, "args": {}}]')
write("ops", "escapes", b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\\"ts\\": 3", '
      b'"args": {"ts": 5}, "tid": 5, "dur": 1, "ts": 2}]}')
write("ops", "cut", b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "tid": 5, "ts": ')
write("ops", "not-json", b"this is not a trace {")
write("ops", "regress-flow-id-huge", b'{"traceEvents": [{"ph": "s", "cat": "fwdbwd", "id": 1e300, '
      b'"tid": 5, "ts": 2}]}')
# the helper's [memory] events (--profile-memory): one good, one with a huge Addr
write("ops", "memory", b'{"baseTimeNanoseconds": 0, "traceEvents": [{"ph": "i", "cat": '
      b'"cpu_instant_event", "s": "t", "name": "[memory]", "pid": 9, "tid": 77, "ts": 12.000, '
      b'"args": {"Total Reserved": 2097152, "Total Allocated": 39424, "Bytes": -512, '
      b'"Device Id": 0, "Device Type": 1, "Addr": 139810345382400}}, {"ph": "i", "cat": '
      b'"cpu_instant_event", "name": "[memory]", "tid": 77, "ts": 13, "args": {"Total Reserved": '
      b'1, "Total Allocated": 1, "Bytes": 1, "Device Id": 0, "Device Type": 1, "Addr": 1e300}}]}')

# gprofctl report on memory: a trace with [memory] events, and snapshots
# (tests/fixtures/memory, made by its make.py: good ones at protocols 4 and
# 2, cut, not a snapshot, hostile, a false length), plus a few shapes the
# reader must take or refuse: a list holding itself, a shared dict.
MEM = os.path.join(HERE, "..", "fixtures", "memory")
with open(os.path.join(MEM, "memory.pt.trace.json"), "rb") as f:
    write("report", "memory-events", json.dumps(json.loads(f.read()),
                                                separators=(",", ":")).encode())
for name in sorted(os.listdir(MEM)):
    if name.endswith(".pickle"):
        with open(os.path.join(MEM, name), "rb") as f:
            write("pickle", name.split(".")[0], f.read())
write("pickle", "self-list", b"\x80\x02]q\x00h\x00a.")
write("pickle", "shared-dict", b"\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00]\x94(}\x94"
      b"\x8c\x01n\x94\x8c\x01x\x94sh\x01e.")
write("pickle", "snapshot-shape", pickle.dumps(
    {"segments": [], "device_traces": [[{"action": "alloc", "addr": 16, "size": 512}]]}, 4))
print("seeds written under", os.path.join(HERE, "corpus"))
