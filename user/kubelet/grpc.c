/* gRPC server over h2c on unix sockets: nghttp2 server sessions driven by
 * libevent bufferevents. See grpc.h for the model and the ownership rules.
 *
 * Connection life:
 *
 *   accept ─> OPEN ──(peer SETTINGS)──> OPEN ──(first request)──> OPEN, idle timer
 *               │  GOAWAY queued (protocol error, no request in time, idle,
 *               │  peer GOAWAY)
 *               v
 *            CLOSING ──(output drained or write timeout)──> DEAD ─> freed
 *   EOF, socket error, handshake or write timeout, evicted ──────> DEAD
 *
 * The timer holds one deadline at a time: the handshake's and the first
 * request's (both counted from the accept) until a request arrives (the
 * latter closes only while the server is crowded, see grpc.h), then the
 * idle one (re-armed on input), then the close grace.
 *
 * Only socket callbacks and the connection timer free a socket connection;
 * everything else (handlers completing calls, nghttp2 callbacks) marks it DEAD
 * and activates the timer, so nothing is freed under a caller's feet.
 *
 * Call life: refs holds CALL_REF_STREAM while nghttp2 has the stream,
 * CALL_REF_HANDLER while a handler holds the handle, CALL_REF_CANCEL while
 * its cancel callback runs (so completing inside it frees nothing under our
 * feet); freed at zero. Byte
 * accounting (conn->buffered, conn->queued) covers what a call holds while
 * attached to its connection; detaching drops both buffers.
 */
#define LOG_MOD "grpc"

#include "kubelet/grpc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "kubelet/grpc_priv.h"

#define HANDLER_BUDGET_NS (10 * 1000 * 1000ULL) /* STYLE.md: slow handlers are logged */
#define WARN_INTERVAL_MS 10000
#define ACCEPT_RETRY_MS 1000
#define LOCAL_WINDOW (1 << 20)
#define MAX_HEADER_LIST 16384

/* ---- connections: output -------------------------------------------------------------------- */

static void conn_arm_timer(struct grpc_conn *c);

static struct evbuffer *conn_out(struct grpc_conn *c)
{
	return c->bev ? bufferevent_get_output(c->bev) : c->mem_out;
}

/* Marks c for freeing; the timer callback does it (socket connections) or the
 * owner does (memory connections). Safe from anywhere. */
static void conn_kill(struct grpc_conn *c)
{
	c->state = CONN_DEAD;
	if (c->timer)
		event_active(c->timer, EV_TIMEOUT, 0);
}

/* Ends the session with GOAWAY(code); the connection closes once it is out. */
static void conn_goaway(struct grpc_conn *c, uint32_t code)
{
	if (c->state != CONN_OPEN)
		return;
	if (nghttp2_session_terminate_session(c->session, code) < 0) {
		conn_kill(c);
		return;
	}
	c->state = CONN_CLOSING;
	if (c->timer) { /* a peer that never reads the GOAWAY gets this long */
		struct timeval tv = clock_tv_ms(c->srv->limits.write_timeout_ms);

		(void)evtimer_add(c->timer, &tv);
	}
	grpc_conn_flush(c);
}

/* After input or output: pause reading while the output is over its cap,
 * notice that the session is over. */
static void conn_update(struct grpc_conn *c)
{
	struct evbuffer *out = conn_out(c);
	bool over;

	if (c->state == CONN_OPEN && !nghttp2_session_want_read(c->session) &&
	    !nghttp2_session_want_write(c->session))
		c->state = CONN_CLOSING;
	if (c->state == CONN_CLOSING && evbuffer_get_length(out) == 0 &&
	    !nghttp2_session_want_write(c->session))
		conn_kill(c);
	if (!c->bev || c->state == CONN_DEAD)
		return;
	over = evbuffer_get_length(out) >= c->srv->limits.max_conn_output;
	if (c->state != CONN_OPEN || over) {
		if (!c->read_paused)
			(void)bufferevent_disable(c->bev, EV_READ);
		c->read_paused = true;
	} else if (c->read_paused) {
		(void)bufferevent_enable(c->bev, EV_READ);
		c->read_paused = false;
	}
}

/* Moves what nghttp2 has to send into the output buffer, up to the output
 * cap (the rest waits for the write callback). Not re-entrant: inside
 * nghttp2 it only notes that a flush is due. */
