/* ttrpc: NRI mux framing, ttrpc framing, client calls and server requests.
 * Golden bytes are the exchanges in wire-protocols.md 4.3 and appendix A.1. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nri_ttrpc.pb-c.h"
#include "nri/ttrpc.h"

/* ---- fixtures: a byte sink that remembers frame boundaries, a request log ---------------- */

struct wire {
	uint8_t *buf;
	size_t len, cap;
	size_t frames[256]; /* length of each write */
	size_t n_frames;
	int fail_after;	/* writes left before -EIO; < 0: never */
};

static int wire_write(void *ud, const void *buf, size_t len)
{
	struct wire *w = ud;

	if (w->fail_after == 0)
		return -EIO;
	if (w->fail_after > 0)
		w->fail_after--;
	if (w->len + len > w->cap) {
		w->cap = (w->len + len) * 2;
		w->buf = realloc(w->buf, w->cap);
		assert_non_null(w->buf);
	}
	memcpy(w->buf + w->len, buf, len);
	w->len += len;
	if (w->n_frames < 256)
		w->frames[w->n_frames++] = len;
	return 0;
}

static void wire_reset(struct wire *w)
{
	free(w->buf);
	*w = (struct wire){ .fail_after = -1 };
}

struct seen {
	int n;
	uint32_t stream_id;
	char service[64], method[64];
	uint8_t payload[64];
	size_t len;
	int64_t timeout_ns;
	int ret;		/* what the request callback returns */
	int reply_code;		/* reply with this code (-1: do not reply) */
	struct ttrpc_mux *m;
};

static int seen_request(void *ud, const struct ttrpc_request *rq)
{
	struct seen *s = ud;

	s->n++;
	s->stream_id = rq->stream_id;
	snprintf(s->service, sizeof(s->service), "%s", rq->service);
	snprintf(s->method, sizeof(s->method), "%s", rq->method);
	s->len = rq->len < sizeof(s->payload) ? rq->len : sizeof(s->payload);
	if (s->len)
		memcpy(s->payload, rq->payload, s->len);
	s->timeout_ns = rq->timeout_ns;
	if (s->reply_code >= 0)
		assert_int_equal(ttrpc_mux_reply(s->m, rq->stream_id, s->reply_code, "nope",
						 rq->payload, rq->len),
				 0);
	return s->ret;
}

struct done {
	int n, r, code;
	char msg[64];
	uint8_t payload[16384];
	size_t len;
};

static void on_done(void *ud, int r, int code, const char *msg, const uint8_t *payload,
		    size_t len)
{
	struct done *d = ud;

	d->n++;
	d->r = r;
	d->code = code;
	snprintf(d->msg, sizeof(d->msg), "%s", msg ? msg : "");
	d->len = len;
	if (len && len <= sizeof(d->payload))
		memcpy(d->payload, payload, len);
}

/* The plugin side: serves conn 1, calls on conn 2. */
struct plugin {
	struct wire out;
	struct seen seen;
	struct ttrpc_mux *m;
};

/* Each test makes its mux (plugin_mux() or its own ops); teardown frees it. */
static int plugin_setup(void **state)
{
	struct plugin *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	p->out.fail_after = -1;
	p->seen.reply_code = -1;
	*state = p;
	return 0;
}

static int plugin_teardown(void **state)
{
	struct plugin *p = *state;

	ttrpc_mux_free(p->m);
	wire_reset(&p->out);
	free(p);
	return 0;
}

/* The mux gets one ud; route write and request through a combined struct. */
static int p_write(void *ud, const void *buf, size_t len)
{
	return wire_write(&((struct plugin *)ud)->out, buf, len);
}

static int p_request(void *ud, const struct ttrpc_request *rq)
{
	return seen_request(&((struct plugin *)ud)->seen, rq);
}

static struct ttrpc_mux *plugin_mux(struct plugin *p)
{
	static const struct ttrpc_mux_ops ops = { .write = p_write, .request = p_request };

