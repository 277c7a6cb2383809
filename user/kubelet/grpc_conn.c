/* The gRPC server's connections: the listening unix sockets and accepting
 * (with eviction when full), the bufferevent that carries a connection's
 * bytes to and from its nghttp2 session, the one timer (handshake, first
 * request, idle, close grace), and memory connections for tests. See
 * "Connection life" in grpc.c.
 *
 * Apart from grpc.c because this is the socket side; grpc.c holds the
 * nghttp2 callbacks that turn streams into calls, and the server.
 */
#define LOG_MOD "grpc"

#include "kubelet/grpc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "kubelet/grpc_priv.h"

#define ACCEPT_RETRY_MS 1000
#define LOCAL_WINDOW (1 << 20)
#define MAX_HEADER_LIST 16384

/* ---- connections: output -------------------------------------------------------------------- */


static struct evbuffer *conn_out(struct grpc_conn *c)
{
	return c->bev ? bufferevent_get_output(c->bev) : c->mem_out;
}

/* Marks c for freeing; the timer callback does it (socket connections) or the
 * owner does (memory connections). Safe from anywhere. */
static void conn_kill(struct grpc_conn *c)
{
	c->state = CONN_DEAD;
	if (c->timer)
		event_active(c->timer, EV_TIMEOUT, 0);
}

/* Ends the session with GOAWAY(code); the connection closes once it is out. */
void grpc_conn_goaway(struct grpc_conn *c, uint32_t code)
{
	if (c->state != CONN_OPEN)
		return;
	if (nghttp2_session_terminate_session(c->session, code) < 0) {
		conn_kill(c);
		return;
	}
	c->state = CONN_CLOSING;
	if (c->timer) { /* a peer that never reads the GOAWAY gets this long */
		struct timeval tv = clock_tv_ms(c->srv->limits.write_timeout_ms);

		(void)evtimer_add(c->timer, &tv);
	}
	grpc_conn_flush(c);
}

/* After input or output: pause reading while the output is over its cap,
 * notice that the session is over. */
static void conn_update(struct grpc_conn *c)
{
	struct evbuffer *out = conn_out(c);
	bool over;

	if (c->state == CONN_OPEN && !nghttp2_session_want_read(c->session) &&
	    !nghttp2_session_want_write(c->session))
		c->state = CONN_CLOSING;
	if (c->state == CONN_CLOSING && evbuffer_get_length(out) == 0 &&
	    !nghttp2_session_want_write(c->session))
		conn_kill(c);
	if (!c->bev || c->state == CONN_DEAD)
		return;
	over = evbuffer_get_length(out) >= c->srv->limits.max_conn_output;
	if (c->state != CONN_OPEN || over) {
		if (!c->read_paused)
			(void)bufferevent_disable(c->bev, EV_READ);
		c->read_paused = true;
	} else if (c->read_paused) {
		(void)bufferevent_enable(c->bev, EV_READ);
		c->read_paused = false;
	}
}

/* Moves what nghttp2 has to send into the output buffer, up to the output
 * cap (the rest waits for the write callback). Not re-entrant: inside
 * nghttp2 it only notes that a flush is due. */
void grpc_conn_flush(struct grpc_conn *c)
{
	struct evbuffer *out = conn_out(c);

	if (c->state == CONN_DEAD)
		return;
	if (c->in_session) {
		c->want_flush = true;
		return;
	}
	c->in_session++;
	do {
		c->want_flush = false;
		while (evbuffer_get_length(out) < c->srv->limits.max_conn_output) {
			const uint8_t *data;
			ssize_t n = nghttp2_session_mem_send(c->session, &data);

			if (n < 0 || (n > 0 && evbuffer_add(out, data, (size_t)n) < 0)) {
				log_debug("conn_send_failed", "err=%s",
					  n < 0 ? nghttp2_strerror((int)n) : "ENOMEM");
				conn_kill(c);
				break;
			}
			if (n == 0)
				break;
		}
	} while (c->want_flush && c->state != CONN_DEAD &&
		 evbuffer_get_length(out) < c->srv->limits.max_conn_output);
	c->in_session--;
	conn_update(c);
}

/* ---- connections: life ---------------------------------------------------------------------- */

