/* evhttp endpoints. See httpd.h.
 *
 * Why evhttp and not libmicrohttpd: MHD (0.9.75 in Debian 12) caps
 * connections by refusing new ones, so whoever holds the cap with idle
 * connections keeps the kubelet out until its own timeout; it cannot close
 * the oldest to admit a probe. evhttp (libevent 2.1) has neither a cap nor
 * eviction, but with the listener ours and a bufferevent per connection
 * supplied through evhttp_set_bevcb() the missing part is small and stays on
 * the one loop we already have.
 *
 * Connection lifecycle:
 *
 *   accept (evhttp) --bevcb--> pending (we hold a bufferevent reference)
 *     --adopt (at the next accept, else the next callback on the loop)-->
 *   conns, least recently active first
 *     --closecb (evhttp frees it: peer closed, timeout, evicted)--> gone
 *
 * evhttp gives no hook once a connection is set up, and the bufferevent it
 * asked us for is its only trace: at adoption the bufferevent's callback
 * argument is the evhttp_connection (evhttp installs its callbacks with the
 * connection as argument in every 2.x release), which lets us install a
 * close callback and free the connection ourselves. The reference held while
 * pending keeps the bufferevent valid if evhttp gave up on it in between
 * (out of memory): it then has no callbacks, and adoption just lets it go.
 *
 * Invariants: n_conns counts pending + conns, every descriptor evhttp holds
 * for us, and never exceeds max_conns (room is made before an accepted
 * connection is counted); at most one conn is pending after an accept
 * returns; a conn is freed only by its close callback (or httpd_free).
 *
 * accept() failing with EMFILE/ENFILE (or ENOBUFS/ENOMEM) leaves the
 * listening socket readable, and libevent's listener would retry forever:
 * the listener is disabled instead, then either our least recently active
 * connection is closed and the listener resumes right after (each retry costs
 * one of our own connections: no loop), or, with none of ours to close, the
 * waiting connections are accepted on a reserved descriptor and closed at
 * once (the peer learns now instead of timing out) and the listener resumes
 * after a growing pause.
 */
#include "obs/httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#define LOG_MOD "httpd"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/num.h"
#include "lib/ratelimit.h"
#include "obs/metrics.h"

#define HTTPD_MAX_CHECKS 16
#define HTTPD_MAX_DOCUMENTS 8
/* Slow handler warning threshold (STYLE: 10 ms). */
#define HTTPD_SLOW_NS 10000000LL
#define HTTPD_BACKLOG 1024
/* Pause after accept() failed with nothing of ours to close: doubles up to
 * the max (under the kubelet's default probe timeout of 1 s), back to the
 * min after an accept succeeds. */
#define HTTPD_PAUSE_MIN_MS 50
#define HTTPD_PAUSE_MAX_MS 800
/* Waiting connections closed per shedding round (the backlog is 128). */
#define HTTPD_SHED_MAX 256
/* A flood repeats whatever makes us warn: one line per interval. */
#define HTTPD_WARN_INTERVAL_MS 10000

struct check {
	const char *name;
	int kinds;
	bool ok;
};

struct conn {
	TAILQ_ENTRY(conn) link;
	struct httpd *h;
	struct bufferevent *bev;
	struct evhttp_connection *evcon; /* NULL while pending */
	struct evbuffer_cb_entry *in_cb, *out_cb;
};

TAILQ_HEAD(conn_list, conn);

struct httpd {
	LIST_ENTRY(httpd) live;
	struct event_base *base;
	struct evhttp *http;
	struct evconnlistener *listener;
	struct evhttp_bound_socket *sock;
	struct metrics *metrics;
	struct check checks[HTTPD_MAX_CHECKS];
	int n_checks;
	struct metric *scrape_seconds;
	struct document {
		struct httpd *h;
		httpd_document_fn fn;
		void *ud;
	} docs[HTTPD_MAX_DOCUMENTS];
	int n_docs;