	assert_int_equal(ttrpc_mux_new(1, 2, &ops, p, &p->m), 0);
	p->seen.m = p->m;
	return p->m;
}

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;

	while (*hex) {
		unsigned v;

		if (*hex == ' ' || *hex == '|') {
			hex++;
			continue;
		}
		if (*hex == '"') { /* "text" literal */
			for (hex++; *hex && *hex != '"'; hex++) {
				assert_true(n < cap);
				out[n++] = (uint8_t)*hex;
			}
			hex++;
			continue;
		}
		assert_int_equal(sscanf(hex, "%2x", &v), 1);
		assert_true(n < cap);
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One mux frame around a ttrpc message: returns the length written to out. */
static size_t frame(uint8_t *out, uint32_t conn, uint32_t stream, uint8_t type, uint8_t flags,
		    const uint8_t *body, uint32_t len)
{
	put32(out, conn);
	put32(out + 4, 10 + len);
	put32(out + 8, len);
	put32(out + 12, stream);
	out[16] = type;
	out[17] = flags;
	if (len)
		memcpy(out + 18, body, len);
	return 18 + len;
}

/* A packed ttrpc.Request. */
static size_t request_body(uint8_t *out, const char *svc, const char *method,
			   const uint8_t *payload, size_t len)
{
	Ttrpc__Request rq = TTRPC__REQUEST__INIT;

	rq.service = (char *)svc;
	rq.method = (char *)method;
	rq.payload.data = (uint8_t *)payload;
	rq.payload.len = len;
	return ttrpc__request__pack(&rq, out);
}

/* ---- golden exchanges --------------------------------------------------------------------- */

/* wire-protocols.md 4.3: RegisterPlugin{"cpu-dra", "10"} with a 5 s deadline. */
static void test_ttrpc_call_writes_register_plugin_like_the_wire_doc(void **state)
{
	struct plugin *p = *state;
	uint8_t want[128], payload[16];
	size_t n = unhex("00 00 00 02 00 00 00 4d"
			 "00 00 00 43 00 00 00 01 01 00"
			 "0a 1c \"nri.pkg.api.v1alpha1.Runtime\""
			 "12 0e \"RegisterPlugin\""
			 "1a 0d 0a 07 \"cpu-dra\" 12 02 \"10\""
			 "20 80 e4 97 d0 12",
			 want, sizeof(want));
	size_t pl = unhex("0a 07 \"cpu-dra\" 12 02 \"10\"", payload, sizeof(payload));
	struct done d = { 0 };
	uint32_t sid = 0;

	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin",
					payload, pl, 5000, on_done, &d, &sid),
			 0);
	assert_int_equal(sid, 1);
	assert_int_equal(p->out.len, n);
	assert_memory_equal(p->out.buf, want, n);
	assert_int_equal(ttrpc_mux_pending(p->m), 1);
	assert_int_equal(d.n, 0);

	/* A.1 #2: the empty response (zero-length body) is OK with no payload. */
	n = unhex("00 00 00 02 00 00 00 0a 00 00 00 00 00 00 00 01 02 00", want, sizeof(want));
	assert_int_equal(ttrpc_mux_feed(p->m, want, n), 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.r, 0);
	assert_int_equal(d.code, TTRPC_OK);
	assert_int_equal(d.len, 0);
	assert_int_equal(ttrpc_mux_pending(p->m), 0);
}

/* A.1 #3/#4: the runtime's Configure on conn 1, our reply with events 1769. */
static const char configure_hex[] =
	"00 00 00 01 00 00 00 5f"
	"00 00 00 55 00 00 00 01 01 00"
	"0a 1b \"nri.pkg.api.v1alpha1.Plugin\""
	"12 09 \"Configure\""
	"1a 25 12 10 \"nri-runtime-peer\" 1a 0b \"v0.8.0-peer\" 20 88 27 28 d0 0f"
	"20 b6 a4 d4 b9 07";

static int reply_events(void *ud, const struct ttrpc_request *rq)
{
	struct plugin *p = ud;
	static const uint8_t events_1769[] = { 0x10, 0xe9, 0x0d };

	p->seen.n++;
	snprintf(p->seen.method, sizeof(p->seen.method), "%s", rq->method);
	p->seen.timeout_ns = rq->timeout_ns;
	p->seen.len = rq->len;
	return ttrpc_mux_reply(p->m, rq->stream_id, TTRPC_OK, NULL, events_1769, 3);
}

static void test_ttrpc_serves_configure_like_the_wire_doc(void **state)
{
	static const struct ttrpc_mux_ops ops = { .write = p_write, .request = reply_events };
	struct plugin *p = *state;
	uint8_t in[128], want[64];
	size_t n = unhex(configure_hex, in, sizeof(in));
	size_t wn = unhex("00 00 00 01 00 00 00 0f 00 00 00 05 00 00 00 01 02 00 12 03 10 e9 0d",
			  want, sizeof(want));

	assert_int_equal(n, 8 + 95);
	assert_int_equal(ttrpc_mux_new(1, 2, &ops, p, &p->m), 0);
	assert_int_equal(ttrpc_mux_feed(p->m, in, n), 0);
	assert_int_equal(p->seen.n, 1);
	assert_string_equal(p->seen.method, "Configure");
	assert_int_equal(p->seen.len, 37);
	assert_int_equal(p->seen.timeout_ns, 1999966774);
	assert_int_equal(p->out.len, wn);
	assert_memory_equal(p->out.buf, want, wn);
}

static void test_ttrpc_feed_accepts_one_byte_at_a_time(void **state)
{
	static const struct ttrpc_mux_ops ops = { .write = p_write, .request = reply_events };
	struct plugin *p = *state;
	uint8_t in[128];
	size_t n = unhex(configure_hex, in, sizeof(in));

	assert_int_equal(ttrpc_mux_new(1, 2, &ops, p, &p->m), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(p->seen.n, 0);
		assert_int_equal(ttrpc_mux_feed(p->m, in + i, 1), 0);
	}
	assert_int_equal(p->seen.n, 1);
	assert_string_equal(p->seen.method, "Configure");
}

