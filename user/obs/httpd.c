/* evhttp endpoints. See httpd.h. */
#include "obs/httpd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#define LOG_MOD "httpd"
#include "lib/log.h"
#include "obs/metrics.h"

#define HTTPD_MAX_CHECKS 16
/* Slow handler warning threshold (STYLE: 10 ms). */
#define HTTPD_SLOW_NS 10000000LL

struct check {
	const char *name;
	int kinds;
	bool ok;
};

struct httpd {
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct metrics *metrics;
	struct check checks[HTTPD_MAX_CHECKS];
	int n_checks;
	struct metric *scrape_seconds;
};

static long long now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void reply(struct evhttp_request *req, int code, const char *reason, struct evbuffer *body,
		  const char *ctype)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
	evhttp_send_reply(req, code, reason, body);
}

static void on_check(struct evhttp_request *req, void *arg, int kind)
{
	struct httpd *h = arg;
	struct evbuffer *b = evbuffer_new();
	bool ok = true;

	if (!b) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	for (int i = 0; i < h->n_checks; i++)
		if ((h->checks[i].kinds & kind) && !h->checks[i].ok) {
			if (ok)
				evbuffer_add_printf(b, "waiting for:");
			evbuffer_add_printf(b, " %s", h->checks[i].name);
			ok = false;
		}
	evbuffer_add_printf(b, ok ? "ok\n" : "\n");
	reply(req, ok ? 200 : 503, ok ? "OK" : "Service Unavailable", b, "text/plain");
	evbuffer_free(b);
}

static void on_healthz(struct evhttp_request *req, void *arg)
{
	on_check(req, arg, HTTPD_HEALTH);
}

static void on_readyz(struct evhttp_request *req, void *arg)
{
	on_check(req, arg, HTTPD_READY);
}

/* TCP_NODELAY on the scrape's connection: a /metrics body leaves in several
 * writes, and Nagle plus the scraper's delayed ACK would hold the tail ~40 ms
 * on a keep-alive connection. (libevent 2.1 has no hook at accept time.) */
static void set_nodelay(struct evhttp_request *req)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	int one = 1;

	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void on_metrics(struct evhttp_request *req, void *arg)
{
	struct httpd *h = arg;
	struct evbuffer *b = evbuffer_new();
	long long t0 = now_ns(), dt;

	if (!b) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	set_nodelay(req);
	(void)metrics_render(h->metrics, b);
	dt = now_ns() - t0;
	metric_observe(h->scrape_seconds, (double)dt / 1e9);
	if (dt > HTTPD_SLOW_NS)
		log_warn("slow_handler", "path=/metrics ms=%.1f", (double)dt / 1e6);
	reply(req, 200, "OK", b, "text/plain; version=0.0.4; charset=utf-8");
	evbuffer_free(b);
}

static void on_other(struct evhttp_request *req, void *arg)
{
	evhttp_send_error(req, 404, "Not Found");
}

/* Splits "host:port", ":port", "[v6]:port" into host (default 0.0.0.0) and port. */
static int split_addr(const char *addr, char *host, size_t hsize, int *port)
{
	const char *colon, *h = addr;
	size_t hlen;
	char *end;
	long p;

	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h = addr + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - addr);
	}
	if (hlen >= hsize)
		return -EINVAL;
	if (hlen == 0) {
		(void)snprintf(host, hsize, "0.0.0.0");
	} else {
		memcpy(host, h, hlen);
		host[hlen] = 0;
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || p < 0 || p > 65535)
		return -EINVAL;
	*port = (int)p;
	return 0;
}

int httpd_new(struct event_base *base, const char *addr, struct metrics *m, struct httpd **ret)
{
	_cleanup_(httpd_freep) struct httpd *h = NULL;
	static const double buckets[] = { 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05 };
	char host[128];
	int port, r;

	r = split_addr(addr, host, sizeof(host), &port);
	if (r < 0)
		return r;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->metrics = m;
	h->http = evhttp_new(base);
	if (!h->http)
		return -ENOMEM;
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(h->http, 16384);
	evhttp_set_max_body_size(h->http, 4096);
	evhttp_set_timeout(h->http, 10);
	evhttp_set_cb(h->http, "/healthz", on_healthz, h);
	evhttp_set_cb(h->http, "/readyz", on_readyz, h);
	evhttp_set_cb(h->http, "/metrics", on_metrics, h);
	evhttp_set_gencb(h->http, on_other, h);
	h->sock = evhttp_bind_socket_with_handle(h->http, host, (ev_uint16_t)port);
	if (!h->sock)
		return errno ? -errno : -EADDRINUSE;
	h->scrape_seconds = metrics_histogram(m, "dra_cpu_metrics_render_seconds",
					      "Time to render /metrics.", NULL, buckets,
					      (int)ARRAY_SIZE(buckets));
	*ret = TAKE_PTR(h);
	return 0;
}

struct httpd *httpd_free(struct httpd *h)
{
	if (!h)
		return NULL;
	if (h->http)
		evhttp_free(h->http);
	free(h);
	return NULL;
}

int httpd_port(const struct httpd *h)
{
	struct sockaddr_storage ss;
	ev_socklen_t len = sizeof(ss);
	evutil_socket_t fd = evhttp_bound_socket_get_fd(h->sock);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int httpd_check_add(struct httpd *h, const char *name, int kinds)
{
	if (h->n_checks == HTTPD_MAX_CHECKS)
		return -E2BIG;
	h->checks[h->n_checks] = (struct check){ .name = name, .kinds = kinds };
	return h->n_checks++;
}

void httpd_check_set(struct httpd *h, int id, bool ok)
{
	if (id < 0 || id >= h->n_checks || h->checks[id].ok == ok)
		return;
	h->checks[id].ok = ok;
	log_info(ok ? "check_passing" : "check_failing", "check=%s", h->checks[id].name);
}
