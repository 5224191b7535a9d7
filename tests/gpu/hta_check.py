#!/usr/bin/env python3
"""hta_check.py: does Holistic Trace Analysis (HTA) say the right things about
a directory of gprofd rank traces? (issue 27: every kernel with its launch)

usage: hta_check.py TRACE_DIR [--glob PAT] [--include-last-step] [--strict] [-v]

Runs HTA's own TraceAnalysis on the traces under TRACE_DIR (*.pt.trace.json*
found recursively, or --glob; HTA itself reads every *.gz and *.json directly
in one directory, so when they lie deeper or beside other files it is handed
a temporary directory of links to them; it maps files to ranks by the
`"rank": R` in each file's distributedInfo, not by file name) and prints,
per rank:
  - the temporal breakdown (idle / compute / non-compute time),
  - the communication/computation overlap,
  - the kernel type breakdown (communication share of kernel time),
  - the idle time breakdown per stream (host wait / kernel wait / other),
  - GPU kernels HTA kept vs kernels in the raw file, NCCL kernels likewise.

HTA keeps a GPU event only when a CPU-side event with the same correlation
(its launch: a cuda_runtime or cuda_driver call) starts before the last
ProfilerStep# begins (hta/common/trace.py, _filter_irrelevant_gpu_kernels;
with --include-last-step: before the last one ends), and only when the
trace holds two or more ProfilerSteps. Each raw kernel is sorted into:
  kept            HTA kept it
  no launch       no CPU event carries its correlation: HTA drops it whatever
                  the window (what driver-API launches that were not recorded
                  do to NCCL's kernels)
  after window    its launch lies in the last step: HTA leaves it out by design
  unexplained     launched inside the window, yet HTA dropped it

Exit 0: HTA loaded every rank and no NCCL kernel was lost.
Exit 1: a rank's NCCL kernels were dropped (no launch, or unexplained), or a
rank holds NCCL kernels while HTA gives communication a 0 share, or an
analysis raised; with --strict also any GPU kernel with no launch.
Exit 2: HTA could not be imported or could not load the traces.
The last line printed is one JSON object with the figures.

Where HTA comes from: HTA itself and the Python packages it imports are not
installed on the GPU host (no network there); they are kept, uncommitted, in
.hta/ at the repository root (HTA_HOME overrides): .hta/hta is HTA's package
unmodified, .hta/site holds Debian's pure-Python packages (networkx, PyYAML,
ijson, tenacity, six, distutils' version module for Python >= 3.12) and
Debian's plotly as a zip, and a psutil stub (virtual_memory() only). .hta/site
goes at the END of sys.path, so the host's own packages win where it has them.
HTA plots nothing here (visualize=False): plotly is needed only for its
imports. Debian's plotly 5.4.1 names numpy.bool8 at import, which NumPy 2
removed: the alias is put back (numpy.bool8 = numpy.bool_) when it is
missing; if plotly still fails to import (or HTA_PLOTLY_STUB=1),
.hta/stubs/plotly (a stub that raises when anything draws) stands in and the
output says so.
"""
import argparse
import atexit
import fnmatch
import glob
import gzip
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import traceback
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)")


def setup_path():
    """Put HTA first and .hta/site (plus its zips) last on sys.path."""
    home = os.environ.get("HTA_HOME") or os.path.join(REPO, ".hta")
    if not os.path.isdir(os.path.join(home, "hta")):
        home2 = os.path.join(os.getcwd(), ".hta")
        if os.path.isdir(os.path.join(home2, "hta")):
            home = home2
    home = os.path.abspath(home)
    if home not in sys.path:
        sys.path.insert(0, home)
    site = os.path.join(home, "site")
    extra = [site] + sorted(glob.glob(os.path.join(site, "*.zip")))
    for p in extra:
        if os.path.isdir(p) or os.path.isfile(p):
            if p not in sys.path:
                sys.path.append(p)
    return home


def where(mod):
    m = sys.modules.get(mod)
    f = getattr(m, "__file__", None) or "?"
    v = getattr(m, "__version__", "")
    tag = " (STUB)" if getattr(m, "IS_GPROFD_STUB", False) else ""
    return "%s %s%s" % (f, v, tag)


