/*
 * download: see download.h (ownership, callers).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "download.h"
#include "log.h"

struct download {
	struct session *s;     /* NULL once its session is gone */
	uint32_t transfer;
	uv_file fd;
	uint64_t off, end, sent;
	uint32_t crc;
	uv_fs_t req;
	bool busy;
	uint8_t *buf;          /* FRAME_CHUNK_PREFIX + DOWNLOAD_CHUNK: becomes the frame */
};

static uint32_t next_transfer = 1;

static void dl_free(struct download *dl)
{
	uv_fs_t req;

	if (dl->fd >= 0) {
		uv_fs_close(NULL, &req, dl->fd, NULL);
		uv_fs_req_cleanup(&req);
	}
	free(dl->buf);
	free(dl);
}

/* s's download is now dl (NULL: none). While one runs, its chunks do not
 * count as replies left unread (conn_streaming): it keeps the queue under
 * DOWNLOAD_AHEAD itself. */
static void set_download(struct session *s, struct download *dl)
{
	s->download = dl;
	conn_streaming(&s->conn, dl != NULL);
}

static void finish(struct download *dl)
{
	struct session *s = dl->s;
	struct msg m;

	msg_init(&m, MSG_DOWNLOAD_END, 0);
	m.u.download_end.transfer = dl->transfer;
	m.u.download_end.bytes = (int64_t)dl->sent;
	m.u.download_end.crc32 = dl->crc;
	set_download(s, NULL);
	dl_free(dl);
	conn_send_msg(&s->conn, &m);
}

static void on_read(uv_fs_t *req)
{
	struct download *dl = req->data;
	uint8_t prefix[FRAME_CHUNK_PREFIX];
	ssize_t n = req->result;
	struct session *s = dl->s;
	struct pbuf b;

	uv_fs_req_cleanup(req);
	dl->busy = false;
	if (s == NULL) {
		dl_free(dl);
		return;
	}
	if (n <= 0) {
		conn_send_error(&s->conn, 0, MSG_E_IO, "reading the trace failed: %s",
		                n == 0 ? "the file is shorter than recorded" : uv_strerror((int)n));
		set_download(s, NULL);
		dl_free(dl);
		conn_finish(&s->conn, "download failed");
		return;
	}
	/* The data was read behind room for the chunk prefix: the buffer
	 * becomes the frame and goes to the socket as it is. */
	frame_chunk_prefix(prefix, dl->transfer, dl->off, (size_t)n);
	memcpy(dl->buf, prefix, sizeof(prefix));
	dl->crc = (uint32_t)crc32(dl->crc, dl->buf + FRAME_CHUNK_PREFIX, (uInt)n);
	pbuf_init(&b, 0);
	b.data = dl->buf; /* transferred */
	b.len = b.cap = FRAME_CHUNK_PREFIX + (size_t)n;
	dl->buf = NULL;
	dl->off += (uint64_t)n;
	dl->sent += (uint64_t)n;
	if (conn_send(&s->conn, &b) < 0)
		return; /* the conn is closing; download_session_gone freed dl */
	download_pump(s);
}

void download_pump(struct session *s)
{
	struct download *dl = s->download;
	uv_buf_t buf;
	size_t want;
	int r;

	if (dl == NULL || dl->busy || s->conn.queued > DOWNLOAD_AHEAD)
		return;
	if (dl->off >= dl->end) {
		finish(dl);
		return;
	}
	want = dl->end - dl->off < DOWNLOAD_CHUNK ? (size_t)(dl->end - dl->off) : DOWNLOAD_CHUNK;
	if (dl->buf == NULL)
		dl->buf = malloc(FRAME_CHUNK_PREFIX + DOWNLOAD_CHUNK);
	if (dl->buf == NULL) {
		conn_close(&s->conn, "out of memory");
		return;
	}
	buf = uv_buf_init((char *)dl->buf + FRAME_CHUNK_PREFIX, (unsigned)want);
	dl->req.data = dl;
	r = uv_fs_read(s->d->loop, &dl->req, dl->fd, &buf, 1, (int64_t)dl->off, on_read);
	if (r < 0) {
		conn_send_error(&s->conn, 0, MSG_E_IO, "reading the trace failed: %s", uv_strerror(r));
		set_download(s, NULL);
		dl_free(dl);
		conn_finish(&s->conn, "download failed");
		return;
	}
	dl->busy = true;
}

void download_start(struct session *s, uint64_t id, const char *path, uint64_t offset)
{
	struct download *dl;
	struct stat st;
	struct msg m;

	if (s->download != NULL) {
		conn_send_error(&s->conn, id, MSG_E_BUSY, "a download is already running on this "
		                "connection; wait for its download_end");
		return;
	}
	dl = calloc(1, sizeof(*dl));
	if (dl == NULL) {
		conn_send_error(&s->conn, id, MSG_E_INTERNAL, "out of memory");
		return;
	}
	dl->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (dl->fd < 0 || fstat(dl->fd, &st) != 0) {
		conn_send_error(&s->conn, id, MSG_E_IO, "cannot open the trace: %s", strerror(errno));
		dl_free(dl);
		return;
	}
	if (offset > (uint64_t)st.st_size) {
		conn_send_error(&s->conn, id, MSG_E_BAD_REQUEST, "offset %llu is past the end of the "
		                "file (%lld bytes)", (unsigned long long)offset,
		                (long long)st.st_size);
		dl_free(dl);
		return;
	}
	dl->s = s;
	dl->transfer = next_transfer++;
	if (next_transfer == 0)
		next_transfer = 1;
	dl->off = offset;
	dl->end = (uint64_t)st.st_size;
	dl->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	msg_init(&m, MSG_TRACE_DOWNLOAD_REPLY, id);
	m.u.trace_download_reply.transfer = dl->transfer;
	m.u.trace_download_reply.bytes = (int64_t)dl->end;
	set_download(s, dl);
	conn_send_msg(&s->conn, &m);
	download_pump(s);
}

void download_session_gone(struct session *s)
{
	struct download *dl = s->download;

	if (dl == NULL)
		return;
	s->download = NULL;
	dl->s = NULL;
	if (!dl->busy)
		dl_free(dl);
}
