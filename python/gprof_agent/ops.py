"""PyTorch operators for the agent's capture windows (docs/AGENT.md).

At each optimizer step gprof_agent's one call (gprof_step_memory) says
whether a window that takes operators is open (GPROF_STEP_OPS); only then,
and while its recorder runs, does it ask what the window wants
(gprof_window_flags: the options, the window's number). When a window
that takes operators opens, a recorder starts (never CUPTI: the agent
holds it); at the first step after the window's end it stops and writes a
Kineto-shaped trace to the private file the agent named (gprof_ops_path),
and says so (gprof_ops_done); the agent merges the operators into its
trace.

The recorder is chosen by GPROF_TORCH_OPS:
  observer (default)    one global RecordFunction callback of our own
                        (_ops_observer.cpp, built against the job's torch
                        by build_ops.py), per-thread buffers, written at
                        the window's end (docs/AGENT.md: its cost per
                        operator). Not built yet: a background
                        build starts and the window uses kineto-cpu; no
                        compiler: kineto-cpu; the trace's note says which.
  kineto-cpu            torch.profiler.profile(activities=[CPU],
                        record_shapes=<--record-shapes>,
                        with_modules=<--with-modules>)
  legacy                torch.autograd.profiler.profile(use_kineto=False),
                        its events written in Kineto's shape by this file
  off                   nothing (the agent offers no window operators)
A window the request did not ask operators of (the agent's default,
GPROF_WINDOW_UNASKED) takes them from the observer only when it is built
already; else it records none, starts no build and no torch.profiler, and
the trace's note says how to get them.
--profile-memory also records the CUDA caching allocator's history over
the window and turns it into Kineto's "[memory]" events (memevents.py),
written beside the operators' file; a torch without CUDA or too old for
the history says so in the note.
--with-modules also puts an "nn.Module: <Class>_<n>" scope (a
record_function, so a user_annotation) around each module's forward, from
global module hooks registered for the window only: eager PyTorch's
with_modules records nothing without TorchScript. GPROF_TORCH_OPS_MB (16)
bounds the observer's memory; operators past it are dropped and counted
in the note.

Rules: nothing here changes what the job computes; outside a window it
costs nothing beyond the step's own call; every exception is swallowed, and its
text goes into the trace's note through gprof_ops_done.
"""
import ctypes
import os
import sys
import threading
import time

OPEN, OPS, SHAPES, MODULES, STACK, FLOPS, MEMORY, UNASKED = (1 << i for i in range(8))
_UNHONOURED = ((STACK, "--with-stack"), (FLOPS, "--with-flops"))


def _err(e):
    return "%s: %s" % (type(e).__name__, str(e)[:200])


class _Modules:
    """nn.Module scopes from global forward hooks, for one window: the
    observer's own scopes when it records (scope_push/scope_pop, a fraction
    of a microsecond), else record_function scopes (tens of microseconds
    each through torch.ops)."""

    def __init__(self, torch, observer=None):
        self._torch = torch
        self._obs = observer
        self._names = {}
        self._count = {}
        self._tls = threading.local()
        mod = torch.nn.modules.module
        self._handles = [mod.register_module_forward_pre_hook(self._pre),
                         mod.register_module_forward_hook(self._post)]

    def _name(self, m):
        n = self._names.get(id(m))
        if n is None:
            cls = type(m).__name__
            k = self._count.get(cls, 0)
            self._count[cls] = k + 1
            n = self._names[id(m)] = "nn.Module: %s_%d" % (cls, k)
        return n

    def _pre(self, m, args):
        stack = getattr(self._tls, "s", None)
        if stack is None:
            stack = self._tls.s = []
        if self._obs is not None:
            stack.append(self._obs.scope_push(self._name(m)))
        else:
            stack.append(self._torch.ops.profiler._record_function_enter_new(self._name(m), None))

    def _post(self, m, args, out):
        stack = getattr(self._tls, "s", None)
        if stack:
            if self._obs is not None:
                self._obs.scope_pop(stack.pop())
            else:
                self._torch.ops.profiler._record_function_exit(stack.pop())

    def close(self):
        for h in self._handles:
            h.remove()
        self._names.clear()


class _KinetoCpu:
    def __init__(self, torch, flags):
        self._prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            record_shapes=bool(flags & SHAPES), with_modules=bool(flags & MODULES))

    def start(self):
        self._prof.start()

    def stop(self, path):
        self._prof.stop()
        self._prof.export_chrome_trace(path)


_MARK = "gprof::clock"


