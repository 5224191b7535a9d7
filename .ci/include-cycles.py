#!/usr/bin/env python3
"""Fails when the files of a directory include each other in a circle.

Usage: include-cycles.py DIR...

Each directory is checked on its own: a file X.c or X.h is the node "X",
and X including "Y.h" (a header of the same directory) is the edge X -> Y;
headers from elsewhere (proto/, system) and X.c including its own X.h
are not edges. A strongly connected component of more than one node is
a circle: every file in it can reach every other, so none can be read,
changed or tested without the rest. For each circle the script prints
its members, the edges that hold it together, and every loop in it
(each once, shortest first, the first LOOPS_SHOWN of them), then exits
1. Exit 0: every directory is a DAG (its files can be read bottom up).

meson (tests/meson.build) runs it over daemon/, ctl/, agent/ and proto/
as the test `include-cycles` (suite unit). Its sibling symbol-cycles.py
checks the calls between the same files, from the built objects.
Python 3 standard library only.
"""
import os
import re
import sys

# A circle of many files can hold thousands of loops: the first ones (the
# shortest) say enough, its edges say the rest.
LOOPS_SHOWN = 200

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(directory):
    """The include graph of one directory: {node: set(nodes it includes)}."""
    files = [f for f in sorted(os.listdir(directory)) if f.endswith(('.c', '.h'))]
    nodes = {os.path.splitext(f)[0] for f in files}
    headers = {f for f in files if f.endswith('.h')}
    edges = {n: set() for n in nodes}
    for f in files:
        with open(os.path.join(directory, f), encoding='utf-8', errors='replace') as fh:
            text = fh.read()
        # comments may quote an #include; they are not edges
        text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
        src = os.path.splitext(f)[0]
        for inc in INCLUDE.findall(text):
            dst = os.path.splitext(inc)[0]
            # X.c including X.h is the module and its own interface
            if inc in headers and dst != src:
                edges[src].add(dst)
    return edges


def components(edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def loops(edges, comp, cap):
    """Every elementary loop inside comp (each once, from its smallest
    node), shortest first; at most cap of them, and how many there are."""
    inside = set(comp)
    found = []

    def walk(start, v, path, on):
        for w in sorted(edges[v]):
            if w not in inside:
                continue
            if w == start:
                found.append(path + [start])
            elif w > start and w not in on:
                on.add(w)
                walk(start, w, path + [w], on)
                on.discard(w)

    for start in sorted(comp):
        walk(start, start, [start], {start})
    found.sort(key=lambda loop: (len(loop), loop))
    return found[:cap], len(found)


def check(directory):
    edges = graph(directory)
    bad = [c for c in components(edges) if len(c) > 1]
    for comp in bad:
        inside = set(comp)
        print(f'{directory}: include circle of {len(comp)} nodes: {" ".join(comp)}')
        for v in comp:
            ins = sorted(w for w in edges[v] if w in inside)
            print(f'  {v} -> {" ".join(ins)}')
        shown, total = loops(edges, comp, LOOPS_SHOWN)
        print(f'  {total} loops:')
        for loop in shown:
            print('  loop: ' + ' -> '.join(loop))
        if total > len(shown):
            print(f'  ... and {total - len(shown)} more through the same edges')
    if not bad:
        print(f'{directory}: {len(edges)} nodes, no include circle')
    return len(bad)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    found = 0
    for directory in argv[1:]:
        if not os.path.isdir(directory):
            print(f'{directory}: not a directory', file=sys.stderr)
            return 2
        found += check(directory)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