static void test_ttrpc_feed_handles_coalesced_frames(void **state)
{
	struct plugin *p = *state;
	uint8_t body[128], buf[1024];
	size_t bl = request_body(body, "svc", "A", (const uint8_t *)"x", 1), n = 0;
	struct done d = { 0 };

	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), 0);
	/* request 1, response to our call, request 3: one read */
	n += frame(buf + n, 1, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	n += frame(buf + n, 2, 1, TTRPC_TYPE_RESPONSE, 0, NULL, 0);
	n += frame(buf + n, 1, 3, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_int_equal(p->seen.n, 2);
	assert_int_equal(p->seen.stream_id, 3);
	assert_string_equal(p->seen.method, "A");
	assert_int_equal(d.n, 1);
	assert_int_equal(d.code, TTRPC_OK);
}

/* One ttrpc message over several mux frames, interleaved with the other conn:
 * what Go's 4 KiB writer produces (A: 4096 + rest). */
static void test_ttrpc_reassembles_a_message_across_frames_per_conn(void **state)
{
	struct plugin *p = *state;
	static uint8_t payload[9000], body[9200], buf[10000];
	uint8_t msg[9300];
	size_t bl, ml, n = 0;
	struct done d = { 0 };

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), 0);
	bl = request_body(body, "svc", "Big", payload, sizeof(payload));
	ml = frame(msg, 1, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl) - 8; /* ttrpc bytes */
	/* conn 1: first 4096 bytes */
	put32(buf + n, 1);
	put32(buf + n + 4, 4096);
	memcpy(buf + n + 8, msg + 8, 4096);
	n += 8 + 4096;
	/* conn 2: the whole response to our call, in between */
	n += frame(buf + n, 2, 1, TTRPC_TYPE_RESPONSE, 0, NULL, 0);
	/* conn 1: the rest */
	put32(buf + n, 1);
	put32(buf + n + 4, (uint32_t)(ml - 4096));
	memcpy(buf + n + 8, msg + 8 + 4096, ml - 4096);
	n += 8 + ml - 4096;
	/* split the socket bytes at awkward places */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, 3), 0);
	assert_int_equal(ttrpc_mux_feed(p->m, buf + 3, 4100), 0);
	assert_int_equal(p->seen.n, 0);
	assert_int_equal(ttrpc_mux_feed(p->m, buf + 4103, n - 4103), 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(p->seen.n, 1);
	assert_string_equal(p->seen.method, "Big");
	assert_memory_equal(p->seen.payload, payload, sizeof(p->seen.payload));
}

static void test_ttrpc_writes_frames_of_at_most_4096_bytes(void **state)
{
	struct plugin *p = *state;
	static uint8_t payload[10000];
	struct done d = { 0 };
	size_t total = 0;

	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", payload, sizeof(payload), 0, on_done, &d,
					NULL),
			 0);
	assert_true(p->out.n_frames >= 3);
	for (size_t i = 0; i < p->out.n_frames; i++) {
		assert_true(p->out.frames[i] <= 8 + TTRPC_MUX_WRITE_MAX);
		total += p->out.frames[i] - 8;
	}
	assert_int_equal(p->out.frames[0], 8 + 4096);
	assert_int_equal(p->out.frames[1], 8 + 4096);
	/* ttrpc header + Request{service, method, payload} */
	assert_int_equal(total, 10 + 3 + 3 + 3 + sizeof(payload));
	p->m = ttrpc_mux_free(p->m); /* d lives on this stack */
}

/* ---- a plugin and a runtime back to back -------------------------------------------------- */

struct pair {
	struct wire to_rt, to_pl;
	struct seen rt_seen;
	struct ttrpc_mux *pl, *rt;
};

static int pair_to_rt(void *ud, const void *buf, size_t len)
{
	return wire_write(&((struct pair *)ud)->to_rt, buf, len);
}

static int pair_to_pl(void *ud, const void *buf, size_t len)
{
	return wire_write(&((struct pair *)ud)->to_pl, buf, len);
}

static int pair_rt_request(void *ud, const struct ttrpc_request *rq)
{
	return seen_request(&((struct pair *)ud)->rt_seen, rq);
}

static void pair_init(struct pair *x)
{
	static const struct ttrpc_mux_ops pl_ops = { .write = pair_to_rt };
	static const struct ttrpc_mux_ops rt_ops = { .write = pair_to_pl,
						     .request = pair_rt_request };

	*x = (struct pair){ 0 };
	x->to_rt.fail_after = x->to_pl.fail_after = -1;
	assert_int_equal(ttrpc_mux_new(1, 2, &pl_ops, x, &x->pl), 0);
	assert_int_equal(ttrpc_mux_new(2, 1, &rt_ops, x, &x->rt), 0);
	x->rt_seen.m = x->rt;
	x->rt_seen.reply_code = TTRPC_OK;
}

