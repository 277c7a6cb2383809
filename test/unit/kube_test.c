/* kube: the pure parts (line splitter, strict JSON, Status, watch events,
 * errno table, query encoding) and the asynchronous client end to end against
 * an in-process libevent evhttp server on the same loop (plain http, allowed
 * insecure): retries, Retry-After, 401 + token rotation, watches across
 * chunks, back-pressure, caps, timeouts, cancel and free from callbacks, and
 * trace output without the token. TLS is covered by test/integration. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "core/claimsource.h"
#include "kube/claims.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/errbuf.h"
#include "lib/log.h"

static char *read_fixture(const char *name, size_t *len)
{
	char path[256];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "test/data/kube/%s", name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

/* ---- line splitter ------------------------------------------------------------------- */

static void expect_line(struct kube_lines *l, const char *want)
{
	char *line;
	size_t n;

	assert_int_equal(kube_lines_next(l, &line, &n), 1);
	assert_int_equal(n, strlen(want));
	assert_string_equal(line, want);
}

static void expect_no_line(struct kube_lines *l)
{
	char *line;
	size_t n;

	assert_int_equal(kube_lines_next(l, &line, &n), 0);
}

static void test_kube_lines_joins_partial_chunks(void **st)
{
	struct kube_lines l;

	kube_lines_init(&l, 64);
	assert_int_equal(kube_lines_feed(&l, "", 0), 0); /* empty write before any buffer */
	expect_no_line(&l);
	assert_int_equal(kube_lines_feed(&l, "{\"a\":", 5), 0);
	expect_no_line(&l);
	assert_int_equal(kube_lines_feed(&l, "1}\n{\"b\"", 7), 0);
	expect_line(&l, "{\"a\":1}");
	expect_no_line(&l);
	assert_int_equal(kube_lines_feed(&l, ":2}\r\n\n\r\n{}\n", 11), 0);
	expect_line(&l, "{\"b\":2}");
	expect_line(&l, "{}"); /* empty and bare-CR lines skipped */
	expect_no_line(&l);
	assert_int_equal(kube_lines_pending(&l), 0);
	kube_lines_done(&l);
}

static void test_kube_lines_byte_by_byte(void **st)
{
	const char *s = "first\nsecond line\r\nthird\n";
	const char *want[] = { "first", "second line", "third" };
	struct kube_lines l;
	size_t got = 0;

	kube_lines_init(&l, 32);
	for (size_t i = 0; s[i]; i++) {
		char *line;
		size_t n;

		assert_int_equal(kube_lines_feed(&l, s + i, 1), 0);
		while (kube_lines_next(&l, &line, &n) == 1)
			assert_string_equal(line, want[got++]);
	}
	assert_int_equal(got, 3);
	kube_lines_done(&l);
}

static void test_kube_lines_caps_line_length_sticky(void **st)
{
	struct kube_lines l;

	kube_lines_init(&l, 8);
	/* exactly max_line is fine, including across feeds */
	assert_int_equal(kube_lines_feed(&l, "1234", 4), 0);
	assert_int_equal(kube_lines_feed(&l, "5678\nabc", 8), 0);
	expect_line(&l, "12345678");
	/* a partial line growing past the cap fails, and keeps failing */
	assert_int_equal(kube_lines_feed(&l, "defghi", 6), -E2BIG);
	assert_int_equal(kube_lines_feed(&l, "\n", 1), -E2BIG);
	assert_int_equal(kube_lines_pending(&l), 3); /* nothing taken from a bad feed */
	kube_lines_done(&l);

	kube_lines_init(&l, 8);
	assert_int_equal(kube_lines_feed(&l, "ok\n123456789\nok\n", 16), -E2BIG);
	expect_no_line(&l);
	kube_lines_done(&l);
}

static void test_kube_lines_buffer_stays_bounded(void **st)
{
	struct kube_lines l;
	char chunk[100];

	kube_lines_init(&l, 200);
	memset(chunk, 'x', sizeof(chunk));
	chunk[sizeof(chunk) - 1] = '\n';
	for (int i = 0; i < 10000; i++) {
		char *line;
		size_t n;

		/* 1.5 lines per feed, drained each time: the buffer never creeps */
		assert_int_equal(kube_lines_feed(&l, chunk, sizeof(chunk)), 0);
		assert_int_equal(kube_lines_feed(&l, chunk, sizeof(chunk) / 2), 0);
		while (kube_lines_next(&l, &line, &n) == 1)
			assert_true(n == 99 || n == 149);
	}
	assert_true(l.cap <= 4096);
	kube_lines_done(&l);
}

static void test_kube_lines_gives_back_a_buffer_grown_for_a_large_line(void **st)
{
	struct kube_lines l;
	size_t big = 100000;
	char *line, *data = malloc(big + 1);
	size_t n;

	memset(data, 'x', big);
	data[big] = '\n';
	kube_lines_init(&l, 200000);
	assert_int_equal(kube_lines_feed(&l, data, big + 1), 0);
	assert_true(l.cap > big);
	assert_int_equal(kube_lines_next(&l, &line, &n), 1);
	assert_int_equal(n, big);
	/* drained: the next feed starts from a small buffer again */
	assert_int_equal(kube_lines_feed(&l, "{}\n", 3), 0);
	assert_true(l.cap <= KUBE_LINES_KEEP);
	expect_line(&l, "{}");
	/* a partial large line keeps its buffer until it is complete */
	assert_int_equal(kube_lines_feed(&l, data, big), 0);
	assert_int_equal(kube_lines_feed(&l, "\n", 1), 0);
	assert_int_equal(kube_lines_next(&l, &line, &n), 1);
	assert_int_equal(n, big);
	kube_lines_done(&l);
	free(data);
}

static void test_kube_lines_garbage_is_just_bytes(void **st)
{
	struct kube_lines l;
	const char g[] = "\x00\xff\x01{\n\x80\x80\n";

	kube_lines_init(&l, 16);
	assert_int_equal(kube_lines_feed(&l, g, sizeof(g) - 1), 0);
	{
		char *line;
		size_t n;

		assert_int_equal(kube_lines_next(&l, &line, &n), 1);
		assert_int_equal(n, 4);
		assert_memory_equal(line, "\x00\xff\x01{", 4);
		assert_int_equal(kube_lines_next(&l, &line, &n), 1);
		assert_int_equal(n, 2);
	}
	kube_lines_done(&l);
}

/* ---- JSON, Status, events ------------------------------------------------------------ */

static void assert_json_rejects(const char *s, size_t n)
{
	struct json_object *o = (void *)0x1;

	if (kube_json_parse(s, n, &o) != -EPROTO)
		fail_msg("accepted: '%.*s'", (int)n, s);
	assert_ptr_equal(o, (void *)0x1);
}

static void test_kube_json_parse_strict(void **st)
{
	struct json_object *o = NULL;
	char deep[200];
	int d;

	assert_int_equal(kube_json_parse(" {\"a\":[1,2]}\r\n ", 15, &o), 0);
	assert_true(json_object_is_type(o, json_type_object));
	json_object_put(o);
	assert_int_equal(kube_json_parse("[]", 2, &o), 0);
	json_object_put(o);

	assert_json_rejects("", 0);
	assert_json_rejects("   ", 3);
	assert_json_rejects("123", 3);
	assert_json_rejects("null", 4);
	assert_json_rejects("\"s\"", 3);
	assert_json_rejects("{}x", 3);
	assert_json_rejects("{} {}", 5);
	assert_json_rejects("{", 1);
	/* json-c 0.16 accepts single-quoted keys even in strict mode: harmless from a
	 * server, and not worth a pre-scan of every byte. */
	assert_json_rejects("{\"a\":1,}", 8);
	assert_json_rejects("{\"a\":\"\xff\"}", 9);
	assert_json_rejects("{\"a\":\"\0\"}", 9);
	assert_json_rejects("{\"a\":1}", 8); /* the NUL terminator counted: a raw NUL */
	/* the escaped NUL too, in a value or a key: json-c cuts the string there */
	assert_json_rejects("{\"a\":\"x\\u0000y\"}", 16);
	assert_json_rejects("{\"a\\u0000b\":1}", 14);
	assert_json_rejects("{\"a\":\"\\\\\\u0000\"}", 16);
	/* an escaped backslash then u0000 is the text \u0000: accepted */
	assert_int_equal(kube_json_parse("{\"a\":\"\\\\u0000\"}", 15, &o), 0);
	assert_int_equal(json_object_get_string_len(json_object_object_get(o, "a")), 6);
	json_object_put(o);
	assert_int_equal(kube_json_parse("{\"a\":\"\\u0001\"}", 14, &o), 0);
	json_object_put(o);

	/* depth: 64 nested arrays parse, 65 do not */
	for (d = 0; d < 64; d++)
		deep[d] = '[';
	for (d = 0; d < 64; d++)
		deep[64 + d] = ']';
	assert_int_equal(kube_json_parse(deep, 128, &o), 0);
	json_object_put(o);
	memmove(deep + 1, deep, 128);
	deep[129] = ']';
	assert_json_rejects(deep, 130);
}