void grpc_conn_flush(struct grpc_conn *c)
{
	struct evbuffer *out = conn_out(c);

	if (c->state == CONN_DEAD)
		return;
	if (c->in_session) {
		c->want_flush = true;
		return;
	}
	c->in_session++;
	do {
		c->want_flush = false;
		while (evbuffer_get_length(out) < c->srv->limits.max_conn_output) {
			const uint8_t *data;
			ssize_t n = nghttp2_session_mem_send(c->session, &data);

			if (n < 0 || (n > 0 && evbuffer_add(out, data, (size_t)n) < 0)) {
				log_debug("conn_send_failed", "err=%s",
					  n < 0 ? nghttp2_strerror((int)n) : "ENOMEM");
				conn_kill(c);
				break;
			}
			if (n == 0)
				break;
		}
	} while (c->want_flush && c->state != CONN_DEAD &&
		 evbuffer_get_length(out) < c->srv->limits.max_conn_output);
	c->in_session--;
	conn_update(c);
}

/* ---- nghttp2 callbacks ---------------------------------------------------------------------- */

static const struct grpc_method *method_find(const struct grpc_server *srv, const char *path)
{
	for (const struct grpc_method *m = srv->methods; m; m = m->next)
		if (strcmp(m->path, path) == 0)
			return m;
	return NULL;
}

static bool service_known(const struct grpc_server *srv, const char *path, size_t svc_len)
{
	for (const struct grpc_method *m = srv->methods; m; m = m->next)
		if (strncmp(m->path, path, svc_len + 1) == 0 && m->path[svc_len + 1] == '/')
			return true;
	return false;
}

static void call_reject_unknown(struct grpc_call *call)
{
	const char *slash = strchr(call->path + 1, '/');
	int svc_len = (int)(slash - call->path - 1);

	if (service_known(call->conn->srv, call->path, (size_t)svc_len))
		grpc_call_reject(call, 200, GRPC_STATUS_UNIMPLEMENTED,
			    "unknown method %s for service %.*s", slash + 1, svc_len, call->path + 1);
	else
		grpc_call_reject(call, 200, GRPC_STATUS_UNIMPLEMENTED, "unknown service %.*s", svc_len,
			    call->path + 1);
}

/* The request HEADERS are complete: answer now what cannot succeed, so no
 * body is buffered for it. Wording of the errors as grpc-go's. */
static void call_headers_done(struct grpc_call *call)
{
	if (!call->is_post)
		grpc_call_reject(call, 405, GRPC_STATUS_UNIMPLEMENTED, "only POST is allowed");
	else if (!call->ctype_ok)
		grpc_call_reject(call, 415, GRPC_STATUS_INTERNAL, "invalid gRPC request content-type");
	else if (call->path_bad || !call->path[0])
		grpc_call_reject(call, 200, GRPC_STATUS_UNIMPLEMENTED, "malformed method name");
	else if (!call->encoding_ok)
		grpc_call_reject(call, 200, GRPC_STATUS_UNIMPLEMENTED,
			    "grpc-encoding not supported, only identity");
	else if (!(call->method = method_find(call->conn->srv, call->path)))
		call_reject_unknown(call);
	else if (call->timeout_ns)
		call->deadline_ns = clock_now_ns() + call->timeout_ns;
}

/* A watch call takes a place on its connection: at most max_conn_watches
 * there, and watches on at most max_connections - 1 connections, so that
 * peers holding watches can never take every connection: one is left for a
 * client's other calls (an idle connection there is evicted for it). */
static bool call_hold_watch(struct grpc_call *call)
{
	struct grpc_conn *c = call->conn;
	struct grpc_server *srv = c->srv;

	if (c->n_watches >= srv->limits.max_conn_watches)
		return false;
	if (c->n_watches == 0 && srv->limits.max_connections > 1 &&
	    srv->n_watch_conns >= srv->limits.max_connections - 1)
		return false;
	if (c->n_watches++ == 0)
		srv->n_watch_conns++;
	call->watch_held = true;
	return true;
}

