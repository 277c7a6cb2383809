/* ttrpc over the NRI multiplexer: one byte stream (the unix socket to the
 * runtime) carries two logical connections, and each carries ttrpc.
 *
 *   socket bytes ──> mux frames [conn u32 BE][len u32 BE][payload]
 *                      │ conn server_conn: byte stream ──> ttrpc requests  ──> ops->request()
 *                      │ conn client_conn: byte stream ──> ttrpc responses ──> done() of the call
 *   ttrpc message:    [len u32 BE][stream u32 BE][type u8][flags u8][protobuf body, len bytes]
 *
 * The mux does no I/O (sans-I/O): the owner feeds it what the socket read
 * (any split: one read is never one frame) and it hands bytes to ops->write()
 * in mux frames of at most TTRPC_MUX_WRITE_MAX payload bytes, the largest the
 * Go reader on the other side accepts (wire-protocols.md 4.2, verified).
 *
 * Invariants:
 *  - Everything the peer controls is capped: a mux frame's payload at
 *    TTRPC_MUX_FRAME_MAX, a ttrpc message at TTRPC_MSG_MAX (over: -E2BIG), a
 *    decoded envelope at TTRPC_DECODE_BUDGET bytes of heap.
 *  - A message on the server conn with an even stream id (client-initiated
 *    streams are odd), or a request whose id is not above the last one (ids
 *    are never reused: one still in flight included), is answered
 *    INVALID_ARGUMENT on that stream id with containerd/ttrpc's own words,
 *    its body skipped unread, and the connection goes on, as with ttrpc's Go
 *    server; ttrpc_mux_rejected() counts them.
 *  - Anything else wrong -- an unknown or reserved conn id, a response on the
 *    server conn or a request on the client conn, a data (streaming) message,
 *    a response for no pending call, an undecodable envelope -- is -EPROTO.
 *    After any error from ttrpc_mux_feed() the mux is dead: the owner drops
 *    the connection and frees it.
 *  - Client calls use odd stream ids 1, 3, 5, ... never reused; a call is
 *    pending until its response, its deadline (ttrpc_mux_expire()) or
 *    ttrpc_mux_free(), and its done() runs exactly once.
 *  - A failed ops->write() kills the mux too: the peer may hold half a
 *    message.
 *
 * Callbacks may call ttrpc_mux_reply() and ttrpc_mux_call() on the same mux
 * but never ttrpc_mux_free(); to end the connection a request callback
 * returns a negative errno, which ttrpc_mux_feed() stops at and returns.
 *
 * Also here: a protobuf-c allocator with a byte budget, so decoding peer data
 * cannot be made to allocate without bound (used by nri.c as well).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "lib/cleanup.h"

#define TTRPC_HDR_LEN 10u
#define TTRPC_MSG_MAX (4u << 20)	/* ttrpc's own limit on a message body */
#define TTRPC_MUX_HDR_LEN 8u
#define TTRPC_MUX_WRITE_MAX 4096u	/* payload bytes per frame we write */
#define TTRPC_MUX_FRAME_MAX (TTRPC_MSG_MAX + TTRPC_HDR_LEN) /* per frame we accept */
#define TTRPC_DECODE_BUDGET (16u << 20) /* heap for one decoded envelope */
#define TTRPC_CALLS_MAX 64u		/* pending client calls */

/* ttrpc message types and the request flag NRI never uses (streaming). */
enum {
	TTRPC_TYPE_REQUEST = 1,
	TTRPC_TYPE_RESPONSE = 2,
	TTRPC_TYPE_DATA = 3,
	TTRPC_FLAG_REMOTE_CLOSED = 0x01,
	TTRPC_FLAG_REMOTE_OPEN = 0x02,
};

/* Status codes (google.rpc.Code, what ttrpc carries). */
enum ttrpc_code {
	TTRPC_OK = 0,
	TTRPC_UNKNOWN = 2,
	TTRPC_INVALID_ARGUMENT = 3,
	TTRPC_DEADLINE_EXCEEDED = 4,
	TTRPC_RESOURCE_EXHAUSTED = 8,
	TTRPC_FAILED_PRECONDITION = 9,
	TTRPC_UNIMPLEMENTED = 12,
	TTRPC_INTERNAL = 13,
	TTRPC_UNAVAILABLE = 14,
};

struct ttrpc_mux;

/* A request that arrived on the server conn; every pointer is borrowed for
 * the duration of the callback only. */
struct ttrpc_request {
	uint32_t stream_id;
	const char *service;
	const char *method;
	const uint8_t *payload;
	size_t len;
	int64_t timeout_ns; /* 0 = the caller sent none */
};

