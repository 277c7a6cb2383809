/* NRI mux + ttrpc framing: arbitrary socket bytes, cut at arbitrary places.
 * Never crashes or leaks; whatever we write back is mux frames of at most
 * 4096 payload bytes; each client call's done() runs exactly once, whether
 * its response came, its deadline passed or the mux went away. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nri/ttrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CALLS 3

struct ctx {
	struct ttrpc_mux *m;
	int done[CALLS];
	size_t written;
};

static int sink(void *ud, const void *buf, size_t len)
{
	struct ctx *c = ud;
	const uint8_t *p = buf;

	assert(len >= TTRPC_MUX_HDR_LEN && len <= TTRPC_MUX_HDR_LEN + TTRPC_MUX_WRITE_MAX);
	assert(((uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7]) ==
	       len - TTRPC_MUX_HDR_LEN);
	c->written += len;
	return 0;
}

static int serve(void *ud, const struct ttrpc_request *rq)
{
	struct ctx *c = ud;

	assert(rq->service && rq->method && (rq->len == 0 || rq->payload));
	/* Echo, refuse, or end the connection, depending on the method. */
	switch (strlen(rq->method) % 3) {
	case 0:
		return ttrpc_mux_reply(c->m, rq->stream_id, TTRPC_OK, NULL, rq->payload, rq->len);
	case 1:
		return ttrpc_mux_reply(c->m, rq->stream_id, TTRPC_UNIMPLEMENTED, rq->method, NULL,
				       0);
	default:
		return rq->len > 8 ? -ESHUTDOWN : 0;
	}
}

static void on_done(void *ud, int r, int code, const char *msg, const uint8_t *payload,
		    size_t len)
{
	int *n = ud;

	assert(msg && (len == 0 || payload));
	(*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ttrpc_mux_ops ops = { .write = sink, .request = serve };
	struct ctx c = { 0 };
	size_t step, off = 0;

	if (ttrpc_mux_new(1, 2, &ops, &c, &c.m) < 0)
		return 0;
	/* Streams 1, 3, 5 are pending, so responses on conn 2 can match. */
	for (int i = 0; i < CALLS; i++)
		assert(ttrpc_mux_call(c.m, "svc", "M", "x", 1, i == 0 ? 0 : 1000, on_done,
				      &c.done[i], NULL) == 0);
	/* The first byte picks how the rest is cut: 1..256 bytes per feed. */
	step = size ? (size_t)data[0] + 1 : 1;
	for (off = size ? 1 : 0; off < size; off += step) {
		size_t n = size - off < step ? size - off : step;

		if (ttrpc_mux_feed(c.m, data + off, n) < 0) {
			assert(ttrpc_mux_is_dead(c.m) && ttrpc_mux_why(c.m)[0]);
			break;
		}
	}
	(void)ttrpc_mux_expire(c.m, INT64_MAX);
	assert(ttrpc_mux_next_deadline(c.m) == -1);
	c.m = ttrpc_mux_free(c.m);
	for (int i = 0; i < CALLS; i++)
		assert(c.done[i] == 1);
	return 0;
}