class _Legacy:
    """The autograd profiler without Kineto; its events (times relative to
    its start, its own thread numbers) written as Kineto's, on the wall
    clock (through a marker scope timed on both clocks: within a microsecond
    or two, so a launch at an operator's edge may stick out of it) and the
    OS thread of the thread that started it (only the busiest thread's
    operators: the others' OS threads are unknown)."""

    def __init__(self, torch, flags):
        self._torch = torch
        self._prof = torch.autograd.profiler.profile(
            use_kineto=False, record_shapes=bool(flags & SHAPES))
        self.note = None

    def start(self):
        self._tid = threading.get_native_id()
        self._prof.__enter__()
        # its clock's zero on the wall clock: a scope whose wall-clock
        # bounds are known (to a microsecond or two)
        a = time.time_ns()
        with self._torch.autograd.profiler.record_function(_MARK):
            b = time.time_ns()
        self._mark = (a + b) // 2

    def stop(self, path):
        import json
        self._prof.__exit__(None, None, None)
        evs = list(self._prof.function_events)
        mark = [e for e in evs if e.name == _MARK]
        # wall-clock ns of the profiler's zero
        t0 = self._mark - int(mark[0].time_range.start * 1000) if mark else time.time_ns()
        evs = [e for e in evs if e.name != _MARK]
        threads = {}
        for e in evs:
            threads[e.thread] = threads.get(e.thread, 0) + 1
        main = max(threads, key=threads.get) if threads else None
        out, other = [], 0
        for e in evs:
            if e.thread != main:
                other += 1
                continue
            args = {"Sequence number": e.sequence_nr, "Fwd thread id": e.fwd_thread or 0}
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
            out.append({"ph": "X", "cat": "cpu_op", "name": e.name, "pid": os.getpid(),
                        "tid": self._tid, "ts": round(e.time_range.start, 3),
                        "dur": round(e.time_range.end - e.time_range.start, 3), "args": args})
        if other:
            self.note = ("%d operators of other threads left out (the legacy profiler "
                         "does not name OS threads)" % other)
        with open(path, "w") as f:
            json.dump({"baseTimeNanoseconds": t0, "traceEvents": out}, f)


class _Observer:
    """Our own RecordFunction callback (_ops_observer.cpp), built already."""

    def __init__(self, mod, flags):
        self._mod = self.module = mod
        self._shapes = bool(flags & SHAPES)
        try:
            mb = int(os.environ.get("GPROF_TORCH_OPS_MB", "16"))
        except ValueError:
            mb = 16
        self._budget = max(1, min(mb, 4096)) << 20
        self.note = None
        self.stats = None

    def start(self):
        self._mod.start(self._shapes, self._budget)

    def stop(self, path):
        st = self.stats = self._mod.stop(path)
        lost = []
        if st["drops"]:
            lost.append("%d operators dropped: the observer's memory (GPROF_TORCH_OPS_MB=%d) "
                        "was full" % (st["drops"], self._budget >> 20))
        if st["overflow"]:
            lost.append("%d operators nested deeper than 256 left out" % st["overflow"])
        # operators still open at the stop are left out without a note: the
        # stop runs inside torch's Optimizer.step#... scope (post-hooks run
        # in it), so every window has one
        self.note = "; ".join(lost) or None


MECHANISMS = {"kineto-cpu": _KinetoCpu, "legacy": _Legacy}
_build = None  # build_ops.Background, once per process


def _observer(torch, flags, notes):
    """The observer for a window, or None (notes say why: an asked-for
    window then uses kineto-cpu, a default one records none). Never
    compiles here: for an asked-for window a build runs in the background;
    a default window (UNASKED) starts no build and no torch.profiler."""
    global _build
    from . import build_ops
    why = None
    try:  # a built one loads without the tools to build it (a compute node)
        mod = build_ops.load_built(torch)
    except Exception as e:  # a library that does not load: say so, use kineto-cpu
        mod, why = None, "its library does not load: %s" % _err(e)
    if mod is not None:
        return _Observer(mod, flags)
    if why is None:
        why = build_ops.missing_tools(torch)
    if flags & UNASKED:
        if why is None:
            notes.append("PyTorch operators not recorded: the operator observer is not built "
                         "for torch %s (python3 -m gprof_agent.build_ops builds it, once per "
                         "torch version; or ask with gprofctl trace --operators)"
                         % torch.__version__)
        else:
            notes.append("PyTorch operators not recorded: the operator observer is not "
                         "available (%s); gprofctl trace --operators records them with "
                         "torch.profiler's CPU side" % why)
        return None
    if why is not None:
        notes.append("operator observer not available (%s): recorded with kineto-cpu "
                     "(torch.profiler's CPU side, at its cost)" % why)
    elif _build is None:
        _build = build_ops.Background()
        notes.append("operator observer not built for torch %s: building it in the background "
                     "(python3 -m gprof_agent.build_ops does it ahead); this window recorded "
                     "with kineto-cpu" % torch.__version__)
    elif not _build.done:
        notes.append("operator observer still building in the background: this window "
                     "recorded with kineto-cpu")
    else:
        notes.append("operator observer not available (%s): recorded with kineto-cpu"
                     % (_build.error or "built, but not loadable"))
    return None


