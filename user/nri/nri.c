/* NRI plugin: the protocol session and its life on the loop; see nri.h.
 *
 * A session owns one ttrpc mux: conn 1 carries the runtime's requests to our
 * Plugin service, conn 2 our calls to its Runtime service. The session sends
 * RegisterPlugin first and serves conn 1 from the start, because Configure
 * may come before the RegisterPlugin reply (wire-protocols.md 4.6). Everything
 * decoded from the runtime goes through a budget allocator.
 *
 * This file holds the session and our calls to the Runtime service. The rest
 * of the module: nri_plugin.c the Plugin service (the runtime's requests),
 * nri_msg.c the message adapters, nri_loop.c the plugin on the loop (struct
 * nri); nri_priv.h what they share.
 */
#define LOG_MOD "nri"
#include "nri/nri.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "lib/backoff.h"
#include "lib/buf.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "nri_api.pb-c.h"
#include "nri/nri_priv.h"
#include "nri/ttrpc.h"

#define SVC_RUNTIME "nri.pkg.api.v1alpha1.Runtime"
#define CONN_PLUGIN 1	/* runtime calls us */
#define CONN_RUNTIME 2	/* we call the runtime */
#define PUSH_CHUNK (1u << 20) /* bytes of updates per UpdateContainers call */
/* A pod the runtime creates in a loop fails its creation in a loop: so many
 * handler error lines per window, the rest counted in the next line. */
#define FAIL_LOG_BURST 10
#define FAIL_LOG_WINDOW_MS 10000

/* ---- configuration ------------------------------------------------------------------------ */

void nri_settings_done(struct nri_settings *c)
{
	free(c->socket_path);
	free(c->name);
	free(c->idx);
	*c = (struct nri_settings){ 0 };
}

/* The runtime's own checks for external plugins (wire-protocols.md 4.6). */
static bool is_valid_name(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") == n;
}

static bool is_valid_idx(const char *s)
{
	return strlen(s) == 2 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9';
}

static unsigned or_default(unsigned v, unsigned def)
{
	return v ? v : def;
}

int nri_settings_init(struct nri_settings *c, const struct nri_config *in)
{
	static const struct nri_config none;
	const struct nri_config *i = in ? in : &none;

	*c = (struct nri_settings){
		.socket_path = strdup(i->socket_path ? i->socket_path : NRI_SOCKET_DEFAULT),
		.name = strdup(i->plugin_name ? i->plugin_name : NRI_PLUGIN_NAME),
		.idx = strdup(i->plugin_idx ? i->plugin_idx : NRI_PLUGIN_IDX),
		.backoff_min_ms = or_default(i->backoff_min_ms, 250),
		.backoff_max_ms = or_default(i->backoff_max_ms, 10000),
		.register_timeout_ms = or_default(i->register_timeout_ms, 5000),
		.setup_timeout_ms = or_default(i->setup_timeout_ms, 15000),
		.call_timeout_ms = or_default(i->call_timeout_ms, 5000),
		.create_wait_ms = or_default(i->create_wait_ms, NRI_CREATE_WAIT_MS),
	};
	if (!c->socket_path || !c->name || !c->idx) {
		nri_settings_done(c);
		return -ENOMEM;
	}
	if (!is_valid_name(c->name) || !is_valid_idx(c->idx) || !*c->socket_path) {
		nri_settings_done(c);
		return -EINVAL;
	}
	if (c->backoff_max_ms < c->backoff_min_ms)
		c->backoff_max_ms = c->backoff_min_ms;
	return 0;
}

/* ---- the session -------------------------------------------------------------------------- */

void nri_sync_reset(struct nri_session *s)
{
	for (size_t i = 0; i < s->n_parts; i++)
		nri__synchronize_request__free_unpacked(s->parts[i], &s->sync_alloc.base);
	free(s->parts);
	s->parts = NULL;
	s->n_parts = 0;
	s->sync_bytes = 0;
}

static int mux_write(void *ud, const void *buf, size_t len)
{
	struct nri_session *s = ud;

	return s->write(s->wud, buf, len);
}


void nri_create_call_free(struct create_call *cc)
{
	if (!cc)
		return;
	if (cc->req)
		nri__container_request__free_unpacked(cc->req, &cc->a.base);
	free(cc);
}