/* The client half-closed: exactly one message must have arrived. */
static void call_request_done(struct grpc_call *call)
{
	struct grpc_conn *c = call->conn;
	struct grpc_server *srv = c->srv;
	uint8_t *req;
	uint32_t len;
	uint64_t t0, dt, held;

	if (call->finished || call->dispatched)
		return;
	if (call->in_body || call->prefix_len) {
		grpc_call_reject(call, 200, GRPC_STATUS_INTERNAL, "truncated request message");
		return;
	}
	if (call->n_msgs == 0) {
		grpc_call_reject(call, 200, GRPC_STATUS_INTERNAL, "missing request message");
		return;
	}
	if (call->method->watch && !call_hold_watch(call)) {
		srv->stats.watches_refused++;
		if (ratelimit_pass(&srv->watch_rl, &held))
			log_warn("watch_refused",
				 "path=%s conn_watches=%u max=%u watch_conns=%u max_conns=%u "
				 "action=resource_exhausted suppressed=%llu",
				 call->path, c->n_watches, srv->limits.max_conn_watches,
				 srv->n_watch_conns, srv->limits.max_connections,
				 (unsigned long long)held);
		grpc_call_reject(call, 200, GRPC_STATUS_RESOURCE_EXHAUSTED,
			    c->n_watches ? "too many watch streams on this connection (max %u)"
					 : "watch streams are held on %u connections, the most "
					   "allowed: the last one is kept for other calls",
			    c->n_watches ? srv->limits.max_conn_watches : srv->n_watch_conns);
		return;
	}

	call->dispatched = true;
	call->refs |= CALL_REF_HANDLER;
	c->n_active++;
	srv->stats.calls_started++;
	srv->stats.calls_active++;
	req = TAKE_PTR(call->req);
	len = call->req_len;
	t0 = call->t_start = clock_now_ns();
	call->method->fn(call, req ? req : (const uint8_t *)"", len, call->method->userdata);
	/* call is alive: the stream's ref cannot go while nghttp2 is in recv */
	free(req);
	c->buffered -= len;
	dt = clock_now_ns() - t0;
	if (dt > HANDLER_BUDGET_NS && ratelimit_pass(&srv->slow_rl, &held))
		log_warn("handler_slow", "path=%s ms=%.1f budget_ms=%llu suppressed=%llu",
			 call->path, (double)dt / 1e6, HANDLER_BUDGET_NS / 1000000,
			 (unsigned long long)held);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct grpc_conn *c = user_data;
	struct grpc_call *call;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	call = calloc(1, sizeof(*call));
	if (!call)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
	call->conn = c;
	call->stream_id = frame->hd.stream_id;
	call->refs = CALL_REF_STREAM;
	call->encoding_ok = true;
	if (nghttp2_session_set_stream_user_data(session, call->stream_id, call) < 0) {
		free(call);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
	return 0;
}

static bool name_is(const uint8_t *name, size_t len, const char *s)
{
	return len == strlen(s) && memcmp(name, s, len) == 0;
}

/* Keeps only what routing needs, in fixed-size fields: a peer's headers
 * cost us no memory (nghttp2 bounds each field and the CONTINUATIONs). */
static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		     void *user_data)
{
	struct grpc_call *call;
	uint64_t ns;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0; /* client trailers: nothing in them matters to us */
	call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	if (!call)
		return 0;
	if (name_is(name, namelen, ":method")) {
		call->is_post = name_is(value, valuelen, "POST");
	} else if (name_is(name, namelen, ":path")) {
		call->path_bad = !grpc_path_is_valid((const char *)value, valuelen);
		if (!call->path_bad) {
			memcpy(call->path, value, valuelen);
			call->path[valuelen] = 0;
		}
	} else if (name_is(name, namelen, "content-type")) {
		/* application/grpc, application/grpc+proto, application/grpc;... */
		call->ctype_ok = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
				 (valuelen == 16 || value[16] == '+' || value[16] == ';');
	} else if (name_is(name, namelen, "grpc-encoding")) {
		call->encoding_ok = name_is(value, valuelen, "identity");
	} else if (name_is(name, namelen, "grpc-timeout")) {
		if (grpc_timeout_parse((const char *)value, valuelen, &ns) == 0)
			call->timeout_ns = ns ? ns : 1;
	}
	return 0;
}

/* A complete prefix: check it and make room for the body. False if the call
 * was answered instead (nothing more of it is kept). */