class Poller:
    """The per-step poll: starts and stops the profiler at window edges."""

    def __init__(self, lib, kind):
        lib.gprof_window_flags.restype = ctypes.c_uint64
        lib.gprof_window_flags.argtypes = []
        lib.gprof_ops_path.restype = ctypes.c_uint64
        lib.gprof_ops_path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.gprof_ops_done.restype = None
        lib.gprof_ops_done.argtypes = [ctypes.c_uint64, ctypes.c_char_p]
        self._lib = lib
        self._flags = lib.gprof_window_flags
        self._kind = kind
        self._gen = 0        # the window a profiler runs for
        self._seen = 0       # the last window begun (or refused)
        self._session = None
        self._modules = None
        self._memory = None
        self._path = None
        self._notes = []
        self.last_stats = None  # the observer's counts for the last window (tests)

    def active(self):
        """A profiler runs for a window (poll every step until it ends)."""
        return self._gen != 0

    def __call__(self):
        f = self._flags()
        gen = f >> 32
        if self._gen and (not (f & OPEN) or gen != self._gen):
            self._end()
        if not self._gen and (f & (OPEN | OPS)) == OPEN | OPS and gen != self._seen:
            self._seen = gen
            self._begin(f)

    def _begin(self, f):
        buf = ctypes.create_string_buffer(4096)
        gen = self._lib.gprof_ops_path(buf, len(buf))
        if not gen:
            return
        self._gen, self._path, self._notes = gen, buf.value.decode(), []
        asked = [n for bit, n in _UNHONOURED if f & bit]
        if asked:
            self._notes.append("%s asked for, not recorded on the agent path (the Kineto "
                               "path records them)" % ", ".join(asked))
        try:
            import torch
            kind = os.environ.get("GPROF_TORCH_OPS") or self._kind  # per window: benchmarks
            if kind != "observer":
                f &= ~UNASKED  # the job's owner chose a recorder: asked
            if kind == "observer":
                self._session = _observer(torch, f, self._notes)
                if self._session is None:
                    kind = None if f & UNASKED else "kineto-cpu"
            if self._session is None and kind is not None:
                mech = MECHANISMS.get(kind)
                if mech is None:
                    raise ValueError("GPROF_TORCH_OPS=%s is not one of observer, kineto-cpu, "
                                     "legacy, off" % kind)
                self._session = mech(torch, f)
            if self._session is not None:
                if f & MODULES:
                    self._modules = _Modules(torch, getattr(self._session, "module", None))
                self._session.start()
        except Exception as e:  # never break the job over profiling
            self._notes.append("PyTorch operators not recorded: the profiler did not "
                               "start (%s)" % _err(e))
            self._close_modules()
            self._session = None
        if f & MEMORY:
            self._begin_memory()
        if self._session is None and self._memory is None:
            self._done()

    def _begin_memory(self):
        """The allocator's history for the window (memevents.py)."""
        try:
            import torch
            from . import memevents
            why = memevents.unavailable(torch)
            if why is not None:
                self._notes.append("--profile-memory asked for, not recorded: %s" % why)
                return
            snap = getattr(sys.modules.get(__package__), "_mem", None)
            entries = self._lib.gprof_memory_max_entries
            entries.restype, entries.argtypes = ctypes.c_int64, []
            self._memory = memevents.Recorder(torch, bool(getattr(snap, "recording", False)),
                                              int(entries()))
            self._memory.start()
        except Exception as e:  # never break the job over profiling
            self._notes.append("[memory] events not recorded: the allocator's history did not "
                               "start (%s)" % _err(e))
            self._memory = None

    def _close_modules(self):
        if self._modules is not None:
            try:
                self._modules.close()
            except Exception as e:
                self._notes.append("module hooks: %s" % _err(e))
            self._modules = None

    def _end_memory(self):
        # first: the history's entries end nearest the window's end
        mem, self._memory = self._memory, None
        try:
            mem.stop(self._path)
        except Exception as e:
            self._notes.append("[memory] events not recorded: the allocator's snapshot or "
                               "its file failed (%s)" % _err(e))
        if mem.note:
            self._notes.append(mem.note)

    def _end(self):
        self._close_modules()
        if self._memory is not None:
            self._end_memory()
        if self._session is not None:
            try:
                self._session.stop(self._path)
                self.last_stats = getattr(self._session, "stats", None)
                if getattr(self._session, "note", None):
                    self._notes.append(self._session.note)
            except Exception as e:
                self._notes.append("PyTorch operators not recorded: the profiler's stop or "
                                   "export failed (%s)" % _err(e))
            self._session = None
        self._done()

    def _done(self):
        note = "; ".join(self._notes).encode(errors="replace") or None
        try:
            self._lib.gprof_ops_done(self._gen, note)
        finally:
            self._gen = 0


def poller(lib):
    """The poll to run after each step, or None (an agent without operator
    support). With GPROF_TORCH_OPS=off the agent offers no window operators,
    so the poll starts nothing."""
    kind = os.environ.get("GPROF_TORCH_OPS") or "observer"
    try:
        return Poller(lib, kind)
    except AttributeError:
        return None
