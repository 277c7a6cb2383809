/* The gRPC server's calls: their references, how a call's status is decided
 * and sent (trailers-only, or trailers after the queued messages), the
 * bounded reply queue, and the API a handler uses on its call (grpc.h).
 * See "Call life" in grpc.c.
 *
 * Apart from grpc.c because a handler sees only this: grpc.c turns streams
 * into calls and hands them over, grpc_conn.c moves their bytes.
 */
#define LOG_MOD "grpc"

#include "kubelet/grpc.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "kubelet/grpc_priv.h"

/* ---- calls ---------------------------------------------------------------------------------- */

static void call_release(struct grpc_call *call, uint8_t ref)
{
	assert(call->refs & ref);
	call->refs &= (uint8_t)~ref;
	if (call->refs)
		return;
	assert(!call->conn);
	free(call->req);
	if (call->out)
		evbuffer_free(call->out);
	free(call->latest);
	free(call->message);
	free(call);
}

static void call_observe(struct grpc_call *call, struct grpc_server *srv, enum grpc_status code)
{
	if (!srv->observe)
		return;
	srv->observe(call->method ? call->method->path : "unknown", code,
		     call->t_start ? clock_now_ns() - call->t_start : 0, srv->observe_ud);
}

/* The call no longer holds a watch place on c (completed or gone). */
static void call_unhold_watch(struct grpc_call *call, struct grpc_conn *c)
{
	if (!call->watch_held)
		return;
	call->watch_held = false;
	if (--c->n_watches == 0)
		c->srv->n_watch_conns--;
}

/* The stream is gone (closed, reset, connection freed). Drops the buffers;
 * a call still held by its handler becomes cancelled. May free call. */
void grpc_call_detach(struct grpc_call *call)
{
	struct grpc_conn *c = call->conn;
	struct grpc_server *srv;

	assert(c); /* only attached calls are stream user data or on c->calls */
	srv = c->srv;
	if (call->prev)
		call->prev->next = call->next;
	else
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
	call->prev = call->next = NULL;
	if (call->req) {
		c->buffered -= call->req_len;
		free(call->req);
		call->req = NULL;
	}
	if (call->out) {
		c->queued -= evbuffer_get_length(call->out);
		evbuffer_free(call->out);
		call->out = NULL;
	}
	c->queued -= call->latest_len;
	free(call->latest);
	call->latest = NULL;
	call->latest_len = 0;
	call_unhold_watch(call, c);
	call->conn = NULL;
	if (!(call->refs & CALL_REF_HANDLER)) {
		call_release(call, CALL_REF_STREAM);
		return;
	}
	call->cancelled = true;
	c->n_active--;
	srv->stats.calls_active--;
	srv->stats.calls_cancelled++;
	call_observe(call, srv, GRPC_STATUS_CANCELLED);
	call->refs &= (uint8_t)~CALL_REF_STREAM; /* the handler's ref keeps it */
	if (!call->cancel_fn)
		return; /* the handler completes it when it gets round to it */
	/* With a cancel callback the handle ends when the callback returns,
	 * completed inside or not (grpc.h). */
	call->refs |= CALL_REF_CANCEL;
	call->cancel_fn(call, call->cancel_ud);
	if (call->refs & CALL_REF_HANDLER)
		call_release(call, CALL_REF_HANDLER);
	call_release(call, CALL_REF_CANCEL);
}

static ssize_t on_data_source_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
				   size_t length, uint32_t *flags, nghttp2_data_source *source,
				   void *user_data);

#define NV(n, v)                                                                 \
	{                                                                        \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),        \
			NGHTTP2_NV_FLAG_NO_COPY_NAME                             \
	}

/* Decides the status of an attached call. Nothing sent yet: one HEADERS with
 * END_STREAM ("trailers-only", http_status normally 200). Otherwise the data
 * provider sends the trailers once the queued messages are out. */
static void call_finish(struct grpc_call *call, int http_status, enum grpc_status code,
			const char *msg)
{
	struct grpc_conn *c = call->conn;
	char status[8], hs[8], cut[GRPC_MESSAGE_MAX + 1], enc[3 * GRPC_MESSAGE_MAX + 1];
	int r;

	if (call->finished)
		return;
	call->finished = true;
	call->status = code;
	if (call->req) { /* an early answer: the request will not be needed */
		c->buffered -= call->req_len;
		free(call->req);
		call->req = NULL;
	}
	if (msg && *msg) {
		size_t n = strnlen(msg, GRPC_MESSAGE_MAX + 1);

		if (n > GRPC_MESSAGE_MAX) { /* cut on a UTF-8 boundary */
			n = GRPC_MESSAGE_MAX;
			while (n > 0 && ((unsigned char)msg[n] & 0xc0) == 0x80)
				n--;
		}
		memcpy(cut, msg, n);
		cut[n] = 0;
		(void)grpc_percent_encode(cut, enc, sizeof(enc));
	} else {
		enc[0] = 0;
	}
	(void)snprintf(status, sizeof(status), "%d", (int)code);
	(void)snprintf(hs, sizeof(hs), "%d", http_status);
	if (!call->responded) {
		nghttp2_nv nva[] = {
			NV(":status", hs),
			NV("content-type", "application/grpc"),
			NV("grpc-status", status),
			NV("grpc-message", enc),
		};

		call->responded = true;
		r = nghttp2_submit_response(c->session, call->stream_id, nva,
					    enc[0] ? ARRAY_SIZE(nva) : ARRAY_SIZE(nva) - 1, NULL);
	} else {
		r = 0;
		if (enc[0] && !(call->message = strdup(enc)))
			r = NGHTTP2_ERR_NOMEM;
		else if (call->deferred) {
			call->deferred = false;
			r = nghttp2_session_resume_data(c->session, call->stream_id);
		}
	}
	if (r < 0) /* nghttp2 could not take it: the client sees a reset stream */
		(void)nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->stream_id,
						NGHTTP2_INTERNAL_ERROR);
}