/* A quarter of the connection cap in use: enough peers that the ones
 * which never asked for anything may be crowding out one that will. */
static bool srv_crowded(const struct grpc_server *srv)
{
	return (uint64_t)srv->n_conns * 4 >= srv->limits.max_connections;
}

/* GOAWAY to a connection that sent no request in time. */
static void conn_close_unasked(struct grpc_conn *c)
{
	c->srv->stats.conns_timed_out++;
	log_debug("conn_no_request", "ms=%u conns=%u action=goaway",
		  c->srv->limits.first_request_timeout_ms, c->srv->n_conns);
	grpc_conn_goaway(c, NGHTTP2_NO_ERROR);
}

/* The server just became crowded: connections past their first-request
 * deadline that were let be while it was not go now. They are only marked
 * (GOAWAY queued, or DEAD for the timer to free): nothing is freed here. */
static void srv_sweep_unasked(struct grpc_server *srv)
{
	uint64_t now = clock_now_ns(), fr_ns = (uint64_t)srv->limits.first_request_timeout_ms * 1000000ULL;

	for (struct grpc_conn *c = srv->conns; c; c = c->next)
		if (c->bev && c->state == CONN_OPEN && c->handshaken && !c->requested &&
		    now - c->t_accept_ns >= fr_ns)
			conn_close_unasked(c);
}

/* (Re)arms the timer of an open socket connection for the deadline that
 * applies now (see the top): until the first request, the earlier of the
 * handshake's and the first request's, both counted from the accept, so
 * nothing the peer sends in between buys it time; after it, idle. */
void grpc_conn_arm_timer(struct grpc_conn *c)
{
	const struct grpc_limits *lim = &c->srv->limits;
	uint64_t ms, now, due;
	struct timeval tv;

	if (!c->timer || c->state != CONN_OPEN)
		return;
	if (c->requested) {
		ms = lim->idle_timeout_ms;
	} else {
		ms = lim->first_request_timeout_ms;
		if (!c->handshaken && lim->handshake_timeout_ms < ms)
			ms = lim->handshake_timeout_ms;
		now = clock_now_ns();
		due = c->t_accept_ns + ms * 1000000ULL;
		ms = due > now ? (due - now + 999999) / 1000000 : 0;
	}
	tv = clock_tv_ms((uint32_t)ms);
	(void)evtimer_add(c->timer, &tv);
}

static void conn_destroy(struct grpc_conn *c)
{
	struct grpc_server *srv = c->srv;

	c->state = CONN_DEAD;
	while (c->calls) {
		(void)nghttp2_session_set_stream_user_data(c->session, c->calls->stream_id, NULL);
		grpc_call_detach(c->calls); /* cancel callbacks may complete other calls */
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->n_conns--;
	srv->stats.conns_active--;
	nghttp2_session_del(c->session);
	if (c->timer)
		event_free(c->timer);
	if (c->bev)
		bufferevent_free(c->bev);
	if (c->mem_out)
		evbuffer_free(c->mem_out);
	free(c);
}

static void conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_conn *c = arg;
	struct timeval tv;

	if (c->state == CONN_DEAD) {
		conn_destroy(c);
		return;
	}
	if (c->state == CONN_CLOSING || !c->handshaken) {
		c->srv->stats.conns_timed_out++;
		log_debug("conn_timeout", "state=%s", c->handshaken ? "closing" : "handshake");
		conn_destroy(c);
		return;
	}
	if (!c->requested) {
		uint64_t idle_ns = (uint64_t)c->srv->limits.idle_timeout_ms * 1000000ULL;
		uint64_t quiet_ns = clock_now_ns() - c->t_input_ns;

		/* Without a crowd, a client that connected ahead of its
		 * first call (the kubelet does) is merely idle. */
		if (!srv_crowded(c->srv) && quiet_ns < idle_ns) {
			tv = clock_tv_ms((uint32_t)((idle_ns - quiet_ns + 999999) / 1000000));
			(void)evtimer_add(c->timer, &tv);
			return;
		}
		conn_close_unasked(c);
		if (c->state == CONN_DEAD)
			conn_destroy(c);
		return;
	}
	if (c->n_active > 0) { /* a handler is working for this peer: not idle */
		tv = clock_tv_ms(c->srv->limits.idle_timeout_ms);
		(void)evtimer_add(c->timer, &tv);
		return;
	}
	c->srv->stats.conns_timed_out++;
	log_debug("conn_idle", "action=goaway");
	grpc_conn_goaway(c, NGHTTP2_NO_ERROR);
	if (c->state == CONN_DEAD)
		conn_destroy(c);
}

