"""gprof_agent.memsnap: memory snapshots on demand (gprofctl trace
--memory-snapshot), the Python half of agent/memsnap.c.

At every optimizer step gprof_agent calls gprof_step_memory() instead of
gprof_step() (the same one C call, and one atomic load more in it while
nothing is wanted) and hands its answer to Poller.handle when it is not
NOTHING or while recording:
- START: record the CUDA caching allocator's history from now on
  (torch.cuda.memory._record_memory_history, max_entries from the agent);
- DUMP: the window is over: torch.cuda.memory._snapshot(), pickled
  (pickle.dump) into the file the agent created, recording stopped, and
  the agent told (gprof_memory_done), which uploads the file;
- STOP: the capture was cancelled: recording stopped, nothing written.
While recording, each step also notes the allocator's counters (bytes
allocated and reserved, allocations so far), kept in the snapshot under the
extra key "gprof_steps", so `gprofctl report` can show allocations per
iteration and growth; PyTorch's viewer reads only its own keys.

Nothing here imports torch: it is the job's, found in sys.modules (the
step hook runs only once the job imported torch.optim). Every failure is
reported to the agent with its reason and never raised into the job.
"""
import ctypes
import os
import pickle
import sys
import time

NOTHING, START, DUMP, STOP = 0, 1, 2, 3
_BUF = 4096


def _torch():
    t = sys.modules.get("torch")
    if t is None:
        raise RuntimeError("torch is not imported in this process")
    return t


def _start(t, entries, context=True):
    """Every allocation and free from now on, at most entries kept; with
    context, the stacks of each (a snapshot's frames), else none (the
    cheapest recording: memevents.py's). True when the history was cleared
    first (older PyTorch keeps what an earlier recording left)."""
    mem = t.cuda.memory
    kw = {} if context else {"context": None}
    try:  # the window's history only, not an earlier window's left in the buffer
        mem._record_memory_history(max_entries=entries, clear_history=True, **kw)
        return True
    except TypeError:
        pass
    try:
        mem._record_memory_history(max_entries=entries, **kw)
    except TypeError:  # PyTorch 2.0: the older keywords
        mem._record_memory_history(True, record_context=context,
                                   trace_alloc_max_entries=entries,
                                   trace_alloc_record_context=context)
    return False


def _stop(t):
    mem = t.cuda.memory
    try:
        mem._record_memory_history(enabled=None)
    except TypeError:
        mem._record_memory_history(False)


class Poller:
    def __init__(self, lib):
        self.step = lib.gprof_step_memory  # gprof_step, then the poll
        self.step.argtypes = []
        self.step.restype = ctypes.c_int
        self._entries = lib.gprof_memory_entries
        self._entries.argtypes = []
        self._entries.restype = ctypes.c_int64
        self._path = lib.gprof_memory_path
        self._path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self._path.restype = ctypes.c_int
        self._done = lib.gprof_memory_done
        self._done.argtypes = [ctypes.c_int, ctypes.c_char_p]
        self._done.restype = ctypes.c_int
        self.recording = False  # the per-step notes are wanted
        self._steps = None   # the window's per-step notes while recording
        self._error = None   # why recording could not start, said at DUMP
        self._n = 0

    def _note(self, t):
        s = t.cuda.memory_stats()
        self._steps.append({
            "step": self._n,
            "time_us": time.time_ns() // 1000,
            "allocated": int(s.get("allocated_bytes.all.current", 0)),
            "reserved": int(s.get("reserved_bytes.all.current", 0)),
            "allocations": int(s.get("allocation.all.allocated", 0)),
        })
        self._n += 1

    def handle(self, what):
        """What gprof_step_memory answered (called when it is not NOTHING,
        or while recording)."""
        if what == NOTHING:
            if self._steps is not None:
                try:
                    self._note(_torch())
                except Exception:
                    pass  # the counters are extras: the history is what counts
            return
        if what == START:
            self._begin()
        elif what == DUMP:
            buf = ctypes.create_string_buffer(_BUF)
            if self._path(buf, _BUF) == 0:
                self._dump(buf.value.decode())
            else:
                self._done(0, b"the agent gave no path for the snapshot")
        elif what == STOP:
            self._steps = None
            self.recording = False
            try:
                _stop(_torch())
            except Exception:
                pass

    def _begin(self):
        self._steps, self._error, self._n = [], None, 0
        self.recording = True
        try:
            t = _torch()
            _start(t, int(self._entries()))
            self._note(t)
        except Exception as e:
            self._steps = None
            self._error = "recording the allocator's history failed: %s: %s" % (
                type(e).__name__, e)

    def _dump(self, path):
        steps, self._steps = self._steps, None
        self.recording = False
        if self._error is not None:
            self._done(0, self._error.encode()[:1000])
            return
        try:
            t = _torch()
            if steps is not None:
                self._steps = steps
                self._note(t)
                self._steps = None
            snap = t.cuda.memory._snapshot()
            if isinstance(snap, dict):
                snap["gprof_steps"] = steps or []
            # the agent made the file (mode 0600): a file with no name,
            # reached through its descriptor (/proc/self/fd/N, a link to
            # follow); any other path (an older agent's) is never followed
            nofollow = 0 if path.startswith("/proc/self/fd/") else getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | nofollow)
            with os.fdopen(fd, "wb") as f:
                pickle.dump(snap, f, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            try:
                _stop(t)
            except Exception:
                pass
            self._done(0, ("%s: %s" % (type(e).__name__, e)).encode()[:1000])
            return
        try:
            _stop(t)
        except Exception:
            pass
        if not self._done(1, None) and not path.startswith("/proc/self/fd/"):
            try:  # the capture was given up meanwhile: nobody takes it
                os.unlink(path)
            except OSError:
                pass
