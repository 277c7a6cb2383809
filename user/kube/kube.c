/* Kubernetes REST client on libevent + libcurl multi-socket. See kube.h.
 *
 * This file holds the loop side (curl's sockets and timer), the calls'
 * queue, retries and results, and the public API. The rest of the module:
 * kube_attempt.c one HTTP attempt (the easy handle), kube_watch.c what a
 * watch does besides, kube_cred.c the client certificate and token,
 * kube_proxy.c the proxy, kube_wire.c the pure building blocks; kube_priv.h
 * what they share.
 *
 * Internals. A struct kube_call ("call") is one logical request or watch; each
 * HTTP attempt gets a fresh curl easy handle. Connections (and with HTTP/2 the
 * one connection every stream shares), DNS and TLS sessions belong to the
 * multi handle, so a new easy handle costs nothing on the wire.
 *
 *   start ──> RUNNING (easy in multi) ──curl DONE──> collected ──> ready queue
 *     ^                                                                │
 *     └── retry timer <── retry (401 once / backoff) <── finish ───────┘
 *                                                          └──> callback, freed
 *
 * libcurl calls us back (socket, timer, write, header callbacks) only from
 * inside curl_multi_socket_action() and a few other curl calls. Those
 * callbacks never call the user: they buffer bytes and mark the call ready.
 * After every curl_multi_socket_action() we collect finished transfers
 * (outside libcurl: curl_multi_remove_handle is legal here) and run
 * kube_dispatch(), the only place user callbacks run. The dispatcher marks the
 * call it works on busy: a user who cancels it, or frees the whole client,
 * from inside a callback only sets a flag, and the dispatcher releases things
 * once the callback has returned.
 *
 * Watch back-pressure: the write callback refuses to buffer more than one
 * max_line of complete lines (CURL_WRITEFUNC_PAUSE); the dispatcher drains
 * them and unpauses, so memory is bounded by about two lines. Over HTTP/2
 * libcurl then holds the stream's data back (its window is closed and what
 * already arrived waits in the connection's buffer) until the unpause, which
 * comes in the same loop iteration: the other streams are held up for no
 * longer than it takes to deliver one max_line of events.
 *
 * Client credentials: a certificate and key named by file are read by us and
 * handed to curl as blobs, stat()ed before every attempt and read again when
 * they change. curl matches a connection for reuse on the certificate bytes,
 * so after a rotation new transfers open a connection with the new pair
 * while the ones in flight (a watch) finish on the old one.
 */
#include "kube/kube.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "lib/jsonc.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "kube/kube_priv.h"
#include "kube/kubeconfig.h"

#define LOG_MOD "kube"
#include "lib/log.h"
#include "lib/num.h"
#include "lib/ratelimit.h"

#define SLOW_DISPATCH_MS 10

/* Debian's libcurl links librtmp, which links GnuTLS, whose library
 * constructor initialises it as the process loads (crypto back-ends,
 * p11-kit): about 0.7 MiB of memory private to this process for a library
 * nothing here calls (curl's TLS is OpenSSL; rtmp is not among the allowed
 * protocols). gnutls.h documents this definition (GNUTLS_SKIP_GLOBAL_INIT) as
 * the way to skip it: GnuTLS's own is weak, and as a library in the link
 * defines the name the linker exports ours from the executable, which the
 * loader then prefers. */
int _gnutls_global_init_skip(void);
int _gnutls_global_init_skip(void)
{
	return 1;
}

struct kube_sock {
	struct kube *k;
	curl_socket_t fd;
	struct event *ev;
	LIST_ENTRY(kube_sock) link;
};

/* ---- curl <-> libevent --------------------------------------------------------------- */

static void kube_after_curl(struct kube *k);
static void kube_dispatch(struct kube *k);

static void sock_free(struct kube_sock *ks)
{
	if (ks->ev)
		event_free(ks->ev);
	LIST_REMOVE(ks, link);
	free(ks);
}

