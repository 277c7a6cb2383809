/* grpc: a gRPC server over cleartext HTTP/2 (h2c, prior knowledge) on unix
 * sockets, for kubelet's plugin registration, DRA and health services.
 *
 * nghttp2 does the HTTP/2 framing and HPACK, libevent the sockets, timers and
 * buffering; this module adds gRPC: the 5-byte message prefix, the :path to
 * handler table, grpc-status trailers, limits and timeouts. Messages are
 * opaque bytes here; callers pack/unpack them with protobuf-c.
 *
 *   grpc_server ──< listener (one per unix socket path)
 *        │
 *        └──< conn (one nghttp2 server session per accepted socket)
 *                 └──< call (one per request stream)
 *
 * A call is owned by its stream until the request is complete, then it is
 * handed to the method's handler, which owns the handle until it completes
 * the call exactly once with grpc_call_reply(), grpc_call_fail() or
 * grpc_call_end(), either from inside the handler or later from the loop
 * (async: e.g. after an API-server round trip). If the client goes away
 * first (RST_STREAM, deadline, closed connection, server freed):
 *   - with a cancel callback (grpc_call_on_cancel), it runs once and the
 *     handle ends when it returns: forget the pointer there; completing it
 *     inside is allowed and not needed;
 *   - without one, the handle stays valid and the eventual completion is a
 *     cheap no-op returning -ECANCELED.
 * Either way nothing leaks and no pointer dangles as long as the handler
 * follows the one rule that applies. The request bytes are only lent for
 * the duration of the handler invocation.
 *
 * Limits (struct grpc_limits) bound everything a peer can make us hold:
 * request size (over it: RESOURCE_EXHAUSTED without buffering the message),
 * request bytes buffered and reply bytes queued per connection, concurrent
 * streams, connections, watch calls (grpc_server_add_watch_method). A peer
 * that stops reading stops being read from (output above max_conn_output),
 * and is dropped after write_timeout_ms.
 *
 * Idle peers cannot lock the kubelet out. At max_connections a new
 * connection is not refused while an idle one exists: the most evictable
 * connection with no call in a handler is closed to make room (counted in
 * conns_evicted; one that never sent a request goes before one that did).
 * Only when every connection has a call in a handler is the new one refused
 * (conns_rejected). While a quarter of the cap or more is in use, a
 * connection that has not sent a request within first_request_timeout_ms of
 * its accept is closed (GOAWAY), whatever else it sends meanwhile (PINGs,
 * SETTINGS): a crowd of silent peers is gone in seconds. Below that, such a
 * connection is only idle (idle_timeout_ms without input), because the
 * kubelet connects ahead of its first call and, when that connection ends,
 * reconnects at once: closing it every few seconds would be churn for
 * nothing. After a request, idle_timeout_ms without input applies.
 * Protocol errors end the connection with GOAWAY; nothing here blocks, and
 * nothing a peer sends is fatal to the server.
 *
 * Not thread-safe: everything runs on the loop of the event_base given to
 * grpc_server_new(). Handlers must not free the server.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/cleanup.h"

struct event_base;
struct evbuffer;
struct ProtobufCMessage;
struct grpc_server;
struct grpc_conn;
struct grpc_call;

/* grpc-status codes (gRPC doc/statuscodes.md). */
enum grpc_status {
	GRPC_STATUS_OK = 0,
	GRPC_STATUS_CANCELLED = 1,
	GRPC_STATUS_UNKNOWN = 2,
	GRPC_STATUS_INVALID_ARGUMENT = 3,
	GRPC_STATUS_DEADLINE_EXCEEDED = 4,
	GRPC_STATUS_NOT_FOUND = 5,
	GRPC_STATUS_ALREADY_EXISTS = 6,
	GRPC_STATUS_PERMISSION_DENIED = 7,
	GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
	GRPC_STATUS_FAILED_PRECONDITION = 9,
	GRPC_STATUS_ABORTED = 10,
	GRPC_STATUS_OUT_OF_RANGE = 11,
	GRPC_STATUS_UNIMPLEMENTED = 12,
	GRPC_STATUS_INTERNAL = 13,
	GRPC_STATUS_UNAVAILABLE = 14,
	GRPC_STATUS_DATA_LOSS = 15,
	GRPC_STATUS_UNAUTHENTICATED = 16,
	_GRPC_STATUS_MAX = 16,
};

