"""gprof_agent.memevents: Kineto's "[memory]" events for a capture window on
the agent path (gprofctl trace --profile-memory), made from the CUDA
caching allocator's history; ops.py runs it beside the window's operator
recorder.

torch.profiler(profile_memory=True) writes, for every allocation and free
of the caching allocator, an instant event
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
   "pid", "tid", "ts", "args": {"Total Reserved", "Total Allocated",
   "Bytes", "Device Id", "Device Type": 1, "Addr"}}
(Bytes +size on an allocation, -size on a free; the totals after it). The
agent holds CUPTI, so no torch.profiler with CUDA activities runs here;
instead, for the window:
- start: the allocator's history (torch.cuda.memory._record_memory_history,
  no Python stacks: the cheapest context; at most GPROF_MEMORY_MAX_ENTRIES
  entries, as for memory snapshots), and the totals now
  (torch.cuda.memory_allocated/memory_reserved per device). A history
  already on (a memory snapshot in progress, or the job's own) is used
  as it is and left on, said in the note;
- stop: torch.cuda.memory._snapshot()'s device_traces, the entries since
  the start turned into [memory] events with running totals from those
  seeds; the history stopped (when it was ours); the events written to
  the second file the agent reads beside the operators' (agent/ops.c,
  MEM_FILE), on the clock the agent reads (Unix-epoch ns).

The entries say no thread: the events go on the thread that ran the step
(the job's training thread). On an H200 with PyTorch 2.11 (2026-11-28,
tests/gpu/memsnap.sh step 6) each step's events equal torch.profiler
(profile_memory=True)'s on the same loop: 22 allocations, 21 frees, the
same 43 sizes, the same bytes and running totals.
"""
import json
import os
import threading
import time

MEM_FILE = "memory.json"  # agent/ops.c's MEM_FILE, beside ops.json
_CUDA = 1                 # c10::DeviceType::CUDA, Kineto's "Device Type"
_BLOCK = 512              # the caching allocator's kMinBlockSize


def _block(size):
    """The block the allocator gives for a request of size bytes: what it
    reports to the profiler (Bytes, Total Allocated count blocks), while
    its history records the size requested. Rounded up to 512 B as
    PyTorch's round_size does by default; a large block the allocator did
    not split is larger by the rest it kept, which this cannot see."""
    return max(_BLOCK, (size + _BLOCK - 1) // _BLOCK * _BLOCK)


def unavailable(torch):
    """Why this torch cannot give [memory] events, or None."""
    cuda = getattr(torch, "cuda", None)
    mem = getattr(cuda, "memory", None)
    if mem is None or not hasattr(mem, "_record_memory_history") or \
            not hasattr(mem, "_snapshot"):
        return "this torch (%s) has no allocator history (PyTorch 2.0 or later)" % \
            getattr(torch, "__version__", "?")
    try:
        if not cuda.is_available():
            return "this torch sees no CUDA device"
    except Exception as e:
        return "torch.cuda.is_available() failed: %s" % type(e).__name__
    return None


class Recorder:
    """The allocator's history over one window, as [memory] events."""

    def __init__(self, torch, memsnap_recording, entries):
        """entries: the history's bound, the agent's reading of
        GPROF_MEMORY_MAX_ENTRIES (gprof_memory_max_entries)."""
        from . import memsnap
        self._torch = torch
        self._entries = entries
        self._memsnap = memsnap
        self.note = None
        self.count = 0
        self._tid = threading.get_native_id()
        self._pid = os.getpid()
        on = memsnap_recording
        if not on:
            try:
                on = bool(torch._C._cuda_isHistoryEnabled())
            except Exception:
                on = False  # a torch without the query: ours to start
        self._ours = not on
        if on:
            self.note = ("[memory] events from the CUDA allocator history already being "
                         "recorded (%s), left on" % ("a memory snapshot in progress"
                                                      if memsnap_recording else
                                                      "the job's own"))
        n = torch.cuda.device_count()
        self._seed = {d: [int(torch.cuda.memory_allocated(d)), int(torch.cuda.memory_reserved(d))]
                      for d in range(min(n, 64))}

    def start(self):
        cleared = self._ours and self._memsnap._start(self._torch, self._entries, context=False)
        # a history cleared here holds the window's entries only; one
        # already on (or an older torch's, not cleared), older ones too:
        # those before now are left out (by PyTorch's converted clock,
        # which may stray from the system's by microseconds, so only when
        # needed)
        self._t0_us = -1 if cleared else time.time_ns() // 1000

    def stop(self, ops_path):
        """Writes the window's events beside ops_path; the history stopped
        when it was ours, whatever happens."""
        try:
            snap = self._torch.cuda.memory._snapshot()
        finally:
            if self._ours:
                self._memsnap._stop(self._torch)
        events, untimed = self._events(snap.get("device_traces") or [])
        if untimed:
            self.note = "; ".join(filter(None, (self.note, (
                "%d allocator history entries without a time left out (a torch before 2.1?)"
                % untimed))))
        path = os.path.join(os.path.dirname(ops_path), MEM_FILE)
        # the agent made the directory (0700); never follow a link
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as f:
            f.write('{"baseTimeNanoseconds": 0, "traceEvents": [\n')
            f.write(",\n".join(events))
            f.write("\n]}\n")
        self.count = len(events)

    def _events(self, traces):
        out, untimed = [], 0
        for dev, entries in enumerate(traces):
            seed = self._seed.get(dev)
            if seed is None or not entries:
                continue
            alloc, reserved = seed
            sizes = {}  # addr -> the block an allocation in the window added
            for te in entries:
                t = te.get("time_us")
                if not isinstance(t, int):
                    untimed += 1
                    continue
                if t < self._t0_us:
                    continue  # before the window (a history already on)
                action, size, addr = te.get("action"), int(te.get("size", 0)), te.get("addr", 0)
                if action in ("segment_alloc", "segment_map"):
                    reserved += size
                    continue
                if action in ("segment_free", "segment_unmap"):
                    reserved -= size
                    continue
                if action == "alloc":
                    b = sizes[addr] = _block(size)
                elif action == "free_requested":
                    # free_requested, not free_completed: PyTorch reports a
                    # free to the profiler (reportMemoryUsageToProfiler) in
                    # the allocator's free(), right after this entry, with
                    # the allocated total already lowered; free_completed
                    # comes later when other streams still used the block
                    b = -sizes.pop(addr, _block(size))
                else:
                    continue  # free_completed, oom, snapshot, ...
                alloc += b
                out.append('{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", '
                           '"pid": %d, "tid": %d, "ts": %d.000, "args": {"Total Reserved": %d, '
                           '"Total Allocated": %d, "Bytes": %d, "Device Id": %d, '
                           '"Device Type": %d, "Addr": %d}}'
                           % (self._pid, self._tid, t, reserved, alloc, b, dev, _CUDA, addr))
        return out, untimed

