#!/usr/bin/env python3
"""include-cycles.py DIR...: fails (exit 1) when the include graph of the C
sources in DIRs has a cycle, and prints every cycle as `a -> b -> a`.

A file X.c or X.h is the node DIR/X; `#include "Y.h"` in it is an edge to
the node of Y.h, looked up in the file's own DIR first, then in the other
DIRs (the way meson's include paths find it); system headers (<...>) and
headers outside DIRs are not nodes. X.c including its own X.h is no edge.
Issue 25: the folders read as floors, and a cycle means a file cannot be
understood without the files above it.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAX_CYCLES = 500


def nodes_of(dirs):
    """{node: [paths]} and {dir: {header name: node}}."""
    nodes, headers = {}, {}
    for d in dirs:
        headers[d] = {}
        for name in sorted(os.listdir(d)):
            stem, ext = os.path.splitext(name)
            if ext not in ('.c', '.h'):
                continue
            node = os.path.join(os.path.normpath(d), stem)
            nodes.setdefault(node, []).append(os.path.join(d, name))
            if ext == '.h':
                headers[d][name] = node
    return nodes, headers


def edges_of(dirs, nodes, headers):
    graph = {n: set() for n in nodes}
    for d in dirs:
        for n, paths in nodes.items():
            if os.path.dirname(n) != os.path.normpath(d):
                continue
            for p in paths:
                with open(p, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    base = os.path.basename(inc)
                    target = headers[d].get(base)
                    for other in dirs:
                        if target is None:
                            target = headers[other].get(base)
                    if target is not None and target != n:
                        graph[n].add(target)
    return graph


def cycles_of(graph):
    """Every elementary cycle, each once, started at its smallest node
    (a plain depth-first search per start node over the larger nodes)."""
    found = []
    order = sorted(graph)
    rank = {n: i for i, n in enumerate(order)}
    for start in order:
        stack = [(start, iter(sorted(graph[start])))]
        path, on_path = [start], {start}
        while stack and len(found) < MAX_CYCLES:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if nxt == start:
                found.append(path + [start])
            elif rank[nxt] > rank[start] and nxt not in on_path:
                stack.append((nxt, iter(sorted(graph[nxt]))))
                path.append(nxt)
                on_path.add(nxt)
    return found


def main(argv):
    if len(argv) < 2:
        print('usage: include-cycles.py DIR...', file=sys.stderr)
        return 2
    dirs = argv[1:]
    for d in dirs:
        if not os.path.isdir(d):
            print('include-cycles.py: %s is not a directory' % d, file=sys.stderr)
            return 2
    nodes, headers = nodes_of(dirs)
    graph = edges_of(dirs, nodes, headers)
    cycles = cycles_of(graph)
    for c in cycles:
        print(' -> '.join(c))
    if cycles:
        more = ' (stopped at %d)' % MAX_CYCLES if len(cycles) >= MAX_CYCLES else ''
        print('include-cycles.py: %d include cycle(s)%s in %s: move the function to the '
              'floor that owns it, or give the lower file a callback' %
              (len(cycles), more, ' '.join(dirs)), file=sys.stderr)
        return 1
    print('include-cycles.py: no include cycle among %d files in %s' %
          (sum(len(p) for p in nodes.values()), ' '.join(dirs)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