/* Feeds input to nghttp2 and flushes. 0, or -EPIPE once the session is over. */
static int conn_recv(struct grpc_conn *c, const uint8_t *data, size_t len)
{
	ssize_t n;

	if (c->state != CONN_OPEN || !nghttp2_session_want_read(c->session))
		return -EPIPE;
	c->in_session++;
	n = nghttp2_session_mem_recv(c->session, data, len);
	c->in_session--;
	if (n == NGHTTP2_ERR_BAD_CLIENT_MAGIC) { /* not HTTP/2 at all: no GOAWAY either */
		c->srv->stats.conns_protocol_error++;
		log_debug("conn_bad_preface", "bytes=%zu", len);
		conn_kill(c);
		return -EPIPE;
	}
	if (n < 0) {
		log_debug("conn_recv_failed", "err=%s", nghttp2_strerror((int)n));
		grpc_conn_goaway(c, NGHTTP2_PROTOCOL_ERROR);
		return -EPIPE;
	}
	grpc_conn_flush(c);
	return c->state == CONN_OPEN ? 0 : -EPIPE;
}

static void conn_on_read(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n;

	c->t_input_ns = clock_now_ns();
	if (c->requested) /* before it, input buys no time: see grpc_conn_arm_timer() */
		grpc_conn_arm_timer(c);
	while (c->state == CONN_OPEN && !c->read_paused &&
	       (n = evbuffer_get_contiguous_space(in)) > 0) {
		const uint8_t *data = evbuffer_pullup(in, (ev_ssize_t)n);

		(void)conn_recv(c, data, n);
		(void)evbuffer_drain(in, n);
	}
	if (c->state == CONN_DEAD)
		conn_destroy(c);
	else if (c->state != CONN_OPEN)
		(void)evbuffer_drain(in, evbuffer_get_length(in));
}

static void conn_on_write(struct bufferevent *bev, void *arg)
{
	struct grpc_conn *c = arg;
	bool paused = c->read_paused;

	grpc_conn_flush(c);
	if (c->state == CONN_DEAD) {
		conn_destroy(c);
		return;
	}
	if (paused && !c->read_paused) /* input that waited while we were over the cap */
		conn_on_read(bev, c);
}

static void conn_on_event(struct bufferevent *bev, short what, void *arg)
{
	struct grpc_conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		c->srv->stats.conns_timed_out++;
		log_debug("conn_timeout", "state=write");
	} else {
		log_debug("conn_closed", "eof=%d error=%d", !!(what & BEV_EVENT_EOF),
			  !!(what & BEV_EVENT_ERROR));
	}
	conn_destroy(c);
}

/* A connection with our SETTINGS queued. bev NULL: memory connection. Takes
 * bev (freed on failure). */
static int conn_new(struct grpc_server *srv, struct bufferevent *bev, struct grpc_conn **ret)
{
	const struct grpc_limits *lim = &srv->limits;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, lim->max_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, LOCAL_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST },
	};
	struct grpc_conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c) {
		if (bev)
			bufferevent_free(bev);
		return -ENOMEM;
	}
	c->srv = srv;
	c->bev = bev;
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->n_conns++;
	srv->stats.conns_active++;

	r = nghttp2_session_server_new2(&c->session, srv->cbs, c, srv->opt);
	if (r < 0) {
		c->session = NULL;
		goto fail;
	}
	if (bev) {
		c->timer = evtimer_new(srv->base, conn_on_timer, c);
		if (!c->timer)
			goto fail;
	} else {
		c->mem_out = evbuffer_new();
		if (!c->mem_out)
			goto fail;
	}
	if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv)) < 0 ||
	    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
						  LOCAL_WINDOW) < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	/* conn_destroy() copes with a half-built connection, but not with a
	 * NULL session; nghttp2_session_del(NULL) is a no-op. */
	conn_destroy(c);
	return -ENOMEM;
}


