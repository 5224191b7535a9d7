#!/usr/bin/env python3
"""kineto_client: a stand-in for a PyTorch process started with
KINETO_USE_DAEMON=1, written from shared/DYNOLOG_COMPAT.md section 2, for
tests with no PyTorch: it speaks Kineto's IPC datagrams to the daemon and
writes trace files the way Kineto does.

usage: kineto_client.py SOCKET_DIR [CHILDREN]

- Polls the daemon ("req", type 3 = events|activities; its pid, then its
  ancestors; job = $SLURM_JOB_ID or 0) every 50 ms, from a socket file in
  SOCKET_DIR (directory mode, KINETO_IPC_SOCKET_DIR).
- On a config: reports itself busy (type 1) while it "captures", then
  writes ACTIVITIES_LOG_FILE with _<pid> before .pt.trace.json (to .tmp,
  then renamed), holding ACTIVITIES_ITERATIONS "Optimizer.step#" user
  annotations of its own pid (1 when by time) and, when $RANK is set,
  distributedInfo {"backend": "nccl", "rank": R, "world_size": W}, as
  PyTorch writes for a distributed job.
- With CHILDREN = n > 0 it is a launcher, as torchrun is: it starts n
  copies of itself with RANK, LOCAL_RANK, WORLD_SIZE set (the same socket
  dir and job), polls like any Kineto client (the launcher imports torch
  too) and prints "ranks PID..." once every child has had a reply.
- Prints "ready PID" after its first reply; ends when stdin closes (a
  launcher closes its children's).
"""
import json
import os
import select
import socket
import struct
import subprocess
import sys

HDR = struct.Struct("=Q32s")


def ancestors():
    out, pid = [], os.getppid()
    while pid > 1 and len(out) < 10:
        out.append(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


class Client:
    def __init__(self, sockdir):
        self.daemon = os.path.join(sockdir, "dynolog")
        self.me = os.path.join(sockdir, "dynoconfigclient%d" % os.getpid())
        try:
            os.unlink(self.me)
        except FileNotFoundError:
            pass
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(self.me)
        self.job = int(os.environ.get("SLURM_JOB_ID", "0") or 0)
        self.pids = [os.getpid()] + ancestors()

    def poll(self, kind):
        """One "req"; the config text ("" = nothing), or None on no reply."""
        payload = struct.pack("=iiq", kind, len(self.pids), self.job) + \
            b"".join(struct.pack("=i", p) for p in self.pids)
        self.s.sendto(HDR.pack(len(payload), b"req") + payload, self.daemon)
        r, _, _ = select.select([self.s], [], [], 0.5)
        if not r:
            return None
        data = self.s.recv(70000)
        size, _ = HDR.unpack_from(data)
        return data[HDR.size:HDR.size + size].decode()

    def capture(self, cfg):
        kv = dict(line.split("=", 1) for line in cfg.splitlines() if "=" in line)
        self.poll(1)  # busy while tracing
        base = kv["ACTIVITIES_LOG_FILE"]
        cut = base.index(".pt.trace.json")
        path = "%s_%d.pt.trace.json" % (base[:cut], os.getpid())
        n = int(kv.get("ACTIVITIES_ITERATIONS", "0") or 0) or 1
        pid = os.getpid()
        events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": 5,
                   "ts": 100.0, "dur": 10.0}]
        events += [{"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step",
                    "pid": pid, "tid": 5, "ts": 150.0 + 100 * i, "dur": 20.0, "args": {}}
                   for i in range(n)]
        doc = {"schemaVersion": 1}
        if os.environ.get("RANK"):
            doc["distributedInfo"] = {"backend": "nccl", "rank": int(os.environ["RANK"]),
                                      "world_size": int(os.environ.get("WORLD_SIZE", "1"))}
        doc["trace_id"] = kv.get("REQUEST_TRACE_ID", "")
        doc["traceEvents"] = events
        doc["traceName"] = path
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps(doc, indent=1).replace('"rank":', '"rank": '))
        os.rename(path + ".tmp", path)

    def close(self):
        self.s.close()
        try:
            os.unlink(self.me)
        except FileNotFoundError:
            pass


def main():
    sockdir = sys.argv[1]
    children = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    c = Client(sockdir)
    kids = []
    for r in range(children):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(children))
        kids.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), sockdir],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True))
    ready = False
    while True:
        cfg = c.poll(3)
        if cfg is not None and not ready:
            ready = True
            for k in kids:
                line = k.stdout.readline()
                assert line.startswith("ready "), line
            print("ready %d" % os.getpid(), flush=True)
            if kids:
                print("ranks " + " ".join(str(k.pid) for k in kids), flush=True)
        if cfg:
            c.capture(cfg)
        r, _, _ = select.select([sys.stdin], [], [], 0.05)
        if r and not sys.stdin.readline():
            break
    for k in kids:
        k.stdin.close()
        k.wait()
    c.close()


if __name__ == "__main__":
    main()