	struct conn_list pending, conns;
	int n_conns, max_conns;
	struct event *adopt, *resume;
	int reserve_fd; /* /dev/null, closed to accept-and-close when out of fds */
	int pause_ms;
	struct ratelimit warn_accept, warn_limit;
	struct metric *m_conns;
	struct metric_series *m_evicted_limit, *m_evicted_fds, *m_shed;
	struct metric_series *m_accept_fds, *m_accept_mem, *m_accept_other;
};

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
	long long t0 = (long long)clock_now_ns(), dt;

	if (!b) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	set_nodelay(req);
	(void)metrics_render(h->metrics, b);
	dt = (long long)clock_now_ns() - t0;
	metric_observe(h->scrape_seconds, (double)dt / 1e9);
	if (dt > HTTPD_SLOW_NS)
		log_warn("slow_handler", "path=/metrics ms=%.1f", (double)dt / 1e6);
	reply(req, 200, "OK", b, "text/plain; version=0.0.4; charset=utf-8");
	evbuffer_free(b);
}

static void on_document(struct evhttp_request *req, void *arg)
{
	struct document *d = arg;
	struct evbuffer *b;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, "Method Not Allowed");
		return;
	}
	b = evbuffer_new();
	if (!b) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	set_nodelay(req);
	if (d->fn(d->ud, b) < 0)
		evhttp_send_error(req, 500, NULL);
	else
		reply(req, 200, "OK", b, "application/json");
	evbuffer_free(b);
}

int httpd_document(struct httpd *h, const char *path, httpd_document_fn fn, void *ud)
{
	struct document *d;

	if (h->n_docs == HTTPD_MAX_DOCUMENTS)
		return -E2BIG;
	d = &h->docs[h->n_docs];
	*d = (struct document){ .h = h, .fn = fn, .ud = ud };
	if (evhttp_set_cb(h->http, path, on_document, d) != 0)
		return -EEXIST;
	h->n_docs++;
	return 0;
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
	return num_parse_int(colon + 1, NULL, 0, 65535, port) < 0 ? -EINVAL : 0;
}

/* The listener's error callback gets the argument of its accept callback,
 * which is evhttp's: the instance is found by its listener instead. */
static LIST_HEAD(httpd_list, httpd) live_httpds = LIST_HEAD_INITIALIZER(live_httpds);

static struct httpd *httpd_of(const struct evconnlistener *lev)
{
	struct httpd *h;

	LIST_FOREACH(h, &live_httpds, live)
		if (h->listener == lev)
			return h;
	return NULL;
}

/* ---- connections ---------------------------------------------------------------------------- */

static void update_gauge(struct httpd *h)
{
	metric_set(h->m_conns, h->n_conns);
}

/* A byte went in or out: the connection is the most recently active. */
static void on_activity(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;

	if (!info->n_added && !info->n_deleted)
		return;
	TAILQ_REMOVE(&c->h->conns, c, link);
	TAILQ_INSERT_TAIL(&c->h->conns, c, link);
}

/* evhttp is freeing the connection (and its descriptor, right after). */
static void on_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct conn *c = arg;
	struct httpd *h = c->h;

	if (c->in_cb)
		(void)evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
	if (c->out_cb)
		(void)evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	TAILQ_REMOVE(&h->conns, c, link);
	h->n_conns--;
	free(c);
	update_gauge(h);
}

static void evict(struct httpd *h, struct conn *c, struct metric_series *why)
{
	metric_series_add(why, 1);
	/* Calls on_conn_closed(), which frees c. */
	evhttp_connection_free(c->evcon);
}

/* Pending connections become tracked ones. Runs from the loop, outside any
 * evhttp callback. */
