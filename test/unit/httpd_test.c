/* httpd: probes answered, the connection cap closes the least recently
 * active connection, idle connections time out, and running out of
 * descriptors closes our own connections or sheds the waiting ones, once,
 * instead of retrying accept() in a loop. Real sockets on 127.0.0.1 and a real
 * event loop; the descriptor limit is lowered in this process. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>

#include "lib/clock.h"
#include "obs/httpd.h"
#include "obs/metrics.h"

struct fixture {
	struct event_base *base;
	struct metrics *m;
	struct httpd *h;
	struct event *tick;
	int port;
};

/* Wakes the loop so run_until() can look at the clients between callbacks. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
}

static struct fixture *fixture_new(int max_conns, int idle_ms)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct httpd_opts o = { .max_conns = max_conns, .idle_timeout_ms = idle_ms };
	struct timeval tv = clock_tv_ms(2);

	assert_non_null(f);
	f->base = event_base_new();
	assert_non_null(f->base);
	assert_int_equal(metrics_new(&f->m), 0);
	assert_int_equal(httpd_new(f->base, "127.0.0.1:0", &o, f->m, &f->h), 0);
	f->port = httpd_port(f->h);
	assert_true(f->port > 0);
	f->tick = event_new(f->base, -1, EV_PERSIST, on_tick, NULL);
	assert_non_null(f->tick);
	assert_int_equal(event_add(f->tick, &tv), 0);
	return f;
}

static void fixture_free(struct fixture *f)
{
	event_free(f->tick);
	httpd_free(f->h);
	metrics_free(f->m);
	event_base_free(f->base);
	free(f);
}

typedef bool (*pred_fn)(void *arg);

/* Runs the loop until pred holds; false after timeout_ms. */
static bool run_until(struct fixture *f, pred_fn pred, void *arg, int timeout_ms)
{
	int64_t end = clock_now_ms() + timeout_ms;

	while (!pred(arg)) {
		if (clock_now_ms() > end)
			return false;
		(void)event_base_loop(f->base, EVLOOP_ONCE);
	}
	return true;
}

/* Runs the loop for ms milliseconds. */
static void run_for(struct fixture *f, int ms)
{
	int64_t end = clock_now_ms() + ms;

	while (clock_now_ms() < end)
		(void)event_base_loop(f->base, EVLOOP_ONCE);
}

static int client(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* The server closed it (EOF or reset), seen without blocking. */
static bool is_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static bool closed_pred(void *arg)
{
	return is_closed(*(int *)arg);
}

struct reply {
	int fd;
	char buf[4096];
	size_t len;
};

static bool reply_pred(void *arg)
{
	struct reply *r = arg;
	ssize_t n = recv(r->fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len, MSG_DONTWAIT);

	if (n > 0)
		r->len += (size_t)n;
	r->buf[r->len] = 0;
	return strstr(r->buf, "\r\n\r\n") && (n == 0 || strstr(r->buf, "ok\n") ||
					       strstr(r->buf, "waiting for"));
}

/* GET path on a fresh connection; the status line and body in *r. */
static bool get(struct fixture *f, int fd, const char *path, struct reply *r)
{
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);

	memset(r, 0, sizeof(*r));
	r->fd = fd;
	assert_int_equal(send(fd, req, (size_t)n, 0), n);
	return run_until(f, reply_pred, r, 2000);
}

static double metric_value(struct fixture *f, const char *series)
{
	struct evbuffer *b = evbuffer_new();
	char *text, *p, line[256];
	double v = -1;
	size_t n;

	assert_non_null(b);
	assert_int_equal(metrics_render(f->m, b), 0);
	n = evbuffer_get_length(b);
	text = calloc(1, n + 1);
	assert_non_null(text);
	evbuffer_remove(b, text, n);
	evbuffer_free(b);
	(void)snprintf(line, sizeof(line), "\n%s ", series);
	p = strstr(text, line);
	if (p)
		v = strtod(p + strlen(line), NULL);
	free(text);
	if (v < 0)
		fail_msg("no series %s", series);
	return v;
}