static int resume_self(void *ctx, uint64_t token)
{
	return nri_session_resume(ctx, token);
}

int nri_session_new(const struct nri_config *cfg, const struct nri_handlers *h, void *ud,
		    int (*write)(void *wud, const void *buf, size_t len), void *wud,
		    struct nri_session **ret)
{
	static const struct ttrpc_mux_ops ops = { .write = mux_write, .request = nri_on_request };
	_cleanup_(nri_session_freep) struct nri_session *s = NULL;
	int r;

	if (!h || !write)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	ratelimit_init(&s->fail_rl, FAIL_LOG_WINDOW_MS, FAIL_LOG_BURST);
	r = nri_settings_init(&s->conf, cfg);
	if (r < 0)
		return r;
	s->h = *h;
	s->ud = ud;
	s->write = write;
	s->wud = wud;
	r = ttrpc_mux_new(CONN_PLUGIN, CONN_RUNTIME, &ops, s, &s->mux);
	if (r < 0)
		return r;
	if (h->create_container)
		s->handled |= NRI_EVENT_BIT(NRI_EVENT_CREATE_CONTAINER);
	if (h->post_create_container)
		s->handled |= NRI_EVENT_BIT(NRI_EVENT_POST_CREATE_CONTAINER);
	if (h->start_container)
		s->handled |= NRI_EVENT_BIT(NRI_EVENT_START_CONTAINER);
	if (h->update_container)
		s->handled |= NRI_EVENT_BIT(NRI_EVENT_UPDATE_CONTAINER);
	if (h->stop_container)
		s->handled |= NRI_EVENT_BIT(NRI_EVENT_STOP_CONTAINER);
	if (h->remove_container)
		s->handled |= NRI_EVENT_BIT(NRI_EVENT_REMOVE_CONTAINER);
	/* A mask of 0 means "all events" to the runtime, and an UNIMPLEMENTED
	 * CreateContainer fails the container: with no handler at all, ask for
	 * RemoveContainer alone and answer it. */
	s->events = s->handled ? s->handled : NRI_EVENT_BIT(NRI_EVENT_REMOVE_CONTAINER);
	s->end = -ECONNRESET;
	s->resume_fn = resume_self;
	s->resume_ctx = s;
	*ret = TAKE_PTR(s);
	return 0;
}

struct nri_session *nri_session_free(struct nri_session *s)
{
	if (!s)
		return NULL;
	/* Pending calls end first (push_done() learns of it), then the
	 * connection as a whole. */
	s->mux = ttrpc_mux_free(s->mux);
	if (s->connected_called && s->h.disconnected)
		s->h.disconnected(s->ud, s->end);
	nri_sync_reset(s);
	/* Waiting CreateContainers go unanswered: their connection is gone. */
	while (s->waiting) {
		struct create_call *cc = s->waiting;

		s->waiting = cc->next;
		nri_create_call_free(cc);
	}
	nri_settings_done(&s->conf);
	free(s);
	return NULL;
}

bool nri_session_is_registered(const struct nri_session *s)
{
	return s->registered;
}

bool nri_session_is_synchronized(const struct nri_session *s)
{
	return s->synchronized;
}

const char *nri_session_why(const struct nri_session *s)
{
	return s->why.s;
}

const struct nri_stats *nri_session_stats(const struct nri_session *s)
{
	return &s->st;
}

uint32_t nri_session_events(const struct nri_session *s)
{
	return s->events;
}

/* Ends the session on the runtime's bad data or a missed deadline, with the
 * reason counted and kept for the log line and disconnected(). */
static int session_fail(struct nri_session *s, int r)
{
	if (!s->why.s[0] && s->mux && ttrpc_mux_is_dead(s->mux))
		errbuf_set(&s->why, "%s", ttrpc_mux_why(s->mux));
	if (r == -EPROTO || r == -E2BIG)
		s->st.protocol_errors++;
	if (r == -E2BIG)
		s->st.oversized++;
	if (r == -ETIMEDOUT)
		s->st.timeouts++;
	s->end = r;
	return r;
}