static void adopt_pending(struct httpd *h)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&h->pending))) {
		bufferevent_event_cb eventcb = NULL;
		void *cbarg = NULL;

		TAILQ_REMOVE(&h->pending, c, link);
		bufferevent_getcb(c->bev, NULL, NULL, &eventcb, &cbarg);
		if (!eventcb) {
			/* evhttp gave up on it (out of memory). If it never set
			 * the descriptor it never took the bufferevent either. */
			if (bufferevent_getfd(c->bev) < 0)
				bufferevent_free(c->bev);
			bufferevent_decref(c->bev);
			h->n_conns--;
			free(c);
			continue;
		}
		c->evcon = cbarg;
		evhttp_connection_set_closecb(c->evcon, on_conn_closed, c);
		c->in_cb = evbuffer_add_cb(bufferevent_get_input(c->bev), on_activity, c);
		c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), on_activity, c);
		TAILQ_INSERT_TAIL(&h->conns, c, link);
		bufferevent_decref(c->bev);
	}
}

/* Closes the least recently active connections until `room` more fit under
 * the cap. */
static void make_room(struct httpd *h, int room)
{
	struct conn *c;
	int evicted = 0;
	uint64_t held;

	while (h->n_conns + room > h->max_conns && (c = TAILQ_FIRST(&h->conns))) {
		evict(h, c, h->m_evicted_limit);
		evicted++;
	}
	if (evicted && ratelimit_pass(&h->warn_limit, &held))
		log_warn("http_connection_limit",
			 "limit=%d evicted=%d action=closed_least_recently_active suppressed=%llu",
			 h->max_conns, evicted, (unsigned long long)held);
}

/* Adopts the last accept of a batch (no later accept did). */
static void on_adopt(evutil_socket_t fd, short what, void *arg)
{
	struct httpd *h = arg;

	adopt_pending(h);
	make_room(h, 0);
	update_gauge(h);
}

/* evhttp_set_bevcb(): called for each accepted connection, before evhttp
 * sets it up. The connections accepted before it in the same batch are set
 * up by now: adopting them and making room here keeps the count within the
 * cap however many wait in the backlog. Evicting from
 * here is safe: the new connection is not evhttp's yet, and no callback of
 * another connection is running. */
static struct bufferevent *on_accepted(struct event_base *base, void *arg)
{
	struct httpd *h = arg;
	struct conn *c;

	h->pause_ms = HTTPD_PAUSE_MIN_MS;
	adopt_pending(h);
	make_room(h, 1);
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL; /* evhttp makes its own: one connection we do not see */
	/* Without BEV_OPT_CLOSE_ON_FREE, as evhttp's own: evhttp then closes
	 * the descriptor in evhttp_connection_free(), not later when the
	 * bufferevent is finalized, so an eviction frees it at once. */
	c->bev = bufferevent_socket_new(base, -1, 0);
	if (!c->bev) {
		free(c);
		return NULL;
	}
	c->h = h;
	bufferevent_incref(c->bev);
	TAILQ_INSERT_TAIL(&h->pending, c, link);
	h->n_conns++;
	event_active(h->adopt, EV_TIMEOUT, 0);
	return c->bev;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct httpd *h = arg;

	(void)evconnlistener_enable(h->listener);
}

/* Accepts what waits in the backlog on the reserved descriptor and closes
 * it: the peers see the connection closed now rather than time out. */
static int shed_waiting(struct httpd *h)
{
	evutil_socket_t lfd = evconnlistener_get_fd(h->listener);
	int n = 0;

	if (h->reserve_fd < 0)
		h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (h->reserve_fd < 0)
		return 0;
	(void)close(h->reserve_fd);
	h->reserve_fd = -1;
	while (n < HTTPD_SHED_MAX) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			break;
		(void)close(fd);
		n++;
	}
	h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	metric_series_add(h->m_shed, n);
	return n;
}

/* A connection waits in the backlog. Linux fails accept() with EMFILE before
 * looking at the backlog, so the failure alone does not say one does: the
 * listener's loop sees it after the accept that took the last descriptor. */