struct ttrpc_mux_ops {
	/* Queue bytes for the peer; called once per mux frame. >= 0 or -errno
	 * (the call or reply that wrote fails with it). Required. */
	int (*write)(void *ud, const void *buf, size_t len);
	/* A request on the server conn. Reply with ttrpc_mux_reply() now or later.
	 * A negative return stops ttrpc_mux_feed(), which returns it. NULL: every
	 * request is answered UNIMPLEMENTED. */
	int (*request)(void *ud, const struct ttrpc_request *req);
};

/* Outcome of a client call, run exactly once. r < 0: no response (-ETIMEDOUT,
 * -ECONNRESET when the mux was freed first); r == 0: a response with status
 * code (TTRPC_OK or an error code and msg) and its payload (borrowed). */
typedef void (*ttrpc_done_fn)(void *ud, int r, int code, const char *msg, const uint8_t *payload,
			      size_t len);

/* server_conn: the conn id the peer sends us requests on; client_conn: the one
 * we send requests on. Both non-zero and different. ops is copied. */
int ttrpc_mux_new(uint32_t server_conn, uint32_t client_conn, const struct ttrpc_mux_ops *ops,
		  void *ud, struct ttrpc_mux **ret);
/* Runs done(-ECONNRESET) of every pending call, then frees. NULL-safe. */
struct ttrpc_mux *ttrpc_mux_free(struct ttrpc_mux *m);
DEFINE_FREEP(ttrpc_mux, ttrpc_mux_free)

/* Consume len bytes from the socket. Returns 0, or -errno (-EPROTO, -E2BIG,
 * -ENOMEM, or what a request callback returned): the mux is dead then and
 * further feeding returns -EPIPE. Bounded work: decodes what is complete. */
int ttrpc_mux_feed(struct ttrpc_mux *m, const void *buf, size_t len);

/* Answer request stream_id: code TTRPC_OK with payload (may be empty), or an
 * error code with msg (payload ignored). -E2BIG if payload > TTRPC_MSG_MAX. */
int ttrpc_mux_reply(struct ttrpc_mux *m, uint32_t stream_id, int code, const char *msg,
		    const void *payload, size_t len);

/* Call service/method on the peer with the given payload; timeout_ms > 0 sets
 * the deadline (and timeout_nano on the wire). done(ud, ...) runs later, never
 * from inside this call. Returns 0 and the stream id in *ret_stream_id (may be
 * NULL), or -errno: -E2BIG, -EBUSY (TTRPC_CALLS_MAX pending), -EOVERFLOW
 * (stream ids used up), -EPIPE (mux dead), or the write error. */
int ttrpc_mux_call(struct ttrpc_mux *m, const char *service, const char *method,
		   const void *payload, size_t len, unsigned timeout_ms, ttrpc_done_fn done,
		   void *ud, uint32_t *ret_stream_id);

/* Earliest deadline of a pending call in ttrpc_now_ms() time, or -1. */
int64_t ttrpc_mux_next_deadline(const struct ttrpc_mux *m);
/* Fails every call whose deadline is <= now_ms with -ETIMEDOUT; returns how
 * many. A response that comes later is dropped quietly (the call keeps its
 * slot until then, counted by ttrpc_mux_pending()). */
int ttrpc_mux_expire(struct ttrpc_mux *m, int64_t now_ms);
size_t ttrpc_mux_pending(const struct ttrpc_mux *m);
/* True once feeding failed; ttrpc_mux_why() then says what was wrong with the
 * peer's bytes ("unknown conn id 7"), borrowed from the mux. */
bool ttrpc_mux_is_dead(const struct ttrpc_mux *m);
const char *ttrpc_mux_why(const struct ttrpc_mux *m);
/* Messages refused for their stream id (answered, the mux lives on); *ret_last
 * (may be NULL): what was wrong with the latest ("stream 4 after 3: StreamID
 * must be odd for client initiated streams"), borrowed from the mux. */
uint64_t ttrpc_mux_rejected(const struct ttrpc_mux *m, const char **ret_last);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t ttrpc_now_ms(void);

/* Name of a status code ("UNIMPLEMENTED"), "CODE_<n>" style for others into a
 * static buffer. */
const char *ttrpc_code_name(int code);

/* A protobuf-c allocator that refuses to go past a byte budget. Initialise,
 * pass &a->base to __unpack() and to __free_unpacked() of the result. */
struct ttrpc_pb_alloc {
	ProtobufCAllocator base;
	size_t used;
	size_t cap;
};
void ttrpc_pb_alloc_init(struct ttrpc_pb_alloc *a, size_t cap);
