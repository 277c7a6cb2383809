/* httpc: the HTTP/1.1 response parser (good, bad and split input), URL
 * parsing, and the client against a scripted in-process TCP server: keep-alive
 * reuse, a dead kept-alive connection replayed (GET) or not (POST), chunked
 * bodies cut anywhere, pause/resume, cancel from a callback, EOF-delimited
 * bodies, refused connections, timeouts and DNS through evdns. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "kube/httpc.h"

/* ---- the parser ------------------------------------------------------------------------ */

struct parsed {
	int err; /* first error, 0 if none */
	int heads;
	int status;
	int retry_after_s;
	bool keep_alive;
	bool done;
	enum http1_body body_kind;
	char warning[HTTPC_WARNING_MAX];
	char body[4096];
	size_t body_len;
	size_t used; /* bytes consumed up to DONE */
};

/* Feeds s in pieces of step bytes (0 = all at once), then EOF if not done. */
static void parse(const char *s, size_t n, size_t step, bool head_req, struct parsed *out)
{
	struct http1_parser p;
	size_t off = 0;

	memset(out, 0, sizeof(*out));
	http1_parser_init(&p, head_req);
	while (!out->done && !out->err) {
		size_t lim = step && n - off > step ? off + step : n;

		for (;;) {
			enum http1_event ev;
			const char *d = NULL;
			size_t len = 0;
			ssize_t used = http1_parse(&p, s + off, lim - off, &ev, &d, &len);

			if (used < 0) {
				out->err = (int)used;
				break;
			}
			assert_true((size_t)used <= lim - off);
			off += (size_t)used;
			if (ev == HTTP1_NEED_MORE) {
				assert_int_equal(off, lim);
				break;
			}
			if (ev == HTTP1_HEAD) {
				out->heads++;
				out->status = p.status;
				out->retry_after_s = p.retry_after_s;
				out->keep_alive = p.keep_alive;
				out->body_kind = p.body;
				strcpy(out->warning, p.warning);
			} else if (ev == HTTP1_BODY) {
				assert_true(len > 0);
				assert_true(d >= s && d + len <= s + n);
				assert_true(out->body_len + len < sizeof(out->body));
				memcpy(out->body + out->body_len, d, len);
				out->body_len += len;
			} else {
				out->done = true;
				out->used = off;
				break;
			}
		}
		if (off == n && !out->done && !out->err) {
			if (http1_parse_eof(&p) == 0)
				out->done = true, out->used = off;
			else
				out->err = -ECONNRESET;
		}
	}
	out->body[out->body_len] = 0;
	http1_parser_done(&p);
}

/* Every split gives the same result as one piece. */
static void parse_all_ways(const char *s, struct parsed *out)
{
	size_t n = strlen(s);
	struct parsed other;

	parse(s, n, 0, false, out);
	for (size_t step = 1; step <= 7; step++) {
		parse(s, n, step, false, &other);
		assert_int_equal(other.err, out->err);
		assert_int_equal(other.status, out->status);
		assert_int_equal(other.done, out->done);
		assert_int_equal(other.body_len, out->body_len);
		assert_memory_equal(other.body, out->body, out->body_len);
		assert_int_equal(other.used, out->used);
	}
}

static void test_http1_content_length_body_and_fields(void **st)
{
	static const char r[] = "HTTP/1.1 201 Created\r\n"
				"Content-Type: application/json\r\n"
				"Warning: 299 - \"unknown field \\\"spec.x\\\"\"\r\n"
				"Warning: 299 - second\r\n"
				"Retry-After: 7\r\n"
				"content-length:  5 \r\n"
				"\r\n"
				"hello"
				"HTTP/1.1 200 OK\r\n"; /* the next message: not ours */
	struct parsed p;

	parse_all_ways(r, &p);
	assert_int_equal(p.err, 0);
	assert_true(p.done);
	assert_int_equal(p.heads, 1);
	assert_int_equal(p.status, 201);
	assert_int_equal(p.body_kind, HTTP1_BODY_LENGTH);
	assert_string_equal(p.body, "hello");
	assert_int_equal(p.retry_after_s, 7);
	assert_true(p.keep_alive);
	assert_string_equal(p.warning, "299 - \"unknown field \\\"spec.x\\\"\"");
	assert_int_equal(p.used, strlen(r) - strlen("HTTP/1.1 200 OK\r\n"));
}

