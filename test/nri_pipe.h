/* An in-memory socket between a runtime-side ttrpc mux and an NRI session,
 * for the unit tests of nri and pools (header-only, test code only). */
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nri/nri.h"
#include "nri/ttrpc.h"

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
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

		p->to_rt = (struct buf){ 0 };
		p->to_pl = (struct buf){ 0 };
		if (a.len)
			assert_int_equal(ttrpc_mux_feed(rt, a.p, a.len), 0);
		if (b.len)
			r = nri_session_feed(s, b.p, b.len);
		free(a.p);
		free(b.p);
	}
	return r;
}

static void nri_pipe_done(struct nri_pipe *p)
{
	free(p->to_rt.p);
	free(p->to_pl.p);
}