static void test_kube_status_parse_fixtures(void **st)
{
	struct json_object *o;
	struct kube_status s;
	size_t n;
	char *t;

	t = read_fixture("status-404.json", &n);
	assert_int_equal(kube_json_parse(t, n, &o), 0);
	assert_int_equal(kube_status_parse(o, &s), 0);
	assert_int_equal(s.code, 404);
	assert_string_equal(s.reason, "NotFound");
	assert_string_equal(s.status, "Failure");
	assert_string_equal(s.message, "resourceclaims.resource.k8s.io \"db\" not found");
	assert_int_equal(s.retry_after_s, -1);
	json_object_put(o);
	free(t);

	t = read_fixture("status-429.json", &n);
	assert_int_equal(kube_json_parse(t, n, &o), 0);
	assert_int_equal(kube_status_parse(o, &s), 0);
	assert_int_equal(s.code, 429);
	assert_int_equal(s.retry_after_s, 3);
	json_object_put(o);
	free(t);

	t = read_fixture("status-422.json", &n);
	assert_int_equal(kube_json_parse(t, n, &o), 0);
	assert_int_equal(kube_status_parse(o, &s), 0);
	assert_string_equal(s.reason, "Invalid");
	assert_int_equal(kube_errno_from_http(s.code, s.reason), -EINVAL);
	json_object_put(o);
	free(t);

	t = read_fixture("status-409-conflict.json", &n);
	assert_int_equal(kube_json_parse(t, n, &o), 0);
	assert_int_equal(kube_status_parse(o, &s), 0);
	assert_int_equal(kube_errno_from_http(s.code, s.reason), -EBUSY);
	json_object_put(o);
	free(t);
}

static void test_kube_status_parse_rejects_non_status(void **st)
{
	struct json_object *o;
	struct kube_status s = { .code = 7 };
	size_t n;
	char *t = read_fixture("slice-list.json", &n);

	assert_int_equal(kube_json_parse(t, n, &o), 0);
	assert_int_equal(kube_status_parse(o, &s), -EPROTO);
	assert_int_equal(s.code, 7);
	json_object_put(o);
	free(t);
	assert_int_equal(kube_status_parse(NULL, &s), -EPROTO);

	/* no kind, but status + code: still a Status (what some proxies send) */
	t = "{\"status\":\"Failure\",\"code\":500,\"reason\":7}";
	assert_int_equal(kube_json_parse(t, strlen(t), &o), 0);
	assert_int_equal(kube_status_parse(o, &s), 0);
	assert_int_equal(s.code, 500);
	assert_null(s.reason); /* wrong type: absent, not a crash */
	json_object_put(o);
	t = "{\"kind\":\"Status\",\"code\":99999,\"details\":{\"retryAfterSeconds\":100000}}";
	assert_int_equal(kube_json_parse(t, strlen(t), &o), 0);
	assert_int_equal(kube_status_parse(o, &s), 0);
	assert_int_equal(s.code, 0);
	assert_int_equal(s.retry_after_s, KUBE_RETRY_AFTER_MAX_S);
	json_object_put(o);
}

static void test_kube_errno_table(void **st)
{
	assert_int_equal(kube_errno_from_http(200, NULL), 0);
	assert_int_equal(kube_errno_from_http(201, NULL), 0);
	assert_int_equal(kube_errno_from_http(400, NULL), -EINVAL);
	assert_int_equal(kube_errno_from_http(401, NULL), -EACCES);
	assert_int_equal(kube_errno_from_http(403, NULL), -EPERM);
	assert_int_equal(kube_errno_from_http(404, NULL), -ENOENT);
	assert_int_equal(kube_errno_from_http(405, NULL), -EOPNOTSUPP);
	assert_int_equal(kube_errno_from_http(409, "AlreadyExists"), -EEXIST);
	assert_int_equal(kube_errno_from_http(409, "Conflict"), -EBUSY);
	assert_int_equal(kube_errno_from_http(409, NULL), -EBUSY);
	assert_int_equal(kube_errno_from_http(410, "Expired"), -ESTALE);
	assert_int_equal(kube_errno_from_http(413, NULL), -E2BIG);
	assert_int_equal(kube_errno_from_http(422, "Invalid"), -EINVAL);
	assert_int_equal(kube_errno_from_http(429, NULL), -EAGAIN);
	assert_int_equal(kube_errno_from_http(418, NULL), -EPROTO);
	assert_int_equal(kube_errno_from_http(500, NULL), -EIO);
	assert_int_equal(kube_errno_from_http(503, NULL), -EAGAIN);
	assert_int_equal(kube_errno_from_http(504, NULL), -ETIMEDOUT);
	assert_int_equal(kube_errno_from_http(302, NULL), -EPROTO);
}

static void test_kube_is_expired(void **st)
{
	struct kube_result r = { .retry_after_s = -1 };

	assert_false(kube_is_expired(&r));
	r.http_status = 410;
	assert_true(kube_is_expired(&r));
	r.http_status = 200;
	r.status.code = 410;
	assert_true(kube_is_expired(&r));
	r.status.code = 0;
	r.status.reason = "Gone";
	assert_true(kube_is_expired(&r));
	r.status.reason = "Conflict";
	assert_false(kube_is_expired(&r));
}

static void test_kube_watch_event_parse_recorded_stream(void **st)
{
	static const enum kube_event_type want[] = { KUBE_EVENT_ADDED, KUBE_EVENT_MODIFIED,
						     KUBE_EVENT_BOOKMARK, KUBE_EVENT_DELETED,
						     KUBE_EVENT_ERROR };
	static const char *const rv[] = { "1201", "1207", "1302", "1310", NULL };
	struct kube_lines l;
	size_t n, i = 0;
	char *t = read_fixture("watch-stream.jsonl", &n), *line;

	kube_lines_init(&l, 4096);
	assert_int_equal(kube_lines_feed(&l, t, n), 0);
	while (kube_lines_next(&l, &line, &n) == 1) {
		struct kube_watch_event ev;

		assert_int_equal(kube_watch_event_parse(line, n, &ev), 0);
		assert_int_equal(ev.type, want[i]);
		if (rv[i])
			assert_string_equal(ev.resource_version, rv[i]);
		else
			assert_null(ev.resource_version);
		assert_true(json_object_is_type(ev.object, json_type_object));
		if (ev.type == KUBE_EVENT_ERROR) {
			struct kube_status s;

			assert_int_equal(kube_status_parse(ev.object, &s), 0);
			assert_int_equal(s.code, 410);
			assert_string_equal(s.reason, "Expired");
		}
		kube_watch_event_done(&ev);
		assert_null(ev.root);
		i++;
	}
	assert_int_equal(i, 5);
	kube_lines_done(&l);
	free(t);
}

static void test_kube_watch_event_parse_rejects(void **st)
{
	static const char *const bad[] = {
		"{}",
		"[]",
		"{\"type\":\"ADDED\"}",
		"{\"type\":\"ADDED\",\"object\":[]}",
		"{\"type\":\"ADDED\",\"object\":\"x\"}",
		"{\"type\":\"added\",\"object\":{}}",
		"{\"type\":\"RESTARTED\",\"object\":{}}",
		"{\"type\":1,\"object\":{}}",
		"not json",
		"{\"type\":\"ADDED\",\"object\":{}} trailing",
	};
	struct kube_watch_event ev = { .type = KUBE_EVENT_BOOKMARK };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (kube_watch_event_parse(bad[i], strlen(bad[i]), &ev) != -EPROTO)
			fail_msg("accepted %s", bad[i]);
		assert_int_equal(ev.type, KUBE_EVENT_BOOKMARK); /* untouched */
	}
	/* metadata of the wrong type: fine, just no resourceVersion */
	{
		const char *m = "{\"type\":\"ADDED\",\"object\":{\"metadata\":3}}";

		assert_int_equal(kube_watch_event_parse(m, strlen(m), &ev), 0);
	}
	assert_null(ev.resource_version);
	kube_watch_event_done(&ev);
}

