#!/usr/bin/env python3
"""What an idle daemon costs its host, and how getStatus answers, for two
daemons side by side (issue 25): gprofd against Dynolog, or against another
build of gprofd.

usage: bench/footprint.py GPROFD (--dynolog PATH | --other GPROFD2)
                          [--unread N [--user NAME]] [--rounds 5] [--idle-s 30] [--requests 400]
                          [--clients 8] [--fill-s 31] [--fill-rounds N]
                          [--label-a A --label-b B] [--nice N]
                          [--daemon-cpus 0-1 --client-cpus 2-15]
                          [--cclient build/bench/bench-getstatus]

Each round starts each daemon afresh, in alternating order (A B, then B A),
and measures, one after the other:
  startup      spawn to the first getStatus reply over TCP (ms)
  seq p50/p99  getStatus over a fresh TCP connection each, one client (us)
  8c p50/p99   the same from --clients processes at once (us; every
               request of every client counted)
  C8c p50/p99  with --cclient: the same from the threads of one C process
               (bench-getstatus), --clients of them, as many requests (us)
  cpu          CPU time over --idle-s idle seconds, all threads (ms,
               /proc/PID/task/*/schedstat)
  pss_anon     private memory (Pss_Anon of /proc/PID/smaps_rollup) and RSS
  rss          at the end of the idle time (kB)
  full         gprofd only, with --fill-s > 0 (in the first --fill-rounds
               rounds; all by default): Pss_Anon once its default
               300-sample history is full (a daemon started with
               sampling.interval 100 ms and history 30 s, which holds the
               same 300 samples as the defaults, 1 s and 300 s), in kB
  series, B/sample  the same daemon's series per sample (its /metrics) and
               what the history holds per sample (gprofd_metrics_history_
               bytes over _samples; builds that export them)
With --unread N (issue 43, item 2), instead: each daemon afresh, N Unix
connections of one user (--user, a local account: nobody by default when run
as root; the caller's own otherwise) each say hello and send 64 KiB of
pipelined status requests whose replies they never read; the daemon's RSS
and Pss_Anon (kB) idle, with them held, and 3 s after they closed, with its
own count of what connections hold (conn_bytes, and the budget's closes
and refusals) where the build has it. Each reading waits 3 s for the daemon
to settle (a benchmark: no test relies on it).
With --control, each round also times the 8 clients against a do-nothing
serial server (Python, standard library: accept, read, reply, close): the
tail the machine and the clients give by themselves, without a daemon.
Both daemons sample host metrics every second (Dynolog:
--kernel_monitor_reporting_interval_s 1). --dynolog may name a wrapper that
execs Dynolog (its process is the one measured). With --daemon-cpus and
--client-cpus (taskset's lists), the daemons (and the control server) run on
the one set of cores and this script and its clients on the other, so the
clients' own CPU wait is not the daemons' tail. Every round is printed, then the
medians and the ratios A/B. The benchmark builds nothing: bench/README.md
says how to build main's gprofd into a second directory.
"""
import argparse
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

REQ = b'{"fn":"getStatus"}'
REQ = struct.pack("=i", len(REQ)) + REQ


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get_status(port):
    """One dyno-style getStatus on a fresh connection; its time in us."""
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(REQ)
    size = struct.unpack("=i", s.recv(4, socket.MSG_WAITALL))[0]
    reply = s.recv(size, socket.MSG_WAITALL)
    s.close()
    t = (time.perf_counter() - t0) * 1e6
    assert b'"status"' in reply, reply
    return t


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def client(args):
    port, n, start = args
    while time.monotonic() < start:  # all clients begin together
        pass
    return [get_status(port) for _ in range(n)]


def concurrent(port, clients, n):
    start = time.monotonic() + 0.3
    with multiprocessing.Pool(clients) as pool:
        lat = pool.map(client, [(port, n, start)] * clients)
    return [x for part in lat for x in part]


def cclient(path, port, clients, n):
    """The 8-client measure from bench-getstatus's threads: their times."""
    out = subprocess.run([path, str(port), str(clients), str(n)], capture_output=True,
                         text=True, check=True).stdout
    return [float(x) for x in out.split()]


def cpu_ns(pid):
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def memory_kb(pid):
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Rss", "Pss_Anon"):
                out[k] = int(v.split()[0])
    return out["Pss_Anon"], out["Rss"]