def import_hta(home, notes):
    """Import HTA's TraceAnalysis; return it, or raise."""
    import numpy  # noqa: F401  (the host's: HTA needs pandas and numpy)
    with warnings.catch_warnings():  # NumPy 1.24-1.26 warn on bool8
        warnings.simplefilter("ignore")
        has_bool8 = hasattr(numpy, "bool8")
    if not has_bool8:
        # NumPy 2 removed bool8; Debian's plotly 5.4.1 (plotly/express/
        # imshow_utils.py) names it at import. HTA never reaches that code.
        numpy.bool8 = numpy.bool_
        notes.append("numpy %s has no bool8: aliased to numpy.bool_ for plotly's import"
                      % numpy.__version__)
    try:
        if os.environ.get("HTA_PLOTLY_STUB") == "1":
            raise ImportError("HTA_PLOTLY_STUB=1")
        import plotly.express  # noqa: F401
        import plotly.graph_objects  # noqa: F401
        import plotly.subplots  # noqa: F401
        from plotly.io import to_html  # noqa: F401
    except Exception as e:  # fall back to the stub, which draws nothing
        stub = os.path.join(home, "stubs")
        if not os.path.isdir(os.path.join(stub, "plotly")):
            raise
        notes.append("plotly failed to import (%s: %s): using the plotly STUB in %s"
                     % (type(e).__name__, e, stub))
        for k in [k for k in sys.modules if k == "plotly" or k.startswith("plotly.")
                  or k.startswith("_plotly_")]:
            del sys.modules[k]
        sys.path.insert(1, stub)
    from hta.trace_analysis import TraceAnalysis
    return TraceAnalysis