/* The server answers a call no handler saw. */
void grpc_call_reject(struct grpc_call *call, int http_status, enum grpc_status code,
			const char *fmt, ...)
{
	struct grpc_server *srv = call->conn->srv;
	char msg[GRPC_MESSAGE_MAX + 1];
	va_list ap;

	if (call->finished)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv->stats.calls_rejected++;
	call_observe(call, srv, code);
	call_finish(call, http_status, code, msg);
	grpc_conn_flush(call->conn);
}

/* Completion by the handler: the single place the handler's ref goes. */
static int call_complete(struct grpc_call *call, enum grpc_status code, const char *msg)
{
	struct grpc_conn *c = call->conn;
	int r;

	assert(call->refs & CALL_REF_HANDLER);
	if (!c) {
		call_release(call, CALL_REF_HANDLER);
		return -ECANCELED;
	}
	r = c->state == CONN_DEAD ? -ECANCELED : 0; /* going away: nothing will be sent */
	call_finish(call, 200, code, msg);
	call_unhold_watch(call, c);
	c->n_active--;
	c->srv->stats.calls_active--;
	call_observe(call, c->srv, code);
	call_release(call, CALL_REF_HANDLER); /* the stream still holds it */
	grpc_conn_flush(c);
	return r;
}

/* Room for one message of len bytes in the call's output, once freed bytes
 * of it (a message the new one replaces) are gone. */
static int call_send_check(struct grpc_call *call, size_t len, size_t freed)
{
	struct grpc_conn *c = call->conn;

	assert(call->refs & CALL_REF_HANDLER);
	if (!c || c->state == CONN_DEAD)
		return -ECANCELED;
	if (len > c->srv->limits.max_message) {
		c->srv->stats.messages_too_large++;
		return -E2BIG;
	}
	if (c->queued - freed + GRPC_PREFIX_LEN + len > c->srv->limits.max_conn_queued) {
		c->srv->stats.replies_dropped++;
		return -ENOBUFS;
	}
	if (!call->out && !(call->out = evbuffer_new()))
		return -ENOMEM;
	return 0;
}

/* The message is in call->out: account, open the response, wake the provider. */
static int call_send_commit(struct grpc_call *call, size_t len)
{
	struct grpc_conn *c = call->conn;
	int r = 0;

	c->queued += GRPC_PREFIX_LEN + len;
	if (!call->responded) {
		nghttp2_nv nva[] = {
			NV(":status", "200"),
			NV("content-type", "application/grpc"),
		};
		nghttp2_data_provider prd = { .source.ptr = call, .read_callback = on_data_source_read };

		call->responded = true;
		r = nghttp2_submit_response(c->session, call->stream_id, nva, ARRAY_SIZE(nva), &prd);
	} else if (call->deferred) {
		call->deferred = false;
		r = nghttp2_session_resume_data(c->session, call->stream_id);
	}
	if (r < 0) {
		(void)nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, call->stream_id,
						NGHTTP2_INTERNAL_ERROR);
		r = -ENOMEM;
	}
	grpc_conn_flush(c);
	return r;
}

/* Appends one framed message of len bytes to call->out in one piece; pack
 * writes the body. Nothing is left behind on failure. */
static int call_queue(struct grpc_call *call, size_t len,
		      void (*pack)(uint8_t *dst, size_t len, const void *arg), const void *arg)
{
	struct evbuffer_iovec v;
	int r;

	r = call_send_check(call, len, 0);
	if (r < 0)
		return r;
	if (evbuffer_reserve_space(call->out, (ev_ssize_t)(GRPC_PREFIX_LEN + len), &v, 1) != 1)
		return -ENOMEM;
	grpc_prefix_write(v.iov_base, (uint32_t)len);
	pack((uint8_t *)v.iov_base + GRPC_PREFIX_LEN, len, arg);
	v.iov_len = GRPC_PREFIX_LEN + len;
	if (evbuffer_commit_space(call->out, &v, 1) < 0)
		return -ENOMEM;
	return call_send_commit(call, len);
}

static void pack_bytes(uint8_t *dst, size_t len, const void *arg)
{
	if (len)
		memcpy(dst, arg, len);
}