/* Everything a peer can make the server hold. Zero fields take the default. */
struct grpc_limits {
	size_t max_message;		/* one request or reply message (4 MiB, gRPC's default) */
	size_t max_conn_buffered;	/* request bytes buffered per connection (16 MiB) */
	size_t max_conn_queued;		/* reply bytes queued per connection (16 MiB) */
	size_t max_conn_output;		/* socket output before we stop producing/reading (256 KiB) */
	uint32_t max_streams;		/* SETTINGS_MAX_CONCURRENT_STREAMS (100) */
	uint32_t max_connections;	/* open connections per server (64) */
	uint32_t handshake_timeout_ms;	/* accept to the client's SETTINGS (10 s) */
	uint32_t first_request_timeout_ms; /* accept to the first request, when crowded (10 s) */
	uint32_t idle_timeout_ms;	/* no input and no call in a handler (120 s) */
	uint32_t write_timeout_ms;	/* output pending and not moving (30 s) */
	uint32_t max_conn_watches;	/* watch calls held per connection (4) */
};

/* Counters since grpc_server_new(), for a metrics collector. */
struct grpc_stats {
	uint64_t conns_accepted;
	uint64_t conns_active;
	uint64_t conns_rejected;	/* over max_connections, none idle to close */
	uint64_t conns_evicted;		/* idle, closed to make room for a new one */
	uint64_t conns_protocol_error;	/* closed for bad frames or a bad preface */
	uint64_t conns_timed_out;	/* handshake, first request, idle or write timeout */
	uint64_t calls_started;		/* handed to a handler */
	uint64_t calls_cancelled;	/* client went away before completion */
	uint64_t calls_rejected;	/* answered by the server: unknown path, too big, bad request */
	uint64_t calls_active;		/* held by handlers */
	uint64_t messages_too_large;	/* over max_message (either way) or max_conn_buffered */
	uint64_t replies_dropped;	/* -ENOBUFS: over max_conn_queued */
	uint64_t watches_refused;	/* RESOURCE_EXHAUSTED: no room for a watch call */
	uint64_t messages_coalesced;	/* grpc_call_send_latest() replaced an unsent one */
};

/* A method: called once per complete request (exactly one message). req is
 * lent until the handler returns. The handler completes the call now or later
 * (see the header comment). */
typedef void (*grpc_handler_fn)(struct grpc_call *call, const uint8_t *req, size_t len,
				void *userdata);

/* Told once per completed call: path is the registered method path, or
 * "unknown" for anything else (bounded label cardinality); duration from the
 * end of the request to completion. For a /metrics counter and histogram. */
typedef void (*grpc_observe_fn)(const char *path, enum grpc_status code, uint64_t duration_ns,
				void *userdata);

typedef void (*grpc_cancel_fn)(struct grpc_call *call, void *userdata);

/* Fills *l with the defaults above. */
void grpc_limits_default(struct grpc_limits *l);

/* Returns 0 and a server without listeners in *ret, or -errno. limits: NULL =
 * defaults; copied. base is borrowed and must outlive the server. */
int grpc_server_new(struct event_base *base, const struct grpc_limits *limits,
		    struct grpc_server **ret);

/* Closes listeners (unlinking the socket files it created, if they are still
 * ours), drops every connection after a best-effort GOAWAY, cancels calls
 * still held by handlers (their cancel callbacks run; their handles stay
 * valid until completed). NULL-safe; returns NULL. Not from a handler. */
struct grpc_server *grpc_server_free(struct grpc_server *srv);
DEFINE_FREEP(grpc_server, grpc_server_free)

/* Serves on a unix stream socket at path, created with exactly mode (umask
 * set around bind(), so no window with other permissions). A stale socket
 * file is replaced; any other file there is left alone (-EEXIST). The parent
 * directory must exist (-ENOENT). -ENAMETOOLONG when path does not fit
 * sun_path (more than 107 bytes). May be called for several paths. */
int grpc_server_listen_unix(struct grpc_server *srv, const char *path, mode_t mode);

/* Registers a handler for path ("/package.Service/Method", copied). -EINVAL
 * for a malformed path, -EEXIST if already registered. */
int grpc_server_add_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
			   void *userdata);
/* Same for a watch: a server stream its handler holds for long, sending the
 * latest state with grpc_call_send_latest(). A connection holds at most
 * max_conn_watches of them, and watches are held on at most max_connections
 * - 1 connections; over either, the call is answered RESOURCE_EXHAUSTED
 * without reaching the handler (watches_refused). So peers that open
 * watches and never read can hold neither every connection (the last one
 * stays for other calls, an idle connection there being evicted for a new
 * one) nor more than max_conn_watches latest messages each. */
int grpc_server_add_watch_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
				 void *userdata);

void grpc_server_set_observer(struct grpc_server *srv, grpc_observe_fn fn, void *userdata);
void grpc_server_get_stats(const struct grpc_server *srv, struct grpc_stats *ret);

/* ---- calls ---------------------------------------------------------------------------------- */

/* The :path of the call; valid until the call is completed. */
const char *grpc_call_path(const struct grpc_call *call);

/* True once the client is gone (reset, deadline, connection closed). */
bool grpc_call_is_cancelled(const struct grpc_call *call);