static void on_sock_event(evutil_socket_t fd, short what, void *arg)
{
	/* ks may be freed inside socket_action (CURL_POLL_REMOVE): read k first. */
	struct kube *k = ((struct kube_sock *)arg)->k;
	int action = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
	int running = 0;

	(void)curl_multi_socket_action(k->multi, fd, action, &running);
	kube_after_curl(k);
}

static int on_curl_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct kube *k = userp;
	struct kube_sock *ks = socketp;
	short flags = EV_PERSIST;

	if (what == CURL_POLL_REMOVE) {
		if (ks)
			sock_free(ks);
		return 0;
	}
	if (!ks) {
		ks = calloc(1, sizeof(*ks));
		if (!ks)
			return -1;
		ks->k = k;
		ks->fd = s;
		LIST_INSERT_HEAD(&k->socks, ks, link);
		if (curl_multi_assign(k->multi, s, ks) != CURLM_OK) {
			sock_free(ks);
			return -1;
		}
	}
	if (ks->ev) {
		event_free(ks->ev);
		ks->ev = NULL;
	}
	if (what & CURL_POLL_IN)
		flags |= EV_READ;
	if (what & CURL_POLL_OUT)
		flags |= EV_WRITE;
	ks->ev = event_new(k->base, s, flags, on_sock_event, ks);
	if (!ks->ev || event_add(ks->ev, NULL) < 0)
		return -1;
	return 0;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct kube *k = arg;
	int running = 0;

	(void)curl_multi_socket_action(k->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	kube_after_curl(k);
}

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp)
{
	struct kube *k = userp;
	struct timeval tv;

	if (timeout_ms < 0)
		return evtimer_del(k->timer) < 0 ? -1 : 0;
	tv = clock_tv_ms(timeout_ms);
	return evtimer_add(k->timer, &tv) < 0 ? -1 : 0;
}

/* Also while busy: the dispatcher took c off the queue before working on it,
 * so bytes that arrive meanwhile (curl_easy_pause) get another round. */
void kube_call_mark_ready(struct kube_call *c)
{
	if (c->in_ready)
		return;
	TAILQ_INSERT_TAIL(&c->k->ready, c, ready);
	c->in_ready = true;
}

static void call_unready(struct kube_call *c)
{
	if (!c->in_ready)
		return;
	TAILQ_REMOVE(&c->k->ready, c, ready);
	c->in_ready = false;
}

void kube_call_free(struct kube_call *c)
{
	struct kube *k = c->k;

	kube_call_stop_easy(c);
	call_unready(c);
	TAILQ_REMOVE(&k->calls, c, link);
	if (c->retry_ev)
		event_free(c->retry_ev);
	free(c->url);
	if (c->body)
		explicit_bzero(c->body, c->body_len);
	free(c->body);
	free(c->content_type);
	free(c->in);
	free(c->warning);
	kube_lines_done(&c->lines);
	if (c->end_status)
		(void)json_object_put(c->end_status);
	free(c);
}

static void kube_after_curl(struct kube *k)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(k->multi, &left))) {
		struct kube_call *c = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		(void)curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
		if (c)
			kube_call_collect(c, m->data.result);
	}
	kube_dispatch(k);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct kube_call *c = arg;
	struct kube *k = c->k;
	int r;

	r = kube_call_start(c);
	if (r < 0) {
		c->local_err = r;
		errbuf_set(&c->errtext, "could not start request: %s", strerror(-r));
		c->done = true;
		kube_call_mark_ready(c);
	}
	kube_dispatch(k);
}

static int call_schedule(struct kube_call *c, uint32_t delay_ms)
{
	struct timeval tv = clock_tv_ms(delay_ms);

	if (!c->retry_ev) {
		c->retry_ev = evtimer_new(c->k->base, on_retry, c);
		if (!c->retry_ev)
			return -ENOMEM;
	}
	return evtimer_add(c->retry_ev, &tv) < 0 ? -ENOMEM : 0;
}

/* ---- finishing: result, retry, callback ---------------------------------------------- */

