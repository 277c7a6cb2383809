/* An in-memory socket between a runtime-side ttrpc mux and an NRI session,
 * for the unit tests of nri and pools (header-only, test code only). */
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "nri/nri.h"
#include "nri/ttrpc.h"

/* What a test buffer may hold: a test that floods one fails, not the machine. */
#define NRI_PIPE_BUF_MAX (64u << 20)

/* Appends to a test buffer (a zero-filled one gets the cap); the test fails
 * on an error. */
static void pipe_buf_add(struct buf *b, const void *p, size_t len)
{
	if (!b->max)
		b->max = NRI_PIPE_BUF_MAX;
	assert_int_equal(buf_add(b, p, len), 0);
}

static const uint8_t *pipe_bytes(const struct buf *b)
{
	return (const uint8_t *)buf_str(b);
}

/* Bytes in flight each way; the two sides' write callbacks append here. */
struct nri_pipe {
	struct buf to_rt, to_pl;
};

/* Moves bytes both ways until nothing moves. Returns 0, or the first error
 * the session's feed returned (the runtime side must never fail). */
static int nri_pipe_pump(struct nri_pipe *p, struct ttrpc_mux *rt, struct nri_session *s)
{
	int r = 0;

	while ((p->to_rt.len || p->to_pl.len) && !r) {
		struct buf a = p->to_rt, b = p->to_pl;

		p->to_rt = BUF_INIT(NRI_PIPE_BUF_MAX);
		p->to_pl = BUF_INIT(NRI_PIPE_BUF_MAX);
		if (a.len)
			assert_int_equal(ttrpc_mux_feed(rt, pipe_bytes(&a), a.len), 0);
		if (b.len)
			r = nri_session_feed(s, pipe_bytes(&b), b.len);
		buf_done(&a);
		buf_done(&b);
	}
	return r;
}

static void nri_pipe_done(struct nri_pipe *p)
{
	buf_done(&p->to_rt);
	buf_done(&p->to_pl);
}
