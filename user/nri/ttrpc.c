/* NRI multiplexer and ttrpc framing; see ttrpc.h for the model.
 *
 * Input is two nested byte-stream parsers: the trunk parser cuts mux frames
 * and hands each payload piece to the ttrpc parser of its conn id, which
 * collects a 10-byte header, checks it, and only then allocates the body
 * (length already capped). Header checks come first so a bad peer costs us
 * nothing: a 4 MiB allocation needs a header that is valid in every way.
 */
#define LOG_MOD "ttrpc"
#include "nri/ttrpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/errbuf.h"
#include "nri_ttrpc.pb-c.h"

enum { SRV = 0, CLI = 1 };

struct conn_in {
	uint8_t hdr[TTRPC_HDR_LEN];
	size_t hdr_got;
	uint8_t *body;
	uint32_t body_len;
	size_t body_got;
	uint32_t stream_id;
	uint8_t type;
	const char *reject; /* refused at the header: body skipped, this answered */
};

struct call {
	uint32_t stream_id;
	int64_t deadline; /* ms, 0 = none */
	ttrpc_done_fn done; /* NULL: timed out, a late response is dropped */
	void *ud;
};

struct ttrpc_mux {
	struct ttrpc_mux_ops ops;
	void *ud;
	uint32_t conn_id[2];
	struct conn_in in[2];
	uint8_t mhdr[TTRPC_MUX_HDR_LEN];
	size_t mhdr_got;
	int cur;		/* conn of the frame being read */
	uint32_t frame_left;	/* payload bytes of that frame still to come */
	uint32_t last_req_stream;
	uint32_t next_stream;
	struct call calls[TTRPC_CALLS_MAX];
	size_t n_calls;
	bool dead;
	struct errbuf why; /* once dead: what was wrong */
	uint64_t rejected;
	char last_rejection[128];
};

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Marks the mux dead with a reason; evaluates to r. */
#define die(m, r, ...) ((m)->dead = true, errbuf_fail(&(m)->why, (r), __VA_ARGS__))

int64_t ttrpc_now_ms(void)
{
	return clock_now_ms();
}

const char *ttrpc_code_name(int code)
{
	static const char *const names[] = {
		[0] = "OK",
		[1] = "CANCELLED",
		[2] = "UNKNOWN",
		[3] = "INVALID_ARGUMENT",
		[4] = "DEADLINE_EXCEEDED",
		[5] = "NOT_FOUND",
		[6] = "ALREADY_EXISTS",
		[7] = "PERMISSION_DENIED",
		[8] = "RESOURCE_EXHAUSTED",
		[9] = "FAILED_PRECONDITION",
		[10] = "ABORTED",
		[11] = "OUT_OF_RANGE",
		[12] = "UNIMPLEMENTED",
		[13] = "INTERNAL",
		[14] = "UNAVAILABLE",
		[15] = "DATA_LOSS",
		[16] = "UNAUTHENTICATED",
	};
	static char buf[24];

	if (code >= 0 && (size_t)code < ARRAY_SIZE(names))
		return names[code];
	(void)snprintf(buf, sizeof(buf), "CODE_%d", code);
	return buf;
}

/* ---- budget allocator ------------------------------------------------------------------ */

union pb_hdr {
	size_t size;
	max_align_t align;
};

static void *pb_alloc(void *data, size_t size)
{
	struct ttrpc_pb_alloc *a = data;
	union pb_hdr *h;

	if (size > a->cap - a->used || size > SIZE_MAX - sizeof(*h))
		return NULL;
	h = malloc(sizeof(*h) + size);
	if (!h)
		return NULL;
	h->size = size;
	a->used += size;
	return h + 1;
}

static void pb_free(void *data, void *ptr)
{
	struct ttrpc_pb_alloc *a = data;
	union pb_hdr *h;

	if (!ptr)
		return;
	h = (union pb_hdr *)ptr - 1;
	a->used -= h->size;
	free(h);
}