static bool call_take_prefix(struct grpc_call *call)
{
	struct grpc_conn *c = call->conn;
	const struct grpc_limits *lim = &c->srv->limits;
	bool compressed;
	uint32_t mlen;

	if (call->n_msgs > 0) {
		grpc_call_reject(call, 200, GRPC_STATUS_INTERNAL, "more than one request message");
		return false;
	}
	if (grpc_prefix_parse(call->prefix, &compressed, &mlen) < 0) {
		grpc_call_reject(call, 200, GRPC_STATUS_INTERNAL, "invalid message compression flag %u",
			    call->prefix[0]);
		return false;
	}
	if (compressed) { /* only identity is accepted, so nothing may be compressed */
		grpc_call_reject(call, 200, GRPC_STATUS_INTERNAL,
			    "compressed message without grpc-encoding");
		return false;
	}
	if (mlen > lim->max_message) {
		c->srv->stats.messages_too_large++;
		grpc_call_reject(call, 200, GRPC_STATUS_RESOURCE_EXHAUSTED,
			    "received message larger than max (%u vs. %zu)", mlen, lim->max_message);
		return false;
	}
	if (c->buffered + mlen > lim->max_conn_buffered) {
		c->srv->stats.messages_too_large++;
		grpc_call_reject(call, 200, GRPC_STATUS_RESOURCE_EXHAUSTED,
			    "too many request bytes buffered on this connection");
		return false;
	}
	call->req = malloc(mlen ? mlen : 1);
	if (!call->req) {
		grpc_call_reject(call, 200, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return false;
	}
	c->buffered += mlen;
	call->req_len = mlen;
	call->req_got = 0;
	call->in_body = true;
	return true;
}

/* Reassembles the single request message; the 5-byte prefix may straddle
 * DATA frames. Oversized or compressed messages are answered at the prefix. */
static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
			      const uint8_t *data, size_t len, void *user_data)
{
	struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);

	while (call && len > 0 && !call->finished && !call->dispatched) {
		size_t take;

		if (!call->in_body) {
			take = GRPC_PREFIX_LEN - call->prefix_len;
			if (take > len)
				take = len;
			memcpy(call->prefix + call->prefix_len, data, take);
			call->prefix_len = (uint8_t)(call->prefix_len + take);
			data += take;
			len -= take;
			if (call->prefix_len < GRPC_PREFIX_LEN || !call_take_prefix(call))
				break;
		} else {
			take = call->req_len - call->req_got;
			if (take > len)
				take = len;
			memcpy(call->req + call->req_got, data, take);
			call->req_got += (uint32_t)take;
			data += take;
			len -= take;
		}
		if (call->in_body && call->req_got == call->req_len) {
			call->in_body = false;
			call->prefix_len = 0;
			call->n_msgs++;
		}
	}
	return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct grpc_conn *c = user_data;
	struct grpc_call *call;

	switch (frame->hd.type) {
	case NGHTTP2_SETTINGS:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && !c->handshaken) {
			c->handshaken = true;
			conn_arm_timer(c);
		}
		break;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
		if (!call)
			break;
		if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
			if (!c->requested) {
				c->requested = true;
				conn_arm_timer(c);
			}
			call_headers_done(call);
		}
		if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
			call_request_done(call);
		break;
	default:
		break;
	}
	return 0;
}

/* After our final HEADERS: if the client is still sending (we answered
 * early), reset its half so it stops (RFC 9113 8.1). */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct grpc_conn *c = user_data;

	if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR) {
		c->srv->stats.conns_protocol_error++;
		log_debug("conn_goaway", "error=%s",
			  nghttp2_http2_strerror(frame->goaway.error_code));
	}
	if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
		(void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
						NGHTTP2_NO_ERROR);
	return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
			   void *user_data)
{
	struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);

	if (call)
		grpc_call_detach(call);
	return 0;
}

/* ---- connections: life ---------------------------------------------------------------------- */

/* A quarter of the connection cap in use: enough peers that the ones
 * which never asked for anything may be crowding out one that will. */
static bool srv_crowded(const struct grpc_server *srv)
{
	return (uint64_t)srv->n_conns * 4 >= srv->limits.max_connections;
}

/* GOAWAY to a connection that sent no request in time. */
static void conn_close_unasked(struct grpc_conn *c)
{
	c->srv->stats.conns_timed_out++;
	log_debug("conn_no_request", "ms=%u conns=%u action=goaway",
		  c->srv->limits.first_request_timeout_ms, c->srv->n_conns);
	conn_goaway(c, NGHTTP2_NO_ERROR);
}

/* The server just became crowded: connections past their first-request
 * deadline that were let be while it was not go now. They are only marked
 * (GOAWAY queued, or DEAD for the timer to free): nothing is freed here. */
static void srv_sweep_unasked(struct grpc_server *srv)
{
	uint64_t now = clock_now_ns(), fr_ns = (uint64_t)srv->limits.first_request_timeout_ms * 1000000ULL;

	for (struct grpc_conn *c = srv->conns; c; c = c->next)
		if (c->bev && c->state == CONN_OPEN && c->handshaken && !c->requested &&
		    now - c->t_accept_ns >= fr_ns)
			conn_close_unasked(c);
}

/* (Re)arms the timer of an open socket connection for the deadline that
 * applies now (see the top): until the first request, the earlier of the
 * handshake's and the first request's, both counted from the accept, so
 * nothing the peer sends in between buys it time; after it, idle. */