static bool has_waiting(evutil_socket_t lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* libevent calls this when accept() failed with anything but EAGAIN, EINTR
 * or ECONNABORTED; the listening socket is still readable. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();
	struct httpd *h = httpd_of(lev);
	bool fds = err == EMFILE || err == ENFILE;
	bool mem = err == ENOBUFS || err == ENOMEM;
	char action[64];
	uint64_t held;
	struct conn *c;

	if (!h) { /* not ours: cannot happen, but never retry in a loop */
		(void)evconnlistener_disable(lev);
		return;
	}
	if ((fds || mem) && !has_waiting(evconnlistener_get_fd(lev)))
		return; /* nobody refused: the listener wakes for the next one */
	/* The accepts just before the failure are ours to close too. */
	adopt_pending(h);
	c = TAILQ_FIRST(&h->conns);

	metric_series_add(fds ? h->m_accept_fds : mem ? h->m_accept_mem : h->m_accept_other, 1);
	(void)evconnlistener_disable(lev);
	if ((fds || mem) && c) {
		/* Its descriptor is closed now; if someone else takes it,
		 * the next failure closes the next connection. */
		evict(h, c, h->m_evicted_fds);
		event_active(h->resume, EV_TIMEOUT, 0);
		(void)snprintf(action, sizeof(action), "closed_least_recently_active");
	} else {
		struct timeval tv = clock_tv_ms(h->pause_ms);
		int shed = fds ? shed_waiting(h) : 0;

		(void)evtimer_add(h->resume, &tv);
		(void)snprintf(action, sizeof(action), "paused pause_ms=%d shed=%d", h->pause_ms,
			       shed);
		h->pause_ms = h->pause_ms * 2 > HTTPD_PAUSE_MAX_MS ? HTTPD_PAUSE_MAX_MS
								    : h->pause_ms * 2;
	}
	if (ratelimit_pass(&h->warn_accept, &held))
		log_warn_errno(-err, "http_accept_failed", "action=%s connections=%d suppressed=%llu",
			       action, h->n_conns, (unsigned long long)held);
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int listen_on(struct httpd *h, const char *host, int port)
{
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC,
					 .ai_socktype = SOCK_STREAM,
					 .ai_flags = EVUTIL_AI_PASSIVE | EVUTIL_AI_ADDRCONFIG };
	struct evutil_addrinfo *ai = NULL;
	char service[8];
	int r;

	(void)snprintf(service, sizeof(service), "%d", port);
	r = evutil_getaddrinfo(host, service, &hints, &ai);
	if (r != 0)
		return -EINVAL;
	errno = 0;
	h->listener = evconnlistener_new_bind(h->base, NULL, NULL,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
						      LEV_OPT_REUSEABLE,
					      HTTPD_BACKLOG, ai->ai_addr, (int)ai->ai_addrlen);
	r = errno;
	evutil_freeaddrinfo(ai);
	if (!h->listener)
		return r ? -r : -EADDRINUSE;
	evconnlistener_set_error_cb(h->listener, on_accept_error);
	/* evhttp installs its accept callback; the listener is freed with it. */
	h->sock = evhttp_bind_listener(h->http, h->listener);
	if (!h->sock) {
		evconnlistener_free(h->listener);
		h->listener = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int register_metrics(struct httpd *h, struct metrics *m)
{
	struct metric *evicted, *accept_errors, *shed, *limit;

	h->scrape_seconds = metrics_family(m, MF_METRICS_RENDER_SECONDS);
	h->m_conns = metrics_family(m, MF_HTTP_CONNECTIONS);
	limit = metrics_family(m, MF_HTTP_CONNECTIONS_LIMIT);
	evicted = metrics_family(m, MF_HTTP_CONNECTIONS_EVICTED_TOTAL);
	accept_errors = metrics_family(m, MF_HTTP_ACCEPT_ERRORS_TOTAL);
	shed = metrics_family(m, MF_HTTP_CONNECTIONS_SHED_TOTAL);
	if (!h->scrape_seconds || !h->m_conns || !limit || !evicted || !accept_errors || !shed)
		return -ENOMEM;
	metric_set(limit, h->max_conns);
	h->m_evicted_limit = metric_with(evicted, "limit");
	h->m_evicted_fds = metric_with(evicted, "fd_exhausted");
	h->m_accept_fds = metric_with(accept_errors, "fd_exhausted");
	h->m_accept_mem = metric_with(accept_errors, "no_memory");
	h->m_accept_other = metric_with(accept_errors, "other");
	h->m_shed = metric_with(shed);
	if (!h->m_evicted_limit || !h->m_evicted_fds || !h->m_accept_fds || !h->m_accept_mem ||
	    !h->m_accept_other || !h->m_shed)
		return -ENOMEM;
	return 0;
}

int httpd_new(struct event_base *base, const char *addr, const struct httpd_opts *opts,
	      struct metrics *m, struct httpd **ret)
{
	_cleanup_(httpd_freep) struct httpd *h = NULL;
	int max_conns = opts && opts->max_conns ? opts->max_conns : HTTPD_MAX_CONNS_DEFAULT;
	int idle_ms = opts && opts->idle_timeout_ms ? opts->idle_timeout_ms
						    : HTTPD_IDLE_TIMEOUT_MS_DEFAULT;
	struct timeval idle;
	char host[128];
	int port, r;

	if (max_conns < 1 || idle_ms < 1)
		return -EINVAL;
	r = split_addr(addr, host, sizeof(host), &port);
	if (r < 0)
		return r;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->base = base;
	LIST_INSERT_HEAD(&live_httpds, h, live); /* httpd_free() removes it when h->base */
	h->metrics = m;
	h->max_conns = max_conns;
	h->pause_ms = HTTPD_PAUSE_MIN_MS;
	ratelimit_init(&h->warn_accept, HTTPD_WARN_INTERVAL_MS, 1);
	ratelimit_init(&h->warn_limit, HTTPD_WARN_INTERVAL_MS, 1);
	TAILQ_INIT(&h->pending);
	TAILQ_INIT(&h->conns);
	h->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (h->reserve_fd < 0)
		return -errno;
	h->adopt = event_new(base, -1, 0, on_adopt, h);
	h->resume = evtimer_new(base, on_resume, h);
	h->http = evhttp_new(base);
	if (!h->adopt || !h->resume || !h->http)
		return -ENOMEM;
	r = register_metrics(h, m);
	if (r < 0)
		return r;
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(h->http, 16384);
	evhttp_set_max_body_size(h->http, 4096);
	idle = clock_tv_ms(idle_ms);
	evhttp_set_timeout_tv(h->http, &idle);
	evhttp_set_bevcb(h->http, on_accepted, h);
	evhttp_set_cb(h->http, "/healthz", on_healthz, h);
	evhttp_set_cb(h->http, "/readyz", on_readyz, h);
	evhttp_set_cb(h->http, "/metrics", on_metrics, h);
	evhttp_set_gencb(h->http, on_other, h);
	r = listen_on(h, host, port);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(h);
	return 0;
}

struct httpd *httpd_free(struct httpd *h)
{
	struct conn *c;

	if (!h)
		return NULL;
	if (h->base)
		LIST_REMOVE(h, live);
	/* Frees every connection (their close callbacks free the conns) and
	 * the listener. */
	if (h->http)
		evhttp_free(h->http);
	while ((c = TAILQ_FIRST(&h->pending))) {
		TAILQ_REMOVE(&h->pending, c, link);
		if (bufferevent_getfd(c->bev) < 0)
			bufferevent_free(c->bev);
		bufferevent_decref(c->bev);
		free(c);
	}
	if (h->adopt)
		event_free(h->adopt);
	if (h->resume)
		event_free(h->resume);
	if (h->reserve_fd >= 0)
		(void)close(h->reserve_fd);
	free(h);
	return NULL;
}

int httpd_port(const struct httpd *h)
{
	struct sockaddr_storage ss;
	ev_socklen_t len = sizeof(ss);
	evutil_socket_t fd = evconnlistener_get_fd(h->listener);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int httpd_connections(const struct httpd *h)
{
	return h->n_conns;
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