static void test_kube_query_add_encodes(void **st)
{
	char *p = strdup("/apis/resource.k8s.io/v1/resourceslices");

	assert_int_equal(kube_query_add(&p, "fieldSelector", "spec.nodeName=node-1,spec.driver=dra.cpu"),
			 0);
	assert_int_equal(kube_query_add(&p, "limit", "500"), 0);
	assert_int_equal(kube_query_add(&p, "continue", "a b/c?&=~"), 0);
	assert_string_equal(p, "/apis/resource.k8s.io/v1/resourceslices"
			       "?fieldSelector=spec.nodeName%3Dnode-1%2Cspec.driver%3Ddra.cpu"
			       "&limit=500&continue=a%20b%2Fc%3F%26%3D~");
	free(p);
	p = NULL;
	assert_int_equal(kube_query_add(&p, "watch", "1"), 0);
	assert_string_equal(p, "?watch=1");
	free(p);
}

/* ---- the client against an in-process evhttp server ---------------------------------- */

struct srv {
	struct event_base *base;
	struct evhttp *http;
	int port;
	int hits;	       /* requests seen by the counting handlers */
	int throttle;	       /* /throttle: 429s still to send */
	char last_method[16];
	char last_body[512];
	char last_ctype[128];
	char last_auth[256];
	/* /slow: never answered. libevent 2.1 detaches (does not free) a request
	 * whose client hangs up first; completing it then frees it. */
	struct evhttp_request *hung[8];
	int n_hung;
	/* /watch scripts: chunks sent one per timer tick */
	const char *const *chunks;
	int n_chunks, next_chunk;
	struct evhttp_request *stream;
	struct event *chunk_ev;
	char *big; /* a large chunk for back-pressure */
};

struct fix {
	struct srv srv;
	struct event_base *base;
	struct kube *k;
	char dir[64];
	char token_path[128];
	/* what callbacks saw */
	int done;
	struct kube_result res;
	char body_kind[64];
	char status_reason[64];
	char warning[256];
	char text[512];
	long elapsed_ms;
	int events;
	enum kube_event_type types[512];
	char rvs[8][16];
	int ends;
	int ticks;
	struct timespec t0;
};

static long since_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void reply_json(struct evhttp_request *req, int code, const char *body)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add(b, body, strlen(body));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, code, code == 200 ? "OK" : "Err", b);
	evbuffer_free(b);
}

static void send_next_chunk(evutil_socket_t fd, short what, void *arg)
{
	struct srv *s = arg;
	struct evbuffer *b;
	struct timeval tv = { 0, 20000 };

	if (!s->stream)
		return;
	if (s->next_chunk == s->n_chunks) {
		evhttp_send_reply_end(s->stream);
		s->stream = NULL;
		return;
	}
	b = evbuffer_new();
	if (strcmp(s->chunks[s->next_chunk], "@big") == 0)
		evbuffer_add(b, s->big, strlen(s->big));
	else
		evbuffer_add(b, s->chunks[s->next_chunk], strlen(s->chunks[s->next_chunk]));
	s->next_chunk++;
	evhttp_send_reply_chunk(s->stream, b);
	evbuffer_free(b);
	evtimer_add(s->chunk_ev, &tv);
}

static void on_stream_closed(struct evhttp_connection *con, void *arg)
{
	struct srv *s = arg;

	/* Detached by a client hang-up: ours to complete (which frees it). From
	 * evhttp_free() it is still attached and freed with the connection. */
	if (s->stream && !evhttp_request_get_connection(s->stream))
		evhttp_send_reply_end(s->stream);
	s->stream = NULL;
}

static void srv_handle(struct evhttp_request *req, void *arg)
{
	struct srv *s = arg;
	const char *uri = evhttp_request_get_uri(req);
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evbuffer *body = evhttp_request_get_input_buffer(req);
	const char *h;
	size_t n;

	s->hits++;
	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_GET: strcpy(s->last_method, "GET"); break;
	case EVHTTP_REQ_POST: strcpy(s->last_method, "POST"); break;
	case EVHTTP_REQ_PUT: strcpy(s->last_method, "PUT"); break;
	case EVHTTP_REQ_PATCH: strcpy(s->last_method, "PATCH"); break;
	case EVHTTP_REQ_DELETE: strcpy(s->last_method, "DELETE"); break;
	default: strcpy(s->last_method, "?");
	}
	n = evbuffer_get_length(body);
	if (n >= sizeof(s->last_body))
		n = sizeof(s->last_body) - 1;
	evbuffer_copyout(body, s->last_body, n);
	s->last_body[n] = 0;
	h = evhttp_find_header(in, "Content-Type");
	snprintf(s->last_ctype, sizeof(s->last_ctype), "%s", h ? h : "");
	h = evhttp_find_header(in, "Authorization");
	snprintf(s->last_auth, sizeof(s->last_auth), "%s", h ? h : "");

	if (strcmp(uri, "/ok") == 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Warning",
				  "299 - \"unknown field \\\"spec.x\\\"\"");
		reply_json(req, 200, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}\n");
	} else if (strcmp(uri, "/created") == 0) {
		reply_json(req, 201, "{\"kind\":\"ResourceSlice\"}");
	} else if (strcmp(uri, "/notfound") == 0) {
		char *t = read_fixture("status-404.json", NULL);

		reply_json(req, 404, t);
		free(t);
	} else if (strcmp(uri, "/throttle") == 0) {
		if (s->throttle > 0) {
			s->throttle--;
			evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
			reply_json(req, 429, "{\"kind\":\"Status\",\"code\":429,\"reason\":"
					     "\"TooManyRequests\",\"status\":\"Failure\"}");
		} else {
			reply_json(req, 200, "{\"kind\":\"Node\"}");
		}
	} else if (strcmp(uri, "/unavailable") == 0) {
		reply_json(req, 503, "{\"kind\":\"Status\",\"code\":503,\"reason\":"
				     "\"ServiceUnavailable\",\"status\":\"Failure\"}");
	} else if (strcmp(uri, "/error500") == 0) {
		reply_json(req, 500, "<html>oops</html>");
	} else if (strcmp(uri, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1") == 0) {
		reply_json(req, 200, "{\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"c1\"}}");
	} else if (strcmp(uri, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/down") ==
		   0) {
		reply_json(req, 503, "{\"kind\":\"Status\",\"code\":503,\"reason\":"
				     "\"ServiceUnavailable\",\"status\":\"Failure\"}");
	} else if (strcmp(uri, "/auth") == 0) {
		h = evhttp_find_header(in, "Authorization");
		if (h && strcmp(h, "Bearer good-token") == 0)
			reply_json(req, 200, "{\"kind\":\"Node\"}");
		else
			reply_json(req, 401, "{\"kind\":\"Status\",\"code\":401,\"reason\":"
					     "\"Unauthorized\",\"status\":\"Failure\",\"message\":"
					     "\"Unauthorized\"}");
	} else if (strcmp(uri, "/deny") == 0) {
		reply_json(req, 401, "{\"kind\":\"Status\",\"code\":401,\"reason\":"
				     "\"Unauthorized\",\"status\":\"Failure\"}");
	} else if (strcmp(uri, "/slow") == 0) {
		if (s->n_hung < 8)
			s->hung[s->n_hung++] = req;
	} else if (strcmp(uri, "/big") == 0) {
		char *b = malloc(8192);

		memset(b, ' ', 8191);
		b[0] = '{';
		b[8190] = '}';
		b[8191] = 0;
		reply_json(req, 200, b);
		free(b);
	} else if (strcmp(uri, "/garbage") == 0) {
		reply_json(req, 200, "this is not json");
	} else if (strcmp(uri, "/empty") == 0) {
		reply_json(req, 200, "");
	} else if (strncmp(uri, "/watch-silent", 13) == 0) {
		/* headers, then nothing: a stream a proxy or server lost */
		s->stream = req;
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "application/json;stream=watch");
		evhttp_send_reply_start(req, 200, "OK");
		evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_stream_closed,
					      s);
	} else if (strncmp(uri, "/watch", 6) == 0 && s->chunks) {
		struct timeval tv = { 0, 1000 };

		s->stream = req;
		s->next_chunk = 0;
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
				  "application/json;stream=watch");
		evhttp_send_reply_start(req, 200, "OK");
		evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_stream_closed,
					      s);
		evtimer_add(s->chunk_ev, &tv);
	} else if (strncmp(uri, "/watch-forbidden", 16) == 0) {
		reply_json(req, 403, "{\"kind\":\"Status\",\"code\":403,\"reason\":\"Forbidden\","
				     "\"status\":\"Failure\",\"message\":\"no\"}");
	} else {
		reply_json(req, 404, "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\","
				     "\"status\":\"Failure\"}");
	}
}

