/* grpc_priv: what the files of the gRPC server share and nothing outside it
 * sees: the server, its listeners, methods, connections and calls, and the
 * steps one file does for another. The server is one module in several files
 * (grpc.c the nghttp2 callbacks and the server, grpc_conn.c the connections,
 * grpc_call.c the calls, grpc_frame.c the framing helpers); outside it these
 * structs stay opaque (grpc.h). Not a public header: only
 * user/kubelet/grpc*.c include it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nghttp2/nghttp2.h>

#include "lib/ratelimit.h"
#include "kubelet/grpc.h"

struct bufferevent;
struct evbuffer;
struct event;
struct event_base;
struct evconnlistener;

struct grpc_method {
	struct grpc_method *next;
	grpc_handler_fn fn;
	void *userdata;
	bool watch; /* long-lived server stream (grpc_server_add_watch_method) */
	char path[];
};

struct grpc_listener {
	struct grpc_listener *next;
	struct grpc_server *srv;
	struct evconnlistener *lev;
	struct event *retry; /* re-enables accepting after EMFILE and friends */
	dev_t dev;
	ino_t ino;
	char path[];
};

struct grpc_server {
	struct event_base *base;
	struct grpc_limits limits;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;
	struct grpc_method *methods;
	struct grpc_listener *listeners;
	struct grpc_conn *conns;
	uint32_t n_conns;
	uint32_t n_watch_conns; /* connections holding a watch call */
	grpc_observe_fn observe;
	void *observe_ud;
	struct grpc_stats stats;
	/* peers can repeat whatever makes us warn: one line per
	 * WARN_INTERVAL_MS for each kind */
	struct ratelimit warn_rl, slow_rl, evict_rl, watch_rl;
};

enum conn_state { CONN_OPEN, CONN_CLOSING, CONN_DEAD };

struct grpc_conn {
	struct grpc_server *srv;
	struct grpc_conn *prev, *next;
	nghttp2_session *session;
	struct bufferevent *bev; /* NULL: memory connection (grpc_conn_new_memory) */
	struct evbuffer *mem_out;
	struct event *timer; /* handshake, idle, close grace, deferred free */
	struct grpc_call *calls;
	size_t buffered;   /* request bytes held by calls */
	size_t queued;	   /* reply bytes held by calls */
	uint32_t n_active; /* calls held by handlers */
	uint32_t n_watches; /* of those, watch calls */
	unsigned in_session;
	enum conn_state state;
	bool want_flush;
	bool handshaken;
	bool requested; /* a request's HEADERS arrived */
	bool read_paused;
	uint64_t t_accept_ns, t_input_ns; /* monotonic: accepted, last input */
};

enum { CALL_REF_STREAM = 1, CALL_REF_HANDLER = 2, CALL_REF_CANCEL = 4 };

struct grpc_call {
	struct grpc_conn *conn; /* NULL once the stream is gone */
	struct grpc_call *prev, *next;
	const struct grpc_method *method;
	int32_t stream_id;
	uint8_t refs;

	/* request headers */
	bool is_post, ctype_ok, encoding_ok, path_bad;
	uint64_t deadline_ns; /* monotonic; 0 = none */
	uint64_t timeout_ns;
	char path[GRPC_PATH_MAX];

	/* request body: exactly one message */
	uint8_t prefix[GRPC_PREFIX_LEN];
	uint8_t prefix_len;
	bool in_body;
	uint32_t n_msgs;
	uint8_t *req;
	uint32_t req_len, req_got;

	/* response */
	bool dispatched; /* given to the handler */
	bool finished;	 /* status decided; drop further request data */
	bool responded;	 /* response HEADERS submitted */
	bool deferred;	 /* data provider waits for output */
	bool cancelled;
	bool watch_held; /* counted in conn n_watches */
	struct evbuffer *out;
	/* grpc_call_send_latest(): one framed message not yet moved to out, which
	 * a newer one replaces */
	uint8_t *latest;
	size_t latest_len;
	enum grpc_status status;
	char *message; /* percent-encoded grpc-message, or NULL */
	uint64_t t_start;

	grpc_cancel_fn cancel_fn;
	void *cancel_ud;
};

/* grpc_conn.c: the connections. */
void grpc_conn_flush(struct grpc_conn *c);
void grpc_conn_goaway(struct grpc_conn *c, uint32_t code);
void grpc_conn_arm_timer(struct grpc_conn *c);
void grpc_conn_abort(struct grpc_conn *c);
struct grpc_listener *grpc_listener_free(struct grpc_listener *l);

/* grpc_call.c: the calls. */
void grpc_call_detach(struct grpc_call *call);
void grpc_call_reject(struct grpc_call *call, int http_status, enum grpc_status code,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