static void conn_arm_timer(struct grpc_conn *c)
{
	const struct grpc_limits *lim = &c->srv->limits;
	uint64_t ms, now, due;
	struct timeval tv;

	if (!c->timer || c->state != CONN_OPEN)
		return;
	if (c->requested) {
		ms = lim->idle_timeout_ms;
	} else {
		ms = lim->first_request_timeout_ms;
		if (!c->handshaken && lim->handshake_timeout_ms < ms)
			ms = lim->handshake_timeout_ms;
		now = clock_now_ns();
		due = c->t_accept_ns + ms * 1000000ULL;
		ms = due > now ? (due - now + 999999) / 1000000 : 0;
	}
	tv = clock_tv_ms((uint32_t)ms);
	(void)evtimer_add(c->timer, &tv);
}

static void conn_destroy(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;

	c->state = CONN_DEAD;
	while (c->calls) {
		(void)nghttp2_session_set_stream_user_data(c->session, c->calls->stream_id, NULL);
		grpc_call_detach(c->calls); /* cancel callbacks may complete other calls */
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->n_conns--;
	srv->stats.conns_active--;
	nghttp2_session_del(c->session);
	if (c->timer)
		event_free(c->timer);
	if (c->bev)
		bufferevent_free(c->bev);
	if (c->mem_out)
		evbuffer_free(c->mem_out);
	free(c);
}

static void conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	struct timeval tv;

	if (c->state == CONN_DEAD) {
		conn_destroy(c);
		return;
	}
	if (c->state == CONN_CLOSING || !c->handshaken) {
		c->srv->stats.conns_timed_out++;
		log_debug("conn_timeout", "state=%s", c->handshaken ? "closing" : "handshake");
		conn_destroy(c);
		return;
	}
	if (!c->requested) {
		uint64_t idle_ns = (uint64_t)c->srv->limits.idle_timeout_ms * 1000000ULL;
		uint64_t quiet_ns = clock_now_ns() - c->t_input_ns;

		/* Without a crowd, a client that connected ahead of its
		 * first call (the kubelet does) is merely idle. */
		if (!srv_crowded(c->srv) && quiet_ns < idle_ns) {
			tv = clock_tv_ms((uint32_t)((idle_ns - quiet_ns + 999999) / 1000000));
			(void)evtimer_add(c->timer, &tv);
			return;
		}
		conn_close_unasked(c);
		if (c->state == CONN_DEAD)
			conn_destroy(c);
		return;
	}
	if (c->n_active > 0) { /* a handler is working for this peer: not idle */
		tv = clock_tv_ms(c->srv->limits.idle_timeout_ms);
		(void)evtimer_add(c->timer, &tv);
		return;
	}
	c->srv->stats.conns_timed_out++;
	log_debug("conn_idle", "action=goaway");
	conn_goaway(c, NGHTTP2_NO_ERROR);
	if (c->state == CONN_DEAD)
		conn_destroy(c);
}

/* Feeds input to nghttp2 and flushes. 0, or -EPIPE once the session is over. */
static int conn_recv(struct grpc_conn *c, const uint8_t *data, size_t len)
{
	ssize_t n;

	if (c->state != CONN_OPEN || !nghttp2_session_want_read(c->session))
		return -EPIPE;
	c->in_session++;
	n = nghttp2_session_mem_recv(c->session, data, len);
	c->in_session--;
	if (n == NGHTTP2_ERR_BAD_CLIENT_MAGIC) { /* not HTTP/2 at all: no GOAWAY either */
		c->srv->stats.conns_protocol_error++;
		log_debug("conn_bad_preface", "bytes=%zu", len);
		conn_kill(c);
		return -EPIPE;
	}
	if (n < 0) {
		log_debug("conn_recv_failed", "err=%s", nghttp2_strerror((int)n));
		conn_goaway(c, NGHTTP2_PROTOCOL_ERROR);
		return -EPIPE;
	}
	grpc_conn_flush(c);
	return c->state == CONN_OPEN ? 0 : -EPIPE;
}

static void conn_on_read(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n;

	c->t_input_ns = clock_now_ns();
	if (c->requested) /* before it, input buys no time: see conn_arm_timer() */
		conn_arm_timer(c);
	while (c->state == CONN_OPEN && !c->read_paused &&
	       (n = evbuffer_get_contiguous_space(in)) > 0) {
		const uint8_t *data = evbuffer_pullup(in, (ev_ssize_t)n);

		(void)conn_recv(c, data, n);
		(void)evbuffer_drain(in, n);
	}
	if (c->state == CONN_DEAD)
		conn_destroy(c);
	else if (c->state != CONN_OPEN)
		(void)evbuffer_drain(in, evbuffer_get_length(in));
}

static void conn_on_write(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	bool paused = c->read_paused;

	grpc_conn_flush(c);
	if (c->state == CONN_DEAD) {
		conn_destroy(c);
		return;
	}
	if (paused && !c->read_paused) /* input that waited while we were over the cap */
		conn_on_read(bev, c);
}