static bool run_until(struct fix *f, int *flag, int want, int ms);

static void write_token(struct fix *f, const char *tok)
{
	FILE *fp = fopen(f->token_path, "w");

	assert_non_null(fp);
	fprintf(fp, "%s\n", tok);
	fclose(fp);
}

static struct kube *client_new(struct fix *f, const struct kube_opts *o)
{
	char yaml[512];
	struct errbuf err = { "" };
	struct kubeconfig *cfg = NULL;
	struct kube *k = NULL;

	snprintf(yaml, sizeof(yaml),
		 "current-context: t\n"
		 "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
		 "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
		 "users: [{name: u, user: {tokenFile: '%s'}}]\n",
		 f->srv.port, f->token_path);
	if (kubeconfig_parse(yaml, strlen(yaml), NULL, NULL, KUBECONFIG_ALLOW_INSECURE, &cfg,
			     &err) < 0)
		fail_msg("kubeconfig: %s", err.s);
	assert_int_equal(kube_new(f->base, cfg, o, &k), 0);
	kubeconfig_free(cfg);
	return k;
}

static int setup_loop(void **st)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	f->base = event_base_new();
	f->srv.base = f->base;
	f->srv.http = evhttp_new(f->base);
	evhttp_set_allowed_methods(f->srv.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
							EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(f->srv.http, srv_handle, &f->srv);
	bs = evhttp_bind_socket_with_handle(f->srv.http, "127.0.0.1", 0);
	assert_non_null(bs);
	assert_int_equal(getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &sl),
			 0);
	f->srv.port = ntohs(sin.sin_port);
	f->srv.chunk_ev = evtimer_new(f->base, send_next_chunk, &f->srv);
	strcpy(f->dir, "/tmp/kube_test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->token_path, sizeof(f->token_path), "%s/token", f->dir);
	write_token(f, "good-token");
	f->res.retry_after_s = -2;
	clock_gettime(CLOCK_MONOTONIC, &f->t0);
	*st = f;
	return 0;
}

static int teardown_loop(void **st)
{
	struct fix *f = *st;
	char cmd[128];

	int zero = 0;

	f->k = kube_free(f->k);
	(void)run_until(f, &zero, 1, 30); /* let the server see the hang-ups */
	for (int i = 0; i < f->srv.n_hung; i++)
		if (!evhttp_request_get_connection(f->srv.hung[i]))
			evhttp_send_reply(f->srv.hung[i], 503, "bye", NULL);
	event_free(f->srv.chunk_ev);
	evhttp_free(f->srv.http);
	event_base_free(f->base);
	free(f->srv.big);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/* Runs the loop until *flag >= want or ms pass; returns whether it got there. */
static bool run_until(struct fix *f, int *flag, int want, int ms)
{
	int expired = 0;
	struct event *d = evtimer_new(f->base, on_deadline, &expired);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(d, &tv);
	while (*flag < want && !expired)
		event_base_loop(f->base, EVLOOP_ONCE);
	event_free(d);
	return *flag >= want;
}

static void on_done(void *ud, const struct kube_result *r)
{
	struct fix *f = ud;
	const char *kind;
	struct json_object *v;

	f->done++;
	f->res = *r;
	f->elapsed_ms = since_ms(&f->t0);
	f->body_kind[0] = f->status_reason[0] = f->warning[0] = 0;
	if (r->body && json_object_object_get_ex(r->body, "kind", &v) &&
	    (kind = json_object_get_string(v)))
		snprintf(f->body_kind, sizeof(f->body_kind), "%s", kind);
	if (r->status.reason)
		snprintf(f->status_reason, sizeof(f->status_reason), "%s", r->status.reason);
	if (r->warning)
		snprintf(f->warning, sizeof(f->warning), "%s", r->warning);
	snprintf(f->text, sizeof(f->text), "%s", r->error_text);
	/* pointers die with the callback */
	f->res.body = NULL;
	f->res.warning = NULL;
	f->res.error_text = NULL;
	f->res.status.reason = f->res.status.message = f->res.status.status = NULL;
}

static void on_done_unexpected(void *ud, const struct kube_result *r)
{
	fail_msg("callback after cancel/free: %s", r->error_text);
}

static void test_kube_get_ok_with_warning(void **st)
{
	struct fix *f = *st;
	struct kube_stats s;

	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done, f, NULL), 0);
	assert_int_equal(f->done, 0); /* never synchronous */
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, 0);
	assert_int_equal(f->res.http_status, 200);
	assert_string_equal(f->body_kind, "Node");
	assert_string_equal(f->warning, "299 - \"unknown field \\\"spec.x\\\"\"");
	assert_string_equal(f->text, "");
	assert_int_equal(f->res.attempts, 1);
	assert_string_equal(f->srv.last_auth, "Bearer good-token");
	assert_string_equal(f->srv.last_method, "GET");
	kube_get_stats(f->k, &s);
	assert_int_equal(s.attempts, 1);
	assert_int_equal(s.failures, 0);
	assert_true(s.bytes_received > 20);
}

static void test_kube_status_error_is_parsed(void **st)
{
	struct fix *f = *st;

	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/notfound", NULL, NULL, on_done, f, NULL),
			 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, -ENOENT);
	assert_int_equal(f->res.http_status, 404);
	assert_int_equal(f->res.status.code, 404);
	assert_string_equal(f->status_reason, "NotFound");
	assert_string_equal(f->body_kind, "Status");
	assert_non_null(strstr(f->text, "HTTP 404 NotFound: resourceclaims.resource.k8s.io"));
}

static void test_kube_write_verbs_send_bodies(void **st)
{
	struct fix *f = *st;
	struct kube_req_opts o = { .precondition_uid = "u-1", .precondition_rv = "42" };

	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_CREATE, "/created", "{\"a\":1}", NULL, on_done, f,
				      NULL),
			 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.http_status, 201);
	assert_int_equal(f->res.error, 0);
	assert_string_equal(f->srv.last_method, "POST");
	assert_string_equal(f->srv.last_body, "{\"a\":1}");
	assert_string_equal(f->srv.last_ctype, "application/json");

	assert_int_equal(kube_request(f->k, KUBE_PATCH, "/ok", "{\"b\":2}", NULL, on_done, f, NULL),
			 0);
	assert_true(run_until(f, &f->done, 2, 5000));
	assert_string_equal(f->srv.last_method, "PATCH");
	assert_string_equal(f->srv.last_ctype, "application/merge-patch+json");

	assert_int_equal(kube_request(f->k, KUBE_UPDATE, "/ok", "{}", NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 3, 5000));
	assert_string_equal(f->srv.last_method, "PUT");

	assert_int_equal(kube_request(f->k, KUBE_DELETE, "/ok", NULL, &o, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 4, 5000));
	assert_string_equal(f->srv.last_method, "DELETE");
	assert_string_equal(f->srv.last_body,
			    "{\"preconditions\":{\"uid\":\"u-1\",\"resourceVersion\":\"42\"},"
			    "\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"}");

	assert_int_equal(kube_request(f->k, KUBE_DELETE, "/ok", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 5, 5000));
	assert_string_equal(f->srv.last_body, "");
}

static void on_event(void *ud, const struct kube_watch_event *ev);
static void on_end(void *ud, const struct kube_result *r);

static void test_kube_request_rejects_bad_arguments(void **st)
{
	struct fix *f = *st;
	struct kube_req_opts neg = { .max_attempts = -1 };
	struct kube_req_opts ct = { .content_type = "text/plain\r\nX-Evil: 1" };

	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "ok", NULL, NULL, on_done, f, NULL), -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/a b", NULL, NULL, on_done, f, NULL),
			 -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/a\r\nHost: x", NULL, NULL, on_done, f, NULL),
			 -EINVAL);
	/* a name from a peer must not climb out of the resource it names */
	static const char *const bad_paths[] = {
		"/apis/events.k8s.io/v1/namespaces/../../api/v1/secrets",
		"/apis/x/namespaces/ns/events/..",
		"/apis/x/namespaces/./events",
		"/apis/x/namespaces//events",
		"/apis/x/namespaces/a%2F..%2Fb/events",
		"/apis/x/namespaces/n\xc3\xa9/events",
		"/apis/x/namespaces/a\\b/events",
	};
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
		assert_int_equal(kube_request(f->k, KUBE_GET, bad_paths[i], NULL, NULL, on_done, f,
					      NULL),
				 -EINVAL);
	assert_int_equal(kube_watch(f->k, "/apis/x/../y?watch=1", NULL, on_event, on_end, f, NULL),
			 -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", "{}", NULL, on_done, f, NULL), -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_CREATE, "/ok", NULL, NULL, on_done, f, NULL),
			 -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, NULL, f, NULL), -EINVAL);
	assert_int_equal(kube_request(f->k, (enum kube_verb)9, "/ok", NULL, NULL, on_done, f, NULL),
			 -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, &neg, on_done, f, NULL), -EINVAL);
	assert_int_equal(kube_request(f->k, KUBE_PATCH, "/ok", "{}", &ct, on_done, f, NULL),
			 -EINVAL);
	assert_int_equal(kube_watch(f->k, "/w", NULL, NULL, NULL, f, NULL), -EINVAL);
	assert_int_equal(kube_new(NULL, NULL, NULL, &f->k), -EINVAL);
	/* nothing was started: no callback ever comes */
	assert_false(run_until(f, &f->done, 1, 100));
}