static void test_http1_chunked_with_extensions_and_trailers(void **st)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				"5;name=value\r\nhello\r\n"
				"19 \r\n, this is chunked, really\r\n"
				"0\r\nX-Trailer: 1\r\n\r\n";
	struct parsed p;

	parse_all_ways(r, &p);
	assert_int_equal(p.err, 0);
	assert_true(p.done);
	assert_int_equal(p.body_kind, HTTP1_BODY_CHUNKED);
	assert_string_equal(p.body, "hello, this is chunked, really");
	assert_int_equal(p.used, strlen(r));
}

static void test_http1_interim_heads_are_skipped(void **st)
{
	static const char r[] = "HTTP/1.1 100 Continue\r\n\r\n"
				"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
				"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}";
	struct parsed p;

	parse_all_ways(r, &p);
	assert_int_equal(p.err, 0);
	assert_int_equal(p.heads, 1);
	assert_int_equal(p.status, 404);
	assert_string_equal(p.body, "{}");
}

static void test_http1_bodies_without_length(void **st)
{
	struct parsed p;

	/* Delimited by the close: complete at EOF, never reusable. */
	parse_all_ways("HTTP/1.1 200 OK\r\n\r\nall of it", &p);
	assert_int_equal(p.err, 0);
	assert_true(p.done);
	assert_false(p.keep_alive);
	assert_int_equal(p.body_kind, HTTP1_BODY_EOF);
	assert_string_equal(p.body, "all of it");
	/* 204 and 304 have no body whatever the headers say; nor has a HEAD reply. */
	parse_all_ways("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", &p);
	assert_true(p.done);
	assert_int_equal(p.body_len, 0);
	parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 39, 0, true, &p);
	assert_true(p.done);
	assert_int_equal(p.body_len, 0);
	/* Content-Length: 0 completes without another byte */
	parse_all_ways("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &p);
	assert_true(p.done);
	assert_int_equal(p.err, 0);
}

static void test_http1_connection_persistence(void **st)
{
	struct parsed p;

	parse_all_ways("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n",
		       &p);
	assert_false(p.keep_alive);
	parse_all_ways("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", &p);
	assert_false(p.keep_alive);
	parse_all_ways("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", &p);
	assert_true(p.keep_alive);
	/* both framings: chunked wins, and the connection is not trusted again */
	parse_all_ways("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
		       "2\r\nok\r\n0\r\n\r\n",
		       &p);
	assert_string_equal(p.body, "ok");
	assert_false(p.keep_alive);
}

static void test_http1_retry_after_and_warning_edge_cases(void **st)
{
	char big[1200];
	struct parsed p;

	parse_all_ways("HTTP/1.1 429 Too Many\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"
		       "Content-Length: 0\r\n\r\n",
		       &p);
	assert_int_equal(p.retry_after_s, -1);
	parse_all_ways("HTTP/1.1 503 Busy\r\nRetry-After: 99999999999\r\nContent-Length: 0\r\n\r\n",
		       &p);
	assert_true(p.retry_after_s > 1000000);
	/* a long Warning is capped; control bytes become spaces */
	snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nWarning: a\tb%0900d\r\nContent-Length: 0\r\n\r\n",
		 0);
	parse_all_ways(big, &p);
	assert_int_equal(strlen(p.warning), HTTPC_WARNING_MAX - 1);
	assert_memory_equal(p.warning, "a b000", 6);
}

static void test_http1_rejects_bad_input(void **st)
{
	static const struct {
		const char *in;
		int err;
	} bad[] = {
		{ "HTTP/2 200 OK\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 20 OK\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 2000 OK\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 600 Odd\r\n\r\n", -EPROTO },
		{ "http/1.1 200 OK\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 101 Switching\r\n\r\n", -EPROTO },
		{ "garbage\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		  -EPROTO },
		{ "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", -EPROTO },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", -EPROTO },
		/* truncated: EOF before the end of the framing */
		{ "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", -ECONNRESET },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", -ECONNRESET },
		{ "HTTP/1.1 200 OK\r\nContent-Le", -ECONNRESET },
		{ "", -ECONNRESET },
	};
	struct parsed p;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		parse_all_ways(bad[i].in, &p);
		if (p.err != bad[i].err)
			fail_msg("case %zu: got %d want %d: %s", i, p.err, bad[i].err, bad[i].in);
	}
}