void ttrpc_pb_alloc_init(struct ttrpc_pb_alloc *a, size_t cap)
{
	a->base.alloc = pb_alloc;
	a->base.free = pb_free;
	a->base.allocator_data = a;
	a->used = 0;
	a->cap = cap;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

int ttrpc_mux_new(uint32_t server_conn, uint32_t client_conn, const struct ttrpc_mux_ops *ops,
		  void *ud, struct ttrpc_mux **ret)
{
	struct ttrpc_mux *m;

	if (!ops || !ops->write || !server_conn || !client_conn || server_conn == client_conn)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ops = *ops;
	m->ud = ud;
	m->conn_id[SRV] = server_conn;
	m->conn_id[CLI] = client_conn;
	m->cur = -1;
	m->next_stream = 1;
	*ret = m;
	return 0;
}

struct ttrpc_mux *ttrpc_mux_free(struct ttrpc_mux *m)
{
	if (!m)
		return NULL;
	m->dead = true;
	/* done() may call back into the mux (which answers -EPIPE): take each
	 * call out of the table before running it. */
	while (m->n_calls > 0) {
		struct call c = m->calls[--m->n_calls];

		if (c.done)
			c.done(c.ud, -ECONNRESET, TTRPC_UNAVAILABLE, "connection closed", NULL, 0);
	}
	for (int i = 0; i < 2; i++)
		free(m->in[i].body);
	free(m);
	return NULL;
}

size_t ttrpc_mux_pending(const struct ttrpc_mux *m)
{
	return m->n_calls;
}

bool ttrpc_mux_is_dead(const struct ttrpc_mux *m)
{
	return m->dead;
}

const char *ttrpc_mux_why(const struct ttrpc_mux *m)
{
	return m->why.s;
}

uint64_t ttrpc_mux_rejected(const struct ttrpc_mux *m, const char **ret_last)
{
	if (ret_last)
		*ret_last = m->last_rejection;
	return m->rejected;
}

/* ---- output ------------------------------------------------------------------------------ */

/* Sends one ttrpc message on conn: header + body (packed by msg, or empty),
 * cut into mux frames of at most TTRPC_MUX_WRITE_MAX payload bytes. */
static int send_msg(struct ttrpc_mux *m, uint32_t conn, uint32_t stream_id, uint8_t type,
		    const ProtobufCMessage *msg)
{
	_cleanup_free_ uint8_t *buf = NULL;
	uint8_t frame[TTRPC_MUX_HDR_LEN + TTRPC_MUX_WRITE_MAX];
	size_t body = msg ? protobuf_c_message_get_packed_size(msg) : 0;
	size_t total = TTRPC_HDR_LEN + body;

	if (body > TTRPC_MSG_MAX)
		return -E2BIG;
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	put_be32(buf, (uint32_t)body);
	put_be32(buf + 4, stream_id);
	buf[8] = type;
	buf[9] = 0;
	if (msg && protobuf_c_message_pack(msg, buf + TTRPC_HDR_LEN) != body)
		return -EINVAL;
	for (size_t off = 0; off < total;) {
		size_t n = total - off < TTRPC_MUX_WRITE_MAX ? total - off : TTRPC_MUX_WRITE_MAX;
		int r;

		put_be32(frame, conn);
		put_be32(frame + 4, (uint32_t)n);
		memcpy(frame + TTRPC_MUX_HDR_LEN, buf + off, n);
		r = m->ops.write(m->ud, frame, TTRPC_MUX_HDR_LEN + n);
		if (r < 0) /* the peer may have half a message: the stream is lost */
			return die(m, r, "write failed");
		off += n;
	}
	return 0;
}

int ttrpc_mux_reply(struct ttrpc_mux *m, uint32_t stream_id, int code, const char *msg,
		    const void *payload, size_t len)
{
	Ttrpc__Response resp = TTRPC__RESPONSE__INIT;
	Ttrpc__Status st = TTRPC__STATUS__INIT;

	if (m->dead)
		return -EPIPE;
	if (code != TTRPC_OK) {
		st.code = code;
		st.message = (char *)(msg ? msg : "");
		resp.status = &st;
	} else {
		if (len > TTRPC_MSG_MAX)
			return -E2BIG;
		resp.payload.data = (uint8_t *)payload;
		resp.payload.len = payload ? len : 0;
	}
	return send_msg(m, m->conn_id[SRV], stream_id, TTRPC_TYPE_RESPONSE, &resp.base);
}

int ttrpc_mux_call(struct ttrpc_mux *m, const char *service, const char *method,
		   const void *payload, size_t len, unsigned timeout_ms, ttrpc_done_fn done,
		   void *ud, uint32_t *ret_stream_id)
{
	Ttrpc__Request req = TTRPC__REQUEST__INIT;
	uint32_t id;
	int r;

	if (!done || !service || !method)
		return -EINVAL;
	if (m->dead)
		return -EPIPE;
	if (len > TTRPC_MSG_MAX)
		return -E2BIG;
	if (m->n_calls >= TTRPC_CALLS_MAX)
		return -EBUSY;
	/* Stream ids are odd and must increase: 2^31 calls per connection. */
	if (m->next_stream == 0 || m->next_stream > UINT32_MAX - 2)
		return -EOVERFLOW;
	id = m->next_stream;
	req.service = (char *)service;
	req.method = (char *)method;
	req.payload.data = (uint8_t *)payload;
	req.payload.len = payload ? len : 0;
	req.timeout_nano = (int64_t)timeout_ms * 1000000;
	r = send_msg(m, m->conn_id[CLI], id, TTRPC_TYPE_REQUEST, &req.base);
	if (r < 0)
		return r;
	m->next_stream += 2;
	m->calls[m->n_calls++] = (struct call){
		.stream_id = id,
		.deadline = timeout_ms ? ttrpc_now_ms() + timeout_ms : 0,
		.done = done,
		.ud = ud,
	};
	if (ret_stream_id)
		*ret_stream_id = id;
	return 0;
}

int64_t ttrpc_mux_next_deadline(const struct ttrpc_mux *m)
{
	int64_t best = -1;

	for (size_t i = 0; i < m->n_calls; i++)
		if (m->calls[i].done && m->calls[i].deadline &&
		    (best < 0 || m->calls[i].deadline < best))
			best = m->calls[i].deadline;
	return best;
}

int ttrpc_mux_expire(struct ttrpc_mux *m, int64_t now_ms)
{
	int n = 0;

	/* An expired call keeps its slot (done = NULL) so that a late response
	 * is recognised and dropped rather than taken for a protocol error; its
	 * slot frees when that response comes or with the mux. */
	for (size_t i = 0; i < m->n_calls; i++) {
		struct call *c = &m->calls[i];
		ttrpc_done_fn done = c->done;

		if (!done || !c->deadline || c->deadline > now_ms)
			continue;
		c->done = NULL;
		done(c->ud, -ETIMEDOUT, TTRPC_DEADLINE_EXCEEDED, "deadline exceeded", NULL, 0);
		n++;
		/* done() may have added calls (appended: the scan sees them, and
		 * their deadlines lie ahead) but cannot remove any. */
	}
	return n;
}

/* ---- input ------------------------------------------------------------------------------- */

static int find_call(const struct ttrpc_mux *m, uint32_t stream_id)
{
	for (size_t i = 0; i < m->n_calls; i++)
		if (m->calls[i].stream_id == stream_id)
			return (int)i;
	return -1;
}

static int dispatch_request(struct ttrpc_mux *m, const struct conn_in *in)
{
	struct ttrpc_pb_alloc a;
	Ttrpc__Request *req;
	struct ttrpc_request view;
	int r;

	ttrpc_pb_alloc_init(&a, TTRPC_DECODE_BUDGET);
	req = ttrpc__request__unpack(&a.base, in->body_len, in->body);
	if (!req)
		return die(m, -EPROTO, "undecodable request on stream %u", in->stream_id);
	view = (struct ttrpc_request){
		.stream_id = in->stream_id,
		.service = req->service,
		.method = req->method,
		.payload = req->payload.data,
		.len = req->payload.len,
		.timeout_ns = req->timeout_nano,
	};
	if (m->ops.request)
		r = m->ops.request(m->ud, &view);
	else
		r = ttrpc_mux_reply(m, in->stream_id, TTRPC_UNIMPLEMENTED, "service", NULL, 0);
	ttrpc__request__free_unpacked(req, &a.base);
	if (r < 0 && !m->dead)
		return die(m, r, "request handler stopped the connection");
	return r < 0 ? r : 0;
}

static int dispatch_response(struct ttrpc_mux *m, const struct conn_in *in)
{
	struct ttrpc_pb_alloc a;
	Ttrpc__Response *resp;
	struct call c;
	int i = find_call(m, in->stream_id);

	if (i < 0) /* checked at the header; a done() cannot remove another call */
		return die(m, -EPROTO, "response for no call on stream %u", in->stream_id);
	ttrpc_pb_alloc_init(&a, TTRPC_DECODE_BUDGET);
	resp = ttrpc__response__unpack(&a.base, in->body_len, in->body);
	if (!resp)
		return die(m, -EPROTO, "undecodable response on stream %u", in->stream_id);
	c = m->calls[i];
	m->calls[i] = m->calls[--m->n_calls];
	/* !c.done: answered after its deadline, nobody waits any more. */
	if (c.done && resp->status && resp->status->code != TTRPC_OK)
		c.done(c.ud, 0, resp->status->code, resp->status->message, NULL, 0);
	else if (c.done)
		c.done(c.ud, 0, TTRPC_OK, "", resp->payload.data, resp->payload.len);
	ttrpc__response__free_unpacked(resp, &a.base);
	return 0;
}

/* A message refused at its header: INVALID_ARGUMENT on its stream id, as
 * containerd/ttrpc does (on an even id too: the sender learns which one). */
static int reject_request(struct ttrpc_mux *m, struct conn_in *in)
{
	m->rejected++;
	(void)snprintf(m->last_rejection, sizeof(m->last_rejection), "stream %u after %u: %s",
		       in->stream_id, m->last_req_stream, in->reject);
	return ttrpc_mux_reply(m, in->stream_id, TTRPC_INVALID_ARGUMENT, in->reject, NULL, 0);
}

/* The 10-byte header of conn idx is complete: check all of it before the
 * body is allocated. */
static int check_header(struct ttrpc_mux *m, int idx, struct conn_in *in)
{
	uint32_t len = get_be32(in->hdr);
	uint32_t sid = get_be32(in->hdr + 4);
	uint8_t type = in->hdr[8], flags = in->hdr[9];

	if (len > TTRPC_MSG_MAX)
		return die(m, -E2BIG, "message of %u bytes on conn %u (max %u)", len,
			   m->conn_id[idx], TTRPC_MSG_MAX);
	in->reject = NULL;
	if (idx == SRV) {
		/* What containerd/ttrpc's server answers (InvalidArgument, these
		 * words) and goes on: a misnumbered message is its sender's
		 * mistake, not a reason to drop every other stream. */
		if (!(sid & 1))
			in->reject = "StreamID must be odd for client initiated streams";
		else if (type == TTRPC_TYPE_REQUEST && sid <= m->last_req_stream)
			in->reject = "StreamID cannot be re-used and must increment";
		if (in->reject) {
			in->body_len = len;
			in->stream_id = sid;
			in->type = type;
			in->body_got = 0;
			return 0; /* the body is skipped, never stored */
		}
		if (type != TTRPC_TYPE_REQUEST)
			return die(m, -EPROTO, "message type %u on request conn %u", type,
				   m->conn_id[idx]);
		if (flags & TTRPC_FLAG_REMOTE_OPEN)
			return die(m, -EPROTO, "streaming request (flags 0x%x) on stream %u", flags,
				   sid);
		m->last_req_stream = sid;
	} else {
		if (type != TTRPC_TYPE_RESPONSE)
			return die(m, -EPROTO, "message type %u on response conn %u", type,
				   m->conn_id[idx]);
		if (find_call(m, sid) < 0)
			return die(m, -EPROTO, "response for no call on stream %u", sid);
	}
	in->body_len = len;
	in->stream_id = sid;
	in->type = type;
	in->body_got = 0;
	if (len > 0) {
		in->body = malloc(len);
		if (!in->body)
			return die(m, -ENOMEM, "out of memory for %u bytes", len);
	}
	return 0;
}

/* Bytes of conn idx's ttrpc stream. */
static int conn_feed(struct ttrpc_mux *m, int idx, const uint8_t *p, size_t n)
{
	struct conn_in *in = &m->in[idx];
	int r;

	while (n > 0 || (in->hdr_got == TTRPC_HDR_LEN && in->body_got == in->body_len)) {
		if (in->hdr_got < TTRPC_HDR_LEN) {
			size_t k = TTRPC_HDR_LEN - in->hdr_got;

			if (k > n)
				k = n;
			memcpy(in->hdr + in->hdr_got, p, k);
			in->hdr_got += k;
			p += k;
			n -= k;
			if (in->hdr_got < TTRPC_HDR_LEN)
				return 0;
			r = check_header(m, idx, in);
			if (r < 0)
				return r;
			continue;
		}
		if (in->body_got < in->body_len) {
			size_t k = in->body_len - in->body_got;

			if (k > n)
				k = n;
			if (!in->reject)
				memcpy(in->body + in->body_got, p, k);
			in->body_got += k;
			p += k;
			n -= k;
			if (in->body_got < in->body_len)
				return 0;
		}
		/* A whole message: dispatch, then reset for the next one. */
		if (in->reject)
			r = reject_request(m, in);
		else
			r = idx == SRV ? dispatch_request(m, in) : dispatch_response(m, in);
		free(in->body);
		in->body = NULL;
		in->reject = NULL;
		in->hdr_got = 0;
		in->body_len = 0;
		in->body_got = 0;
		if (r < 0)
			return r;
		if (m->dead)
			return -EPIPE;
	}
	return 0;
}

int ttrpc_mux_feed(struct ttrpc_mux *m, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int r;

	if (m->dead)
		return -EPIPE;
	while (len > 0) {
		if (m->frame_left == 0) {
			size_t k = TTRPC_MUX_HDR_LEN - m->mhdr_got;
			uint32_t conn, flen;

			if (k > len)
				k = len;
			memcpy(m->mhdr + m->mhdr_got, p, k);
			m->mhdr_got += k;
			p += k;
			len -= k;
			if (m->mhdr_got < TTRPC_MUX_HDR_LEN)
				return 0;
			m->mhdr_got = 0;
			conn = get_be32(m->mhdr);
			flen = get_be32(m->mhdr + 4);
			if (conn == m->conn_id[SRV])
				m->cur = SRV;
			else if (conn == m->conn_id[CLI])
				m->cur = CLI;
			else
				return die(m, -EPROTO, "unknown conn id %u", conn);
			if (flen > TTRPC_MUX_FRAME_MAX)
				return die(m, -E2BIG, "mux frame of %u bytes (max %u)", flen,
					   TTRPC_MUX_FRAME_MAX);
			m->frame_left = flen;
			continue;
		}
		size_t k = len < m->frame_left ? len : m->frame_left;

		r = conn_feed(m, m->cur, p, k);
		if (r < 0)
			return r;
		m->frame_left -= (uint32_t)k;
		p += k;
		len -= k;
	}
	return 0;
}