static void pair_flush(struct pair *x)
{
	while (x->to_rt.len || x->to_pl.len) {
		struct wire a = x->to_rt, b = x->to_pl;

		x->to_rt = (struct wire){ .fail_after = -1 };
		x->to_pl = (struct wire){ .fail_after = -1 };
		if (a.len)
			assert_int_equal(ttrpc_mux_feed(x->rt, a.buf, a.len), 0);
		if (b.len)
			assert_int_equal(ttrpc_mux_feed(x->pl, b.buf, b.len), 0);
		free(a.buf);
		free(b.buf);
	}
}

static void pair_done(struct pair *x)
{
	ttrpc_mux_free(x->pl);
	ttrpc_mux_free(x->rt);
	wire_reset(&x->to_rt);
	wire_reset(&x->to_pl);
}

static void test_ttrpc_call_roundtrip_with_odd_increasing_stream_ids(void **state)
{
	struct pair x;
	struct done d1 = { 0 }, d2 = { 0 };
	static uint8_t big[12000];
	uint32_t s1, s2;

	pair_init(&x);
	memset(big, 0x5a, sizeof(big));
	assert_int_equal(ttrpc_mux_call(x.pl, "svc", "Echo", "hi", 2, 1000, on_done, &d1, &s1), 0);
	assert_int_equal(ttrpc_mux_call(x.pl, "svc", "Echo", big, sizeof(big), 1000, on_done, &d2,
					&s2),
			 0);
	assert_int_equal(s1, 1);
	assert_int_equal(s2, 3);
	pair_flush(&x);
	assert_int_equal(x.rt_seen.n, 2);
	assert_int_equal(x.rt_seen.timeout_ns, 1000000000);
	assert_int_equal(d1.n, 1);
	assert_int_equal(d1.len, 2);
	assert_memory_equal(d1.payload, "hi", 2);
	assert_int_equal(d2.n, 1);
	assert_int_equal(d2.len, sizeof(big));
	assert_memory_equal(d2.payload, big, sizeof(big));
	pair_done(&x);
}

static void test_ttrpc_error_status_reaches_the_caller(void **state)
{
	struct pair x;
	struct done d = { 0 };

	pair_init(&x);
	x.rt_seen.reply_code = TTRPC_UNIMPLEMENTED;
	assert_int_equal(ttrpc_mux_call(x.pl, "svc", "Nope", NULL, 0, 0, on_done, &d, NULL), 0);
	pair_flush(&x);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.r, 0);
	assert_int_equal(d.code, TTRPC_UNIMPLEMENTED);
	assert_string_equal(d.msg, "nope");
	assert_int_equal(d.len, 0);
	pair_done(&x);
}

static void test_ttrpc_status_present_with_code_zero_is_ok(void **state)
{
	struct plugin *p = *state;
	Ttrpc__Response resp = TTRPC__RESPONSE__INIT;
	Ttrpc__Status st = TTRPC__STATUS__INIT;
	uint8_t body[64], buf[128];
	size_t bl, n;
	struct done d = { 0 };

	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), 0);
	st.message = "fine";
	resp.status = &st;
	resp.payload.data = (uint8_t *)"ok";
	resp.payload.len = 2;
	bl = ttrpc__response__pack(&resp, body);
	n = frame(buf, 2, 1, TTRPC_TYPE_RESPONSE, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_int_equal(d.code, TTRPC_OK);
	assert_int_equal(d.len, 2);
}

static void test_ttrpc_no_request_handler_answers_unimplemented(void **state)
{
	static const struct ttrpc_mux_ops ops = { .write = p_write };
	struct plugin *p = *state;
	uint8_t body[64], buf[128];
	size_t bl = request_body(body, "svc", "X", NULL, 0), n;
	Ttrpc__Response *resp;

	assert_int_equal(ttrpc_mux_new(1, 2, &ops, p, &p->m), 0);
	n = frame(buf, 1, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_true(p->out.len > 18);
	assert_int_equal(p->out.buf[3], 1); /* conn 1 */
	assert_int_equal(p->out.buf[16], TTRPC_TYPE_RESPONSE);
	resp = ttrpc__response__unpack(NULL, p->out.len - 18, p->out.buf + 18);
	assert_non_null(resp);
	assert_non_null(resp->status);
	assert_int_equal(resp->status->code, TTRPC_UNIMPLEMENTED);
	ttrpc__response__free_unpacked(resp, NULL);
}

/* ---- bad peer data ------------------------------------------------------------------------ */

static void assert_feed_fails(struct plugin *p, const uint8_t *buf, size_t n, int err,
			      const char *why_part)
{
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), err);
	assert_true(ttrpc_mux_is_dead(p->m));
	if (!strstr(ttrpc_mux_why(p->m), why_part))
		fail_msg("why '%s' lacks '%s'", ttrpc_mux_why(p->m), why_part);
	/* dead stays dead */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), -EPIPE);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, NULL, NULL), -EPIPE);
}