static void test_http1_caps(void **st)
{
	size_t n = HTTPC_MAX_HEAD + 64;
	char *big = malloc(n + 1);
	struct parsed p;
	int off;

	/* a head over the cap, however it arrives */
	off = snprintf(big, n, "HTTP/1.1 200 OK\r\nX: ");
	memset(big + off, 'a', n - (size_t)off);
	big[n] = 0;
	parse(big, n, 0, false, &p);
	assert_int_equal(p.err, -E2BIG);
	parse(big, n, 1000, false, &p);
	assert_int_equal(p.err, -E2BIG);
	/* a chunk-size line over the cap (extensions are not free) */
	off = snprintf(big, n, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;");
	memset(big + off, 'e', HTTPC_MAX_LINE + 10);
	big[off + HTTPC_MAX_LINE + 10] = 0;
	parse_all_ways(big, &p);
	assert_int_equal(p.err, -E2BIG);
	/* trailers over the cap */
	off = snprintf(big, n, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n");
	for (int i = 0; i < 40; i++)
		off += snprintf(big + off, n - (size_t)off, "T%d: %0500d\r\n", i, 0);
	parse(big, strlen(big), 0, false, &p);
	assert_int_equal(p.err, -E2BIG);
	free(big);
}

static void test_httpc_url_parse(void **st)
{
	static const char *const bad[] = {
		"ftp://h", "https://", "https://:443", "https://h:0", "https://h:65536",
		"https://h:12a", "https://user@h", "https://h/a?b", "https://h/#x", "https://[::1",
		"https://[notip]:1", "https://h:1:2", "https://h /x", NULL,
	};
	struct httpc_url u;

	assert_int_equal(httpc_url_parse("https://10.96.0.1", &u), 0);
	assert_true(u.tls && u.host_is_ip);
	assert_string_equal(u.host, "10.96.0.1");
	assert_string_equal(u.port, "443");
	assert_string_equal(u.prefix, "");
	assert_int_equal(httpc_url_parse("HTTP://api.example:8080/k8s/clusters/c1//", &u), 0);
	assert_false(u.tls || u.host_is_ip);
	assert_string_equal(u.host, "api.example");
	assert_string_equal(u.port, "8080");
	assert_string_equal(u.prefix, "/k8s/clusters/c1");
	assert_int_equal(httpc_url_parse("https://[fd00::1]:6443", &u), 0);
	assert_true(u.host_is_ip);
	assert_string_equal(u.host, "fd00::1");
	assert_string_equal(u.port, "6443");
	for (size_t i = 0; bad[i]; i++)
		if (httpc_url_parse(bad[i], &u) != -EINVAL)
			fail_msg("accepted %s", bad[i]);
	assert_int_equal(httpc_url_parse(NULL, &u), -EINVAL);
}

/* ---- the client against a scripted server ---------------------------------------------- */

/* One accepted connection: reads requests, answers from the script. */
struct script {
	const char *reply;   /* sent after each complete request head (+ body) */
	bool close_after;    /* close after replying */
	bool swallow_second; /* on a second request on one connection: close without a reply */
	bool silent;	     /* never answer */
	size_t split;	     /* send the reply in pieces of this many bytes, one per tick */
};

struct srv {
	struct event_base *base;
	int lfd;
	int port;
	struct event *lev;
	struct script sc;
	int accepts;
	int requests;
	char last[2048];
	struct sconn {
		int fd;
		struct event *ev;
		struct event *tick;
		char in[8192];
		size_t in_len;
		int served;
		size_t sent;
		struct srv *s;
	} c[8];
	int n;
};

static void sconn_close(struct sconn *c)
{
	if (c->fd < 0)
		return;
	event_free(c->ev);
	event_free(c->tick);
	close(c->fd);
	c->fd = -1;
}

static void on_sconn_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sconn *c = arg;
	struct srv *s = c->s;
	size_t n = strlen(s->sc.reply), step = s->sc.split ? s->sc.split : n;
	struct timeval tv = { 0, 2000 };

	if (c->fd < 0)
		return;
	if (step > n - c->sent)
		step = n - c->sent;
	assert_int_equal(write(c->fd, s->sc.reply + c->sent, step), (ssize_t)step);
	c->sent += step;
	if (c->sent < n) {
		evtimer_add(c->tick, &tv);
		return;
	}
	c->sent = 0;
	if (s->sc.close_after)
		sconn_close(c);
}

static void on_sconn_read(evutil_socket_t fd, short what, void *arg)
{
	struct sconn *c = arg;
	struct srv *s = c->s;
	ssize_t n = read(fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);
	char *end;

	if (n <= 0) {
		sconn_close(c);
		return;
	}
	c->in_len += (size_t)n;
	c->in[c->in_len] = 0;
	end = strstr(c->in, "\r\n\r\n");
	if (!end)
		return;
	{
		const char *cl = strcasestr(c->in, "\r\nContent-Length: ");
		size_t blen = cl && cl < end ? strtoul(cl + 18, NULL, 10) : 0;
		size_t whole = (size_t)(end + 4 - c->in) + blen;

		if (c->in_len < whole)
			return;
		snprintf(s->last, sizeof(s->last), "%.*s", (int)whole, c->in);
		memmove(c->in, c->in + whole, c->in_len - whole);
		c->in_len -= whole;
	}
	s->requests++;
	c->served++;
	if (s->sc.silent)
		return;
	if (s->sc.swallow_second && c->served == 2) {
		sconn_close(c);
		return;
	}
	on_sconn_tick(-1, 0, c);
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct srv *s = arg;
	int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct sconn *c;

	if (cfd < 0)
		return;
	assert_true(s->n < 8);
	c = &s->c[s->n++];
	*c = (struct sconn){ .fd = cfd, .s = s };
	c->ev = event_new(s->base, cfd, EV_READ | EV_PERSIST, on_sconn_read, c);
	c->tick = evtimer_new(s->base, on_sconn_tick, c);
	event_add(c->ev, NULL);
	s->accepts++;
}

struct fix {
	struct event_base *base;
	struct srv srv;
	struct httpc *h;
	/* what the callbacks saw */
	int heads, dones, status, err;
	bool sent;
	char text[320];
	char body[1 << 16];
	size_t body_len;
	int pause_every;    /* on_body: pause after this many calls (0: never) */
	int body_calls;
	bool cancel_in_body;
	struct httpc_xfer *x;
	struct event *resume_ev;
};

static int setup(void **st)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	f->base = event_base_new();
	f->srv.base = f->base;
	f->srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(f->srv.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->srv.lfd, 16), 0);
	getsockname(f->srv.lfd, (struct sockaddr *)&a, &al);
	f->srv.port = ntohs(a.sin_port);
	f->srv.lev = event_new(f->base, f->srv.lfd, EV_READ | EV_PERSIST, on_accept, &f->srv);
	event_add(f->srv.lev, NULL);
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	struct fix *f = *st;

	httpc_free(f->h);
	for (int i = 0; i < f->srv.n; i++)
		sconn_close(&f->srv.c[i]);
	if (f->resume_ev)
		event_free(f->resume_ev);
	event_free(f->srv.lev);
	close(f->srv.lfd);
	event_base_free(f->base);
	free(f);
	return 0;
}