static bool call_should_retry(const struct kube_call *c, const struct kube_result *res)
{
	if (c->kind != CALL_REQUEST || c->attempts >= (unsigned)c->max_attempts)
		return false;
	if (res->http_status == 429 || res->http_status == 503)
		return true;
	/* Nothing left this host: safe for every verb. */
	if (!c->sent && res->http_status == 0 &&
	    (res->error == -ECONNREFUSED || res->error == -EHOSTUNREACH ||
	     res->error == -ETIMEDOUT || res->error == -ECONNRESET))
		return true;
	if (c->verb != KUBE_GET)
		return false;
	if (res->http_status == 500 || res->http_status == 502 || res->http_status == 504)
		return true;
	return res->http_status == 0 && (res->error == -ETIMEDOUT || res->error == -ECONNRESET);
}

static void status_text(struct errbuf *eb, long http, const struct kube_status *s)
{
	errbuf_set(eb, "HTTP %ld %s: %s", http, s->reason ? s->reason : "(no reason)",
		   s->message ? s->message : "(no message)");
}

/* A watch ended by an ERROR event: its Status is the result. */
static void result_watch_error(struct kube_call *c, struct kube_result *res)
{
	res->body = c->end_status;
	if (kube_status_parse(c->end_status, &res->status) == 0 && res->status.code)
		res->error = kube_errno_from_http(res->status.code, res->status.reason);
	if (res->error == 0)
		res->error = -EPROTO;
	errbuf_set(&c->errtext, "watch ERROR event: %d %s: %s", res->status.code,
		   res->status.reason ? res->status.reason : "",
		   res->status.message ? res->status.message : "");
	if (res->status.retry_after_s >= 0 && res->retry_after_s < 0)
		res->retry_after_s = res->status.retry_after_s;
}

/* Our callbacks refused the transfer (c->local_err) or curl failed it. */
static void result_transfer_error(struct kube_call *c, struct kube_result *res)
{
	if (c->local_err) {
		res->error = c->local_err;
		if (c->errtext.s[0])
			return;
		if (c->local_err == -E2BIG)
			errbuf_set(&c->errtext, "%s over %zu bytes",
				   c->stream_ok ? "watch line" : "response body",
				   c->stream_ok ? c->lines.max_line : c->max_body);
		else
			errbuf_set(&c->errtext, "%s", strerror(-c->local_err));
		return;
	}
	res->error = kube_errno_from_curl(c->cres);
	/* A proxy that answered CONNECT with an error refused the tunnel (curl
	 * reports it as a receive error). */
	if (c->proxy_status >= 300)
		res->error = -ECONNREFUSED;
	/* curl's own text for this code also speaks of SSH keys. */
	errbuf_set(&c->errtext, "%s%s%s",
		   res->error == -EKEYREJECTED ? "server certificate rejected"
					       : curl_easy_strerror(c->cres),
		   c->errbuf[0] ? ": " : "", c->errbuf);
}

/* A complete HTTP response: its status, and its body as JSON (into
 * *ret_body, owned by the caller). */
static void result_http(struct kube_call *c, struct kube_result *res,
			struct json_object **ret_body)
{
	struct json_object *body = NULL;

	res->error = kube_errno_from_http(c->http_status, NULL);
	if (c->in_len && kube_json_parse(c->in, c->in_len, &body) == 0) {
		res->body = body;
		*ret_body = body;
	}
	if (res->error == 0) {
		if (c->in_len && !body) {
			res->error = -EPROTO;
			errbuf_set(&c->errtext, "HTTP %ld with a body that is not JSON (%zu bytes)",
				   c->http_status, c->in_len);
		}
		return;
	}
	if (body && kube_status_parse(body, &res->status) == 0) {
		res->error = kube_errno_from_http(c->http_status, res->status.reason);
		if (res->retry_after_s < 0 && res->status.retry_after_s >= 0)
			res->retry_after_s = res->status.retry_after_s;
		status_text(&c->errtext, c->http_status, &res->status);
	} else {
		errbuf_set(&c->errtext, "HTTP %ld (no Status body)", c->http_status);
	}
}