/* ---- registration and Runtime calls ------------------------------------------------------- */

static void on_registered(void *ud, int r, int code, const char *msg, const uint8_t *payload,
			  size_t len)
{
	struct nri_session *s = ud;

	if (r == -ECONNRESET) /* the session is closing anyway */
		return;
	if (r < 0) {
		errbuf_set(&s->why, "no RegisterPlugin reply within %u ms",
			   s->conf.register_timeout_ms);
		s->fatal = r;
		return;
	}
	if (code != TTRPC_OK) {
		errbuf_set(&s->why, "registration refused: %s %s", ttrpc_code_name(code),
			   log_quote(msg));
		s->fatal = -ECONNREFUSED;
		return;
	}
	s->registered = true;
	s->st.registrations++;
	log_info("nri_registered", "plugin=%s-%s", s->conf.idx, s->conf.name);
	s->connected_called = true;
	if (s->h.connected)
		s->h.connected(s->ud);
}

int nri_session_start(struct nri_session *s)
{
	Nri__RegisterPluginRequest req = NRI__REGISTER_PLUGIN_REQUEST__INIT;
	uint8_t buf[256];
	size_t len;

	req.plugin_name = s->conf.name;
	req.plugin_idx = s->conf.idx;
	len = nri__register_plugin_request__get_packed_size(&req);
	if (len > sizeof(buf)) /* name < 64 bytes: cannot happen */
		return -E2BIG;
	(void)nri__register_plugin_request__pack(&req, buf);
	return ttrpc_mux_call(s->mux, SVC_RUNTIME, "RegisterPlugin", buf, len,
			      s->conf.register_timeout_ms, on_registered, s, NULL);
}

static void on_pushed(void *ud, int r, int code, const char *msg, const uint8_t *payload,
		      size_t len)
{
	struct nri_session *s = ud;
	struct ttrpc_pb_alloc a;
	Nri__UpdateContainersResponse *resp;
	_cleanup_free_ const char **ids = NULL;

	if (r == 0 && code != TTRPC_OK) {
		log_warn("nri_push_refused", "code=%s msg=%s", ttrpc_code_name(code),
			 log_quote(msg));
		r = -EREMOTEIO;
	}
	if (r < 0) {
		if (r != -ECONNRESET)
			log_warn_errno(r, "nri_push_failed", "action=reported");
		if (s->h.push_done)
			s->h.push_done(s->ud, r, NULL, 0);
		return;
	}
	ttrpc_pb_alloc_init(&a, NRI_DECODE_BUDGET);
	resp = nri__update_containers_response__unpack(&a.base, len, payload);
	if (!resp) {
		errbuf_set(&s->why, "undecodable UpdateContainersResponse");
		s->fatal = -EPROTO;
		if (s->h.push_done)
			s->h.push_done(s->ud, -EPROTO, NULL, 0);
		return;
	}
	if (resp->n_failed > 0)
		ids = calloc(resp->n_failed, sizeof(*ids));
	if (resp->n_failed > 0 && !ids) {
		nri__update_containers_response__free_unpacked(resp, &a.base);
		if (s->h.push_done)
			s->h.push_done(s->ud, -ENOMEM, NULL, 0);
		return;
	}
	for (size_t i = 0; i < resp->n_failed; i++)
		ids[i] = resp->failed[i] ? nri_str(resp->failed[i]->container_id) : "";
	if (resp->n_failed > 0) /* one line, however many */
		log_warn("nri_update_failed", "n=%zu first=%s action=reported",
			 resp->n_failed, log_quote(ids[0]));
	s->st.updates_failed += resp->n_failed;
	if (s->h.push_done)
		s->h.push_done(s->ud, 0, ids, resp->n_failed);
	nri__update_containers_response__free_unpacked(resp, &a.base);
}

/* End of the update that starts at off in an encoded update field. */
static size_t update_end(const struct nri_updates *u, size_t off)
{
	size_t len = 0;
	unsigned shift = 0;

	off++; /* the key */
	do {
		len |= (size_t)(nri_updates_bytes(u)[off] & 0x7f) << shift;
		shift += 7;
	} while (nri_updates_bytes(u)[off++] & 0x80);
	return off + len;
}

