/* The NRI plugin on the loop: the unix socket to the runtime, connecting
 * and reconnecting with backoff, feeding the session what arrives and
 * writing what it sends, its call deadlines and the setup timeout, and the
 * totals over sessions. See nri.h.
 *
 * Apart from nri.c because a session knows nothing of sockets or the loop
 * (the tests drive one through nri_session_feed() and its write callback);
 * struct nri owns one session at a time and this file is all it does.
 */
#define LOG_MOD "nri"
#include "nri/nri.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "lib/backoff.h"
#include "lib/log.h"
#include "nri/nri_priv.h"

/* ---- the plugin on the loop --------------------------------------------------------------- */

struct nri {
	struct event_base *base;
	struct nri_settings conf;
	struct nri_handlers h;
	void *ud;
	struct sockaddr_un addr;
	socklen_t addr_len;
	struct bufferevent *bev;
	struct nri_session *s;
	struct event *retry;	/* next connection attempt */
	struct event *deadline;	/* earliest call deadline of the session */
	struct event *setup;	/* connected -> synchronized within setup_timeout_ms */
	struct backoff backoff;
	int last_connect_err;	/* log a connect failure once per errno */
	bool started;
	struct nri_stats totals; /* of sessions that ended */
};

static void stats_add(struct nri_stats *d, const struct nri_stats *s)
{
	d->connects += s->connects;
	d->connect_failures += s->connect_failures;
	d->registrations += s->registrations;
	d->disconnects += s->disconnects;
	d->protocol_errors += s->protocol_errors;
	d->oversized += s->oversized;
	d->timeouts += s->timeouts;
	d->requests += s->requests;
	d->unimplemented += s->unimplemented;
	d->handler_errors += s->handler_errors;
	d->sync_parts += s->sync_parts;
	d->updates_pushed += s->updates_pushed;
	d->updates_failed += s->updates_failed;
	d->create_waits += s->create_waits;
	d->create_wait_timeouts += s->create_wait_timeouts;
}

struct nri_stats nri_get_stats(const struct nri *n)
{
	struct nri_stats st = n->totals;

	if (n->s)
		stats_add(&st, nri_session_stats(n->s));
	return st;
}

bool nri_is_synchronized(const struct nri *n)
{
	return n->s && nri_session_is_synchronized(n->s);
}

/* Next connection attempt after the next backoff delay; returns the delay. */
static uint32_t schedule_retry(struct nri *n)
{
	uint32_t ms = backoff_next(&n->backoff);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	(void)evtimer_add(n->retry, &tv);
	return ms;
}

/* Ends the connection (r: why) and schedules the next attempt. */
static void conn_drop(struct nri *n, int r)
{
	const char *why = n->s ? nri_session_why(n->s) : "";
	bool was_synced = n->s && nri_session_is_synchronized(n->s);
	bool was_registered = n->s && nri_session_is_registered(n->s);

	switch (r) {
	case -EPROTO:
	case -E2BIG:
		log_error("nri_protocol_error", "why=%s action=reconnecting", log_quote(why));
		break;
	case -ECONNREFUSED:
	case -ETIMEDOUT:
		log_error_errno(r, "nri_session_failed", "why=%s action=reconnecting",
				log_quote(why));
		break;
	case -ESHUTDOWN:
		log_info("nri_shutdown", "why=%s action=reconnecting", log_quote(why));
		break;
	default:
		log_warn_errno(r, "nri_disconnected", "registered=%d action=reconnecting",
			       was_registered);
	}
	if (n->s) {
		stats_add(&n->totals, nri_session_stats(n->s));
		n->s->end = r;
		n->s = nri_session_free(n->s);
	}
	n->totals.disconnects++;
	if (n->bev) {
		bufferevent_free(n->bev);
		n->bev = NULL;
	}
	(void)evtimer_del(n->deadline);
	(void)evtimer_del(n->setup);
	/* A connection that worked resets the backoff: a runtime restart is
	 * picked up quickly, a runtime that keeps dropping us is not hammered. */
	if (was_synced)
		backoff_reset(&n->backoff);
	n->last_connect_err = 0;
	(void)schedule_retry(n);
}