static void conn_on_event(struct bufferevent *bev, short what, void *arg)
{
	struct grpc_conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		c->srv->stats.conns_timed_out++;
		log_debug("conn_timeout", "state=write");
	} else {
		log_debug("conn_closed", "eof=%d error=%d", !!(what & BEV_EVENT_EOF),
			  !!(what & BEV_EVENT_ERROR));
	}
	conn_destroy(c);
}

/* A connection with our SETTINGS queued. bev NULL: memory connection. Takes
 * bev (freed on failure). */
static int conn_new(struct grpc_server *srv, struct bufferevent *bev, struct grpc_conn **ret)
{
	const struct grpc_limits *lim = &srv->limits;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, lim->max_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, LOCAL_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST },
	};
	struct grpc_conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c) {
		if (bev)
			bufferevent_free(bev);
		return -ENOMEM;
	}
	c->srv = srv;
	c->bev = bev;
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->n_conns++;
	srv->stats.conns_active++;

	r = nghttp2_session_server_new2(&c->session, srv->cbs, c, srv->opt);
	if (r < 0) {
		c->session = NULL;
		goto fail;
	}
	if (bev) {
		c->timer = evtimer_new(srv->base, conn_on_timer, c);
		if (!c->timer)
			goto fail;
	} else {
		c->mem_out = evbuffer_new();
		if (!c->mem_out)
			goto fail;
	}
	if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv)) < 0 ||
	    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
						  LOCAL_WINDOW) < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	/* conn_destroy() copes with a half-built connection, but not with a
	 * NULL session; nghttp2_session_del(NULL) is a no-op. */
	conn_destroy(c);
	return -ENOMEM;
}

static void conn_abort(struct grpc_conn *c);

/* How readily c gives up its place: 0 never (a handler works for it, or it
 * is not a socket), 1 streams open (a request still arriving or a reply
 * still leaving), 2 idle after requests, 3 idle without ever a request, 4
 * already closing. A client that has asked before (the kubelet) loses its
 * connection only to a crowd of such clients: closing it under a client
 * about to send costs that call an UNAVAILABLE. */
static int conn_evictable(const struct grpc_conn *c)
{
	if (!c->bev || c->state == CONN_DEAD || c->n_active > 0)
		return 0;
	if (c->state == CONN_CLOSING)
		return 4;
	if (!c->requested)
		return 3;
	return c->calls ? 1 : 2;
}

/* At the connection cap: closes the most evictable connection, the one
 * longest without input among equals, so that an idle crowd cannot keep the
 * kubelet out (it gets in, at worst, at its next call). False when every
 * connection has a call in a handler. */
static bool conn_evict_idlest(struct grpc_server *srv, const struct grpc_listener *l)
{
	struct grpc_conn *victim = NULL;
	int best = 0;

	for (struct grpc_conn *c = srv->conns; c; c = c->next) {
		int e = conn_evictable(c);

		if (e > best || (e > 0 && e == best && c->t_input_ns < victim->t_input_ns)) {
			victim = c;
			best = e;
		}
	}
	if (!victim)
		return false;
	srv->stats.conns_evicted++;
	if (ratelimit_pass(&srv->evict_rl, NULL)) /* the total says how many */
		log_warn("conn_evicted", "socket=%s max=%u idle_ms=%llu evicted_total=%llu "
					 "action=closed_idlest",
			 l->path, srv->limits.max_connections,
			 (unsigned long long)((clock_now_ns() - victim->t_input_ns) / 1000000),
			 (unsigned long long)srv->stats.conns_evicted);
	conn_abort(victim);
	return true;
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
		      int socklen, void *arg)
{
	struct grpc_listener *l = arg;
	struct grpc_server *srv = l->srv;
	struct bufferevent *bev;
	struct grpc_conn *c;
	uint64_t held;
	struct timeval wt = clock_tv_ms(srv->limits.write_timeout_ms);

	if (srv->n_conns >= srv->limits.max_connections && !conn_evict_idlest(srv, l)) {
		srv->stats.conns_rejected++;
		if (ratelimit_pass(&srv->warn_rl, &held))
			log_warn("conn_rejected",
				 "socket=%s max=%u reason=\"all busy\" action=closed suppressed=%llu",
				 l->path, srv->limits.max_connections, (unsigned long long)held);
		(void)close(fd);
		return;
	}
	bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		(void)close(fd);
		return;
	}
	if (conn_new(srv, bev, &c) < 0)
		return;
	if (srv->n_conns * 4 >= srv->limits.max_connections &&
	    (srv->n_conns - 1) * 4 < srv->limits.max_connections)
		srv_sweep_unasked(srv);
	srv->stats.conns_accepted++;
	c->t_accept_ns = c->t_input_ns = clock_now_ns();
	bufferevent_setcb(bev, conn_on_read, conn_on_write, conn_on_event, c);
	bufferevent_setwatermark(bev, EV_READ, 0, srv->limits.max_conn_output);
	(void)bufferevent_set_timeouts(bev, NULL, &wt);
	conn_arm_timer(c);
	(void)bufferevent_enable(bev, EV_READ | EV_WRITE);
	grpc_conn_flush(c);
	if (c->state == CONN_DEAD)
		conn_destroy(c);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_listener *l = arg;

	(void)evconnlistener_enable(l->lev);
}

