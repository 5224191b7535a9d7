"""runner: the few lines the Python integration tests share: run each test
function in a fresh temporary directory, report `ok - name` or `FAIL - name`
with the traceback (and whatever on_fail prints from that directory), and
end with the "N passed, N failed" line meson and CI read."""
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
