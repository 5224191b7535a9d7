#!/usr/bin/env python3
"""What each way of recording with CUPTI costs a launching thread, per kernel.

Runs bench/cupti_cost (built by tests/gpu/prepare.sh) once per configuration
and round, in a fresh process each time (enabling CUPTI leaves part of its
cost behind, so configurations cannot share a process), the order rotated
each round. Each process compares its own phases: `during` and `after` over
`before`. Prints every process's line, then per configuration the median over
rounds of the added ns per kernel and of the ratios.

    bench/cupti_cost.py BINARY [--rounds N] [--batches N] [--batch N]
                        [--configs "a;b;..."] [--jsonl FILE]
"""
import argparse
import json
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--configs", help="separated by semicolons (names have commas; "
                    "default: every one the binary lists)")
    ap.add_argument("--jsonl", help="also write every process's line here")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    known = subprocess.run([a.binary, "--list"], check=True, capture_output=True,
                           text=True).stdout.split("\n")
    known = [k for k in known if k]
    configs = a.configs.split(";") if a.configs else known
    bad = [c for c in configs if c not in known]
    if bad:
        ap.error(f"unknown configuration(s) {', '.join(bad)}; the binary has: {', '.join(known)}")
    rows = []
    out = open(a.jsonl, "w") if a.jsonl else None
    for r in range(a.rounds):
        for k in range(len(configs)):
            c = configs[(k + r) % len(configs)]
            p = subprocess.run([a.binary, c, str(a.batches), str(a.batch)], capture_output=True,
                               text=True, timeout=300)
            if p.returncode != 0:
                print(f"{c}: exit {p.returncode}: {p.stderr.strip()}", file=sys.stderr)
                return 1
            j = json.loads(p.stdout.strip().splitlines()[-1])
            j["round"] = r
            rows.append(j)
            line = json.dumps(j)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
    if out:
        out.close()
    print(f"\n{'configuration':28s} {'before ns':>10s} {'+ns/kernel':>11s} {'during/before':>14s}"
          f" {'after/before':>13s} {'late/before':>12s}  rounds ({rows[0]['gpu']})")
    for c in configs:
        mine = [j for j in rows if j["config"] == c]
        med = statistics.median
        add = med(j["during"] - j["before"] for j in mine)
        ratio = med(j["during"] / j["before"] for j in mine)
        after = med(j["after"] / j["before"] for j in mine)
        late = med(j["late"] / j["before"] for j in mine)
        each = " ".join(f"{j['during'] / j['before']:.3f}" for j in mine)
        print(f"{c:28s} {med(j['before'] for j in mine):10.1f} {add:11.1f} {ratio:14.3f}"
              f" {after:13.3f} {late:12.3f}  {each}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