static int on_head(void *arg, const struct httpc_head *h)
{
	struct fix *f = arg;

	f->heads++;
	f->status = h->status;
	return 0;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct fix *f = arg;

	httpc_xfer_resume(f->x);
}

static int on_body(void *arg, const char *d, size_t n)
{
	struct fix *f = arg;
	struct timeval tv = { 0, 1000 };

	assert_true(f->body_len + n < sizeof(f->body));
	memcpy(f->body + f->body_len, d, n);
	f->body_len += n;
	f->body[f->body_len] = 0;
	f->body_calls++;
	if (f->cancel_in_body) {
		httpc_xfer_cancel(f->x);
		f->x = NULL;
		return 0;
	}
	if (f->pause_every && f->body_calls % f->pause_every == 0) {
		if (!f->resume_ev)
			f->resume_ev = evtimer_new(f->base, on_resume, f);
		evtimer_add(f->resume_ev, &tv);
		return HTTPC_PAUSE;
	}
	return 0;
}

static void on_done(void *arg, int err, const char *text, bool sent)
{
	struct fix *f = arg;

	f->dones++;
	f->err = err;
	f->sent = sent;
	snprintf(f->text, sizeof(f->text), "%s", text);
	f->x = NULL;
	event_base_loopbreak(f->base);
}