static void test_ttrpc_rejects_unknown_conn_ids(void **state)
{
	struct plugin *p = *state;
	uint8_t buf[32];

	plugin_mux(p);
	frame(buf, 7, 1, TTRPC_TYPE_REQUEST, 0, NULL, 0);
	assert_feed_fails(p, buf, 8, -EPROTO, "unknown conn id 7");
	ttrpc_mux_free(p->m);
	plugin_mux(p);
	frame(buf, 0, 1, TTRPC_TYPE_REQUEST, 0, NULL, 0);
	assert_feed_fails(p, buf, 8, -EPROTO, "unknown conn id 0");
	assert_int_equal(p->seen.n, 0);
}

static void test_ttrpc_rejects_oversized_mux_frame_before_reading_it(void **state)
{
	struct plugin *p = *state;
	uint8_t buf[8];

	plugin_mux(p);
	put32(buf, 1);
	put32(buf + 4, TTRPC_MUX_FRAME_MAX + 1);
	assert_feed_fails(p, buf, 8, -E2BIG, "mux frame");
}

static void test_ttrpc_rejects_oversized_message_from_its_header(void **state)
{
	struct plugin *p = *state;
	uint8_t buf[32];

	plugin_mux(p);
	put32(buf, 1);
	put32(buf + 4, 10);
	put32(buf + 8, TTRPC_MSG_MAX + 1);
	put32(buf + 12, 1);
	buf[16] = TTRPC_TYPE_REQUEST;
	buf[17] = 0;
	assert_feed_fails(p, buf, 18, -E2BIG, "message of");
	/* exactly the max is a valid header (the body just has not come yet) */
	ttrpc_mux_free(p->m);
	plugin_mux(p);
	put32(buf + 8, TTRPC_MSG_MAX);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, 18), 0);
}

/* The one response in p->out (a single frame): its stream id, status code
 * and message; p->out is emptied. */
static void take_reply(struct plugin *p, uint32_t *sid, int *code, char *msg, size_t msz)
{
	Ttrpc__Response *resp;

	assert_int_equal(p->out.n_frames, 1);
	assert_int_equal(get32(p->out.buf), 1); /* on the conn we serve */
	assert_int_equal(get32(p->out.buf + 4), p->out.len - 8);
	assert_int_equal(get32(p->out.buf + 8), p->out.len - 18);
	assert_int_equal(p->out.buf[16], TTRPC_TYPE_RESPONSE);
	*sid = get32(p->out.buf + 12);
	resp = ttrpc__response__unpack(NULL, p->out.len - 18, p->out.buf + 18);
	assert_non_null(resp);
	*code = resp->status ? resp->status->code : TTRPC_OK;
	snprintf(msg, msz, "%s", resp->status ? resp->status->message : "");
	ttrpc__response__free_unpacked(resp, NULL);
	wire_reset(&p->out);
}

static void assert_rejected(struct plugin *p, uint32_t want_sid, const char *want_msg)
{
	uint32_t sid;
	int code;
	char msg[128];

	take_reply(p, &sid, &code, msg, sizeof(msg));
	assert_int_equal(sid, want_sid);
	assert_int_equal(code, TTRPC_INVALID_ARGUMENT);
	assert_string_equal(msg, want_msg);
	assert_false(ttrpc_mux_is_dead(p->m));
}

#define ODD_MSG "StreamID must be odd for client initiated streams"
#define REUSE_MSG "StreamID cannot be re-used and must increment"

/* containerd/ttrpc's server: INVALID_ARGUMENT on the offending stream id, the
 * request never reaches the handler, the connection goes on. */