/* Descriptors: every free slot under a lowered limit taken but `leave`. */
struct fds {
	struct rlimit saved;
	int fd[512];
	int n;
};

static void fds_exhaust(struct fds *x, int leave)
{
	struct rlimit lim;
	int fd;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &x->saved), 0);
	lim = x->saved;
	lim.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	x->n = 0;
	while ((fd = dup(0)) >= 0) {
		assert_true(x->n < (int)(sizeof(x->fd) / sizeof(x->fd[0])));
		x->fd[x->n++] = fd;
	}
	assert_int_equal(errno, EMFILE);
	assert_true(x->n >= leave);
	while (leave-- > 0)
		(void)close(x->fd[--x->n]);
}

static void fds_restore(struct fds *x)
{
	while (x->n > 0)
		(void)close(x->fd[--x->n]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &x->saved), 0);
}

static void test_httpd_healthz_follows_checks(void **st)
{
	struct fixture *f = fixture_new(0, 0);
	int id = httpd_check_add(f->h, "slices", HTTPD_HEALTH);
	struct reply r;
	int fd;

	fd = client(f->port);
	assert_true(get(f, fd, "/healthz", &r));
	assert_non_null(strstr(r.buf, "HTTP/1.1 503"));
	assert_non_null(strstr(r.buf, "waiting for: slices"));
	httpd_check_set(f->h, id, true);
	assert_true(get(f, fd, "/healthz", &r));
	assert_non_null(strstr(r.buf, "HTTP/1.1 200"));
	assert_non_null(strstr(r.buf, "ok\n"));
	(void)close(fd);
	fixture_free(f);
}

static void test_httpd_rejects_bad_options(void **st)
{
	struct event_base *base = event_base_new();
	struct metrics *m = NULL;
	struct httpd *h = NULL;
	struct httpd_opts neg = { .max_conns = -1 };

	assert_int_equal(metrics_new(&m), 0);
	assert_int_equal(httpd_new(base, "127.0.0.1:0", &neg, m, &h), -EINVAL);
	assert_int_equal(httpd_new(base, "127.0.0.1", NULL, m, &h), -EINVAL);
	assert_int_equal(httpd_new(base, "127.0.0.1:70000", NULL, m, &h), -EINVAL);
	assert_null(h);
	metrics_free(m);
	event_base_free(base);
}

static bool conns_pred_4(void *arg)
{
	return httpd_connections(arg) == 4;
}

/* Over the cap, the connection that has been quiet longest goes, not the
 * oldest: one that sent a byte since is kept. */
static void test_httpd_cap_closes_least_recently_active(void **st)
{
	struct fixture *f = fixture_new(4, 0);
	int a, b, c, d, e;
	struct reply r;

	a = client(f->port);
	b = client(f->port);
	c = client(f->port);
	d = client(f->port);
	assert_true(run_until(f, conns_pred_4, f->h, 2000));
	/* a half request from a: now the most recently active */
	assert_int_equal(send(a, "GET /healthz HTTP/1.1\r\n", 23, 0), 23);
	run_for(f, 20);
	e = client(f->port);
	assert_true(run_until(f, closed_pred, &b, 2000));
	assert_false(is_closed(a));
	assert_false(is_closed(c));
	assert_false(is_closed(d));
	assert_int_equal(httpd_connections(f->h), 4);
	assert_true(get(f, e, "/healthz", &r));
	assert_non_null(strstr(r.buf, "HTTP/1.1 200"));
	assert_true(metric_value(f, "dra_cpu_http_connections_evicted_total{reason=\"limit\"}") ==
		    1);
	assert_true(metric_value(f, "dra_cpu_http_connections_limit") == 4);
	(void)close(a);
	(void)close(b);
	(void)close(c);
	(void)close(d);
	(void)close(e);
	fixture_free(f);
}

static void test_httpd_idle_connection_times_out(void **st)
{
	struct fixture *f = fixture_new(0, 100);
	int64_t t0 = clock_now_ms();
	int fd = client(f->port);

	assert_true(run_until(f, closed_pred, &fd, 3000));
	assert_true(clock_now_ms() - t0 >= 90);
	assert_int_equal(httpd_connections(f->h), 0);
	(void)close(fd);
	fixture_free(f);
}

