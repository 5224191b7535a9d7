#!/usr/bin/env python3
"""What gprofctl report refuses, and how (issue 37): `gprofctl report
/etc/passwd` printed a zeroed report ending "nothing stands out", and only
its exit status said no.

usage: test-report-refuse.py GPROFCTL FIXTURES

A file that is not a trace (not JSON, JSON without traceEvents, an empty
file, one cut before its events, a binary), an unreadable one, an empty
trace (metadata only, or cut before its first complete event), an empty
directory or one holding no trace: each gets a non-zero exit, nothing on
stdout (text and --json alike), and a line on stderr that names the file,
says what was expected and what to do. A trace next to a refused file is
not reported either (a report missing one file would pass for all). A
trace cut after some events is still reported, as before.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

GPROFCTL, FIXTURES = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import runner  # noqa: E402
import report_check  # noqa: E402

GOOD = os.path.join(FIXTURES, "ddp", "h200-ddp_1537_rank0.pt.trace.json.gz")


def report(*args):
    r = subprocess.run([GPROFCTL] + list(args), capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def refused(path, code, *why):
    for mode in ([], ["--json"]):
        c, out, err = report(*(mode + ["report", path]))
        assert c == code and out == "", (path, mode, c, out, err)
        assert path in err and all(w in err for w in why), (path, err)
        assert "nothing stands out" not in out + err, err


def test_not_traces(d):
    """Non-traces: exit 3, why and what is read instead."""
    expected = "gprofctl report reads Chrome-trace JSON"
    cases = {
        "passwd": (b"root:x:0:0:root:/root:/bin/bash\n", "not valid JSON at byte 0"),
        "other.json": (b'{"a": [1, 2, 3]}', 'JSON without a "traceEvents" array'),
        "empty.json": (b"", "an empty file"),
        "head.json": (b'{"schemaVersion": 1, "deviceProperties": [', "ends before any traceEvents"),
        "binary": (open(sys.executable, "rb").read(4096), "not valid JSON at byte 0"),
        "list.json": (b"[1, 2]", 'JSON without a "traceEvents" array'),
    }
    for name, (data, why) in cases.items():
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        refused(path, 3, "not a trace", why, expected)
    refused("/etc/passwd", 3, "not a trace", expected)
    gz = os.path.join(d, "other.json.gz")
    with gzip.open(gz, "wb") as f:
        f.write(b'{"hello": "world"}')
    refused(gz, 3, "not a trace", "traceEvents")
    if os.geteuid() != 0:  # root reads anything: the mode means nothing then
        locked = os.path.join(d, "locked.json")
        shutil.copy(os.path.join(d, "other.json"), locked)
        os.chmod(locked, 0)
        refused(locked, 3, "cannot open it")


def test_empty_traces(d):
    """A trace with nothing timed: exit 1 and why (metadata only, or cut
    before its first event: wait or fetch again)."""
    meta = os.path.join(d, "meta.pt.trace.json")
    with open(meta, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
            {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5}]}, f)
    refused(meta, 1, "an empty trace", "of its 2 events none is timed", "--duration")
    cut = os.path.join(d, "cut.pt.trace.json")
    with open(cut, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a", "ts": 1')
    refused(cut, 1, "an empty trace", "ends early", "fetch it again")


def test_directories(d):
    """An empty directory, one with no trace in it, and a trace beside a
    non-trace: refused, each saying why."""
    empty = os.path.join(d, "empty")
    os.makedirs(empty)
    c, out, err = report("report", empty)
    assert c == 3 and out == "" and "is an empty directory" in err, (c, out, err)
    other = os.path.join(d, "other")
    os.makedirs(other)
    open(os.path.join(other, "notes.txt"), "w").write("x")
    c, out, err = report("report", other)
    assert c == 3 and out == "" and "holds no trace file" in err and "'notes.txt'" in err, err
    mixed = os.path.join(d, "mixed")
    os.makedirs(mixed)
    shutil.copy(GOOD, mixed)
    open(os.path.join(mixed, "meta.json"), "w").write('{"job": 1}')
    c, out, err = report("--json", "report", mixed)
    assert c == 3 and out == "" and "meta.json: not a trace" in err and \
        "name only the others" in err, (c, out, err)


def test_still_reported(d):
    """A trace cut after some events is reported as far as it goes (exit
    1), and a whole one as before (exit 0): neither is refused."""
    text = gzip.open(GOOD, "rt").read()
    cut = os.path.join(d, "cut.pt.trace.json")
    with open(cut, "w") as f:
        f.write(text[:len(text) // 2])
    c, out, err = report("--json", "report", cut)
    assert c == 1 and "ends early" in err, (c, err)
    doc = report_check.validate(out)
    assert doc["ranks"][0]["events"] > 0 and "error" in doc["ranks"][0], doc["ranks"][0]
    c, out, err = report("--json", "report", GOOD)
    assert c == 0, err
    report_check.validate(out)


if __name__ == "__main__":
    code = runner.run([test_not_traces, test_empty_traces, test_directories, test_still_reported],
                      "gprof-report-refuse-")
    if code == 0 and report_check.SCHEMA_MISSING:
        print("SKIP: python3 jsonschema is missing, so the JSON was not validated "
              "(apt-get install python3-jsonschema)")
        code = 77
    sys.exit(code)