static void test_ttrpc_answers_bad_request_stream_ids_and_goes_on(void **state)
{
	struct plugin *p = *state;
	uint8_t body[64], buf[256];
	size_t bl = request_body(body, "s", "m", NULL, 0), n;
	const char *last = NULL;
	uint32_t sid;
	int code;
	char msg[128];

	plugin_mux(p);
	p->seen.reply_code = TTRPC_OK;
	n = frame(buf, 1, 2, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl); /* even */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_rejected(p, 2, ODD_MSG);
	assert_int_equal(p->seen.n, 0);

	n = frame(buf, 1, 5, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	take_reply(p, &sid, &code, msg, sizeof(msg));
	assert_int_equal(sid, 5);
	assert_int_equal(code, TTRPC_OK);
	assert_int_equal(p->seen.n, 1);

	n = frame(buf, 1, 5, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl); /* reused */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_rejected(p, 5, REUSE_MSG);
	n = frame(buf, 1, 3, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl); /* decreasing */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_rejected(p, 3, REUSE_MSG);
	n = frame(buf, 1, 0, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl); /* zero is even */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_rejected(p, 0, ODD_MSG);
	assert_int_equal(p->seen.n, 1);
	assert_int_equal(ttrpc_mux_rejected(p->m, &last), 4);
	assert_string_equal(last, "stream 0 after 5: " ODD_MSG);

	/* the rejections did not move the bar: 7 is served */
	n = frame(buf, 1, 7, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	take_reply(p, &sid, &code, msg, sizeof(msg));
	assert_int_equal(sid, 7);
	assert_int_equal(code, TTRPC_OK);
	assert_int_equal(p->seen.n, 2);
}

/* A request reusing the id of one still being answered (the handler replies
 * later): the duplicate is refused on that id, the first keeps its turn. */
static void test_ttrpc_refuses_the_id_of_a_request_in_flight(void **state)
{
	struct plugin *p = *state;
	uint8_t body[64], buf[512];
	size_t bl = request_body(body, "s", "m", NULL, 0), n = 0;
	uint32_t sid;
	int code;
	char msg[128];

	plugin_mux(p);
	p->seen.reply_code = -1; /* answer later */
	n += frame(buf + n, 1, 9, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	n += frame(buf + n, 1, 9, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_int_equal(p->seen.n, 1);
	assert_rejected(p, 9, REUSE_MSG);
	assert_int_equal(ttrpc_mux_reply(p->m, 9, TTRPC_OK, NULL, "x", 1), 0);
	take_reply(p, &sid, &code, msg, sizeof(msg));
	assert_int_equal(sid, 9);
	assert_int_equal(code, TTRPC_OK);
}

/* A refused message's body is skipped, not stored: even at the 4 MiB cap and
 * split over frames, and the next message is read from the right byte. */
static void test_ttrpc_refused_body_is_skipped_across_frames(void **state)
{
	struct plugin *p = *state;
	static uint8_t chunk[4096 + 8];
	uint8_t hdr[32], body[64], buf[256];
	size_t bl = request_body(body, "s", "m", NULL, 0), n;
	uint32_t left = TTRPC_MSG_MAX;

	plugin_mux(p);
	p->seen.reply_code = TTRPC_OK;
	put32(hdr, 1);
	put32(hdr + 4, 10);
	put32(hdr + 8, TTRPC_MSG_MAX);
	put32(hdr + 12, 4); /* even */
	hdr[16] = TTRPC_TYPE_REQUEST;
	hdr[17] = 0;
	assert_int_equal(ttrpc_mux_feed(p->m, hdr, 18), 0);
	memset(chunk, 0xff, sizeof(chunk));
	while (left > 0) {
		uint32_t k = left < 4096 ? left : 4096;

		put32(chunk, 1);
		put32(chunk + 4, k);
		assert_int_equal(ttrpc_mux_feed(p->m, chunk, 8 + k), 0);
		left -= k;
	}
	assert_rejected(p, 4, ODD_MSG);
	n = frame(buf, 1, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_int_equal(p->seen.n, 1);
	assert_int_equal(p->seen.stream_id, 1);
}

/* The refusal is a reply like any other: a failed write kills the mux. */
static void test_ttrpc_refusal_that_cannot_be_written_ends_the_mux(void **state)
{
	struct plugin *p = *state;
	uint8_t body[64], buf[256];
	size_t bl = request_body(body, "s", "m", NULL, 0), n;

	plugin_mux(p);
	p->out.fail_after = 0;
	n = frame(buf, 1, 2, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), -EIO);
	assert_true(ttrpc_mux_is_dead(p->m));
}

static void test_ttrpc_rejects_wrong_message_types_per_conn(void **state)
{
	struct plugin *p = *state;
	uint8_t body[64], buf[256];
	size_t bl = request_body(body, "s", "m", NULL, 0), n;
	struct done d = { 0 };

	plugin_mux(p); /* a response on the conn where we serve */
	n = frame(buf, 1, 1, TTRPC_TYPE_RESPONSE, 0, NULL, 0);
	assert_feed_fails(p, buf, n, -EPROTO, "type 2 on request conn 1");

	ttrpc_mux_free(p->m);
	plugin_mux(p); /* a request on the conn where we call */
	n = frame(buf, 2, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_feed_fails(p, buf, n, -EPROTO, "type 1 on response conn 2");

	ttrpc_mux_free(p->m);
	plugin_mux(p); /* streaming data */
	n = frame(buf, 1, 1, TTRPC_TYPE_DATA, 0, NULL, 0);
	assert_feed_fails(p, buf, n, -EPROTO, "type 3");

	ttrpc_mux_free(p->m);
	plugin_mux(p); /* a streaming request */
	n = frame(buf, 1, 1, TTRPC_TYPE_REQUEST, TTRPC_FLAG_REMOTE_OPEN, body, (uint32_t)bl);
	assert_feed_fails(p, buf, n, -EPROTO, "streaming");

	ttrpc_mux_free(p->m);
	plugin_mux(p); /* a response nobody asked for */
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), 0);
	n = frame(buf, 2, 3, TTRPC_TYPE_RESPONSE, 0, NULL, 0);
	assert_feed_fails(p, buf, n, -EPROTO, "no call on stream 3");
	assert_int_equal(p->seen.n, 0);
	p->m = ttrpc_mux_free(p->m); /* d lives on this stack */
	assert_int_equal(d.n, 1);
}

static void test_ttrpc_rejects_undecodable_bodies(void **state)
{
	struct plugin *p = *state;
	static const uint8_t junk[] = { 0x0a, 0x7f, 'x' }; /* field 1, length past the end */
	uint8_t buf[64];
	size_t n;
	struct done d = { 0 };

	plugin_mux(p);
	n = frame(buf, 1, 1, TTRPC_TYPE_REQUEST, 0, junk, sizeof(junk));
	assert_feed_fails(p, buf, n, -EPROTO, "undecodable request");

	ttrpc_mux_free(p->m);
	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), 0);
	n = frame(buf, 2, 1, TTRPC_TYPE_RESPONSE, 0, junk, sizeof(junk));
	assert_feed_fails(p, buf, n, -EPROTO, "undecodable response");
	assert_int_equal(d.n, 0);
	p->m = ttrpc_mux_free(p->m); /* the pending call ends now */
	assert_int_equal(d.n, 1);
	assert_int_equal(d.r, -ECONNRESET);
}

static void test_ttrpc_truncated_input_waits_and_frees_cleanly(void **state)
{
	struct plugin *p = *state;
	uint8_t body[64], buf[256];
	size_t bl = request_body(body, "s", "m", (const uint8_t *)"abc", 3);
	size_t n = frame(buf, 1, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);

	plugin_mux(p);
	/* all but the last byte: nothing dispatched, nothing wrong yet */
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n - 1), 0);
	assert_int_equal(p->seen.n, 0);
	assert_false(ttrpc_mux_is_dead(p->m));
	/* teardown frees the half-read body (valgrind / ASan check it) */
}