static const struct httpc_handlers handlers = { on_head, on_body, on_done };

static void client(struct fix *f, const char *host)
{
	char url[128];

	snprintf(url, sizeof(url), "http://%s:%d/prefix", host, f->srv.port);
	assert_int_equal(httpc_new(f->base, url, NULL, NULL, &f->h), 0);
}

/* Starts method path and runs the loop until on_done (or a 5 s guard). */
static void run(struct fix *f, const char *method, const char *path, const char *body)
{
	const char *hdr[] = { "Accept: application/json" };
	struct httpc_req rq = { .method = method, .path = path, .headers = hdr, .n_headers = 1,
				.body = body, .body_len = body ? strlen(body) : 0,
				.timeout_ms = 5000 };

	f->heads = f->dones = f->body_calls = 0;
	f->err = 1;
	f->body_len = 0;
	f->body[0] = 0;
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, &f->x), 0);
	event_base_dispatch(f->base);
}

static const char ok_reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";

static void test_httpc_keeps_connections_alive(void **st)
{
	struct fix *f = *st;
	struct httpc_stats s;

	f->srv.sc.reply = ok_reply;
	client(f, "127.0.0.1");
	for (int i = 0; i < 3; i++) {
		run(f, "GET", "/api/v1/nodes/n1", NULL);
		assert_int_equal(f->err, 0);
		assert_int_equal(f->status, 200);
		assert_string_equal(f->body, "{}");
	}
	assert_int_equal(f->srv.accepts, 1);
	assert_int_equal(f->srv.requests, 3);
	httpc_get_stats(f->h, &s);
	assert_int_equal(s.connects, 1);
	assert_int_equal(s.reuses, 2);
	/* request line with the server's prefix, Host with the port */
	assert_non_null(strstr(f->srv.last, "GET /prefix/api/v1/nodes/n1 HTTP/1.1\r\n"));
	assert_non_null(strstr(f->srv.last, "\r\nHost: 127.0.0.1:"));
	assert_non_null(strstr(f->srv.last, "\r\nAccept: application/json\r\n"));
}

static void test_httpc_sends_bodies_with_length(void **st)
{
	struct fix *f = *st;

	f->srv.sc.reply = ok_reply;
	client(f, "127.0.0.1");
	run(f, "POST", "/x", "{\"a\":1}");
	assert_int_equal(f->err, 0);
	assert_true(f->sent);
	assert_non_null(strstr(f->srv.last, "\r\nContent-Length: 7\r\n\r\n{\"a\":1}"));
	run(f, "PUT", "/x", NULL); /* a PUT without a body still says so */
	assert_non_null(strstr(f->srv.last, "\r\nContent-Length: 0\r\n"));
}

static void test_httpc_replays_idempotent_request_on_dead_connection(void **st)
{
	struct fix *f = *st;
	struct httpc_stats s;

	/* The server takes the second request on the connection and hangs up
	 * without a word (an idle-timeout race): a GET goes again on a new one. */
	f->srv.sc = (struct script){ .reply = ok_reply, .swallow_second = true };
	client(f, "127.0.0.1");
	run(f, "GET", "/a", NULL);
	assert_int_equal(f->err, 0);
	run(f, "GET", "/b", NULL);
	assert_int_equal(f->err, 0);
	assert_string_equal(f->body, "{}");
	httpc_get_stats(f->h, &s);
	assert_int_equal(s.stale_retries, 1);
	assert_int_equal(f->srv.accepts, 2);
}

static void test_httpc_does_not_replay_a_sent_post(void **st)
{
	struct fix *f = *st;

	f->srv.sc = (struct script){ .reply = ok_reply, .swallow_second = true };
	client(f, "127.0.0.1");
	run(f, "GET", "/a", NULL);
	assert_int_equal(f->err, 0);
	run(f, "POST", "/create", "{}");
	assert_int_equal(f->err, -ECONNRESET);
	assert_true(f->sent);
	assert_non_null(strstr(f->text, "without a response"));
	assert_int_equal(f->srv.accepts, 1);
}