def cpu_list(text):
    """taskset's spelling, "0-1,4", as a set of CPUs."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def placed(nice=0, cpus=None):
    """What a child runs before exec: its nice value and its CPUs."""
    if not nice and not cpus:
        return None

    def pre():
        if nice:
            os.nice(nice)
        if cpus:
            os.sched_setaffinity(0, cpus)
    return pre


class Daemon:
    def __init__(self, kind, path, tmp, yaml="", nice=0, cpus=None):
        self.port = free_port()
        self.mport = free_port()
        os.makedirs(tmp, exist_ok=True)
        if kind == "dynolog":
            cmd = [path, "--port", str(self.port), "--kernel_monitor_reporting_interval_s", "1"]
        else:
            cfg = os.path.join(tmp, "gprofd.yaml")
            with open(cfg, "w") as f:
                # a Kineto socket name of its own: two daemons (or Dynolog)
                # would share @dynolog
                f.write("kineto:\n  socket_name: bench-%d\n%s" % (self.port, yaml))
            cmd = [path, "--config", cfg, "--socket", os.path.join(tmp, "s.sock"),
                   "--tcp", "127.0.0.1:%d" % self.port, "--metrics", "127.0.0.1:%d" % self.mport,
                   "--state-dir", os.path.join(tmp, "state")]
        self.log = open(os.path.join(tmp, "log"), "w")
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                  preexec_fn=placed(nice, cpus))
        while True:  # polled: the reply itself is what is timed
            try:
                get_status(self.port)
                break
            except OSError:
                if self.p.poll() is not None:
                    raise SystemExit("%s exited at start (log: %s)" % (path, self.log.name))
                time.sleep(0.0005)
        self.startup_ms = (time.perf_counter() - self.t0) * 1000

    def stop(self):
        self.p.terminate()
        self.p.wait(10)
        self.log.close()


def scrape(port):
    """Series per sample and history bytes per sample, from /metrics."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
    vals = {}
    series = 0
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            series += 1
            name, _, v = line.rpartition(" ")
            vals[name] = float(v)
    out = {"series": series}
    n = vals.get("gprofd_metrics_history_samples")
    if n:
        out["hist_b"] = vals["gprofd_metrics_history_bytes"] / n
    return out