/* How readily c gives up its place: 0 never (a handler works for it, or it
 * is not a socket), 1 streams open (a request still arriving or a reply
 * still leaving), 2 idle after requests, 3 idle without ever a request, 4
 * already closing. A client that has asked before (the kubelet) loses its
 * connection only to a crowd of such clients: closing it under a client
 * about to send costs that call an UNAVAILABLE. */
static int conn_evictable(const struct grpc_conn *c)
{
	if (!c->bev || c->state == CONN_DEAD || c->n_active > 0)
		return 0;
	if (c->state == CONN_CLOSING)
		return 4;
	if (!c->requested)
		return 3;
	return c->calls ? 1 : 2;
}

/* At the connection cap: closes the most evictable connection, the one
 * longest without input among equals, so that an idle crowd cannot keep the
 * kubelet out (it gets in, at worst, at its next call). False when every
 * connection has a call in a handler. */
static bool conn_evict_idlest(struct grpc_server *srv, const struct grpc_listener *l)
{
	struct grpc_conn *victim = NULL;
	int best = 0;

	for (struct grpc_conn *c = srv->conns; c; c = c->next) {
		int e = conn_evictable(c);

		if (e > best || (e > 0 && e == best && c->t_input_ns < victim->t_input_ns)) {
			victim = c;
			best = e;
		}
	}
	if (!victim)
		return false;
	srv->stats.conns_evicted++;
	if (ratelimit_pass(&srv->evict_rl, NULL)) /* the total says how many */
		log_warn("conn_evicted", "socket=%s max=%u idle_ms=%llu evicted_total=%llu "
					 "action=closed_idlest",
			 l->path, srv->limits.max_connections,
			 (unsigned long long)((clock_now_ns() - victim->t_input_ns) / 1000000),
			 (unsigned long long)srv->stats.conns_evicted);
	grpc_conn_abort(victim);
	return true;
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
		      int socklen, void *arg)
{
	struct grpc_listener *l = arg;
	struct grpc_server *srv = l->srv;
	struct bufferevent *bev;
	struct grpc_conn *c;
	uint64_t held;
	struct timeval wt = clock_tv_ms(srv->limits.write_timeout_ms);

	if (srv->n_conns >= srv->limits.max_connections && !conn_evict_idlest(srv, l)) {
		srv->stats.conns_rejected++;
		if (ratelimit_pass(&srv->warn_rl, &held))
			log_warn("conn_rejected",
				 "socket=%s max=%u reason=\"all busy\" action=closed suppressed=%llu",
				 l->path, srv->limits.max_connections, (unsigned long long)held);
		(void)close(fd);
		return;
	}
	bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		(void)close(fd);
		return;
	}
	if (conn_new(srv, bev, &c) < 0)
		return;
	if (srv->n_conns * 4 >= srv->limits.max_connections &&
	    (srv->n_conns - 1) * 4 < srv->limits.max_connections)
		srv_sweep_unasked(srv);
	srv->stats.conns_accepted++;
	c->t_accept_ns = c->t_input_ns = clock_now_ns();
	bufferevent_setcb(bev, conn_on_read, conn_on_write, conn_on_event, c);
	bufferevent_setwatermark(bev, EV_READ, 0, srv->limits.max_conn_output);
	(void)bufferevent_set_timeouts(bev, NULL, &wt);
	grpc_conn_arm_timer(c);
	(void)bufferevent_enable(bev, EV_READ | EV_WRITE);
	grpc_conn_flush(c);
	if (c->state == CONN_DEAD)
		conn_destroy(c);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct grpc_listener *l = arg;

	(void)evconnlistener_enable(l->lev);
}

/* EMFILE, ENFILE, ENOBUFS: accepting again at once would spin the loop. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct grpc_listener *l = arg;
	struct timeval tv = clock_tv_ms(ACCEPT_RETRY_MS);
	int err = EVUTIL_SOCKET_ERROR();
	uint64_t held;

	if (ratelimit_pass(&l->srv->warn_rl, &held))
		log_warn("accept_failed", "socket=%s err=%s action=retry_in_%dms suppressed=%llu",
			 l->path, log_quote(strerror(err)), ACCEPT_RETRY_MS,
			 (unsigned long long)held);
	(void)evconnlistener_disable(lev);
	(void)evtimer_add(l->retry, &tv);
}

/* ---- memory connections (test seam) --------------------------------------------------------- */