static void test_kube_retry_after_is_honoured(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .backoff_initial_ms = 10, .backoff_max_ms = 20 };
	struct kube_req_opts o = { .max_attempts = 3 };
	struct kube_stats s;

	f->srv.throttle = 1;
	f->k = client_new(f, &ko);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/throttle", NULL, &o, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, 0);
	assert_int_equal(f->res.attempts, 2);
	/* the backoff alone would have retried after 5-10 ms */
	assert_true(f->elapsed_ms >= 1000);
	assert_true(f->elapsed_ms < 3000);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.retries, 1);
}

static void test_kube_retries_exhausted_report_last_status(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .backoff_initial_ms = 5, .backoff_max_ms = 10 };
	struct kube_req_opts o = { .max_attempts = 3 };

	f->k = client_new(f, &ko);
	assert_int_equal(kube_request(f->k, KUBE_CREATE, "/unavailable", "{}", &o, on_done, f, NULL),
			 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, -EAGAIN);
	assert_int_equal(f->res.attempts, 3);
	assert_int_equal(f->srv.hits, 3);
	assert_string_equal(f->status_reason, "ServiceUnavailable");

	/* 500 is retried for GET only: a POST may have been applied */
	f->srv.hits = 0;
	assert_int_equal(kube_request(f->k, KUBE_CREATE, "/error500", "{}", &o, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 2, 5000));
	assert_int_equal(f->res.error, -EIO);
	assert_int_equal(f->res.attempts, 1);
	assert_non_null(strstr(f->text, "HTTP 500 (no Status body)"));
	assert_int_equal(kube_request(f->k, KUBE_GET, "/error500", NULL, &o, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 3, 5000));
	assert_int_equal(f->res.attempts, 3);
}

/* ---- kube/claims: the claim source over the client ----------------------------------- */

struct claim_got {
	int n;
	char name[64];
	char err[256];
};

static void on_claim(void *ud, struct json_object *claim, const char *err)
{
	struct claim_got *g = ud;
	struct json_object *md, *name;

	g->n++;
	g->name[0] = g->err[0] = 0;
	if (claim && json_object_object_get_ex(claim, "metadata", &md) &&
	    json_object_object_get_ex(md, "name", &name))
		snprintf(g->name, sizeof(g->name), "%s", json_object_get_string(name));
	snprintf(g->err, sizeof(g->err), "%s", err ? err : "");
}

static void test_kube_claims_get_a_claim_retried_three_times(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .backoff_initial_ms = 5, .backoff_max_ms = 10 };
	struct claim_got got = { 0 }, never = { 0 };
	struct kube_claims kc;
	void *h = NULL;

	kube_claims_init(&kc);
	/* no API client yet */
	assert_int_equal(claimsource_start(&kc.source, "default", "c1", 5000, on_claim, &got, &h),
			 -ENOTCONN);
	f->k = client_new(f, &ko);
	kube_claims_set_kube(&kc, f->k);
	assert_int_equal(claimsource_start(&kc.source, "default", "c1", 5000, on_claim, &got, &h),
			 0);
	assert_int_equal(got.n, 0); /* never from inside start */
	assert_true(run_until(f, &got.n, 1, 5000));
	assert_string_equal(got.name, "c1");
	assert_string_equal(got.err, "");
	assert_string_equal(f->srv.last_method, "GET");

	/* 503 every time: three attempts, then the error */
	f->srv.hits = 0;
	assert_int_equal(claimsource_start(&kc.source, "default", "down", 5000, on_claim, &got, &h),
			 0);
	assert_true(run_until(f, &got.n, 2, 5000));
	assert_int_equal(f->srv.hits, KUBE_CLAIMS_ATTEMPTS);
	assert_string_equal(got.name, "");
	assert_non_null(strstr(got.err, "503"));

	/* cancelled: its callback never runs, the next read's does */
	assert_int_equal(claimsource_start(&kc.source, "default", "c1", 5000, on_claim, &never, &h),
			 0);
	claimsource_cancel(&kc.source, h);
	assert_int_equal(claimsource_start(&kc.source, "default", "c1", 5000, on_claim, &got, &h),
			 0);
	assert_true(run_until(f, &got.n, 3, 5000));
	assert_int_equal(never.n, 0);
}

static void test_kube_401_rereads_token_and_retries_once(void **st)
{
	struct fix *f = *st;
	struct kube_stats s;

	write_token(f, "old-token");
	f->k = client_new(f, NULL);
	write_token(f, "good-token"); /* the kubelet rotated it */
	assert_int_equal(kube_request(f->k, KUBE_GET, "/auth", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, 0);
	assert_int_equal(f->res.attempts, 2);
	assert_string_equal(f->srv.last_auth, "Bearer good-token");
	kube_get_stats(f->k, &s);
	assert_int_equal(s.token_reloads, 1);

	/* a 401 that a new token does not fix: one retry, then the 401 */
	f->srv.hits = 0;
	assert_int_equal(kube_request(f->k, KUBE_GET, "/deny", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 2, 5000));
	assert_int_equal(f->res.error, -EACCES);
	assert_int_equal(f->res.attempts, 2);
	assert_int_equal(f->srv.hits, 2);
	assert_string_equal(f->status_reason, "Unauthorized");
	kube_get_stats(f->k, &s);
	assert_int_equal(s.token_reloads, 1); /* re-read, unchanged */

	/* an unreadable token file: the last good token is kept */
	assert_int_equal(unlink(f->token_path), 0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/deny", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 3, 5000));
	assert_int_equal(kube_request(f->k, KUBE_GET, "/auth", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 4, 5000));
	assert_int_equal(f->res.error, 0);
	assert_string_equal(f->srv.last_auth, "Bearer good-token");
	kube_get_stats(f->k, &s);
	assert_int_equal(s.token_read_errors, 1);
}

static void test_kube_new_needs_a_readable_token_file(void **st)
{
	struct fix *f = *st;
	struct kubeconfig *cfg = NULL;
	struct kube *k = (struct kube *)0x1;
	const char *y = "current-context: t\n"
			"contexts: [{name: t, context: {cluster: c, user: u}}]\n"
			"clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
			"users: [{name: u, user: {tokenFile: /nonexistent/token}}]\n";
	struct errbuf err = { "" };

	assert_int_equal(kubeconfig_parse(y, strlen(y), NULL, NULL, 0, &cfg, &err), 0);
	assert_int_equal(kube_new(f->base, cfg, NULL, &k), -ENOENT);
	assert_ptr_equal(k, (void *)0x1);
	kubeconfig_free(cfg);
}

static void test_kube_token_refreshed_periodically(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .token_refresh_ms = 50 };
	int zero = 0;

	f->k = client_new(f, &ko);
	write_token(f, "rotated");
	(void)run_until(f, &zero, 1, 150);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_string_equal(f->srv.last_auth, "Bearer rotated");
}

static void write_file(const char *path, const char *text)
{
	char tmp[256];
	FILE *fp;

	/* replaced whole, as a rotation does (a new inode, never a half-written file) */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fp = fopen(tmp, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	assert_int_equal(rename(tmp, path), 0);
}

#define PEM_CERT(x) "-----BEGIN CERTIFICATE-----\n" x "\n-----END CERTIFICATE-----\n"
#define PEM_KEY(x) "-----BEGIN PRIVATE KEY-----\n" x "\n-----END PRIVATE KEY-----\n"

static struct kube *client_with_cert_files(struct fix *f, char *crt, char *key, size_t n)
{
	char yaml[1024];
	struct errbuf err = { "" };
	struct kubeconfig *cfg = NULL;
	struct kube *k = NULL;
	int r;

	snprintf(crt, n, "%s/client.crt", f->dir);
	snprintf(key, n, "%s/client.key", f->dir);
	snprintf(yaml, sizeof(yaml),
		 "current-context: t\n"
		 "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
		 "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
		 "users: [{name: u, user: {tokenFile: '%s', client-certificate: '%s', "
		 "client-key: '%s'}}]\n",
		 f->srv.port, f->token_path, crt, key);
	assert_int_equal(kubeconfig_parse(yaml, strlen(yaml), NULL, NULL, KUBECONFIG_ALLOW_INSECURE,
					  &cfg, &err),
			 0);
	r = kube_new(f->base, cfg, NULL, &k);
	kubeconfig_free(cfg);
	return r < 0 ? NULL : k;
}

static void get_ok(struct fix *f)
{
	int want = f->done + 1;

	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, want, 5000));
	assert_int_equal(f->res.error, 0);
}

