/* gRPC server over h2c on unix sockets: nghttp2 server sessions driven by
 * libevent bufferevents. See grpc.h for the model and the ownership rules.
 *
 * This file holds the nghttp2 callbacks that turn a stream into a call and
 * hand it to its handler, and the server. The rest of the module:
 * grpc_conn.c the connections (sockets, accepting, timers), grpc_call.c the
 * calls and the handler's API, grpc_frame.c the framing helpers;
 * grpc_priv.h what they share.
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
			grpc_conn_arm_timer(c);
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
				grpc_conn_arm_timer(c);
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
	/* nghttp2 otherwise keeps the state of the last closed streams of a
	 * connection for HTTP/2 stream priorities, which gRPC clients do not
	 * send: the kubelet's one connection held about 22 KiB of them after a
	 * thousand Prepare calls, for nothing. */
	nghttp2_option_set_no_closed_streams(srv->opt, 1);

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

struct grpc_server *grpc_server_free(struct grpc_server *srv)
{
	if (!srv)
		return NULL;
	while (srv->listeners) {
		struct grpc_listener *l = srv->listeners;

		srv->listeners = l->next;
		grpc_listener_free(l);
	}
	while (srv->conns)
		grpc_conn_abort(srv->conns);
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