/* Builds c's result into res (body into *ret_body, owned by the caller). */
static void call_result(struct kube_call *c, struct kube_result *res, struct json_object **ret_body)
{
	*res = (struct kube_result){
		.http_status = c->http_status,
		.retry_after_s = c->retry_after_s > 0 ? (int)c->retry_after_s : -1,
		.warning = c->warning,
		.error_text = c->errtext.s,
		.attempts = c->attempts,
	};
	if (c->end_status) { /* a watch ended by an ERROR event */
		result_watch_error(c, res);
	} else if (c->local_err || c->cres != CURLE_OK) {
		result_transfer_error(c, res);
	} else if (c->stream_ok) { /* the server ended a watch normally */
		if (kube_lines_pending(&c->lines)) {
			res->error = -EPROTO;
			errbuf_set(&c->errtext, "watch stream ended inside a line (%zu bytes)",
				   kube_lines_pending(&c->lines));
		}
	} else {
		result_http(c, res, ret_body);
	}
}

/* The attempt is over: retry, or hand the result to the user. */
static void call_finish(struct kube_call *c)
{
	struct kube *k = c->k;
	_cleanup_(json_object_putp) struct json_object *body = NULL;
	struct kube_result res;
	uint32_t delay;

	call_result(c, &res, &body);
	/* client-go: a 401 invalidates the cached token; re-read the file, retry once. */
	if (res.http_status == 401 && k->cfg->token_file && !c->auth_retried) {
		c->auth_retried = true;
		kube_token_reload(k, "unauthorized");
		if (call_schedule(c, 0) == 0)
			return;
	}
	if (call_should_retry(c, &res)) {
		delay = backoff_next_at_least(
			&c->bo, res.retry_after_s > 0 ? (uint32_t)res.retry_after_s * 1000u : 0);
		/* The caller's deadline wins over the server's Retry-After: better the
		 * last answer now than a retry that could only end after it. */
		if (c->deadline && clock_now_ms() + delay >= c->deadline) {
			log_debug("request_retry_past_deadline", "url=%s attempt=%u delay_ms=%u",
				  log_quote(c->url), c->attempts, delay);
		} else {
			log_debug("request_retry", "url=%s attempt=%u error=%s delay_ms=%u",
				  log_quote(c->url), c->attempts, log_quote(res.error_text),
				  delay);
			if (call_schedule(c, delay) == 0)
				return;
		}
	}
	if (res.error)
		k->st.failures++;
	if (res.error == -E2BIG)
		k->st.too_big++;
	c->finished = true;
	if (c->kind == CALL_REQUEST)
		c->done_cb(c->userdata, &res);
	else
		c->on_end(c->userdata, &res);
}

static void call_process(struct kube_call *c)
{
	struct kube *k = c->k;
	int r;

	if (c->stream_ok) {
		r = kube_watch_drain(c);
		if (k->dead || c->cancelled)
			return;
		if (r < 0) {
			kube_call_stop_easy(c);
			if (r != -ECANCELED)
				c->local_err = r;
			c->done = true;
		} else if (c->paused && c->easy) {
			/* May call on_body right away, which marks c ready again. */
			c->paused = false;
			(void)curl_easy_pause(c->easy, CURLPAUSE_CONT);
		}
	}
	if (c->done)
		call_finish(c);
}

static void kube_destroy(struct kube *k);

static void kube_dispatch(struct kube *k)
{
	struct kube_call *c;
	int64_t t0, dt;
	uint64_t held;

	if (k->dispatching) /* not re-entered in practice; the outer loop picks new work up */
		return;
	k->dispatching = true;
	t0 = clock_now_ms();
	while (!k->dead && (c = TAILQ_FIRST(&k->ready))) {
		call_unready(c);
		c->busy = true;
		call_process(c);
		c->busy = false;
		if (c->cancelled || c->finished)
			kube_call_free(c);
	}
	k->dispatching = false;
	if (k->dead) {
		kube_destroy(k);
		return;
	}
	dt = clock_now_ms() - t0;
	if (dt > SLOW_DISPATCH_MS) {
		k->st.slow_dispatches++;
		if (ratelimit_pass(&k->slow_rl, &held))
			log_warn("slow_dispatch", "ms=%lld budget_ms=%d suppressed=%llu",
				 (long long)dt, SLOW_DISPATCH_MS, (unsigned long long)held);
	}
}