/* Plain http here (TLS is test_kube_client.py's): what is checked is when the
 * files are read again, and that a bad read keeps the pair that worked. */
static void test_kube_client_cert_files_read_again_when_changed(void **st)
{
	struct fix *f = *st;
	char crt[128], key[128];
	struct kube_stats s;

	/* not there yet: no client */
	assert_null(client_with_cert_files(f, crt, key, sizeof(crt)));
	write_file(crt, PEM_CERT("one"));
	write_file(key, PEM_KEY("one"));
	f->k = client_with_cert_files(f, crt, key, sizeof(crt));
	assert_non_null(f->k);
	get_ok(f);
	get_ok(f);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.cert_reloads, 0); /* unchanged files are not read again */

	write_file(crt, PEM_CERT("two, longer"));
	write_file(key, PEM_KEY("two, longer"));
	get_ok(f);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.cert_reloads, 1);
	assert_int_equal(s.cert_read_errors, 0);

	/* caught half-written, then gone: the old pair stays, requests go on */
	write_file(crt, "-----END CERTIFICATE-----\n");
	get_ok(f);
	assert_int_equal(unlink(crt), 0);
	get_ok(f);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.cert_reloads, 1);
	assert_int_equal(s.cert_read_errors, 2);

	/* the rotation completes */
	write_file(crt, PEM_CERT("three"));
	get_ok(f);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.cert_reloads, 2);
	assert_int_equal(s.cert_read_errors, 2);
}

static void test_kube_proxy_select_follows_client_go(void **st)
{
	static const char *const vars[] = { "HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
					    "http_proxy", "NO_PROXY", "no_proxy" };
	static const struct {
		const char *server, *proxy_url, *env[6]; /* values for vars[], NULL = unset */
		const char *want_proxy, *want_noproxy;
	} t[] = {
		{ "https://api.example:6443", NULL, { 0 }, "", "" },
		{ "https://api.example:6443", NULL, { "http://p:3128" }, "http://p:3128", "" },
		{ "https://api.example:6443", NULL, { "p:3128" }, "http://p:3128", "" },
		{ "https://api.example:6443", NULL, { "https://A", "http://b" }, "https://A", "" },
		{ "https://api.example:6443", NULL, { "", "http://b" }, "http://b", "" },
		{ "https://api.example:6443", NULL, { NULL, NULL, "http://h" }, "", "" },
		{ "http://api.example", NULL, { "http://s", NULL, "http://h" }, "http://h", "" },
		{ "http://api.example", NULL, { NULL, NULL, NULL, "http://l" }, "http://l", "" },
		{ "https://api.example", NULL, { "http://p", NULL, NULL, NULL, "a.b,.c", "x" },
		  "http://p", "a.b,.c" },
		{ "https://api.example", NULL, { "http://p", NULL, NULL, NULL, NULL, "x,10.0.0.0/8" },
		  "http://p", "x,10.0.0.0/8" },
		{ "https://api.example", NULL, { "socks5://s:1080" }, "socks5h://s:1080", "" },
		/* never through an environment proxy */
		{ "https://127.0.0.1:6443", NULL, { "http://p" }, "", "" },
		{ "https://127.9.9.9", NULL, { "http://p" }, "", "" },
		{ "https://localhost:6443/k8s", NULL, { "http://p" }, "", "" },
		{ "https://LOCALHOST", NULL, { "http://p" }, "", "" },
		{ "https://[::1]:6443", NULL, { "http://p" }, "", "" },
		{ "https://[::ffff:127.0.0.1]:6443", NULL, { "http://p" }, "", "" },
		{ "https://128.0.0.1", NULL, { "http://p" }, "http://p", "" },
		{ "https://[::2]:6443", NULL, { "http://p" }, "http://p", "" },
		{ "https://localhost.example", NULL, { "http://p" }, "http://p", "" },
		/* a kubeconfig proxy-url: always, NO_PROXY aside */
		{ "https://api.example", "http://u:pw@q:8080", { "http://p", NULL, NULL, NULL, "*" },
		  "http://u:pw@q:8080", "" },
		{ "https://127.0.0.1", "https://q", { 0 }, "https://q", "" },
		{ "https://127.0.0.1", "socks5://q:1080", { 0 }, "socks5h://q:1080", "" },
	};
	char *proxy = NULL, *noproxy = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		for (size_t v = 0; v < ARRAY_SIZE(vars); v++) {
			if (t[i].env[v])
				setenv(vars[v], t[i].env[v], 1);
			else
				unsetenv(vars[v]);
		}
		assert_int_equal(kube_proxy_select(t[i].server, t[i].proxy_url, &proxy, &noproxy),
				 0);
		if (strcmp(proxy, t[i].want_proxy) || strcmp(noproxy, t[i].want_noproxy))
			fail_msg("case %zu (%s): proxy '%s' noproxy '%s'", i, t[i].server, proxy,
				 noproxy);
		free(proxy);
		free(noproxy);
	}
	proxy = noproxy = (char *)"untouched";
	assert_int_equal(kube_proxy_select("https://", NULL, &proxy, &noproxy), -EINVAL);
	assert_int_equal(kube_proxy_select("not a url", NULL, &proxy, &noproxy), -EINVAL);
	assert_int_equal(kube_proxy_select(NULL, NULL, &proxy, &noproxy), -EINVAL);
	assert_string_equal(proxy, "untouched");
	for (size_t v = 0; v < ARRAY_SIZE(vars); v++)
		unsetenv(vars[v]);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	((struct fix *)arg)->ticks++;
}

static void test_kube_deadline_beats_retry_after(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .backoff_initial_ms = 10, .backoff_max_ms = 20 };
	struct kube_req_opts tight = { .max_attempts = 3, .deadline_ms = 400 };
	struct kube_req_opts roomy = { .max_attempts = 3, .deadline_ms = 5000 };
	struct kube_req_opts slow = { .timeout_ms = 5000, .deadline_ms = 300 };

	f->k = client_new(f, &ko);
	/* Retry-After: 1 cannot fit in 400 ms: the 429 comes back at once */
	f->srv.throttle = 1;
	assert_int_equal(kube_request(f->k, KUBE_GET, "/throttle", NULL, &tight, on_done, f, NULL),
			 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, -EAGAIN);
	assert_int_equal(f->res.attempts, 1);
	assert_int_equal(f->res.retry_after_s, 1);
	assert_true(f->elapsed_ms < 400);
	/* with room for it, the retry waits for Retry-After and succeeds */
	f->srv.throttle = 1;
	clock_gettime(CLOCK_MONOTONIC, &f->t0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/throttle", NULL, &roomy, on_done, f, NULL),
			 0);
	assert_true(run_until(f, &f->done, 2, 5000));
	assert_int_equal(f->res.error, 0);
	assert_int_equal(f->res.attempts, 2);
	assert_true(f->elapsed_ms >= 1000);
	/* the attempt's own timeout is cut to the deadline */
	clock_gettime(CLOCK_MONOTONIC, &f->t0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/slow", NULL, &slow, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 3, 5000));
	assert_int_equal(f->res.error, -ETIMEDOUT);
	assert_true(f->elapsed_ms >= 290 && f->elapsed_ms < 1500);
	slow.deadline_ms = -1;
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, &slow, on_done, f, NULL),
			 -EINVAL);
}

static void test_kube_timeout_without_blocking_the_loop(void **st)
{
	struct fix *f = *st;
	struct kube_req_opts o = { .timeout_ms = 400 };
	struct timeval tv = { 0, 10000 };
	struct event *tick = event_new(f->base, -1, EV_PERSIST, on_tick, f);

	event_add(tick, &tv);
	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/slow", NULL, &o, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	event_free(tick);
	assert_int_equal(f->res.error, -ETIMEDOUT);
	assert_int_equal(f->res.http_status, 0);
	assert_true(f->elapsed_ms >= 390 && f->elapsed_ms < 2000);
	/* a 10 ms ticker kept firing the whole time: the loop was never held */
	assert_true(f->ticks >= 25);
	assert_non_null(strstr(f->text, "timed out after 4")); /* "... 40x milliseconds" */
}