static void pack_pb(uint8_t *dst, size_t len, const void *arg)
{
	size_t n = protobuf_c_message_pack(arg, dst);

	assert(n == len);
	(void)n;
}

int grpc_call_send(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	return call_queue(call, len, pack_bytes, msg);
}

/* Moves the latest message into the output once what is there has gone out
 * (from the data provider, or at once when nothing waits). */
static void call_take_latest(struct grpc_call *call)
{
	if (!call->latest || (call->out && evbuffer_get_length(call->out) > 0))
		return;
	if (evbuffer_add(call->out, call->latest, call->latest_len) < 0)
		return; /* kept; tried again at the next read */
	free(call->latest);
	call->latest = NULL;
	call->latest_len = 0;
}

int grpc_call_send_latest(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	struct grpc_conn *c;
	uint8_t *m;
	int r, replaced;

	r = call_send_check(call, len, call->latest_len); /* also makes call->out */
	if (r < 0)
		return r;
	c = call->conn;
	m = malloc(GRPC_PREFIX_LEN + len);
	if (!m)
		return -ENOMEM;
	grpc_prefix_write(m, (uint32_t)len);
	if (len)
		memcpy(m + GRPC_PREFIX_LEN, msg, len);
	replaced = call->latest != NULL;
	if (replaced) {
		c->queued -= call->latest_len;
		free(call->latest);
		c->srv->stats.messages_coalesced++;
	}
	call->latest = m;
	call->latest_len = GRPC_PREFIX_LEN + len;
	call_take_latest(call);
	/* accounted as queued, whether in out or still latest */
	r = call_send_commit(call, len);
	return r < 0 ? r : replaced;
}

int grpc_call_send_latest_pb(struct grpc_call *call, const struct ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	_cleanup_free_ uint8_t *buf = malloc(len ? len : 1);

	if (!buf)
		return -ENOMEM;
	(void)protobuf_c_message_pack(msg, buf);
	return grpc_call_send_latest(call, buf, len);
}

int grpc_call_send_pb(struct grpc_call *call, const struct ProtobufCMessage *msg)
{
	return call_queue(call, protobuf_c_message_get_packed_size(msg), pack_pb, msg);
}

int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	int r = grpc_call_send(call, msg, len);

	if (r < 0 && r != -ECANCELED) {
		(void)call_complete(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
				    r == -E2BIG ? "reply larger than max message size"
						: "reply cannot be queued");
		return r;
	}
	r = call_complete(call, GRPC_STATUS_OK, NULL);
	return r;
}

int grpc_call_reply_pb(struct grpc_call *call, const struct ProtobufCMessage *msg)
{
	int r = grpc_call_send_pb(call, msg);

	if (r < 0 && r != -ECANCELED) {
		(void)call_complete(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
				    r == -E2BIG ? "reply larger than max message size"
						: "reply cannot be queued");
		return r;
	}
	return call_complete(call, GRPC_STATUS_OK, NULL);
}

int grpc_call_fail(struct grpc_call *call, enum grpc_status code, const char *msg)
{
	assert(code != GRPC_STATUS_OK);
	if (code == GRPC_STATUS_OK || (unsigned)code > _GRPC_STATUS_MAX)
		code = GRPC_STATUS_UNKNOWN;
	return call_complete(call, code, msg);
}

int grpc_call_end(struct grpc_call *call)
{
	return call_complete(call, GRPC_STATUS_OK, NULL);
}

const char *grpc_call_path(const struct grpc_call *call)
{
	return call->path;
}

bool grpc_call_is_cancelled(const struct grpc_call *call)
{
	return call->cancelled;
}

int64_t grpc_call_deadline_left_ms(const struct grpc_call *call)
{
	uint64_t t;

	if (!call->deadline_ns)
		return -1;
	t = clock_now_ns();
	return t >= call->deadline_ns ? 0 : (int64_t)((call->deadline_ns - t) / 1000000);
}

void grpc_call_on_cancel(struct grpc_call *call, grpc_cancel_fn fn, void *userdata)
{
	call->cancel_fn = fn;
	call->cancel_ud = userdata;
}

static ssize_t on_data_source_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
				   size_t length, uint32_t *flags, nghttp2_data_source *source,
				   void *user_data)
{
	struct grpc_call *call = source->ptr;
	struct grpc_conn *c = user_data;
	size_t n = 0;

	if (call->out)
		call_take_latest(call);
	if (call->out) {
		n = evbuffer_get_length(call->out);
		if (n > length)
			n = length;
		if (n && evbuffer_remove(call->out, buf, n) != (int)n)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		c->queued -= n;
	}
	if (call->finished && !call->latest && (!call->out || evbuffer_get_length(call->out) == 0)) {
		char status[8];

		(void)snprintf(status, sizeof(status), "%d", (int)call->status);
		nghttp2_nv nva[] = {
			NV("grpc-status", status),
			NV("grpc-message", call->message ? call->message : ""),
		};

		*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (nghttp2_submit_trailer(session, stream_id, nva,
					   call->message ? ARRAY_SIZE(nva) : 1) < 0)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		return (ssize_t)n;
	}
	if (n == 0) {
		call->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}