def load_raw(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def classify_raw(doc, include_last_step, is_comm):
    """Sort the raw file's GPU kernels by what HTA's filter does to them."""
    ev = doc.get("traceEvents", [])
    steps = [e for e in ev if e.get("ph") == "X" and STEP_RE.match(str(e.get("name", "")))]
    step_names = {e["name"] for e in steps}
    if len(step_names) >= 2:
        last_start = max(e["ts"] for e in steps)
        last_end = max(e["ts"] + e.get("dur", 0) for e in steps)

        def in_window(t):
            return t <= last_end if include_last_step else t < last_start
    else:
        def in_window(t):  # HTA skips its filter with fewer than 2 steps
            return True
    launch = {}  # correlation -> earliest CPU-side event ts
    for e in ev:
        a = e.get("args") or {}
        if e.get("ph") != "X" or "correlation" not in a:
            continue
        if e.get("cat") in GPU_CATS or e.get("cat") == "cuda_sync":
            continue
        c = a["correlation"]
        if c not in launch or e["ts"] < launch[c]:
            launch[c] = e["ts"]
    out = {"kernels": 0, "nccl": 0, "steps": len(step_names),
           "cls": {}, "nccl_cls": {}, "expect_kept": set(), "names": {}}
    for e in ev:
        if e.get("cat") != "kernel" or e.get("ph") != "X":
            continue
        c = (e.get("args") or {}).get("correlation")
        nccl = is_comm(e.get("name", ""))
        if c not in launch:
            k = "no launch"
        elif in_window(launch[c]):
            k = "kept"
            out["expect_kept"].add(c)
        else:
            k = "after window"
        out["kernels"] += 1
        out["cls"][k] = out["cls"].get(k, 0) + 1
        if nccl:
            out["nccl"] += 1
            out["nccl_cls"][k] = out["nccl_cls"].get(k, 0) + 1
            if k == "no launch":
                out["names"][e["name"]] = out["names"].get(e["name"], 0) + 1
    return out


def fmt_counts(d):
    order = ["kept", "after window", "no launch", "unexplained"]
    return ", ".join("%s %d" % (k, d[k]) for k in order if d.get(k))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="directory of rank traces (*.pt.trace.json.gz)")
    ap.add_argument("--include-last-step", action="store_true",
                    help="HTA's include_last_profiler_step=True")
    ap.add_argument("--strict", action="store_true",
                    help="also fail on any GPU kernel with no recorded launch")
    ap.add_argument("--glob", default="*.pt.trace.json*",
                    help="file names to hand HTA, searched for under DIR recursively "
                         "(default %(default)s; e.g. 'ddp-agent-*.gz' in a run's $OUT)")
    ap.add_argument("-v", "--verbose", action="store_true", help="keep HTA's own log")
    args = ap.parse_args()

    figures = {"dir": args.dir, "ok": False, "ranks": {}}
    failures = []
    notes = []

    def finish(rc):
        figures["ok"] = rc == 0
        figures["failures"] = failures
        figures["notes"] = notes
        for n in notes:
            print("note: " + n)
        for f in failures:
            print("FAIL: " + f)
        print(json.dumps(figures, sort_keys=True, default=str))
        return rc

    if not os.path.isdir(args.dir):
        failures.append("%s is not a directory" % args.dir)
        return finish(2)
    home = setup_path()
    try:
        TraceAnalysis = import_hta(home, notes)
        import pandas as pd
        import numpy as np
        from hta.utils.utils import is_comm_kernel
        from hta.configs.config import logger as hta_logger
    except Exception as e:
        traceback.print_exc()
        failures.append("HTA could not be imported from %s (%s: %s); sys.path=%s"
                        % (home, type(e).__name__, e, sys.path))
        return finish(2)
    hta_logger.setLevel(logging.DEBUG if args.verbose else logging.ERROR)
    if not args.verbose:  # pandas 2's FutureWarnings on HTA's replace(), 0/0 with no NCCL
        for cat in (RuntimeWarning, FutureWarning, DeprecationWarning):
            warnings.filterwarnings("ignore", category=cat, module="hta")
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    import hta
    hta_ver = getattr(sys.modules.get("hta.version"), "__version__", None)
    if hta_ver is None:
        try:
            from hta.version import __version__ as hta_ver
        except Exception:
            hta_ver = "?"
    print("python %s, pandas %s, numpy %s, HTA %s (%s)" % (
        sys.version.split()[0], pd.__version__, np.__version__, hta_ver,
        os.path.dirname(hta.__file__)))
    for m in ("plotly", "networkx", "psutil", "yaml"):
        print("  %-8s %s" % (m, where(m)))
    figures["versions"] = {"python": sys.version.split()[0], "pandas": pd.__version__,
                           "numpy": np.__version__, "hta": hta_ver}

    # HTA reads every *.gz and *.json directly in the directory it is given; the
    # traces (gprofctl trace --output-dir D writes D/<trace-id>/...) may lie deeper
    # or beside other files: then HTA gets a directory of links to them alone.
    files = sorted(p for p in glob.glob(os.path.join(args.dir, "**", "*"), recursive=True)
                   if os.path.isfile(p) and fnmatch.fnmatch(os.path.basename(p), args.glob))
    if not files:
        failures.append("no file matching %s in %s (searched recursively)" % (args.glob, args.dir))
        return finish(2)
    top = sorted(os.path.join(args.dir, f) for f in os.listdir(args.dir)
                 if (f.endswith(".gz") or f.endswith(".json")) and
                 os.path.isfile(os.path.join(args.dir, f)))
    hta_dir = args.dir
    if top != files:
        hta_dir = tempfile.mkdtemp(prefix="hta_check.")
        atexit.register(shutil.rmtree, hta_dir, True)
        for i, p in enumerate(files):
            name = os.path.basename(p)
            if os.path.exists(os.path.join(hta_dir, name)):
                name = "%d_%s" % (i, name)
            os.symlink(os.path.abspath(p), os.path.join(hta_dir, name))
        notes.append("HTA read %d files matching %s found under %s, through links in %s"
                     % (len(files), args.glob, args.dir, hta_dir))
    figures["files"] = [os.path.relpath(p, args.dir) for p in files]

    # --- HTA loads the directory -------------------------------------------
    try:
        ta = TraceAnalysis(trace_dir=hta_dir,
                           include_last_profiler_step=args.include_last_step)
    except BaseException as e:
        traceback.print_exc()
        failures.append("HTA failed to load the traces in %s (%s: %s)"
                        % (hta_dir, type(e).__name__, e))
        return finish(2)
    t = ta.t
    rank_files = {int(r): os.path.basename(p) for r, p in t.trace_files.items()}
    ranks = sorted(t.traces.keys())
    print("HTA rank -> file: %s" % json.dumps(rank_files, sort_keys=True))
    if len(rank_files) != len(files):
        failures.append("%d trace files but HTA mapped %d ranks (files share a rank, or lack "
                        "'\"rank\": R' with a space after the colon): %s"
                        % (len(files), len(rank_files), figures["files"]))
    missing = sorted(set(rank_files) - set(ranks))
    if missing:
        failures.append("HTA kept no analyzable events for rank(s) %s" % missing)
    if not ranks:
        failures.append("HTA loaded no rank")
        return finish(2)
    for r, fn in rank_files.items():
        m = re.search(r"rank(\d+)", fn)
        if m and int(m.group(1)) != r:
            failures.append("%s: file name says rank %s, distributedInfo says %d"
                            % (fn, m.group(1), r))

    # --- HTA's analyses --------------------------------------------------------
    def run(name, fn):
        try:
            return fn()
        except Exception as e:
            traceback.print_exc()
            failures.append("HTA's %s raised %s: %s" % (name, type(e).__name__, e))
            return None

    temporal = run("get_temporal_breakdown", lambda: ta.get_temporal_breakdown(visualize=False))
    overlap = run("get_comm_comp_overlap", lambda: ta.get_comm_comp_overlap(visualize=False))
    kb = run("get_gpu_kernel_breakdown", lambda: ta.get_gpu_kernel_breakdown(visualize=False))
    try:
        idle, _ = ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    except Exception as e:
        idle = None
        notes.append("get_idle_time_breakdown raised %s: %s (not counted as a failure)"
                     % (type(e).__name__, e))
    kernel_type_df, kernel_df = kb if kb is not None else (None, None)

    if kernel_type_df is not None:
        print("\nHTA kernel type breakdown (all ranks):")
        print(kernel_type_df.to_string(index=False))
        comm_all = float(kernel_type_df[kernel_type_df["kernel_type"].str.contains(
            "COMMUNICATION")]["percentage"].sum())
        figures["comm_share_all_pct"] = comm_all

    sym = t.symbol_table.get_sym_table()
    kernel_cat = t.symbol_table.get_sym_id_map().get("kernel", -(1 << 30))

    for r in ranks:
        fn = rank_files.get(r)
        raw = classify_raw(load_raw(os.path.join(hta_dir, fn)), args.include_last_step,
                           is_comm_kernel)
        df = t.traces[r]
        k = df[df["cat"] == kernel_cat]
        kept_corr = set(int(c) for c in k["correlation"].tolist())
        knames = k["name"].map(lambda i: sym[i] if 0 <= i < len(sym) else "")
        kept = int(len(k))
        kept_nccl = int(knames.map(is_comm_kernel).sum())
        unexpl = len(raw["expect_kept"] - kept_corr)
        if unexpl:
            raw["cls"]["kept"] -= unexpl
            raw["cls"]["unexplained"] = unexpl
        # NCCL kernels among the unexplained
        doc_nccl_unexpl = 0
        if unexpl:
            ev = load_raw(os.path.join(hta_dir, fn)).get("traceEvents", [])
            for e in ev:
                if (e.get("cat") == "kernel" and is_comm_kernel(e.get("name", "")) and
                        (e.get("args") or {}).get("correlation") in raw["expect_kept"] - kept_corr):
                    doc_nccl_unexpl += 1
            if doc_nccl_unexpl:
                raw["nccl_cls"]["kept"] -= doc_nccl_unexpl
                raw["nccl_cls"]["unexplained"] = doc_nccl_unexpl
        rf = {"file": fn, "steps": raw["steps"], "raw_kernels": raw["kernels"],
              "hta_kernels": kept, "raw_nccl": raw["nccl"], "hta_nccl": kept_nccl,
              "kernels_by_fate": raw["cls"], "nccl_by_fate": raw["nccl_cls"]}
        print("\n== rank %d (%s, %d ProfilerSteps)" % (r, fn, raw["steps"]))
        print("  GPU kernels: HTA kept %d of %d in the file (%s)"
              % (kept, raw["kernels"], fmt_counts(raw["cls"])))
        print("  NCCL kernels: HTA kept %d of %d in the file (%s)"
              % (kept_nccl, raw["nccl"], fmt_counts(raw["nccl_cls"]) or "none"))
        if temporal is not None:
            row = temporal[temporal["rank"] == r]
            if len(row):
                row = row.iloc[0]
                rf["temporal"] = {c: float(row[c]) for c in (
                    "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg",
                    "kernel_time(us)")}
                print("  temporal breakdown: idle %.2f%%, compute %.2f%%, non-compute %.2f%% "
                      "of %.0f us" % (row["idle_time_pctg"], row["compute_time_pctg"],
                                      row["non_compute_time_pctg"], row["kernel_time(us)"]))
        if overlap is not None:
            row = overlap[overlap["rank"] == r]
            if len(row):
                v = float(row.iloc[0]["comp_comm_overlap_pctg"])
                rf["comm_comp_overlap_pctg"] = None if v != v else v
                print("  comm/comp overlap: %s" % ("n/a (no communication kernel)" if v != v
                                                    else "%.2f%% of communication time" % v))
        comm_share = None
        if kernel_df is not None:
            kr = kernel_df[kernel_df["rank"] == r]
            tot = float(kr["sum (us)"].sum())
            by = kr.groupby("kernel_type")["sum (us)"].sum()
            comm_share = 100.0 * float(by.get("COMMUNICATION", 0.0)) / tot if tot else 0.0
            rf["comm_share_pct"] = round(comm_share, 2)
            print("  kernel types: %s; communication share %.2f%%" % (
                ", ".join("%s %.0f us" % (kt, v) for kt, v in by.items()), comm_share))
        if idle is not None:
            ir = idle[idle["rank"] == r]
            parts = []
            for s, g in ir.groupby("stream"):
                parts.append("stream %s: %s" % (s, ", ".join(
                    "%s %.0f us" % (c, v) for c, v in zip(g["idle_category"], g["idle_time"]))))
            print("  idle time: " + ("; ".join(parts) if parts else "none"))
        if raw["names"]:
            print("  NCCL kernels with no launch: %s" % ", ".join(
                "%d x %s" % (c, n) for n, c in sorted(raw["names"].items())))
        figures["ranks"][str(r)] = rf

        # --- verdicts ------------------------------------------------------
        nl = raw["nccl_cls"].get("no launch", 0)
        if nl:
            failures.append("rank %d: HTA dropped %d of %d NCCL kernels: no CPU event carries "
                            "their correlation (their launches, e.g. cuLaunchKernelEx, were "
                            "not recorded)" % (r, nl, raw["nccl"]))
        if doc_nccl_unexpl:
            failures.append("rank %d: HTA dropped %d NCCL kernels whose launches lie inside its "
                            "window" % (r, doc_nccl_unexpl))
        if raw["nccl"] and kept_nccl == 0:
            failures.append("rank %d: the file holds %d NCCL kernels, HTA kept none"
                            % (r, raw["nccl"]))
        if raw["nccl"] and comm_share is not None and comm_share == 0:
            failures.append("rank %d: communication share is 0%% in HTA's kernel breakdown "
                            "while the file holds %d NCCL kernels" % (r, raw["nccl"]))
        if args.strict and raw["cls"].get("no launch"):
            failures.append("rank %d (--strict): %d GPU kernels have no recorded launch"
                            % (r, raw["cls"]["no launch"]))
        if raw["cls"].get("no launch") and not args.strict and not nl:
            notes.append("rank %d: %d non-NCCL kernels have no recorded launch (HTA drops them)"
                         % (r, raw["cls"]["no launch"]))
        if raw["nccl_cls"].get("after window"):
            notes.append("rank %d: %d NCCL kernels launched in the last ProfilerStep, which HTA "
                         "leaves out by design (--include-last-step keeps them)"
                         % (r, raw["nccl_cls"]["after window"]))
    return finish(1 if failures else 0)


if __name__ == "__main__":
    sys.exit(main())