/* One UpdateContainers call with n updates: the request is their update field alone. */
static int push_chunk(struct nri_session *s, const uint8_t *buf, size_t len, size_t n)
{
	int r = ttrpc_mux_call(s->mux, SVC_RUNTIME, "UpdateContainers", buf, len,
			       s->conf.call_timeout_ms, on_pushed, s, NULL);

	if (r < 0)
		return r;
	s->st.updates_pushed += n;
	return 0;
}

int nri_session_push_updates(struct nri_session *s, const struct nri_update *u, size_t n)
{
	_cleanup_(nri_updates_done) struct nri_updates upd = UPDATES_INIT(PB_UPDATE);
	size_t start = 0, end = 0, k = 0;
	int r;

	if (!s->registered)
		return -ENOTCONN;
	if (n > NRI_UPDATES_MAX)
		return -E2BIG;
	/* Every update is checked (and encoded) before the first call goes out. */
	for (size_t i = 0; i < n; i++) {
		r = nri_updates_add(&upd, u[i].container_id, u[i].cpus);
		if (r < 0)
			return r;
	}
	/* Calls of about PUSH_CHUNK bytes, cut between updates. */
	while (end < nri_updates_len(&upd)) {
		end = update_end(&upd, end);
		k++;
		if (end - start < PUSH_CHUNK && end < nri_updates_len(&upd))
			continue;
		r = push_chunk(s, nri_updates_bytes(&upd) + start, end - start, k);
		if (r < 0)
			return r;
		start = end;
		k = 0;
	}
	return 0;
}

int nri_session_push_evict(struct nri_session *s, const char *container_id, const char *reason)
{
	Nri__UpdateContainersRequest req = NRI__UPDATE_CONTAINERS_REQUEST__INIT;
	Nri__ContainerEviction ev = NRI__CONTAINER_EVICTION__INIT, *evp = &ev;
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len;

	if (!s->registered)
		return -ENOTCONN;
	if (!nri_is_valid_id(container_id) || !reason || strlen(reason) >= ERRBUF_MAX)
		return -EINVAL;
	ev.container_id = (char *)container_id;
	ev.reason = (char *)reason;
	req.n_evict = 1;
	req.evict = &evp;
	len = nri__update_containers_request__get_packed_size(&req);
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	(void)nri__update_containers_request__pack(&req, buf);
	return ttrpc_mux_call(s->mux, SVC_RUNTIME, "UpdateContainers", buf, len,
			      s->conf.call_timeout_ms, on_pushed, s, NULL);
}

int nri_session_feed(struct nri_session *s, const void *buf, size_t len)
{
	uint64_t rejected = ttrpc_mux_rejected(s->mux, NULL);
	int r = ttrpc_mux_feed(s->mux, buf, len);
	const char *last;

	/* The mux answered a misnumbered request and goes on: say so once per
	 * connection (the runtime repeats whatever it does wrong). */
	if (ttrpc_mux_rejected(s->mux, &last) != rejected)
		log_emit(rejected ? LOG_DEBUG : LOG_WARN, LOG_MOD, "nri_request_rejected",
			 "why=%s action=answered_invalid_argument", log_quote(last));
	if (r < 0)
		return session_fail(s, r);
	if (s->fatal)
		return session_fail(s, s->fatal);
	return 0;
}

int64_t nri_session_next_deadline(const struct nri_session *s)
{
	int64_t d = ttrpc_mux_next_deadline(s->mux);

	for (const struct create_call *cc = s->waiting; cc; cc = cc->next)
		if (d < 0 || cc->deadline_ms < d)
			d = cc->deadline_ms;
	return d;
}

int nri_session_expire(struct nri_session *s, int64_t now_ms)
{
	struct create_call *cc;
	int r;

	(void)ttrpc_mux_expire(s->mux, now_ms);
	/* One at a time from the head: a final run unlinks its call. */
	do {
		for (cc = s->waiting; cc && cc->deadline_ms > now_ms; cc = cc->next)
			;
		if (cc) {
			r = nri_run_create(s, cc, true);
			if (r < 0)
				return session_fail(s, r);
		}
	} while (cc);
	return s->fatal ? session_fail(s, s->fatal) : 0;
}