def measure(kind, path, tmp, a, fill=True):
    d = Daemon(kind, path, tmp, nice=a.nice, cpus=a.daemon_cpus)
    try:
        r = {"startup_ms": d.startup_ms}
        seq = [get_status(d.port) for _ in range(a.requests)]
        r["seq_p50"], r["seq_p99"] = pct(seq, 0.5), pct(seq, 0.99)
        con = concurrent(d.port, a.clients, a.requests // a.clients * 2)
        r["c_p50"], r["c_p99"] = pct(con, 0.5), pct(con, 0.99)
        if a.cclient:
            con = cclient(a.cclient, d.port, a.clients, a.requests // a.clients * 2)
            r["cc_p50"], r["cc_p99"] = pct(con, 0.5), pct(con, 0.99)
        c0 = cpu_ns(d.p.pid)
        time.sleep(a.idle_s)
        r["cpu_ms"] = (cpu_ns(d.p.pid) - c0) / 1e6
        r["pss_anon_kb"], r["rss_kb"] = memory_kb(d.p.pid)
    finally:
        d.stop()
    if kind == "gprofd" and a.fill_s > 0 and fill:
        d = Daemon(kind, path, tmp + "-fill", "sampling:\n  interval: 100\n  history: 30s\n",
                   nice=a.nice, cpus=a.daemon_cpus)
        try:
            time.sleep(a.fill_s)
            r["full_kb"] = memory_kb(d.p.pid)[0]
            r.update(scrape(d.mport))
        finally:
            d.stop()
    return r


CONTROL = r"""
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(128)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n = struct.unpack("=i", c.recv(4, socket.MSG_WAITALL))[0]
    c.recv(n, socket.MSG_WAITALL)
    c.sendall(struct.pack("=i", 12) + b'{"status":1}')
    c.close()
"""


def control(a):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-c", CONTROL, str(port)], stdout=subprocess.PIPE,
                         preexec_fn=placed(0, a.daemon_cpus))
    try:
        p.stdout.readline()
        lat = concurrent(port, a.clients, a.requests // a.clients * 2)
        r = {"c_p50": pct(lat, 0.5), "c_p99": pct(lat, 0.99)}
        if a.cclient:
            lat = cclient(a.cclient, port, a.clients, a.requests // a.clients * 2)
            r["cc_p50"], r["cc_p99"] = pct(lat, 0.5), pct(lat, 0.99)
        return r
    finally:
        p.terminate()
        p.wait()


COLS = [("startup_ms", "startup ms", "%.1f"), ("seq_p50", "seq p50 us", "%.0f"),
        ("seq_p99", "seq p99 us", "%.0f"), ("c_p50", "8c p50 us", "%.0f"),
        ("c_p99", "8c p99 us", "%.0f"), ("cc_p50", "C8c p50 us", "%.0f"),
        ("cc_p99", "C8c p99 us", "%.0f"), ("cpu_ms", "cpu ms", "%.1f"),
        ("pss_anon_kb", "Pss_Anon kB", "%d"), ("rss_kb", "RSS kB", "%d"),
        ("full_kb", "full kB", "%d"), ("series", "series", "%d"),
        ("hist_b", "B/sample", "%.0f")]


def row(name, r):
    return "| %s | %s |" % (name, " | ".join(
        (fmt % r[k]) if k in r else "-" for k, _, fmt in COLS))


def frame(o):
    b = json.dumps(o).encode()
    return struct.pack("<I", len(b)) + b


def status_counters(sock):
    """The daemon's counters (its status reply), {} if it has none."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)

    def read():
        n = struct.unpack("<I", s.recv(4, socket.MSG_WAITALL))[0]
        return json.loads(s.recv(n, socket.MSG_WAITALL))
    s.sendall(frame({"type": "hello", "id": 1, "proto_min": 1, "proto_max": 1, "role": "ctl",
                     "software": "footprint"}))
    read()
    s.sendall(frame({"type": "daemon_status", "id": 2}))
    r = read()
    s.close()
    return r.get("counters", {}) if isinstance(r.get("counters"), dict) else {}


def unread_child(sock, n, user, ready, done):
    """As user: n connections, each flooding 64 KiB of status requests and
    never reading; holds them until done is set."""
    if user is not None:
        import pwd
        pw = pwd.getpwnam(user)
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    req = frame({"type": "daemon_status", "id": 2})
    batch = req * (65536 // len(req))
    conns = []
    for _ in range(n):
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        try:
            c.sendall(frame({"type": "hello", "id": 1, "proto_min": 1, "proto_max": 1,
                             "role": "ctl", "software": "footprint"}))
            c.setblocking(False)
            c.send(batch)
        except OSError:
            pass  # refused, closed, or a full buffer: what the daemon decided
        conns.append(c)
    ready.set()
    done.wait()
    for c in conns:
        c.close()


def unread(label, path, tmp, a):
    d = Daemon("gprofd", path, tmp)
    sock = os.path.join(tmp, "s.sock")
    os.chmod(tmp, 0o755)
    user = a.user if a.user else ("nobody" if os.geteuid() == 0 else None)
    try:
        time.sleep(3)
        idle = memory_kb(d.p.pid)
        ready, done = multiprocessing.Event(), multiprocessing.Event()
        ch = multiprocessing.Process(target=unread_child, args=(sock, a.unread, user, ready,
                                                                done))
        ch.start()
        ready.wait(300)
        time.sleep(3)
        held = memory_kb(d.p.pid)
        k_held = status_counters(sock)
        done.set()
        ch.join(60)
        time.sleep(3)
        after = memory_kb(d.p.pid)
        k_after = status_counters(sock)
    finally:
        d.stop()
    print("| %s | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s |" % (
        label, idle[1], idle[0], held[1], held[0], after[1], after[0],
        "%.1f MB" % (k_held["conn_bytes"] / 1e6) if "conn_bytes" in k_held else "-",
        "%.1f MB" % (k_held["conn_bytes_peak"] / 1e6) if "conn_bytes_peak" in k_held else "-",
        "%d / %d" % (k_held["conns_memory_closed"], k_held["conns_memory_refused"])
        if "conns_memory_closed" in k_held else "-",
        "%d B" % k_after["conn_bytes"] if "conn_bytes" in k_after else "-"), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gprofd")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--dynolog", help="a Dynolog binary (not built by this script)")
    g.add_argument("--other", help="a second gprofd binary (e.g. main's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle-s", type=float, default=30)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--fill-s", type=float, default=31)
    ap.add_argument("--fill-rounds", type=int,
                    help="the full-history memory in the first N rounds only (default: all)")
    ap.add_argument("--label-a", default="gprofd")
    ap.add_argument("--label-b")
    ap.add_argument("--control", action="store_true",
                    help="also time the clients against a do-nothing serial server")
    ap.add_argument("--nice", type=int, default=0, help="start both daemons at this nice")
    ap.add_argument("--daemon-cpus", type=cpu_list,
                    help="run the daemons and the control server on these CPUs (e.g. 0-1)")
    ap.add_argument("--client-cpus", type=cpu_list,
                    help="run this script and its clients on these CPUs (e.g. 2-15)")
    ap.add_argument("--cclient", metavar="BENCH_GETSTATUS",
                    help="also time the concurrent clients as threads of this C program "
                    "(build/bench/bench-getstatus)")
    ap.add_argument("--json", help="also write every round here")
    ap.add_argument("--unread", type=int, metavar="N",
                    help="measure N connections of one user with unread replies instead")
    ap.add_argument("--user", help="--unread: the user they connect as")
    a = ap.parse_args()
    if a.unread:
        tmp = tempfile.mkdtemp(prefix="gprof-footprint-")
        os.chmod(tmp, 0o755)  # the user of the connections reaches the sockets
        print("| daemon | idle RSS | idle Pss_Anon | held RSS | held Pss_Anon | closed RSS | "
              "closed Pss_Anon | conn_bytes held | its peak | closed / refused by budget | "
              "conn_bytes closed |")
        print("|---" * 11 + "|")
        try:
            for i in range(a.rounds):
                for j, (label, path) in enumerate(((a.label_a, a.gprofd),
                                                   (a.label_b or "other gprofd", a.other))):
                    if path:
                        unread("%d: %s" % (i + 1, label), path,
                               os.path.join(tmp, "%d-%d" % (i, j)), a)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    if a.client_cpus:
        # the clients inherit it; the daemons get the CPUs we had, if not told
        a.daemon_cpus = a.daemon_cpus or os.sched_getaffinity(0)
        os.sched_setaffinity(0, a.client_cpus)
    kind_b, path_b = ("dynolog", a.dynolog) if a.dynolog else ("gprofd", a.other)
    label_b = a.label_b or ("Dynolog" if a.dynolog else "other gprofd")
    targets = [(a.label_a, "gprofd", a.gprofd), (label_b, kind_b, path_b)]
    tmp = tempfile.mkdtemp(prefix="gprof-footprint-")
    rounds = {a.label_a: [], label_b: []}
    if a.control:
        rounds["control"] = []
    print("| round: daemon | " + " | ".join(h for _, h, _ in COLS) + " |")
    print("|---" * (len(COLS) + 1) + "|")
    try:
        for i in range(a.rounds):
            order = targets if i % 2 == 0 else targets[::-1]
            for label, kind, path in order:
                r = measure(kind, path, os.path.join(tmp, "%d-%d" % (i, targets.index(
                    (label, kind, path)))), a, a.fill_rounds is None or i < a.fill_rounds)
                rounds[label].append(r)
                print(row("%d: %s" % (i + 1, label), r), flush=True)
            if a.control:
                r = control(a)
                rounds["control"].append(r)
                print(row("%d: control" % (i + 1), r), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {}
    for label in rounds:
        # a column some rounds lack (full kB with --fill-rounds): the median
        # of those that have it
        med[label] = {k: statistics.median(r[k] for r in rounds[label] if k in r)
                      for k, _, _ in COLS if any(k in r for r in rounds[label])}
        print(row("median: " + label, med[label]))
    A, B = med[a.label_a], med[label_b]
    print("| ratio %s/%s | %s |" % (a.label_a, label_b, " | ".join(
        ("%.2fx" % (A[k] / B[k])) if k in A and k in B and B[k] else "-" for k, _, _ in COLS)))
    for label in rounds:
        m = med[label]
        for k, what in (("c", "8-client"), ("cc", "8-client C")):
            if k + "_p50" in m:
                print("%s: %s p99 / p50 = %.1f (medians; by round: %s)" % (
                    label, what, m[k + "_p99"] / m[k + "_p50"], ", ".join(
                        "%.1f" % (r[k + "_p99"] / r[k + "_p50"]) for r in rounds[label])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rounds, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
