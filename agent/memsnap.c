/*
 * memsnap.c: memory-snapshot bursts (gprofctl trace --memory-snapshot): the
 * agent opens and closes the window as for a trace, and the job's Python
 * side (python/gprof_agent, loaded by GPROF_TORCH_STEPS=1) records PyTorch's
 * CUDA caching allocator history for it and writes the snapshot, which
 * capture.c then uploads as the burst's file.
 *
 * The agent cannot call into Python, so Python asks: every optimizer step
 * calls gprof_step_memory() (gprof_step, then gprof_memory_poll, in one
 * call from Python), one atomic load more than gprof_step while no snapshot
 * is wanted. The handshake is one atomic state, each transition
 * made by one side with a compare-and-swap:
 *
 *   IDLE -> ARMED        agent thread, memsnap_begin (the file is created)
 *   ARMED -> RECORDING   Python, the first poll after the window opened:
 *                        "start recording" (poll returns 1)
 *   RECORDING -> DUMPING Python, the first poll after the window ended
 *                        whole: "write the snapshot" (2), to the path
 *                        gprof_memory_path gives while DUMPING
 *   DUMPING -> WRITTEN | FAILED   Python, gprof_memory_done()
 *   RECORDING -> STOP    agent thread, when the burst is cancelled or given
 *                        up; STOP -> IDLE Python, "stop, write nothing" (3)
 *   any -> IDLE          agent thread, memsnap_finish (the burst is over)
 *
 * The path and max_entries are written before the state leaves IDLE and
 * read only after it did (release/acquire); Python's reason for a failure
 * is written before it stores FAILED. Python writes into the file the agent
 * created, a file with no name (scratch.c: O_TMPFILE, mode 0600), through
 * the path /proc/self/fd/<fd>: no other user can predict, take or redirect
 * it, and it goes with the process however that ends; the agent uploads it
 * from the same descriptor.
 *
 * The agent thread waits for the snapshot at most MEMSNAP_WAIT_S after the
 * window's end (a step, then pickling a large history, take time); past
 * that the burst fails with the reason, and a snapshot Python finishes
 * later is refused (gprof_memory_done returns 0, and Python deletes it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gprof_agent.h"
#include "memsnap.h"
#include "ops.h"
#include "rec.h"
#include "scratch.h"
#include "state.h"

/* How long after the window's end the snapshot may take to arrive. */
#define MEMSNAP_WAIT_S 120
/* History entries PyTorch keeps (its ring buffer), unless
 * GPROF_MEMORY_MAX_ENTRIES says otherwise: enough for thousands of
 * allocations per step over a 20-step window, and a snapshot of tens of MB. */
#define MEMSNAP_DEFAULT_ENTRIES 100000

enum { MS_IDLE, MS_ARMED, MS_RECORDING, MS_DUMPING, MS_WRITTEN, MS_FAILED, MS_STOP };

static atomic_int state;
static atomic_int seen;            /* Python has polled at least once */
static char path[64];              /* IDLE -> ARMED publishes it: /proc/self/fd/<fd> */
static int file_fd = -1;           /* the snapshot's file (agent thread) */
static atomic_int held_fd = -1;    /* /dev/null at a given-up path (memsnap_finish) */
static int64_t max_entries;
static char why_py[300];           /* Python's reason, before FAILED */
static uint64_t wait_until_ns;     /* agent thread: the snapshot's deadline */

static int64_t entries_wanted(void)
{
	const char *v = getenv("GPROF_MEMORY_MAX_ENTRIES");
	char *end;
	long long n;

	if (v == NULL || !*v)
		return MEMSNAP_DEFAULT_ENTRIES;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < 1000 || n > 100000000) {
		agent_log("GPROF_MEMORY_MAX_ENTRIES=%s is not a number from 1000 to 100000000: "
		          "%d entries kept", v, MEMSNAP_DEFAULT_ENTRIES);
		return MEMSNAP_DEFAULT_ENTRIES;
	}
	return n;
}

int memsnap_begin(const char *trace_id, char *why, size_t n)
{
	int fd;

	(void)trace_id;
	if (file_fd >= 0)
		close(file_fd); /* a burst that never finished */
	file_fd = -1;
	fd = scratch_new(why, n);
	if (fd < 0)
		return fd;
	file_fd = fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	max_entries = entries_wanted();
	wait_until_ns = 0;
	atomic_store_explicit(&state, MS_ARMED, memory_order_release);
	return 0;
}

bool memsnap_pending(uint64_t now, int *timeout_ms)
{
	int s = atomic_load(&state);
	int er = atomic_load(&A.end_reason);

	/* only a window that ended whole has a snapshot to wait for */
	if ((er != END_DONE && er != END_CUT) || (s != MS_RECORDING && s != MS_DUMPING))
		return false;
	if (wait_until_ns == 0)
		wait_until_ns = now + (uint64_t)MEMSNAP_WAIT_S * 1000000000u;
	if (now >= wait_until_ns)
		return false;
	if (timeout_ms != NULL)
		*timeout_ms = (int)((wait_until_ns - now + 999999) / 1000000);
	return true;
}