static void test_kube_body_cap_and_bad_json(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .max_body = 4096 };
	struct kube_req_opts small = { .max_body = 100 };
	struct kube_stats s;

	f->k = client_new(f, &ko);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/big", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, -E2BIG);
	assert_string_equal(f->text, "response body over 4096 bytes");
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, &small, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 2, 5000));
	assert_int_equal(f->res.error, 0); /* 44 bytes fit in 100 */
	assert_int_equal(kube_request(f->k, KUBE_GET, "/garbage", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 3, 5000));
	assert_int_equal(f->res.error, -EPROTO);
	assert_int_equal(f->res.http_status, 200);
	assert_non_null(strstr(f->text, "not JSON"));
	assert_int_equal(kube_request(f->k, KUBE_GET, "/empty", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 4, 5000));
	assert_int_equal(f->res.error, 0);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.too_big, 1);
	assert_int_equal(s.failures, 2);
}

static void test_kube_connection_refused_is_retried(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .backoff_initial_ms = 5, .backoff_max_ms = 10 };
	struct kube_req_opts o = { .max_attempts = 2 };
	int port = f->srv.port;

	/* a port nobody listens on: bind, note it, close */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sin);

	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	close(fd);
	f->srv.port = ntohs(sin.sin_port);
	f->k = client_new(f, &ko);
	f->srv.port = port;
	/* even a POST: nothing left this host */
	assert_int_equal(kube_request(f->k, KUBE_CREATE, "/ok", "{}", &o, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, -ECONNREFUSED);
	assert_int_equal(f->res.attempts, 2);
	assert_int_equal(f->res.http_status, 0);
}

static void on_timer_cancel(evutil_socket_t fd, short what, void *arg)
{
	kube_call_cancel(arg);
}

static void test_kube_cancel_means_no_callback(void **st)
{
	struct fix *f = *st;
	struct kube_call *c = NULL, *c2 = NULL;
	struct timeval tv = { 0, 50000 };
	struct event *ev;
	int zero = 0;

	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/slow", NULL, NULL, on_done_unexpected, f,
				      &c),
			 0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done_unexpected, f,
				      &c2),
			 0);
	kube_call_cancel(c2); /* before it even connected */
	ev = evtimer_new(f->base, on_timer_cancel, c);
	evtimer_add(ev, &tv);
	(void)run_until(f, &zero, 1, 300);
	event_free(ev);
	kube_call_cancel(NULL);
	/* the client still works */
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_int_equal(f->res.error, 0);
}

static void on_done_free_client(void *ud, const struct kube_result *r)
{
	struct fix *f = ud;
	struct kube *k = f->k;

	f->done++;
	f->k = kube_free(k);
	/* Still inside the callback round: k is not gone yet, but closed. */
	assert_int_equal(kube_request(k, KUBE_GET, "/ok", NULL, NULL, on_done_unexpected, f, NULL),
			 -ESHUTDOWN);
}

static void test_kube_free_inside_callback_stops_everything(void **st)
{
	struct fix *f = *st;
	int zero = 0;

	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/slow", NULL, NULL, on_done_unexpected, f,
				      NULL),
			 0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done_free_client, f,
				      NULL),
			 0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/ok", NULL, NULL, on_done_free_client, f,
				      NULL),
			 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	assert_null(f->k);
	(void)run_until(f, &zero, 1, 200);
	assert_int_equal(f->done, 1); /* the second /ok never called back */
}

static void test_kube_free_with_calls_in_flight(void **st)
{
	struct fix *f = *st;
	struct kube_opts ko = { .backoff_initial_ms = 1000 };
	struct kube_req_opts o = { .max_attempts = 3 };
	int zero = 0;

	f->srv.throttle = 5;
	f->k = client_new(f, &ko);
	for (int i = 0; i < 3; i++)
		assert_int_equal(kube_request(f->k, KUBE_GET, "/slow", NULL, NULL,
					      on_done_unexpected, f, NULL),
				 0);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/throttle", NULL, &o, on_done_unexpected,
				      f, NULL),
			 0);
	(void)run_until(f, &zero, 1, 100); /* the 429 has its retry timer armed */
	f->k = kube_free(f->k);
	(void)run_until(f, &zero, 1, 100);
}

/* ---- watches ------------------------------------------------------------------------- */

static void on_event(void *ud, const struct kube_watch_event *ev)
{
	struct fix *f = ud;

	if (f->events < 8 && ev->resource_version)
		snprintf(f->rvs[f->events], sizeof(f->rvs[0]), "%s", ev->resource_version);
	f->types[f->events % 512] = ev->type;
	f->events++;
}

static void on_end(void *ud, const struct kube_result *r)
{
	struct fix *f = ud;

	f->ends++;
	on_done(ud, r);
}

static void test_kube_watch_events_across_chunks(void **st)
{
	static const char *const chunks[] = {
		"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVer",
		"sion\":\"10\"}}}\n{\"type\":\"MODIF",
		"IED\",\"object\":{\"metadata\":{\"resourceVersion\":\"11\"}}}\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n",
		"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"resourceVersion\":\"13\"}}}\r\n",
	};
	struct fix *f = *st;
	struct kube_stats s;

	f->srv.chunks = chunks;
	f->srv.n_chunks = 4;
	f->k = client_new(f, NULL);
	assert_int_equal(kube_watch(f->k, "/watch?watch=1&allowWatchBookmarks=true", NULL,
				    on_event, on_end, f, NULL),
			 0);
	assert_true(run_until(f, &f->ends, 1, 5000));
	assert_int_equal(f->events, 4);
	assert_int_equal(f->types[0], KUBE_EVENT_ADDED);
	assert_int_equal(f->types[1], KUBE_EVENT_MODIFIED);
	assert_int_equal(f->types[2], KUBE_EVENT_BOOKMARK);
	assert_int_equal(f->types[3], KUBE_EVENT_DELETED);
	assert_string_equal(f->rvs[0], "10");
	assert_string_equal(f->rvs[3], "13");
	assert_int_equal(f->res.error, 0);
	assert_int_equal(f->res.http_status, 200);
	kube_get_stats(f->k, &s);
	assert_int_equal(s.watch_events, 4);
}

static void test_kube_watch_error_event_expired(void **st)
{
	static const char *const chunks[] = {
		"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n",
		"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
		"\"status\":\"Failure\",\"message\":\"too old resource version: 1 (5)\","
		"\"reason\":\"Expired\",\"code\":410}}\n",
		"{\"type\":\"ADDED\",\"object\":{}}\n", /* never delivered */
	};
	struct fix *f = *st;
	int zero = 0;

	f->srv.chunks = chunks;
	f->srv.n_chunks = 3;
	f->k = client_new(f, NULL);
	assert_int_equal(kube_watch(f->k, "/watch?watch=1&resourceVersion=1", NULL, on_event,
				    on_end, f, NULL),
			 0);
	assert_true(run_until(f, &f->ends, 1, 5000));
	assert_int_equal(f->events, 1);
	assert_int_equal(f->res.error, -ESTALE);
	assert_int_equal(f->res.status.code, 410);
	assert_string_equal(f->status_reason, "Expired");
	assert_string_equal(f->body_kind, "Status");
	assert_non_null(strstr(f->text, "watch ERROR event: 410 Expired: too old resource version"));
	(void)run_until(f, &zero, 1, 100);
	assert_int_equal(f->ends, 1);
	assert_int_equal(f->events, 1);
}