static void arm_deadline(struct nri *n)
{
	int64_t d = n->s ? nri_session_next_deadline(n->s) : -1;
	int64_t ms;
	struct timeval tv;

	if (d < 0) {
		(void)evtimer_del(n->deadline);
		return;
	}
	ms = d - ttrpc_now_ms();
	if (ms < 0)
		ms = 0;
	tv = (struct timeval){ (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	(void)evtimer_add(n->deadline, &tv);
}

/* Work after any input or call: deadlines and the setup watchdog. */
static void after_io(struct nri *n)
{
	arm_deadline(n);
	if (nri_session_is_synchronized(n->s) && evtimer_pending(n->setup, NULL))
		(void)evtimer_del(n->setup);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct nri *n = arg;

	if (what & BEV_EVENT_EOF)
		conn_drop(n, -ECONNRESET);
	else if (what & BEV_EVENT_ERROR)
		conn_drop(n, -(EVUTIL_SOCKET_ERROR() ? EVUTIL_SOCKET_ERROR() : EIO));
}

static void on_flushed(struct bufferevent *bev, void *arg)
{
	conn_drop(arg, -ESHUTDOWN);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct nri *n = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	int r;

	/* What one read brought (libevent caps a read at 16 KiB): bounded. */
	while (evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		r = nri_session_feed(n->s, v.iov_base, v.iov_len);
		(void)evbuffer_drain(in, v.iov_len);
		if (r == -ESHUTDOWN && evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
			/* Our Shutdown reply goes out before we close. */
			(void)bufferevent_disable(bev, EV_READ);
			bufferevent_setcb(bev, NULL, on_flushed, on_event, n);
			return;
		}
		if (r < 0) {
			conn_drop(n, r);
			return;
		}
	}
	after_io(n);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct nri *n = arg;
	int r;

	if (!n->s)
		return;
	if (ttrpc_mux_is_dead(n->s->mux)) { /* a push failed to write */
		conn_drop(n, -EPIPE);
		return;
	}
	r = nri_session_expire(n->s, ttrpc_now_ms());
	if (r < 0) {
		conn_drop(n, r);
		return;
	}
	arm_deadline(n);
}

static void on_setup_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct nri *n = arg;

	if (!n->s || nri_session_is_synchronized(n->s))
		return;
	n->s->st.timeouts++;
	errbuf_set(&n->s->why, "not synchronized within %u ms", n->conf.setup_timeout_ms);
	log_error("nri_setup_timeout", "why=%s", log_quote(nri_session_why(n->s)));
	conn_drop(n, -ETIMEDOUT);
}

/* A waiting CreateContainer wakes (nri_resume_run()), from outside any I/O of
 * ours: its answer may end the connection or move the next deadline. */
static int loop_resume(void *ctx, uint64_t token)
{
	struct nri *n = ctx;
	int r;

	if (!n->s)
		return -ENOENT;
	r = nri_session_resume(n->s, token);
	if (ttrpc_mux_is_dead(n->s->mux))
		event_active(n->deadline, EV_TIMEOUT, 0);
	else
		arm_deadline(n);
	return r;
}

static int conn_write(void *ud, const void *buf, size_t len)
{
	struct nri *n = ud;
	struct evbuffer *out = bufferevent_get_output(n->bev);

	if (evbuffer_get_length(out) + len > NRI_OUTBUF_MAX)
		return -ENOBUFS;
	return evbuffer_add(out, buf, len) < 0 ? -ENOMEM : 0;
}

static void on_retry(evutil_socket_t unused, short what, void *arg)
{
	struct nri *n = arg;
	struct timeval tv = { n->conf.setup_timeout_ms / 1000,
			      (n->conf.setup_timeout_ms % 1000) * 1000 };
	uint32_t ms;
	int fd, r;

	/* A unix socket connect completes or fails at once: it does not block. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	if (connect(fd, (struct sockaddr *)&n->addr, n->addr_len) < 0) {
		r = -errno;
		(void)close(fd);
		goto fail;
	}
	n->bev = bufferevent_socket_new(n->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!n->bev) {
		(void)close(fd);
		r = -ENOMEM;
		goto fail;
	}
	/* libevent writes at most 16 KiB per loop iteration: a reply updating 500 containers
	 * (45 KB) took three writev()s, three wakeups of the runtime and three trips through
	 * epoll. The kernel takes what fits in the socket buffer in one go anyway. */
	(void)bufferevent_set_max_single_write(n->bev, NRI_OUTBUF_MAX);
	n->totals.connects++;
	log_info("nri_connected", "socket=%s", log_quote(n->conf.socket_path));
	r = nri_session_new(&(struct nri_config){ .plugin_name = n->conf.name,
						  .plugin_idx = n->conf.idx,
						  .register_timeout_ms = n->conf.register_timeout_ms,
						  .call_timeout_ms = n->conf.call_timeout_ms,
						  .create_wait_ms = n->conf.create_wait_ms },
			    &n->h, n->ud, conn_write, n, &n->s);
	if (r < 0) {
		conn_drop(n, r);
		return;
	}
	n->s->resume_fn = loop_resume;
	n->s->resume_ctx = n;
	bufferevent_setcb(n->bev, on_read, NULL, on_event, n);
	r = bufferevent_enable(n->bev, EV_READ | EV_WRITE) < 0 ? -ENOMEM : nri_session_start(n->s);
	if (r < 0) {
		conn_drop(n, r);
		return;
	}
	(void)evtimer_add(n->setup, &tv);
	arm_deadline(n);
	return;
fail:
	n->totals.connect_failures++;
	ms = schedule_retry(n);
	if (r != n->last_connect_err)
		log_warn_errno(r, "nri_connect_failed", "socket=%s retry_ms=%u action=retrying",
			       log_quote(n->conf.socket_path), ms);
	else
		log_debug("nri_connect_failed", "socket=%s retry_ms=%u",
			  log_quote(n->conf.socket_path), ms);
	n->last_connect_err = r;
}

int nri_new(struct event_base *base, const struct nri_config *cfg, const struct nri_handlers *h,
	    void *ud, struct nri **ret)
{
	_cleanup_(nri_freep) struct nri *n = NULL;
	size_t len;
	int r;

	if (!base || !h)
		return -EINVAL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	r = nri_settings_init(&n->conf, cfg);
	if (r < 0)
		return r;
	len = strlen(n->conf.socket_path);
	if (len >= sizeof(n->addr.sun_path))
		return -ENAMETOOLONG;
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, n->conf.socket_path, len + 1);
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	n->base = base;
	n->h = *h;
	n->ud = ud;
	backoff_init(&n->backoff, n->conf.backoff_min_ms, n->conf.backoff_max_ms);
	n->retry = evtimer_new(base, on_retry, n);
	n->deadline = evtimer_new(base, on_deadline, n);
	n->setup = evtimer_new(base, on_setup_timeout, n);
	if (!n->retry || !n->deadline || !n->setup)
		return -ENOMEM;
	*ret = TAKE_PTR(n);
	return 0;
}