/* Milliseconds left before the client's grpc-timeout, clamped at 0; -1 when
 * the client set no deadline. The client enforces it itself (it cancels);
 * handlers may use it to bound their own waits. */
int64_t grpc_call_deadline_left_ms(const struct grpc_call *call);

/* fn runs once if the call is cancelled before it is completed; the handle
 * is gone when fn returns (complete it inside fn or not; grpc_call_send()
 * there returns -ECANCELED). NULL clears it. */
void grpc_call_on_cancel(struct grpc_call *call, grpc_cancel_fn fn, void *userdata);

/* Queues one message (server streaming; unary handlers use grpc_call_reply).
 * 0, -ECANCELED (client gone), -E2BIG (over max_message), -ENOBUFS (the
 * client is not reading: over max_conn_queued; the message was dropped). The
 * call stays open in every case. */
int grpc_call_send(struct grpc_call *call, const uint8_t *msg, size_t len);
/* Same, packing a protobuf-c message straight into the output. */
int grpc_call_send_pb(struct grpc_call *call, const struct ProtobufCMessage *msg);

/* Queues one message that supersedes the previous one sent this way: if that
 * one has not started to go out yet (the client reads slowly, or not at all)
 * it is replaced, so a slow reader gets the latest state, not a queue of
 * every change (messages_coalesced). At most one such message waits per call,
 * besides one partly sent. 1 when a message was replaced, 0 when queued
 * after what is out already, or the errors of grpc_call_send(). */
int grpc_call_send_latest(struct grpc_call *call, const uint8_t *msg, size_t len);
int grpc_call_send_latest_pb(struct grpc_call *call, const struct ProtobufCMessage *msg);

/* Completes the call: grpc_call_send() then status OK. If the message cannot
 * be queued the call fails instead (RESOURCE_EXHAUSTED) and the error is
 * returned. The handle is gone afterwards, whatever the result. */
int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len);
int grpc_call_reply_pb(struct grpc_call *call, const struct ProtobufCMessage *msg);

/* Completes the call with code (not GRPC_STATUS_OK) and an optional message
 * (NULL; sent percent-encoded, cut at 512 bytes). 0 or -ECANCELED; the
 * handle is gone afterwards. */
int grpc_call_fail(struct grpc_call *call, enum grpc_status code, const char *msg);

/* Completes a streaming call with status OK after its messages. */
int grpc_call_end(struct grpc_call *call);

/* ---- framing helpers (pure; exported for tests) --------------------------------------------- */

#define GRPC_PREFIX_LEN 5
#define GRPC_PATH_MAX 256	/* longest :path we route, NUL included */
#define GRPC_MESSAGE_MAX 512	/* longest grpc-message text we send, before encoding */

/* Parses a message prefix: compressed flag (0 or 1) and big-endian length.
 * 0, or -EPROTO for a flag other than 0 and 1. */
int grpc_prefix_parse(const uint8_t p[GRPC_PREFIX_LEN], bool *ret_compressed,
		      uint32_t *ret_len);
void grpc_prefix_write(uint8_t p[GRPC_PREFIX_LEN], uint32_t len);

/* Percent-encodes s for grpc-message: bytes outside 0x20-0x7e and '%' become
 * %XX. Like snprintf: writes at most size bytes including the NUL and
 * returns the length of the whole encoding. */
size_t grpc_percent_encode(const char *s, char *buf, size_t size);

/* True for "/service/method": both parts non-empty, printable ASCII without
 * spaces, exactly two '/', shorter than GRPC_PATH_MAX. */
bool grpc_path_is_valid(const char *path, size_t len);

/* Parses a grpc-timeout value (1-8 digits then H, M, S, m, u or n) into
 * nanoseconds. 0 or -EINVAL. */
int grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ns);

/* "OK", "CANCELLED", ... ; "UNKNOWN_CODE" outside the table. */
const char *grpc_status_name(enum grpc_status code);

/* ---- test seam: a connection without a socket ----------------------------------------------- */

/* A connection fed by hand (fuzzing, unit tests): input goes in with
 * grpc_conn_feed(), output (starting with our SETTINGS) is collected with
 * grpc_conn_take_output(). No timers. Owned by the caller: grpc_conn_free(),
 * or by grpc_server_free() if still open then. */
int grpc_conn_new_memory(struct grpc_server *srv, struct grpc_conn **ret);
/* As if len bytes were read from the socket. 0 while the connection is open,
 * -EPIPE once it is over (protocol error, GOAWAY done); it still must be freed. */
int grpc_conn_feed(struct grpc_conn *c, const uint8_t *data, size_t len);
/* Moves pending output to out (NULL: discards it). Returns the byte count. */
size_t grpc_conn_take_output(struct grpc_conn *c, struct evbuffer *out);
struct grpc_conn *grpc_conn_free(struct grpc_conn *c);
DEFINE_FREEP(grpc_conn, grpc_conn_free)
