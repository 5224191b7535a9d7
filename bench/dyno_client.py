#!/usr/bin/env python3
"""What one `dyno status` does, with the Python standard library only:
connect over TCP, send {"fn":"getStatus"} with a 4-byte native-endian
length, read one reply, close. Repeated N times; prints the median and p99
latency. Point it at gprofd or at Dynolog to compare the two measured the
same way:  bench/dyno_client.py [PORT=1778] [N=2000]
"""
import socket
import statistics
import struct
import sys
import time

port = int(sys.argv[1]) if len(sys.argv) > 1 else 1778
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
body = b'{"fn":"getStatus"}'
req = struct.pack("=i", len(body)) + body
lat = []
for _ in range(n):
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    size = struct.unpack("=i", s.recv(4, socket.MSG_WAITALL))[0]
    reply = s.recv(size, socket.MSG_WAITALL)
    s.close()
    lat.append((time.perf_counter() - t0) * 1e6)
    assert reply == b'{"status":1}', reply
lat.sort()
print("python dyno-style getStatus: median %.1f us, p99 %.1f us (%d requests)"
      % (statistics.median(lat), lat[int(n * 0.99)], n))
