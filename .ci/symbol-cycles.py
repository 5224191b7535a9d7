#!/usr/bin/env python3
"""Fails when the files of a directory call each other in a circle.

Usage: symbol-cycles.py [--allow FILE] BUILD_DIR DIR...
       symbol-cycles.py --self-test FIXTURE_DIR

The include check (include-cycles.py) reads the headers; this one reads
what the linker reads. For every target of BUILD_DIR (a meson build: its
compile_commands.json names each object and the source it came from), it
runs `nm` on each object whose source lies directly in one of the DIRs: a
source file X.c is the node "DIR/X", and X's object using a symbol (nm
"U") that the object of Y.c, of the same directory and the same target,
defines is the edge X -> Y. A file calling back into a file that calls
it is a circle whatever the headers say (a function pointer stored in a
header, a prototype declared by hand). The edges of every target are
joined; a strongly connected component of more than one node is a circle:
the script prints its members, each edge inside it with the symbols that
make it, and its loops, shortest first, then exits 1. Exit 0: every
directory's files call one another as floors, top down.

--allow FILE names circles known and being removed: each line is
"DIR/X DIR/Y ...  # the issue that removes it"; a circle whose members
all lie in one line's set is reported as allowed and does not fail the
run (so a knot that shrinks still passes; one that grows, or a new one,
fails). A line that no longer matches any circle is named, to be deleted.

Exit 77 (skip) where nm is missing or BUILD_DIR has no
compile_commands.json: nothing was checked. --self-test compiles the
fixture (ping.c and pong.c calling each other, leaf.c called by both)
with $CC and checks that the circle and its symbols are reported, that
the fixture without pong.c passes, and that --allow tolerates it.

meson (tests/meson.build) runs it over daemon/, ctl/, agent/ and proto/
as the test `symbol-cycles`, and its self-test as `symbol-cycles-self`
(suite `lint`). Python 3 standard library and binutils' nm only.
"""
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# Tarjan's components and the loop listing are include-cycles.py's
_spec = importlib.util.spec_from_file_location('include_cycles',
                                               os.path.join(HERE, 'include-cycles.py'))
_ic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ic)

SKIP = 77
LOOPS_SHOWN = 50
# an edge lists at most this many of its symbols, then a count
SYMBOLS_SHOWN = 6


def nm_symbols(nm, objs):
    """{object: (defined, undefined)} global symbol names of each object
    file, from one run of nm over them all."""
    out = subprocess.run([nm, '-A', '-P'] + objs, check=True, capture_output=True,
                         text=True).stdout
    syms = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        # -A -P: "OBJECT: NAME TYPE [VALUE [SIZE]]"
        obj, _, rest = line.partition(': ')
        parts = rest.split()
        if obj not in syms or len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        defined, undefined = syms[obj]
        if kind == 'U':
            undefined.add(name)
        elif kind.isupper() or kind in ('u', 'v', 'w'):
            # upper case: global (T D B R C W V...); u/v/w: unique, weak
            defined.add(name)
    return syms


def objects(build_dir, dirs):
    """{target: [(node, object path)]} for every object of build_dir whose
    source lies directly in one of dirs (absolute paths)."""
    db = os.path.join(build_dir, 'compile_commands.json')
    with open(db, encoding='utf-8') as fh:
        entries = json.load(fh)
    wanted = {os.path.realpath(d): d for d in dirs}
    targets = {}
    for e in entries:
        src = os.path.realpath(os.path.join(e['directory'], e['file']))
        folder = os.path.dirname(src)
        if folder not in wanted or not src.endswith('.c'):
            continue
        out = e.get('output')
        if not out:  # older meson: the object is the argument of -o
            argv = shlex.split(e['command'])
            out = argv[argv.index('-o') + 1]
        obj = os.path.join(e['directory'], out)
        # meson puts a target's objects in TARGET.p/
        target = os.path.dirname(obj)
        node = os.path.basename(wanted[folder].rstrip('/')) + '/' + \
            os.path.splitext(os.path.basename(src))[0]
        targets.setdefault(target, []).append((node, obj))
    return targets


def graph(nm, targets):
    """{node: {node: set(symbols)}}: who calls whom, joined over targets."""
    edges = {}
    objs = [obj for t in targets.values() for _, obj in t]
    for obj in objs:
        if not os.path.exists(obj):
            raise FileNotFoundError(f'{obj}: not built (build first)')
    table = nm_symbols(nm, objs)
    for target in sorted(targets):
        defs, uses = {}, {}
        for node, obj in targets[target]:
            d, u = table[obj]
            uses[node] = u
            for sym in d:
                defs.setdefault(sym, set()).add(node)
            edges.setdefault(node, {})
        for node, syms in uses.items():
            for sym in syms:
                for owner in defs.get(sym, ()):
                    # only within one directory: nodes are "dir/file"
                    if owner != node and owner.split('/')[0] == node.split('/')[0]:
                        edges[node].setdefault(owner, set()).add(sym)
    return edges


def read_allow(path):
    """[(set of nodes, the line)] from an allow-list file."""
    allowed = []
    if not path:
        return allowed
    with open(path, encoding='utf-8') as fh:
        for line in fh:
            body = line.split('#', 1)[0].split()
            if body:
                allowed.append((set(body), line.strip()))
    return allowed