/* ---- public API ---------------------------------------------------------------------- */

/* What may go to the server as a request path. Names reach the path from
 * peers (a pod's namespace from the runtime, a slice's name from a LIST), so
 * this is the last gate: segments are non-empty, never "." or "..", and of
 * the characters Kubernetes names and API paths use (a "/../" would have
 * libcurl climb out of the resource the caller meant). The query, after
 * '?', is percent-encoded by kube_query_add(): only control bytes, spaces
 * and '#' are refused there. */
bool kube_path_ok(const char *p)
{
	const char *seg;

	if (!p || p[0] != '/')
		return false;
	for (seg = ++p; *p && *p != '?'; p++) {
		if (*p != '/') {
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || strchr("-._~:", *p)))
				return false;
			continue;
		}
		if (p == seg || (p - seg == 1 && seg[0] == '.') ||
		    (p - seg == 2 && seg[0] == '.' && seg[1] == '.'))
			return false;
		seg = p + 1;
	}
	if ((p - seg == 1 && seg[0] == '.') || (p - seg == 2 && seg[0] == '.' && seg[1] == '.'))
		return false;
	for (; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#')
			return false;
	return true;
}

int kube_call_new(struct kube *k, enum call_kind kind, const char *path, struct kube_call **ret)
{
	struct kube_call *c;

	c = kind == CALL_WATCH ? calloc(1, sizeof(struct kube_watch)) : calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->k = k;
	c->kind = kind;
	TAILQ_INSERT_TAIL(&k->calls, c, link);
	backoff_init(&c->bo, k->o.backoff_initial_ms, k->o.backoff_max_ms);
	if (asprintf(&c->url, "%s%s", k->cfg->server, path) < 0) {
		c->url = NULL;
		kube_call_free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

static char *delete_options(const char *uid, const char *rv)
{
	_cleanup_(json_object_putp) struct json_object *o = json_object_new_object();
	struct json_object *pre = json_object_new_object();
	const char *s;

	if (!o || !pre) {
		if (pre)
			(void)json_object_put(pre);
		return NULL;
	}
	if (json_object_object_add(o, "preconditions", pre) < 0) {
		(void)json_object_put(pre);
		return NULL;
	}
	if (json_object_object_add(o, "kind", json_object_new_string("DeleteOptions")) < 0 ||
	    json_object_object_add(o, "apiVersion", json_object_new_string("v1")) < 0 ||
	    (uid && json_object_object_add(pre, "uid", json_object_new_string(uid)) < 0) ||
	    (rv && json_object_object_add(pre, "resourceVersion", json_object_new_string(rv)) < 0))
		return NULL;
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	return s ? strdup(s) : NULL;
}

static int call_set_body(struct kube_call *c, enum kube_verb verb, const char *body_json,
			 const struct kube_req_opts *o)
{
	const char *ct = "application/json";

	if (verb == KUBE_PATCH)
		ct = o->content_type ? o->content_type : "application/merge-patch+json";
	if (strpbrk(ct, "\r\n"))
		return -EINVAL;
	c->content_type = strdup(ct);
	if (!c->content_type)
		return -ENOMEM;
	if (body_json)
		c->body = strdup(body_json);
	else if (verb == KUBE_DELETE && (o->precondition_uid || o->precondition_rv))
		c->body = delete_options(o->precondition_uid, o->precondition_rv);
	else
		return 0;
	if (!c->body)
		return -ENOMEM;
	c->body_len = strlen(c->body);
	return 0;
}

int kube_request(struct kube *k, enum kube_verb verb, const char *path, const char *body_json,
		 const struct kube_req_opts *o, kube_done_fn cb, void *userdata,
		 struct kube_call **ret_call)
{
	static const struct kube_req_opts none;
	struct kube_call *c = NULL;
	int r;

	if (!o)
		o = &none;
	if (!k || !cb || !kube_path_ok(path) || (unsigned)verb > KUBE_DELETE || o->timeout_ms < 0 ||
	    o->max_attempts < 0 || o->deadline_ms < 0)
		return -EINVAL;
	if (k->dead) /* kube_free() was called in this callback round */
		return -ESHUTDOWN;
	if (verb == KUBE_GET ? body_json != NULL : (verb != KUBE_DELETE && !body_json))
		return -EINVAL;
	r = kube_call_new(k, CALL_REQUEST, path, &c);
	if (r < 0)
		return r;
	c->verb = verb;
	c->done_cb = cb;
	c->userdata = userdata;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : k->o.timeout_ms;
	c->max_body = o->max_body && o->max_body < k->o.max_body ? o->max_body : k->o.max_body;
	c->max_attempts = o->max_attempts ? o->max_attempts : 1;
	c->deadline = o->deadline_ms ? clock_now_ms() + o->deadline_ms : 0;
	c->lines.max_line = k->o.max_line;
	r = call_set_body(c, verb, body_json, o);
	if (r >= 0)
		r = kube_call_start(c);
	if (r < 0) {
		kube_call_free(c);
		return r;
	}
	if (ret_call)
		*ret_call = c;
	return 0;
}

void kube_call_cancel(struct kube_call *c)
{
	if (!c)
		return;
	if (c->busy) {
		c->cancelled = true;
		kube_call_stop_easy(c);
		return;
	}
	kube_call_free(c);
}

void kube_get_stats(const struct kube *k, struct kube_stats *ret)
{
	*ret = k->st;
}

static void kube_destroy(struct kube *k)
{
	struct kube_call *c;
	struct kube_sock *ks;

	while ((c = TAILQ_FIRST(&k->calls)))
		kube_call_free(c);
	/* May call on_curl_socket(CURL_POLL_REMOVE) and on_curl_timer(-1): k is intact. */
	if (k->multi)
		(void)curl_multi_cleanup(k->multi);
	while ((ks = LIST_FIRST(&k->socks)))
		sock_free(ks);
	if (k->timer)
		event_free(k->timer);
	if (k->token_ev)
		event_free(k->token_ev);
	(void)kubeconfig_token_free(k->token);
	kube_cred_file_done(&k->cert);
	kube_cred_file_done(&k->key);
	if (k->proxy) /* may hold proxy credentials */
		explicit_bzero(k->proxy, strlen(k->proxy));
	free(k->proxy);
	free(k->noproxy);
	kubeconfig_free(k->cfg);
	free(k->user_agent);
	if (k->global_init)
		curl_global_cleanup();
	free(k);
}

struct kube *kube_free(struct kube *k)
{
	if (!k)
		return NULL;
	if (k->dispatching) {
		/* Inside one of our callbacks: the dispatcher destroys k on its way out
		 * and calls nothing else meanwhile. */
		k->dead = true;
		return NULL;
	}
	kube_destroy(k);
	return NULL;
}

/* The options with their defaults and caps. k->o.user_agent is not kept:
 * k->user_agent is the client's own copy. */
static int kube_opts_set(struct kube *k, const struct kube_opts *opts)
{
	k->o = *opts;
	k->o.user_agent = NULL;
#define DEF(f, v)            \
	if (!k->o.f)         \
		k->o.f = (v)
	DEF(connect_timeout_ms, 10000);
	DEF(timeout_ms, 30000);
	DEF(watch_timeout_ms, 900000);
	DEF(max_body, KUBE_MAX_BODY_DEFAULT);
	DEF(max_line, KUBE_MAX_LINE_DEFAULT);
	DEF(token_refresh_ms, 60000);
	DEF(backoff_initial_ms, 500);
	DEF(backoff_max_ms, 30000);
#undef DEF
	if (k->o.connect_timeout_ms < 0 || k->o.timeout_ms < 0 || k->o.watch_timeout_ms < 0 ||
	    k->o.token_refresh_ms < 0)
		return -EINVAL;
	if (k->o.max_body > KUBE_MAX_BODY_DEFAULT)
		k->o.max_body = KUBE_MAX_BODY_DEFAULT;
	if (k->o.max_line > KUBE_MAX_LINE_DEFAULT)
		k->o.max_line = KUBE_MAX_LINE_DEFAULT;
	return 0;
}

/* The token and the client certificate and key, read for the first time. */
static int kube_creds_load(struct kube *k)
{
	int r;

	if (k->cfg->token_file) {
		r = kubeconfig_read_token(k->cfg->token_file, &k->token);
		if (r < 0)
			return r;
	} else if (k->cfg->token && !(k->token = strdup(k->cfg->token))) {
		return -ENOMEM;
	}
	k->cert = (struct cred_file){ .path = k->cfg->cert_file, .label = "CERTIFICATE" };
	k->key = (struct cred_file){ .path = k->cfg->key_file, .label = "PRIVATE KEY" };
	if (!kube_cred_refresh(k, true))
		return -ENOKEY;
	return 0;
}

/* libcurl, and the multi handle every call's easy handle joins. */
static int kube_multi_start(struct kube *k)
{
	const curl_version_info_data *vi;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	k->global_init = true;
	vi = curl_version_info(CURLVERSION_NOW);
	if (!(vi->features & CURL_VERSION_ASYNCHDNS))
		log_warn("curl_sync_dns", "version=%s action=dns_may_block_loop", vi->version);
	if (!(vi->features & CURL_VERSION_HTTP2))
		log_warn("curl_no_http2", "version=%s action=http1_only", vi->version);
	k->multi = curl_multi_init();
	k->timer = evtimer_new(k->base, on_timer, k);
	if (!k->multi || !k->timer)
		return -ENOMEM;
	if (curl_multi_setopt(k->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_SOCKETDATA, k) != CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_TIMERDATA, k) != CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX) != CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			      (long)KUBE_MAX_CONNECTIONS) != CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_MAXCONNECTS, (long)KUBE_MAX_CONNECTIONS) !=
		    CURLM_OK ||
	    curl_multi_setopt(k->multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
			      (long)KUBE_MAX_STREAMS) != CURLM_OK)
		return -EINVAL;
	return 0;
}