int memsnap_finish(char *why, size_t wn)
{
	int s = atomic_load(&state);
	bool dumping = false;
	int r = -EIO, nul;

	/* a poll past here sees IDLE or STOP, never this burst's path */
	if (s == MS_RECORDING && atomic_compare_exchange_strong(&state, &s, MS_STOP))
		s = MS_STOP;
	/* Python may still be writing (it has the path): given up, unless it
	 * said done meanwhile (then s is what it said) */
	if (s == MS_DUMPING && atomic_compare_exchange_strong(&state, &s, MS_IDLE))
		dumping = true;
	if (s == MS_WRITTEN) {
		struct stat st;

		if (file_fd >= 0 && fstat(file_fd, &st) == 0 && st.st_size > 0)
			r = file_fd;
		else
			snprintf(why, wn, "the memory snapshot file is empty (the job's Python said "
			         "it wrote it)");
	} else if (s == MS_FAILED) {
		snprintf(why, wn, "PyTorch could not take the memory snapshot: %s", why_py);
	} else if (!atomic_load(&seen)) {
		snprintf(why, wn, "no PyTorch memory hook in this process: a memory snapshot is "
		         "taken by python/gprof_agent at optimizer steps; run the job with it on "
		         "PYTHONPATH and GPROF_TORCH_STEPS=1 (gprofctl launch does both)");
	} else if (s == MS_ARMED) {
		snprintf(why, wn, "the window passed with no optimizer step in it, so recording "
		         "never began: memory history starts and ends at steps; give a longer "
		         "window or use --iterations");
	} else {
		snprintf(why, wn, "the memory snapshot did not arrive within %d s of the window's "
		         "end (the job stopped stepping, or pickling the history took longer)",
		         MEMSNAP_WAIT_S);
	}
	if (r < 0 && file_fd >= 0 && dumping &&
	    (nul = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		/* Python opens /proc/self/fd/<fd> when it gets there: that
		 * number must not be handed to another file of the job meanwhile
		 * (truncated as the snapshot's). /dev/null holds it, and the file
		 * goes; gprof_memory_done closes the holder. */
		dup3(nul, file_fd, O_CLOEXEC);
		close(nul);
		atomic_store(&held_fd, file_fd);
	} else if (r < 0 && file_fd >= 0) {
		close(file_fd); /* the file goes with it */
	}
	file_fd = -1; /* the caller's now, when r is it */
	/* STOP stays until Python hears it; everything else is over */
	s = atomic_load(&state);
	if (s != MS_STOP)
		atomic_store(&state, MS_IDLE);
	return r;
}

void memsnap_discard(void)
{
	char why[8];

	int fd = memsnap_finish(why, sizeof(why));

	if (fd >= 0)
		close(fd);
}

int gprof_memory_poll(void)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);
	int er;

	if (!atomic_load_explicit(&seen, memory_order_relaxed))
		atomic_store(&seen, 1);
	/* a forked child (a DataLoader worker) inherited the state, not the
	 * burst: it must never write the parent's file */
	if (s == MS_IDLE || A.disabled)
		return GPROF_MEMORY_NOTHING;
	er = atomic_load(&A.end_reason);
	switch (s) {
	case MS_ARMED:
		if (atomic_load(&A.t_start) == 0 || er != END_NONE ||
		    !atomic_compare_exchange_strong(&state, &s, MS_RECORDING))
			return GPROF_MEMORY_NOTHING;
		return GPROF_MEMORY_START;
	case MS_RECORDING:
		if (er != END_DONE && er != END_CUT)
			return GPROF_MEMORY_NOTHING; /* open; a cancel turns it into STOP */
		if (!atomic_compare_exchange_strong(&state, &s, MS_DUMPING))
			return GPROF_MEMORY_NOTHING;
		return GPROF_MEMORY_DUMP;
	case MS_STOP:
		if (!atomic_compare_exchange_strong(&state, &s, MS_IDLE))
			return GPROF_MEMORY_NOTHING;
		return GPROF_MEMORY_STOP;
	default:
		return GPROF_MEMORY_NOTHING;
	}
}

int gprof_step_memory(void)
{
	rec_step();
	return gprof_memory_poll() | ops_poll(); /* one poll for every window's wants */
}

int64_t gprof_memory_max_entries(void)
{
	return entries_wanted();
}

int64_t gprof_memory_entries(void)
{
	return atomic_load_explicit(&state, memory_order_acquire) == MS_IDLE ? 0 : max_entries;
}

int gprof_memory_path(char *buf, size_t n)
{
	if (buf == NULL || atomic_load_explicit(&state, memory_order_acquire) != MS_DUMPING ||
	    n <= strlen(path))
		return -1;
	snprintf(buf, n, "%s", path);
	return 0;
}

int gprof_memory_done(int ok, const char *why)
{
	int s = MS_DUMPING;

	if (!ok)
		snprintf(why_py, sizeof(why_py), "%s", why && *why ? why : "no reason given");
	if (!atomic_compare_exchange_strong(&state, &s, ok ? MS_WRITTEN : MS_FAILED)) {
		int fd = atomic_exchange(&held_fd, -1);

		if (fd >= 0)
			close(fd); /* the /dev/null memsnap_finish left at the path */
		return 0; /* the burst was given up meanwhile: nobody takes the file */
	}
	agent_wake();
	return 1;
}