int grpc_conn_new_memory(struct grpc_server *srv, struct grpc_conn **ret)
{
	struct grpc_conn *c;
	int r;

	r = conn_new(srv, NULL, &c);
	if (r < 0)
		return r;
	grpc_conn_flush(c);
	*ret = c;
	return 0;
}

int grpc_conn_feed(struct grpc_conn *c, const uint8_t *data, size_t len)
{
	assert(!c->bev);
	if (len == 0)
		return c->state == CONN_OPEN ? 0 : -EPIPE;
	return conn_recv(c, data, len);
}

size_t grpc_conn_take_output(struct grpc_conn *c, struct evbuffer *out)
{
	size_t n = evbuffer_get_length(c->mem_out);

	assert(!c->bev);
	if (out)
		(void)evbuffer_add_buffer(out, c->mem_out);
	else
		(void)evbuffer_drain(c->mem_out, n);
	grpc_conn_flush(c); /* room again: more of what nghttp2 has */
	return n;
}

struct grpc_conn *grpc_conn_free(struct grpc_conn *c)
{
	if (c)
		conn_destroy(c);
	return NULL;
}

struct grpc_listener *grpc_listener_free(struct grpc_listener *l)
{
	struct stat st;

	if (!l)
		return NULL;
	if (l->lev)
		evconnlistener_free(l->lev);
	if (l->retry)
		event_free(l->retry);
	/* Remove the socket file only if it is still the one we bound: a newer
	 * instance may have replaced it already. */
	if (l->ino && lstat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
		(void)unlink(l->path);
	free(l);
	return NULL;
}

/* Binds l->path and starts accepting; on failure the caller frees l, which
 * also removes a socket file bound here. */
static int listener_open(struct grpc_listener *l, mode_t mode)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int r;

	memcpy(sa.sun_path, l->path, strlen(l->path) + 1); /* length checked by the caller */
	if (lstat(l->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		if (unlink(l->path) < 0 && errno != ENOENT)
			return -errno;
	} else if (errno != ENOENT) {
		return -errno;
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* The file is born with its final mode: no chmod() window. The loop is
	 * single-threaded, so the process umask is ours for these lines. */
	old = umask(~mode & 0777);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return -errno;
	if (lstat(l->path, &st) < 0)
		return -errno;
	l->dev = st.st_dev;
	l->ino = st.st_ino;

	l->retry = evtimer_new(l->srv->base, on_accept_retry, l);
	if (!l->retry)
		return -ENOMEM;
	l->lev = evconnlistener_new(l->srv->base, on_accept, l,
				    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 128, fd);
	if (!l->lev)
		return -errno ? -errno : -ENOMEM;
	TAKE_FD(fd);
	evconnlistener_set_error_cb(l->lev, on_accept_error);
	return 0;
}

int grpc_server_listen_unix(struct grpc_server *srv, const char *path, mode_t mode)
{
	struct sockaddr_un sa;
	struct grpc_listener *l;
	size_t len = strlen(path);
	int r;

	if (len == 0 || (mode & ~(mode_t)0777))
		return -EINVAL;
	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	l = calloc(1, sizeof(*l) + len + 1);
	if (!l)
		return -ENOMEM;
	l->srv = srv;
	memcpy(l->path, path, len + 1);
	r = listener_open(l, mode);
	if (r < 0) {
		grpc_listener_free(l);
		return r;
	}
	l->next = srv->listeners;
	srv->listeners = l;
	return 0;
}

/* Server going away: tell the peer, without waiting for it to listen. */
void grpc_conn_abort(struct grpc_conn *c)
{
	if (c->bev && c->state == CONN_OPEN) {
		(void)nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
					    nghttp2_session_get_last_proc_stream_id(c->session),
					    NGHTTP2_NO_ERROR, NULL, 0);
		grpc_conn_flush(c);
		(void)evbuffer_write(bufferevent_get_output(c->bev), bufferevent_getfd(c->bev));
	}
	conn_destroy(c);
}