struct nri *nri_free(struct nri *n)
{
	if (!n)
		return NULL;
	if (n->s) {
		n->s->end = -ECANCELED;
		n->s = nri_session_free(n->s);
	}
	if (n->bev)
		bufferevent_free(n->bev);
	if (n->retry)
		event_free(n->retry);
	if (n->deadline)
		event_free(n->deadline);
	if (n->setup)
		event_free(n->setup);
	nri_settings_done(&n->conf);
	free(n);
	return NULL;
}

int nri_start(struct nri *n)
{
	static const struct timeval now = { 0, 0 };

	if (n->started)
		return -EALREADY;
	n->started = true;
	return evtimer_add(n->retry, &now) < 0 ? -ENOMEM : 0;
}

int nri_push_evict(struct nri *n, const char *container_id, const char *reason)
{
	int r;

	if (!n->s || !nri_session_is_registered(n->s))
		return -ENOTCONN;
	r = nri_session_push_evict(n->s, container_id, reason);
	if (ttrpc_mux_is_dead(n->s->mux))
		event_active(n->deadline, EV_TIMEOUT, 0);
	else
		arm_deadline(n);
	return r;
}

int nri_push_updates(struct nri *n, const struct nri_update *u, size_t count)
{
	int r;

	if (!n->s || !nri_session_is_registered(n->s))
		return -ENOTCONN;
	r = nri_session_push_updates(n->s, u, count);
	/* We may be inside a handler, inside the session: a connection broken
	 * by a failed write is dropped from the loop, not from here. */
	if (ttrpc_mux_is_dead(n->s->mux))
		event_active(n->deadline, EV_TIMEOUT, 0);
	else
		arm_deadline(n);
	return r;
}
