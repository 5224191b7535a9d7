"""runner: the few lines the Python integration tests share: run each test
function in a fresh temporary directory, report `ok - name` or `FAIL - name`
with the traceback (and whatever on_fail prints from that directory), and
end with the "N passed, N failed" line meson and CI read; and sanitizer_env,
for tests that load the agent into a plain python."""
import tempfile
import traceback


def run(tests, prefix, on_fail=None):
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