static void test_httpc_chunked_body_cut_anywhere(void **st)
{
	static const char r[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				"6\r\n{\"a\":1\r\n3\r\n,\"b\r\n4\r\n\":2}\r\n0\r\n\r\n";
	struct fix *f = *st;

	f->srv.sc = (struct script){ .reply = r, .split = 3 };
	client(f, "127.0.0.1");
	run(f, "GET", "/c", NULL);
	assert_int_equal(f->err, 0);
	assert_string_equal(f->body, "{\"a\":1,\"b\":2}");
	run(f, "GET", "/c", NULL); /* and the connection was fit for reuse */
	assert_int_equal(f->err, 0);
	assert_int_equal(f->srv.accepts, 1);
}

static void test_httpc_pause_and_resume_lose_nothing(void **st)
{
	struct fix *f = *st;
	static char r[40000];
	int off = snprintf(r, sizeof(r), "HTTP/1.1 200 OK\r\nContent-Length: 30000\r\n\r\n");

	for (int i = 0; i < 30000; i++)
		r[off + i] = (char)('a' + i % 26);
	r[off + 30000] = 0;
	f->srv.sc = (struct script){ .reply = r, .split = 7000 };
	f->pause_every = 1;
	client(f, "127.0.0.1");
	run(f, "GET", "/big", NULL);
	assert_int_equal(f->err, 0);
	assert_int_equal(f->body_len, 30000);
	assert_memory_equal(f->body, r + off, 30000);
	assert_true(f->body_calls >= 2);
}

static void test_httpc_cancel_inside_body_callback(void **st)
{
	struct fix *f = *st;
	struct timeval tv = { 0, 100000 };
	struct httpc_req rq = { .method = "GET", .path = "/x", .timeout_ms = 5000 };

	f->srv.sc = (struct script){ .reply = ok_reply };
	f->cancel_in_body = true;
	client(f, "127.0.0.1");
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, &f->x), 0);
	event_base_loopexit(f->base, &tv);
	event_base_dispatch(f->base);
	assert_int_equal(f->body_calls, 1);
	assert_int_equal(f->dones, 0); /* no callback after the cancel */
}

static void test_httpc_body_until_close(void **st)
{
	struct fix *f = *st;

	f->srv.sc = (struct script){ .reply = "HTTP/1.1 200 OK\r\n\r\nuntil the end",
				     .close_after = true };
	client(f, "127.0.0.1");
	run(f, "GET", "/eof", NULL);
	assert_int_equal(f->err, 0);
	assert_string_equal(f->body, "until the end");
	run(f, "GET", "/eof", NULL);
	assert_int_equal(f->err, 0);
	assert_int_equal(f->srv.accepts, 2); /* such a connection is never reused */
}

static void test_httpc_malformed_reply_is_eproto(void **st)
{
	struct fix *f = *st;

	f->srv.sc = (struct script){ .reply = "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n" };
	client(f, "127.0.0.1");
	run(f, "GET", "/bad", NULL);
	assert_int_equal(f->err, -EPROTO);
	assert_non_null(strstr(f->text, "malformed"));
	assert_int_equal(f->heads, 0);
}

static void test_httpc_timeout_and_refused(void **st)
{
	struct fix *f = *st;
	struct httpc_req rq = { .method = "GET", .path = "/slow", .timeout_ms = 200 };
	char url[64];

	f->srv.sc = (struct script){ .silent = true };
	client(f, "127.0.0.1");
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, &f->x), 0);
	event_base_dispatch(f->base);
	assert_int_equal(f->err, -ETIMEDOUT);
	assert_non_null(strstr(f->text, "timed out after 200 ms"));
	f->h = httpc_free(f->h);

	/* nobody listens on the port any more */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->srv.port);
	event_free(f->srv.lev);
	close(f->srv.lfd);
	f->srv.lfd = socket(AF_INET, SOCK_STREAM, 0); /* teardown closes something */
	f->srv.lev = event_new(f->base, -1, 0, on_accept, &f->srv);
	assert_int_equal(httpc_new(f->base, url, NULL, NULL, &f->h), 0);
	run(f, "GET", "/x", NULL);
	assert_int_equal(f->err, -ECONNREFUSED);
	assert_false(f->sent);
	assert_non_null(strstr(f->text, "cannot connect to 127.0.0.1:"));
}