static bool conns_pred_2(void *arg)
{
	return httpd_connections(arg) == 2;
}

/* EMFILE with connections of ours: the least recently active one makes room
 * for the newcomer, which is served. */
static void test_httpd_out_of_fds_closes_own_idle_connection(void **st)
{
	struct fixture *f = fixture_new(0, 0);
	struct fds x;
	struct reply r;
	int a, b, c;

	/* three client sockets, two server slots */
	a = client(f->port);
	b = client(f->port);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_true(run_until(f, conns_pred_2, f->h, 2000));
	fds_exhaust(&x, 0);
	{
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons((uint16_t)f->port),
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	assert_true(run_until(f, closed_pred, &a, 2000));
	assert_false(is_closed(b));
	assert_true(get(f, c, "/healthz", &r));
	assert_non_null(strstr(r.buf, "HTTP/1.1 200"));
	/* one newcomer, one connection closed: accept() failing again on the
	 * empty backlog (Linux checks descriptors first) closes nothing */
	assert_false(is_closed(b));
	assert_int_equal(httpd_connections(f->h), 2);
	assert_true(metric_value(f, "dra_cpu_http_accept_errors_total{reason=\"fd_exhausted\"}") ==
		    1);
	assert_true(metric_value(f, "dra_cpu_http_connections_evicted_total{reason=\"fd_exhausted\"}") ==
		    1);
	fds_restore(&x);
	(void)close(a);
	(void)close(b);
	(void)close(c);
	fixture_free(f);
}

struct shed {
	int fd[4];
	int n;
};

static bool all_closed(void *arg)
{
	struct shed *s = arg;

	for (int i = 0; i < s->n; i++)
		if (!is_closed(s->fd[i]))
			return false;
	return true;
}

/* EMFILE with nothing of ours to close (someone else holds every
 * descriptor): the waiting connections are closed at once through the
 * reserved descriptor, accept() is not retried in a loop, and serving
 * resumes when descriptors are back. */
static void connect_to(int fd, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void test_httpd_out_of_fds_sheds_waiting_and_pauses(void **st)
{
	struct fixture *f = fixture_new(0, 0);
	struct shed s = { .n = 3 };
	struct fds x;
	struct reply r;
	int fd;

	for (int i = 0; i < 4; i++)
		s.fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fds_exhaust(&x, 0);
	for (int i = 0; i < 3; i++)
		connect_to(s.fd[i], f->port);
	assert_true(run_until(f, all_closed, &s, 2000));
	/* One failure shed all three; a listener retrying accept() while they
	 * wait would fail thousands of times. */
	assert_true(metric_value(f, "dra_cpu_http_accept_errors_total{reason=\"fd_exhausted\"}") ==
		    1);
	assert_true(metric_value(f, "dra_cpu_http_connections_shed_total") == 3);
	/* still out of descriptors: the next one is shed after the pause */
	connect_to(s.fd[3], f->port);
	s.n = 4;
	assert_true(run_until(f, all_closed, &s, 2000));
	assert_true(metric_value(f, "dra_cpu_http_accept_errors_total{reason=\"fd_exhausted\"}") ==
		    2);
	assert_true(metric_value(f, "dra_cpu_http_connections_shed_total") == 4);
	assert_int_equal(httpd_connections(f->h), 0);
	fds_restore(&x);
	fd = client(f->port);
	assert_true(get(f, fd, "/healthz", &r));
	assert_non_null(strstr(r.buf, "HTTP/1.1 200"));
	for (int i = 0; i < 4; i++)
		(void)close(s.fd[i]);
	(void)close(fd);
	fixture_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_httpd_healthz_follows_checks),
		cmocka_unit_test(test_httpd_rejects_bad_options),
		cmocka_unit_test(test_httpd_cap_closes_least_recently_active),
		cmocka_unit_test(test_httpd_idle_connection_times_out),
		cmocka_unit_test(test_httpd_out_of_fds_closes_own_idle_connection),
		cmocka_unit_test(test_httpd_out_of_fds_sheds_waiting_and_pauses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