def report(edges, allowed):
    """Prints every circle; returns how many are not allowed."""
    plain = {v: set(w) for v, w in edges.items()}
    bad = [c for c in _ic.components(plain) if len(c) > 1]
    failing = 0
    used = set()
    for comp in bad:
        inside = set(comp)
        ok = next((i for i, (s, _) in enumerate(allowed) if inside <= s), None)
        if ok is None:
            failing += 1
            print(f'call circle of {len(comp)} files: {" ".join(comp)}')
        else:
            used.add(ok)
            print(f'allowed call circle of {len(comp)} files: {" ".join(comp)}'
                  f'\n  (allow-list: {allowed[ok][1]})')
        for v in comp:
            for w in sorted(x for x in edges[v] if x in inside):
                syms = sorted(edges[v][w])
                more = len(syms) - SYMBOLS_SHOWN
                shown = ' '.join(syms[:SYMBOLS_SHOWN]) + (f' (+{more})' if more > 0 else '')
                print(f'  {v} -> {w}: {shown}')
        loops, total = _ic.loops(plain, comp, LOOPS_SHOWN)
        print(f'  {total} loops:')
        for loop in loops:
            print('  loop: ' + ' -> '.join(loop))
        if total > len(loops):
            print(f'  ... and {total - len(loops)} more through the same edges')
    for i, (_, line) in enumerate(allowed):
        if i not in used:
            print(f'allow-list line matches no circle any more, delete it: {line}')
    dirs = sorted({v.split('/')[0] for v in edges})
    print(f'{len(edges)} files of {" ".join(d + "/" for d in dirs)}: '
          f'{len(bad)} call circles, {failing} not allowed')
    return failing


def check(nm, build_dir, dirs, allow):
    targets = objects(build_dir, dirs)
    if not targets:
        print(f'{build_dir}: no object of {" ".join(dirs)}', file=sys.stderr)
        return 2
    try:
        edges = graph(nm, targets)
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        print(f'{e}', file=sys.stderr)
        return 2
    return 1 if report(edges, read_allow(allow)) else 0


def self_test(nm, fixture):
    """The checker on a fixture with a known circle: it must say so."""
    cc = shlex.split(os.environ.get('CC', 'cc'))
    if not shutil.which(cc[0]):
        print(f'self-test: no C compiler ({cc[0]}): skipped')
        return SKIP
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'fix')
        os.mkdir(src)
        for f in ('ping.c', 'pong.c', 'leaf.c'):
            shutil.copy(os.path.join(fixture, f), src)
        build = os.path.join(tmp, 'build')
        os.mkdir(build)

        def compile_db(files):
            db = []
            for f in files:
                out = f'fixture.p/{f}.o'
                os.makedirs(os.path.join(build, 'fixture.p'), exist_ok=True)
                subprocess.run(cc + ['-c', '-o', os.path.join(build, out),
                                     os.path.join(src, f)], check=True)
                db.append({'directory': build, 'file': os.path.join(src, f),
                           'output': out, 'command': f'cc -o {out} -c {f}'})
            with open(os.path.join(build, 'compile_commands.json'), 'w') as fh:
                json.dump(db, fh)

        def run(*args):
            p = subprocess.run([sys.executable, os.path.abspath(__file__)] + list(args),
                               capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

        compile_db(['ping.c', 'pong.c', 'leaf.c'])
        rc, out = run(build, src)
        print(out)
        if rc != 1:
            failures.append(f'circle ping <-> pong: exit {rc}, want 1')
        for want in ('call circle of 2 files: fix/ping fix/pong',
                     'fix/ping -> fix/pong: pong_serve',
                     'fix/pong -> fix/ping: ping_reply'):
            if want not in out:
                failures.append(f'circle ping <-> pong: no line "{want}"')

        allow = os.path.join(tmp, 'allow')
        with open(allow, 'w') as fh:
            fh.write('# known\nfix/ping fix/pong  # issue 0\nfix/gone fix/away\n')
        rc, out = run('--allow', allow, build, src)
        print(out)
        if rc != 0:
            failures.append(f'allowed circle: exit {rc}, want 0')
        if 'delete it: fix/gone fix/away' not in out:
            failures.append('a stale allow-list line is not named')

        os.remove(os.path.join(build, 'fixture.p', 'pong.c.o'))
        compile_db(['ping.c', 'leaf.c'])
        rc, out = run(build, src)
        print(out)
        if rc != 0 or '0 call circles' not in out:
            failures.append(f'without pong.c: exit {rc}, want 0 and no circle')
    for f in failures:
        print('FAIL: ' + f)
    print(f'self-test: {len(failures)} failures')
    return 1 if failures else 0


def main(argv):
    nm = shutil.which(os.environ.get('NM', 'nm'))
    if not nm:
        print('nm not found (binutils): nothing checked')
        return SKIP
    args = argv[1:]
    if len(args) == 2 and args[0] == '--self-test':
        return self_test(nm, args[1])
    allow = None
    if len(args) >= 2 and args[0] == '--allow':
        allow, args = args[1], args[2:]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build_dir, dirs = args[0], args[1:]
    if not os.path.exists(os.path.join(build_dir, 'compile_commands.json')):
        print(f'{build_dir}/compile_commands.json missing: nothing checked')
        return SKIP
    for d in dirs:
        if not os.path.isdir(d):
            print(f'{d}: not a directory', file=sys.stderr)
            return 2
    return check(nm, build_dir, dirs, allow)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