static void test_kube_watch_line_cap_and_garbage(void **st)
{
	static const char *const longline[] = {
		"{\"type\":\"ADDED\",\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"object\":{\"x\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"\"}}\n",
	};
	static const char *const garbage[] = { "{\"type\":\"ADDED\",\"object\":{}}\n",
					       "<html>proxy error</html>\n" };
	static const char *const cut[] = { "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":" };
	struct fix *f = *st;
	struct kube_watch_opts o = { .max_line = 128 };
	struct kube_stats s;

	f->k = client_new(f, NULL);
	f->srv.chunks = longline;
	f->srv.n_chunks = 3;
	assert_int_equal(kube_watch(f->k, "/watch?watch=1", &o, on_event, on_end, f, NULL), 0);
	assert_true(run_until(f, &f->ends, 1, 5000));
	assert_int_equal(f->events, 1);
	assert_int_equal(f->res.error, -E2BIG);
	assert_string_equal(f->text, "watch line over 128 bytes");
	kube_get_stats(f->k, &s);
	assert_int_equal(s.too_big, 1);

	f->srv.chunks = garbage;
	f->srv.n_chunks = 2;
	assert_int_equal(kube_watch(f->k, "/watch?watch=1", &o, on_event, on_end, f, NULL), 0);
	assert_true(run_until(f, &f->ends, 2, 5000));
	assert_int_equal(f->events, 2);
	assert_int_equal(f->res.error, -EPROTO);
	assert_non_null(strstr(f->text, "not a watch event (24 bytes): <html>proxy error"));

	f->srv.chunks = cut;
	f->srv.n_chunks = 1;
	assert_int_equal(kube_watch(f->k, "/watch?watch=1", &o, on_event, on_end, f, NULL), 0);
	assert_true(run_until(f, &f->ends, 3, 5000));
	assert_int_equal(f->events, 3);
	assert_int_equal(f->res.error, -EPROTO);
	assert_non_null(strstr(f->text, "ended inside a line"));
}

static void test_kube_watch_non_200_is_a_result(void **st)
{
	struct fix *f = *st;

	f->k = client_new(f, NULL);
	assert_int_equal(kube_watch(f->k, "/watch-forbidden?watch=1", NULL, on_event, on_end, f,
				    NULL),
			 0);
	assert_true(run_until(f, &f->ends, 1, 5000));
	assert_int_equal(f->events, 0);
	assert_int_equal(f->res.error, -EPERM);
	assert_int_equal(f->res.http_status, 403);
	assert_string_equal(f->status_reason, "Forbidden");
}

/* A watch that asked the server for timeoutSeconds=1 and then hears nothing
 * ends about then (1 s plus its slack), not after the client's 900 s default. */
static void test_kube_watch_silent_stream_ends_at_the_asked_timeout(void **st)
{
	struct fix *f = *st;

	f->k = client_new(f, NULL);
	clock_gettime(CLOCK_MONOTONIC, &f->t0);
	assert_int_equal(kube_watch(f->k, "/watch-silent?watch=1&timeoutSeconds=1&x=2", NULL,
				    on_event, on_end, f, NULL),
			 0);
	assert_true(run_until(f, &f->ends, 1, 10000));
	assert_int_equal(f->events, 0);
	assert_int_equal(f->res.error, -ETIMEDOUT);
	assert_true(since_ms(&f->t0) >= 1000);
	assert_true(since_ms(&f->t0) < 5000);
}

static void on_event_stop(void *ud, const struct kube_watch_event *ev)
{
	struct fix *f = ud;
	struct kube_watch **w = (struct kube_watch **)&f->res.body; /* stash */

	f->events++;
	kube_watch_stop(*w);
}

static void test_kube_watch_stop_inside_on_event(void **st)
{
	static const char *const chunks[] = {
		"{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"object\":{}}\n",
	};
	struct fix *f = *st;
	struct kube_watch *w = NULL;
	int zero = 0;

	f->srv.chunks = chunks;
	f->srv.n_chunks = 2;
	f->k = client_new(f, NULL);
	assert_int_equal(kube_watch(f->k, "/watch?watch=1", NULL, on_event_stop,
				    (kube_watch_end_fn)on_done_unexpected, f, &w),
			 0);
	f->res.body = (struct json_object *)w;
	assert_true(run_until(f, &f->events, 1, 5000));
	(void)run_until(f, &zero, 1, 200);
	assert_int_equal(f->events, 1);
	kube_watch_stop(NULL);
}

static void test_kube_watch_backpressure_keeps_every_event(void **st)
{
	static const char *const chunks[] = { "@big" };
	struct fix *f = *st;
	struct kube_watch_opts o = { .max_line = 256 };
	size_t off = 0, cap = 2000 * 64;
	struct kube_stats s;

	/* 2000 events in one write: 40x max_line, so the stream pauses and resumes */
	f->srv.big = malloc(cap);
	for (int i = 0; i < 2000; i++)
		off += (size_t)snprintf(f->srv.big + off, cap - off,
					"{\"type\":\"MODIFIED\",\"object\":{\"i\":%d}}\n", i);
	f->srv.chunks = chunks;
	f->srv.n_chunks = 1;
	f->k = client_new(f, NULL);
	assert_int_equal(kube_watch(f->k, "/watch?watch=1", &o, on_event, on_end, f, NULL), 0);
	assert_true(run_until(f, &f->ends, 1, 10000));
	assert_int_equal(f->events, 2000);
	assert_int_equal(f->res.error, 0);
	kube_get_stats(f->k, &s);
	assert_true(s.watch_pauses > 0); /* it did pause, and every event still came */
}

static void test_kube_trace_output_redacts_token(void **st)
{
	struct fix *f = *st;
	char path[128], *log;
	int fd, saved;
	size_t n;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/trace.log", f->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
	log_set_level(LOG_TRACE);
	f->k = client_new(f, NULL);
	assert_int_equal(kube_request(f->k, KUBE_GET, "/auth", NULL, NULL, on_done, f, NULL), 0);
	assert_true(run_until(f, &f->done, 1, 5000));
	log_set_level(LOG_INFO);
	dup2(saved, STDERR_FILENO);
	close(saved);
	assert_int_equal(f->res.error, 0);
	fp = fopen(path, "r");
	log = calloc(1, 1 << 20);
	n = fread(log, 1, (1 << 20) - 1, fp);
	fclose(fp);
	assert_true(n > 0);
	assert_non_null(strstr(log, "GET /auth HTTP/1.1"));
	assert_non_null(strstr(log, "<redacted>"));
	assert_null(strstr(log, "good-token"));
	free(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kube_lines_joins_partial_chunks),
		cmocka_unit_test(test_kube_lines_byte_by_byte),
		cmocka_unit_test(test_kube_lines_caps_line_length_sticky),
		cmocka_unit_test(test_kube_lines_buffer_stays_bounded),
		cmocka_unit_test(test_kube_lines_gives_back_a_buffer_grown_for_a_large_line),
		cmocka_unit_test(test_kube_lines_garbage_is_just_bytes),
		cmocka_unit_test(test_kube_json_parse_strict),
		cmocka_unit_test(test_kube_status_parse_fixtures),
		cmocka_unit_test(test_kube_status_parse_rejects_non_status),
		cmocka_unit_test(test_kube_errno_table),
		cmocka_unit_test(test_kube_is_expired),
		cmocka_unit_test(test_kube_watch_event_parse_recorded_stream),
		cmocka_unit_test(test_kube_watch_event_parse_rejects),
		cmocka_unit_test(test_kube_query_add_encodes),
#define LOOP(t) cmocka_unit_test_setup_teardown(t, setup_loop, teardown_loop)
		LOOP(test_kube_get_ok_with_warning),
		LOOP(test_kube_status_error_is_parsed),
		LOOP(test_kube_write_verbs_send_bodies),
		LOOP(test_kube_request_rejects_bad_arguments),
		LOOP(test_kube_retry_after_is_honoured),
		LOOP(test_kube_retries_exhausted_report_last_status),
		LOOP(test_kube_claims_get_a_claim_retried_three_times),
		LOOP(test_kube_401_rereads_token_and_retries_once),
		LOOP(test_kube_new_needs_a_readable_token_file),
		LOOP(test_kube_token_refreshed_periodically),
		LOOP(test_kube_deadline_beats_retry_after),
		LOOP(test_kube_client_cert_files_read_again_when_changed),
		cmocka_unit_test(test_kube_proxy_select_follows_client_go),
		LOOP(test_kube_timeout_without_blocking_the_loop),
		LOOP(test_kube_body_cap_and_bad_json),
		LOOP(test_kube_connection_refused_is_retried),
		LOOP(test_kube_cancel_means_no_callback),
		LOOP(test_kube_free_inside_callback_stops_everything),
		LOOP(test_kube_free_with_calls_in_flight),
		LOOP(test_kube_watch_events_across_chunks),
		LOOP(test_kube_watch_error_event_expired),
		LOOP(test_kube_watch_line_cap_and_garbage),
		LOOP(test_kube_watch_silent_stream_ends_at_the_asked_timeout),
		LOOP(test_kube_watch_non_200_is_a_result),
		LOOP(test_kube_watch_stop_inside_on_event),
		LOOP(test_kube_watch_backpressure_keeps_every_event),
		LOOP(test_kube_trace_output_redacts_token),
	};

	/* KUBE_TEST_FILTER=test_kube_watch_* runs a subset (valgrind, debugging). */
	if (getenv("KUBE_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KUBE_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