static int stop_now(void *ud, const struct ttrpc_request *rq)
{
	return -ESHUTDOWN;
}

static void test_ttrpc_request_callback_error_stops_feeding(void **state)
{
	static const struct ttrpc_mux_ops ops = { .write = p_write, .request = stop_now };
	struct plugin *p = *state;
	uint8_t body[64], buf[256];
	size_t bl = request_body(body, "s", "m", NULL, 0), n = 0;

	assert_int_equal(ttrpc_mux_new(1, 2, &ops, p, &p->m), 0);
	n += frame(buf + n, 1, 1, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	n += frame(buf + n, 1, 3, TTRPC_TYPE_REQUEST, 0, body, (uint32_t)bl);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), -ESHUTDOWN);
	assert_true(ttrpc_mux_is_dead(p->m));
}

/* ---- calls: deadlines, limits, teardown ---------------------------------------------------- */

static void test_ttrpc_expired_call_fails_and_late_reply_is_dropped(void **state)
{
	struct plugin *p = *state;
	struct done d1 = { 0 }, d2 = { 0 };
	uint8_t buf[32];
	size_t n;
	int64_t dl;

	plugin_mux(p);
	assert_int_equal(ttrpc_mux_next_deadline(p->m), -1);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 100, on_done, &d1, NULL), 0);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d2, NULL), 0);
	dl = ttrpc_mux_next_deadline(p->m);
	assert_true(dl >= ttrpc_now_ms() + 50 && dl <= ttrpc_now_ms() + 100);
	assert_int_equal(ttrpc_mux_expire(p->m, dl - 1), 0);
	assert_int_equal(ttrpc_mux_expire(p->m, dl), 1);
	assert_int_equal(d1.n, 1);
	assert_int_equal(d1.r, -ETIMEDOUT);
	assert_int_equal(ttrpc_mux_next_deadline(p->m), -1);
	assert_int_equal(ttrpc_mux_expire(p->m, INT64_MAX), 0); /* no deadline on call 2 */
	assert_int_equal(ttrpc_mux_pending(p->m), 2);
	/* the late reply to call 1 is swallowed, not a protocol error */
	n = frame(buf, 2, 1, TTRPC_TYPE_RESPONSE, 0, NULL, 0);
	assert_int_equal(ttrpc_mux_feed(p->m, buf, n), 0);
	assert_int_equal(d1.n, 1);
	assert_int_equal(ttrpc_mux_pending(p->m), 1);
	p->m = ttrpc_mux_free(p->m);
	assert_int_equal(d2.n, 1);
	assert_int_equal(d2.r, -ECONNRESET);
}

static void test_ttrpc_limits_pending_calls(void **state)
{
	struct plugin *p = *state;
	struct done d = { 0 };

	plugin_mux(p);
	for (unsigned i = 0; i < TTRPC_CALLS_MAX; i++)
		assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), 0);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", NULL, 0, 0, on_done, &d, NULL), -EBUSY);
	p->m = ttrpc_mux_free(p->m);
	assert_int_equal(d.n, TTRPC_CALLS_MAX);
}