/* EMFILE, ENFILE, ENOBUFS: accepting again at once would spin the loop. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct grpc_listener *l = arg;
	struct timeval tv = clock_tv_ms(ACCEPT_RETRY_MS);
	int err = EVUTIL_SOCKET_ERROR();
	uint64_t held;

	if (ratelimit_pass(&l->srv->warn_rl, &held))
		log_warn("accept_failed", "socket=%s err=%s action=retry_in_%dms suppressed=%llu",
			 l->path, log_quote(strerror(err)), ACCEPT_RETRY_MS,
			 (unsigned long long)held);
	(void)evconnlistener_disable(lev);
	(void)evtimer_add(l->retry, &tv);
}

/* ---- memory connections (test seam) --------------------------------------------------------- */

int grpc_conn_new_memory(struct grpc_server *srv, struct grpc_conn **ret)
{
	struct grpc_conn *c;
	int r;

	r = conn_new(srv, NULL, &c);
	if (r < 0)
		return r;
	grpc_conn_flush(c);
	*ret = c;
	return 0;
}

int grpc_conn_feed(struct grpc_conn *c, const uint8_t *data, size_t len)
{
	assert(!c->bev);
	if (len == 0)
		return c->state == CONN_OPEN ? 0 : -EPIPE;
	return conn_recv(c, data, len);
}

size_t grpc_conn_take_output(struct grpc_conn *c, struct evbuffer *out)
{
	size_t n = evbuffer_get_length(c->mem_out);

	assert(!c->bev);
	if (out)
		(void)evbuffer_add_buffer(out, c->mem_out);
	else
		(void)evbuffer_drain(c->mem_out, n);
	grpc_conn_flush(c); /* room again: more of what nghttp2 has */
	return n;
}

struct grpc_conn *grpc_conn_free(struct grpc_conn *c)
{
	if (c)
		conn_destroy(c);
	return NULL;
}

/* ---- server --------------------------------------------------------------------------------- */

int grpc_server_new(struct event_base *base, const struct grpc_limits *limits,
		    struct grpc_server **ret)
{
	_cleanup_(grpc_server_freep) struct grpc_server *srv = NULL;
	struct grpc_limits def, lim;
	nghttp2_session_callbacks *cbs;

	grpc_limits_default(&def);
	lim = limits ? *limits : def;
#define DEF(f)                   \
	if (!lim.f)              \
		lim.f = def.f;
	DEF(max_message) DEF(max_conn_buffered) DEF(max_conn_queued) DEF(max_conn_output)
	DEF(max_streams) DEF(max_connections) DEF(handshake_timeout_ms)
	DEF(first_request_timeout_ms) DEF(idle_timeout_ms) DEF(write_timeout_ms)
	DEF(max_conn_watches)
#undef DEF
	if (lim.max_message > UINT32_MAX - GRPC_PREFIX_LEN)
		return -EINVAL;

	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->base = base;
	srv->limits = lim;
	ratelimit_init(&srv->warn_rl, WARN_INTERVAL_MS, 1);
	ratelimit_init(&srv->slow_rl, WARN_INTERVAL_MS, 1);
	ratelimit_init(&srv->evict_rl, WARN_INTERVAL_MS, 1);
	ratelimit_init(&srv->watch_rl, WARN_INTERVAL_MS, 1);
	if (nghttp2_session_callbacks_new(&srv->cbs) < 0)
		return -ENOMEM;
	cbs = srv->cbs;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);

	if (nghttp2_option_new(&srv->opt) < 0)
		return -ENOMEM;
	/* We check :method, :path and content-type ourselves; nghttp2's HTTP
	 * checks would reset streams whose :authority is a raw socket path
	 * (grpc-go sent the socket path as is, still in v1.38: hyperium/h2#442;
	 * wire-protocols.md section 6, pitfall 3). */
	nghttp2_option_set_no_http_messaging(srv->opt, 1);

	*ret = TAKE_PTR(srv);
	return 0;
}