static void test_httpc_resolves_names(void **st)
{
	struct fix *f = *st;

	/* "localhost" comes from /etc/hosts through evdns, without blocking */
	f->srv.sc.reply = ok_reply;
	client(f, "localhost");
	run(f, "GET", "/n", NULL);
	if (f->err == -ECONNREFUSED) /* localhost is ::1 only here: nothing listens there */
		skip();
	assert_int_equal(f->err, 0);
	assert_non_null(strstr(f->srv.last, "\r\nHost: localhost:"));
	f->h = httpc_free(f->h);
	client(f, "no-such-host.invalid");
	run(f, "GET", "/n", NULL);
	assert_int_equal(f->err, -EHOSTUNREACH);
	assert_non_null(strstr(f->text, "cannot resolve no-such-host.invalid"));
}

static void test_httpc_rejects_bad_requests(void **st)
{
	struct fix *f = *st;
	const char *crlf[] = { "X-A: b\r\nX-Injected: 1" };
	const char *noname[] = { ": b" };
	struct httpc_req rq = { .method = "GET", .path = "/x" };

	client(f, "127.0.0.1");
	assert_int_equal(httpc_start(f->h, &rq, NULL, f, NULL), -EINVAL);
	rq.path = "x";
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, NULL), -EINVAL);
	rq.path = "/a b";
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, NULL), -EINVAL);
	rq.path = "/x";
	rq.method = "G T";
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, NULL), -EINVAL);
	rq.method = "GET";
	rq.headers = crlf;
	rq.n_headers = 1;
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, NULL), -EINVAL);
	rq.headers = noname;
	assert_int_equal(httpc_start(f->h, &rq, &handlers, f, NULL), -EINVAL);
	assert_int_equal(httpc_new(f->base, "https://h:99999", NULL, NULL, &f->h), -EINVAL);
}

static void test_httpc_bad_ca_fails_the_transfer_with_enokey(void **st)
{
	struct fix *f = *st;
	struct httpc_tls tls = { .ca_pem = "not a certificate", .ca_pem_len = 17 };
	char url[64];

	/* TLS settings are checked when the first connection needs them */
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", f->srv.port);
	assert_int_equal(httpc_new(f->base, url, &tls, NULL, &f->h), 0);
	run(f, "GET", "/x", NULL);
	assert_int_equal(f->err, -ENOKEY);
	assert_non_null(strstr(f->text, "CA certificates from certificate-authority-data"));
	f->h = httpc_free(f->h);
	tls = (struct httpc_tls){ .insecure = true, .cert_file = "/nonexistent.crt",
				  .key_file = "/nonexistent.key" };
	assert_int_equal(httpc_new(f->base, url, &tls, NULL, &f->h), 0);
	run(f, "GET", "/x", NULL);
	assert_int_equal(f->err, -ENOKEY);
	assert_non_null(strstr(f->text, "/nonexistent.crt"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http1_content_length_body_and_fields),
		cmocka_unit_test(test_http1_chunked_with_extensions_and_trailers),
		cmocka_unit_test(test_http1_interim_heads_are_skipped),
		cmocka_unit_test(test_http1_bodies_without_length),
		cmocka_unit_test(test_http1_connection_persistence),
		cmocka_unit_test(test_http1_retry_after_and_warning_edge_cases),
		cmocka_unit_test(test_http1_rejects_bad_input),
		cmocka_unit_test(test_http1_caps),
		cmocka_unit_test(test_httpc_url_parse),
		cmocka_unit_test_setup_teardown(test_httpc_keeps_connections_alive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_sends_bodies_with_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_replays_idempotent_request_on_dead_connection,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_does_not_replay_a_sent_post, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_chunked_body_cut_anywhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_pause_and_resume_lose_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_cancel_inside_body_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_body_until_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_malformed_reply_is_eproto, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_timeout_and_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_resolves_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_rejects_bad_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_httpc_bad_ca_fails_the_transfer_with_enokey, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
