"""runner: the few lines the Python integration tests share: run each test
function in a fresh temporary directory, report `ok - name` or `FAIL - name`
with the traceback (and whatever on_fail prints from that directory), and
end with the "N passed, N failed" line meson and CI read; and sanitizer_env,
for tests that load the agent into a plain python.

A file's tests come in two groups, as the C suites' (harness.h, td_main):
`tests`, run by default, and `root`, the ones that act as other users or
mount filesystems, run when GPROF_TEST_GROUP=root (meson registers the
file twice: NAME and NAME-root). The root group exits 77 (meson's SKIP) as
a whole when not run as root, and so does an empty group: a test that could
not run is never counted as passed, and the ones that did run still count.
GPROF_TEST=NAME runs only the test of that name."""
import os
import tempfile
import traceback


def run(tests, prefix, on_fail=None, root=()):
    as_root = os.environ.get("GPROF_TEST_GROUP") == "root"
    only = os.environ.get("GPROF_TEST")  # one test by name (debugging, bench/agent_flood.py)
    if as_root:
        tests = list(root)
    if only:
        tests = [t for t in tests if t.__name__ == only]
    if not tests:
        print("no %s tests here: skipped (77)" % ("root" if as_root else "plain"))
        return 77
    if as_root and os.geteuid() != 0:
        print("%d tests need root (other users, mounts): skipped (77); CI runs as root"
              % len(tests))
        return 77
    passed = failed = 0
    for t in tests:
        with tempfile.TemporaryDirectory(prefix=prefix) as d:
            try:
                t(d)
                passed += 1
                print("ok - %s" % t.__name__)
            except Exception:
                failed += 1
                print("FAIL - %s" % t.__name__)
                traceback.print_exc()
                if on_fail:
                    on_fail(d)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def sanitizer_env(lib):
    """What a plain python needs to load lib when lib is the sanitizer
    build's (its ASan runtime first, leak checks off): {} otherwise."""
    import subprocess
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    asan = [l.split("=>")[1].split()[0] for l in ldd.splitlines() if "libasan" in l and "=>" in l]
    return {"LD_PRELOAD": asan[0], "ASAN_OPTIONS": "detect_leaks=0"} if asan else {}