static int add_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
		      void *userdata, bool watch)
{
	size_t len = strlen(path);
	struct grpc_method *m;

	if (!fn || !grpc_path_is_valid(path, len))
		return -EINVAL;
	if (method_find(srv, path))
		return -EEXIST;
	m = calloc(1, sizeof(*m) + len + 1);
	if (!m)
		return -ENOMEM;
	memcpy(m->path, path, len + 1);
	m->fn = fn;
	m->userdata = userdata;
	m->watch = watch;
	m->next = srv->methods;
	srv->methods = m;
	return 0;
}

int grpc_server_add_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
			   void *userdata)
{
	return add_method(srv, path, fn, userdata, false);
}

int grpc_server_add_watch_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
				 void *userdata)
{
	return add_method(srv, path, fn, userdata, true);
}

void grpc_server_set_observer(struct grpc_server *srv, grpc_observe_fn fn, void *userdata)
{
	srv->observe = fn;
	srv->observe_ud = userdata;
}

void grpc_server_get_stats(const struct grpc_server *srv, struct grpc_stats *ret)
{
	*ret = srv->stats;
}

static struct grpc_listener *listener_free(struct grpc_listener *l)
{
	struct stat st;

	if (!l)
		return NULL;
	if (l->lev)
		evconnlistener_free(l->lev);
	if (l->retry)
		event_free(l->retry);
	/* Remove the socket file only if it is still the one we bound: a newer
	 * instance may have replaced it already. */
	if (l->ino && lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
		(void)unlink(l->path);
	free(l);
	return NULL;
}

/* Binds l->path and starts accepting; on failure the caller frees l, which
 * also removes a socket file bound here. */
static int listener_open(struct grpc_listener *l, mode_t mode)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int r;

	memcpy(sa.sun_path, l->path, strlen(l->path) + 1); /* length checked by the caller */
	if (lstat(l->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		if (unlink(l->path) < 0 && errno != ENOENT)
			return -errno;
	} else if (errno != ENOENT) {
		return -errno;
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* The file is born with its final mode: no chmod() window. The loop is
	 * single-threaded, so the process umask is ours for these lines. */
	old = umask(~mode & 0777);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return -errno;
	if (lstat(l->path, &st) < 0)
		return -errno;
	l->dev = st.st_dev;
	l->ino = st.st_ino;

	l->retry = evtimer_new(l->srv->base, on_accept_retry, l);
	if (!l->retry)
		return -ENOMEM;
	l->lev = evconnlistener_new(l->srv->base, on_accept, l,
				    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128, fd);
	if (!l->lev)
		return -errno ? -errno : -ENOMEM;
	TAKE_FD(fd);
	evconnlistener_set_error_cb(l->lev, on_accept_error);
	return 0;
}

int grpc_server_listen_unix(struct grpc_server *srv, const char *path, mode_t mode)
{
	struct sockaddr_un sa;
	struct grpc_listener *l;
	size_t len = strlen(path);
	int r;

	if (len == 0 || (mode & ~(mode_t)0777))
		return -EINVAL;
	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	l = calloc(1, sizeof(*l) + len + 1);
	if (!l)
		return -ENOMEM;
	l->srv = srv;
	memcpy(l->path, path, len + 1);
	r = listener_open(l, mode);
	if (r < 0) {
		listener_free(l);
		return r;
	}
	l->next = srv->listeners;
	srv->listeners = l;
	return 0;
}

/* Server going away: tell the peer, without waiting for it to listen. */
static void conn_abort(struct grpc_conn *c)
{
	if (c->bev && c->state == CONN_OPEN) {
		(void)nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
					    nghttp2_session_get_last_proc_stream_id(c->session),
					    NGHTTP2_NO_ERROR, NULL, 0);
		grpc_conn_flush(c);
		(void)evbuffer_write(bufferevent_get_output(c->bev), bufferevent_getfd(c->bev));
	}
	conn_destroy(c);
}

struct grpc_server *grpc_server_free(struct grpc_server *srv)
{
	if (!srv)
		return NULL;
	while (srv->listeners) {
		struct grpc_listener *l = srv->listeners;

		srv->listeners = l->next;
		listener_free(l);
	}
	while (srv->conns)
		conn_abort(srv->conns);
	while (srv->methods) {
		struct grpc_method *m = srv->methods;

		srv->methods = m->next;
		free(m);
	}
	nghttp2_session_callbacks_del(srv->cbs);
	nghttp2_option_del(srv->opt);
	free(srv);
	return NULL;
}