static void test_ttrpc_rejects_oversized_outgoing_payload(void **state)
{
	struct plugin *p = *state;
	struct done d = { 0 };
	uint8_t b = 0;
	size_t over = TTRPC_MSG_MAX + 1;

	plugin_mux(p);
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", &b, over, 0, on_done, &d, NULL), -E2BIG);
	assert_int_equal(ttrpc_mux_reply(p->m, 1, TTRPC_OK, NULL, &b, over), -E2BIG);
	assert_int_equal(p->out.len, 0);
}

static void test_ttrpc_write_failure_kills_the_mux(void **state)
{
	struct plugin *p = *state;
	static uint8_t payload[6000];
	struct done d = { 0 };

	plugin_mux(p);
	p->out.fail_after = 1; /* the second frame fails */
	assert_int_equal(ttrpc_mux_call(p->m, "s", "m", payload, sizeof(payload), 0, on_done, &d,
					NULL),
			 -EIO);
	assert_true(ttrpc_mux_is_dead(p->m));
	assert_int_equal(ttrpc_mux_pending(p->m), 0);
	assert_int_equal(d.n, 0);
}

static void test_ttrpc_new_rejects_bad_conn_ids(void **state)
{
	static const struct ttrpc_mux_ops ops = { .write = p_write };
	struct ttrpc_mux *m = NULL;

	assert_int_equal(ttrpc_mux_new(1, 1, &ops, NULL, &m), -EINVAL);
	assert_int_equal(ttrpc_mux_new(0, 2, &ops, NULL, &m), -EINVAL);
	assert_int_equal(ttrpc_mux_new(1, 2, NULL, NULL, &m), -EINVAL);
	assert_null(m);
	assert_null(ttrpc_mux_free(NULL));
}

static void test_ttrpc_budget_allocator_caps_decoding(void **state)
{
	Ttrpc__Request rq = TTRPC__REQUEST__INIT, *out;
	static uint8_t payload[5000], body[6000];
	struct ttrpc_pb_alloc a;
	size_t bl;

	rq.service = "s";
	rq.method = "m";
	rq.payload.data = payload;
	rq.payload.len = sizeof(payload);
	bl = ttrpc__request__pack(&rq, body);
	ttrpc_pb_alloc_init(&a, 4096);
	assert_null(ttrpc__request__unpack(&a.base, bl, body));
	assert_int_equal(a.used, 0);
	ttrpc_pb_alloc_init(&a, 16384);
	out = ttrpc__request__unpack(&a.base, bl, body);
	assert_non_null(out);
	assert_true(a.used >= sizeof(payload));
	ttrpc__request__free_unpacked(out, &a.base);
	assert_int_equal(a.used, 0);
}

static void test_ttrpc_code_names(void **state)
{
	assert_string_equal(ttrpc_code_name(TTRPC_UNIMPLEMENTED), "UNIMPLEMENTED");
	assert_string_equal(ttrpc_code_name(0), "OK");
	assert_string_equal(ttrpc_code_name(99), "CODE_99");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, plugin_setup, plugin_teardown)
	const struct CMUnitTest tests[] = {
		T(test_ttrpc_call_writes_register_plugin_like_the_wire_doc),
		T(test_ttrpc_serves_configure_like_the_wire_doc),
		T(test_ttrpc_feed_accepts_one_byte_at_a_time),
		T(test_ttrpc_feed_handles_coalesced_frames),
		T(test_ttrpc_reassembles_a_message_across_frames_per_conn),
		T(test_ttrpc_writes_frames_of_at_most_4096_bytes),
		T(test_ttrpc_call_roundtrip_with_odd_increasing_stream_ids),
		T(test_ttrpc_error_status_reaches_the_caller),
		T(test_ttrpc_status_present_with_code_zero_is_ok),
		T(test_ttrpc_no_request_handler_answers_unimplemented),
		T(test_ttrpc_rejects_unknown_conn_ids),
		T(test_ttrpc_rejects_oversized_mux_frame_before_reading_it),
		T(test_ttrpc_rejects_oversized_message_from_its_header),
		T(test_ttrpc_answers_bad_request_stream_ids_and_goes_on),
		T(test_ttrpc_refuses_the_id_of_a_request_in_flight),
		T(test_ttrpc_refused_body_is_skipped_across_frames),
		T(test_ttrpc_refusal_that_cannot_be_written_ends_the_mux),
		T(test_ttrpc_rejects_wrong_message_types_per_conn),
		T(test_ttrpc_rejects_undecodable_bodies),
		T(test_ttrpc_truncated_input_waits_and_frees_cleanly),
		T(test_ttrpc_request_callback_error_stops_feeding),
		T(test_ttrpc_expired_call_fails_and_late_reply_is_dropped),
		T(test_ttrpc_limits_pending_calls),
		T(test_ttrpc_rejects_oversized_outgoing_payload),
		T(test_ttrpc_write_failure_kills_the_mux),
		T(test_ttrpc_new_rejects_bad_conn_ids),
		T(test_ttrpc_budget_allocator_caps_decoding),
		T(test_ttrpc_code_names),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