int kube_new(struct event_base *base, const struct kubeconfig *cfg, const struct kube_opts *opts,
	     struct kube **ret)
{
	static const struct kube_opts none;
	_cleanup_(kube_freep) struct kube *k = NULL;
	struct timeval tv;
	int r;

	if (!opts)
		opts = &none;
	if (!base || !cfg || !cfg->server)
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	ratelimit_init(&k->slow_rl, 60000, 1);
	TAILQ_INIT(&k->calls);
	TAILQ_INIT(&k->ready);
	LIST_INIT(&k->socks);
	k->base = base;
	r = kube_opts_set(k, opts);
	if (r < 0)
		return r;
	k->user_agent = strdup(opts->user_agent ? opts->user_agent : "dra-cpu");
	if (!k->user_agent)
		return -ENOMEM;
	r = kubeconfig_dup(cfg, &k->cfg);
	if (r < 0)
		return r;
	r = kube_creds_load(k);
	if (r < 0)
		return r;
	r = kube_proxy_select(k->cfg->server, k->cfg->proxy_url, &k->proxy, &k->noproxy);
	if (r < 0)
		return r;
	kube_proxy_log(k->proxy);
	r = kube_multi_start(k);
	if (r < 0)
		return r;
	if (k->cfg->token_file) {
		k->token_ev = event_new(base, -1, EV_PERSIST, kube_on_token_timer, k);
		tv = clock_tv_ms(k->o.token_refresh_ms);
		if (!k->token_ev || event_add(k->token_ev, &tv) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(k);
	return 0;
}
