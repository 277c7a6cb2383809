/* Kubernetes REST client on libevent + httpc. See kube.h.
 *
 * Internals. A struct kube_call ("call") is one logical request or watch; each
 * HTTP attempt is one httpc transfer (httpc keeps connections alive, so a
 * retry or the next request costs no handshake).
 *
 *   start ──> RUNNING (httpc transfer) ──on_done──> ready queue
 *     ^                                                  │
 *     └── retry timer <── retry (401 once / backoff) <── finish
 *                                                  └──> callback, freed
 *
 * httpc calls us back (head, body, done) from its own handlers. Those
 * callbacks never call the user: they buffer bytes, mark the call ready and
 * wake the dispatcher (an immediate event), the only place user callbacks run.
 * The dispatcher marks the call it works on busy: a user who cancels it, or
 * frees the whole client, from inside a callback only sets a flag, and the
 * dispatcher releases things once the callback has returned.
 *
 * Watch back-pressure: when a max_line of complete lines waits, the body
 * callback pauses the transfer; the dispatcher drains them and resumes, so
 * memory is bounded by about two lines and one read.
 */
#include "kube/kube.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "lib/backoff.h"
#include "lib/clock.h"
#include "kube/httpc.h"
#include "kube/kubeconfig.h"

#define LOG_MOD "kube"
#include "lib/log.h"

#define SLOW_DISPATCH_MS 10

enum call_kind { CALL_REQUEST, CALL_WATCH };

struct kube_call {
	struct kube *k;
	enum call_kind kind;
	TAILQ_ENTRY(kube_call) link;  /* k->calls: every live call */
	TAILQ_ENTRY(kube_call) ready; /* k->ready while in_ready */
	bool in_ready;
	bool busy;	   /* the dispatcher is working on it: do not free */
	bool cancelled;	   /* cancelled while busy: the dispatcher frees it */
	bool finished;	   /* final callback delivered: the dispatcher frees it */
	bool done;	   /* the current attempt is over (finished or never started) */
	bool paused;	   /* watch: the body callback paused the transfer */
	bool auth_retried; /* the one 401 retry has been used */
	bool stream_ok;	   /* watch: 200, bytes go to the line splitter */
	bool sent;	   /* request bytes reached the server */

	/* what to do */
	enum kube_verb verb;
	char *path;
	char *body;
	size_t body_len;
	char *content_type;
	int timeout_ms;
	size_t max_body;
	int max_attempts;
	unsigned attempts;
	struct backoff bo;
	struct event *retry_ev;

	/* the current attempt */
	struct httpc_xfer *x;
	int xfer_err;  /* the transfer's own error (transport) */
	int local_err; /* set by our callbacks: -E2BIG, -ENOMEM, -EPROTO */
	long http_status;
	long retry_after_s;
	char *in; /* response body (non-stream) */
	size_t in_len, in_cap;
	struct kube_lines lines; /* watch stream */
	struct json_object *end_status; /* watch: the ERROR event's Status */
	char *warning;
	char errtext[512];

	kube_done_fn done_cb;
	kube_event_fn on_event;
	kube_watch_end_fn on_end;
	void *userdata;
};

/* The watch handle is the call itself: kube_watch_stop() = kube_call_cancel(). */
struct kube_watch {
	struct kube_call call;
};

struct kube {
	struct event_base *base;
	struct kubeconfig *cfg;
	struct kube_opts o;
	char *user_agent;
	char *token;
	struct httpc *http;
	struct event *dispatch_ev; /* wakes the dispatcher after httpc callbacks */
	struct event *token_ev;	   /* periodic token file re-read */
	TAILQ_HEAD(kube_call_list, kube_call) calls;
	TAILQ_HEAD(kube_ready_list, kube_call) ready;
	bool dispatching;
	bool dead; /* kube_free() called during dispatch: destroy on the way out */
	bool token_failing;
	int64_t slow_logged_ms;
	struct kube_stats st;
};

/* ---- pure building blocks ------------------------------------------------------------ */

void kube_lines_init(struct kube_lines *l, size_t max_line)
{
	*l = (struct kube_lines){ .max_line = max_line };
}

void kube_lines_done(struct kube_lines *l)
{
	free(l->buf);
	*l = (struct kube_lines){ .max_line = l->max_line };
}

size_t kube_lines_pending(const struct kube_lines *l)
{
	return l->len - l->off;
}

int kube_lines_feed(struct kube_lines *l, const char *data, size_t n)
{
	const char *p = data;
	size_t rest = n, cur = l->cur;

	if (l->failed)
		return l->failed;
	if (n == 0)
		return 0;
	/* Check every line length before taking any byte. */
	while (rest) {
		const char *nl = memchr(p, '\n', rest);
		size_t seg = nl ? (size_t)(nl - p) : rest;

		if (seg > l->max_line - cur) {
			l->failed = -E2BIG;
			return l->failed;
		}
		if (!nl) {
			cur += rest;
			break;
		}
		cur = 0;
		rest -= seg + 1;
		p = nl + 1;
	}
	if (n > l->cap - l->len) {
		/* Reclaim consumed bytes before growing; amortised, never per feed. */
		if (l->off) {
			memmove(l->buf, l->buf + l->off, l->len - l->off);
			l->len -= l->off;
			l->off = 0;
		}
		if (n > l->cap - l->len) {
			size_t want = l->len + n, cap = l->cap ? l->cap : 4096;
			char *nb;

			while (cap < want)
				cap *= 2;
			nb = realloc(l->buf, cap);
			if (!nb)
				return -ENOMEM;
			l->buf = nb;
			l->cap = cap;
		}
	}
	memcpy(l->buf + l->len, data, n);
	l->len += n;
	l->cur = cur;
	return 0;
}

int kube_lines_next(struct kube_lines *l, char **ret_line, size_t *ret_len)
{
	for (;;) {
		size_t start = l->off, from = start + l->scanned, end, n;
		char *nl;

		if (from >= l->len) {
			l->scanned = l->len - start;
			return 0;
		}
		nl = memchr(l->buf + from, '\n', l->len - from);
		if (!nl) {
			l->scanned = l->len - start;
			return 0;
		}
		end = (size_t)(nl - l->buf);
		n = end - start;
		l->buf[end] = 0;
		if (n && l->buf[end - 1] == '\r')
			l->buf[start + --n] = 0;
		l->off = end + 1;
		l->scanned = 0;
		if (l->off == l->len) /* all consumed: next feed starts at 0 */
			l->off = l->len = 0;
		if (n == 0)
			continue;
		*ret_line = l->buf + start;
		*ret_len = n;
		return 1;
	}
}

static void json_object_putp(struct json_object **o)
{
	if (*o)
		(void)json_object_put(*o);
}

static void json_tokener_freep(struct json_tokener **t)
{
	if (*t)
		json_tokener_free(*t);
}

static bool is_json_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int kube_json_parse(const char *s, size_t len, struct json_object **ret)
{
	_cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
	_cleanup_(json_object_putp) struct json_object *o = NULL;
	size_t i = 0, end;

	if (len > INT_MAX)
		return -E2BIG;
	if (len == 0)
		return -EPROTO;
	/* json-c would stop at a raw NUL; JSON never has one outside \u0000. */
	if (memchr(s, 0, len))
		return -EPROTO;
	while (i < len && is_json_ws(s[i]))
		i++;
	/* Objects and arrays only: a bare number has no end marker (json-c waits for more). */
	if (i == len || (s[i] != '{' && s[i] != '['))
		return -EPROTO;
	tok = json_tokener_new_ex(KUBE_JSON_MAX_DEPTH);
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, s + i, (int)(len - i));
	if (!o || json_tokener_get_error(tok) != json_tokener_success)
		return -EPROTO;
	for (end = i + json_tokener_get_parse_end(tok); end < len; end++)
		if (!is_json_ws(s[end]))
			return -EPROTO;
	*ret = TAKE_PTR(o);
	return 0;
}

static const char *json_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static bool json_int(struct json_object *o, const char *key, int64_t *ret)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*ret = json_object_get_int64(v);
	return true;
}

int kube_status_parse(struct json_object *o, struct kube_status *ret)
{
	struct json_object *details;
	const char *kind, *status;
	int64_t code = 0, ra;
	bool has_code;

	if (!o || !json_object_is_type(o, json_type_object))
		return -EPROTO;
	kind = json_str(o, "kind");
	status = json_str(o, "status");
	has_code = json_int(o, "code", &code);
	if (!(kind && strcmp(kind, "Status") == 0) &&
	    !(has_code && status && (!strcmp(status, "Failure") || !strcmp(status, "Success"))))
		return -EPROTO;
	*ret = (struct kube_status){
		.code = code >= 0 && code <= 999 ? (int)code : 0,
		.status = status,
		.reason = json_str(o, "reason"),
		.message = json_str(o, "message"),
		.retry_after_s = -1,
	};
	if (json_object_object_get_ex(o, "details", &details) &&
	    json_object_is_type(details, json_type_object) &&
	    json_int(details, "retryAfterSeconds", &ra) && ra >= 0)
		ret->retry_after_s = ra > KUBE_RETRY_AFTER_MAX_S ? KUBE_RETRY_AFTER_MAX_S : (int)ra;
	return 0;
}

int kube_errno_from_http(long s, const char *reason)
{
	if (s >= 200 && s <= 299)
		return 0;
	switch (s) {
	case 400:
	case 422:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 403:
		return -EPERM;
	case 404:
		return -ENOENT;
	case 405:
		return -EOPNOTSUPP;
	case 409:
		return reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -EBUSY;
	case 410:
		return -ESTALE;
	case 413:
		return -E2BIG;
	case 429:
	case 503:
		return -EAGAIN;
	case 504:
		return -ETIMEDOUT;
	}
	return s >= 500 && s <= 599 ? -EIO : -EPROTO;
}

bool kube_is_expired(const struct kube_result *r)
{
	const char *re = r->status.reason;

	return r->http_status == 410 || r->status.code == 410 ||
	       (re && (!strcmp(re, "Expired") || !strcmp(re, "Gone")));
}

static const struct {
	const char *name;
	enum kube_event_type type;
} event_types[] = {
	{ "ADDED", KUBE_EVENT_ADDED },	     { "MODIFIED", KUBE_EVENT_MODIFIED },
	{ "DELETED", KUBE_EVENT_DELETED },   { "BOOKMARK", KUBE_EVENT_BOOKMARK },
	{ "ERROR", KUBE_EVENT_ERROR },
};

int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ret)
{
	_cleanup_(json_object_putp) struct json_object *root = NULL;
	struct json_object *obj, *meta;
	const char *type;
	size_t i;
	int r;

	r = kube_json_parse(line, len, &root);
	if (r < 0)
		return r;
	if (!json_object_is_type(root, json_type_object))
		return -EPROTO;
	type = json_str(root, "type");
	if (!type || !json_object_object_get_ex(root, "object", &obj) ||
	    !json_object_is_type(obj, json_type_object))
		return -EPROTO;
	for (i = 0; i < ARRAY_SIZE(event_types); i++)
		if (strcmp(type, event_types[i].name) == 0)
			break;
	if (i == ARRAY_SIZE(event_types))
		return -EPROTO;
	*ret = (struct kube_watch_event){ .type = event_types[i].type, .object = obj };
	if (json_object_object_get_ex(obj, "metadata", &meta) &&
	    json_object_is_type(meta, json_type_object))
		ret->resource_version = json_str(meta, "resourceVersion");
	ret->root = TAKE_PTR(root);
	return 0;
}

void kube_watch_event_done(struct kube_watch_event *ev)
{
	if (ev->root)
		(void)json_object_put(ev->root);
	*ev = (struct kube_watch_event){ 0 };
}

/* RFC 3986 unreserved, in ASCII whatever the locale says. */
static bool is_unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static char *pct_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (is_unreserved(*p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = 0;
	return out;
}

int kube_query_add(char **path, const char *key, const char *value)
{
	_cleanup_free_ char *k = NULL, *v = NULL;
	const char *old = *path ? *path : "";
	char *n = NULL;

	k = pct_encode(key);
	v = pct_encode(value);
	if (!k || !v)
		return -ENOMEM;
	if (asprintf(&n, "%s%c%s=%s", old, strchr(old, '?') ? '&' : '?', k, v) < 0)
		return -ENOMEM;
	free(*path);
	*path = n;
	return 0;
}

/* ---- token --------------------------------------------------------------------------- */

/* A small bounded local read (KUBECONFIG_TOKEN_MAX, regular file): fine on the loop.
 * Keeps the last good token when the read fails, as client-go does. */
static void kube_token_reload(struct kube *k, const char *why)
{
	char *t = NULL;
	int r;

	if (!k->cfg->token_file)
		return;
	r = kubeconfig_read_token(k->cfg->token_file, &t);
	if (r < 0) {
		k->st.token_read_errors++;
		if (!k->token_failing)
			log_warn_errno(r, "token_read_failed", "path=%s reason=%s action=keeping_old",
				       k->cfg->token_file, why);
		k->token_failing = true;
		return;
	}
	if (k->token_failing)
		log_info("token_read_recovered", "path=%s", k->cfg->token_file);
	k->token_failing = false;
	if (k->token && strcmp(k->token, t) == 0) {
		(void)kubeconfig_token_free(t);
		return;
	}
	(void)kubeconfig_token_free(k->token);
	k->token = t;
	k->st.token_reloads++;
	log_info("token_reloaded", "path=%s reason=%s", k->cfg->token_file, why);
}

static void on_token_timer(evutil_socket_t fd, short what, void *arg)
{
	kube_token_reload(arg, "periodic");
}

/* ---- calls: one attempt -------------------------------------------------------------- */

static void kube_dispatch(struct kube *k);

static void on_dispatch(evutil_socket_t fd, short what, void *arg)
{
	kube_dispatch(arg);
}

/* Also while busy: the dispatcher took c off the queue before working on it,
 * so bytes that arrive meanwhile get another round. */
static void call_mark_ready(struct kube_call *c)
{
	if (c->in_ready)
		return;
	TAILQ_INSERT_TAIL(&c->k->ready, c, ready);
	c->in_ready = true;
	if (!c->k->dispatching)
		event_active(c->k->dispatch_ev, EV_TIMEOUT, 0);
}

static void call_unready(struct kube_call *c)
{
	if (!c->in_ready)
		return;
	TAILQ_REMOVE(&c->k->ready, c, ready);
	c->in_ready = false;
}

/* Ends the attempt's transfer, if one runs (no callback from it after this). */
static void call_stop_xfer(struct kube_call *c)
{
	httpc_xfer_cancel(c->x);
	c->x = NULL;
	c->paused = false;
}

static int on_head(void *arg, const struct httpc_head *h)
{
	struct kube_call *c = arg;

	c->http_status = h->status;
	if (h->retry_after_s > 0)
		c->retry_after_s = h->retry_after_s > KUBE_RETRY_AFTER_MAX_S ? KUBE_RETRY_AFTER_MAX_S
									     : h->retry_after_s;
	if (h->warning && !(c->warning = strdup(h->warning)))
		return -ENOMEM;
	c->stream_ok = c->kind == CALL_WATCH && h->status == 200;
	return 0;
}

static int on_body(void *arg, const char *data, size_t n)
{
	struct kube_call *c = arg;
	int r;

	c->k->st.bytes_received += n;
	if (c->stream_ok) {
		r = kube_lines_feed(&c->lines, data, n);
		if (r < 0)
			return c->local_err = r;
		call_mark_ready(c);
		/* Back-pressure: a max_line of complete lines waits for the dispatcher. */
		if (kube_lines_pending(&c->lines) - c->lines.cur >= c->lines.max_line) {
			c->paused = true;
			return HTTPC_PAUSE;
		}
		return 0;
	}
	if (n > c->max_body - c->in_len)
		return c->local_err = -E2BIG;
	if (n > c->in_cap - c->in_len) {
		size_t cap = c->in_cap ? c->in_cap : 16384;
		char *nb;

		while (cap < c->in_len + n)
			cap *= 2;
		if (cap > c->max_body)
			cap = c->max_body;
		nb = realloc(c->in, cap);
		if (!nb)
			return c->local_err = -ENOMEM;
		c->in = nb;
		c->in_cap = cap;
	}
	memcpy(c->in + c->in_len, data, n);
	c->in_len += n;
	return 0;
}

static void on_xfer_done(void *arg, int err, const char *text, bool sent)
{
	struct kube_call *c = arg;

	c->x = NULL; /* httpc frees it after this returns */
	c->xfer_err = err;
	c->sent = sent || c->http_status > 0;
	if (err && !c->local_err)
		(void)snprintf(c->errtext, sizeof(c->errtext), "%s", text);
	c->done = true;
	call_mark_ready(c);
}

static const struct httpc_handlers call_handlers = {
	.on_head = on_head,
	.on_body = on_body,
	.on_done = on_xfer_done,
};

static const char *const verb_method[] = {
	[KUBE_GET] = "GET",	   [KUBE_CREATE] = "POST",   [KUBE_UPDATE] = "PUT",
	[KUBE_PATCH] = "PATCH",	   [KUBE_DELETE] = "DELETE",
};

/* Starts one attempt of c with the current token. */
static int call_start(struct kube_call *c)
{
	struct kube *k = c->k;
	_cleanup_free_ char *ua = NULL, *ct = NULL, *auth = NULL;
	const char *hdr[4];
	struct httpc_req rq;
	size_t n = 0;
	int r;

	/* Fresh per-attempt state. */
	c->done = false;
	c->xfer_err = 0;
	c->local_err = 0;
	c->http_status = 0;
	c->retry_after_s = 0;
	c->stream_ok = c->sent = false;
	c->in_len = 0;
	c->errtext[0] = 0;
	free(c->warning);
	c->warning = NULL;
	kube_lines_done(&c->lines);

	hdr[n++] = "Accept: application/json";
	if (asprintf(&ua, "User-Agent: %s", k->user_agent) < 0)
		return ua = NULL, -ENOMEM;
	hdr[n++] = ua;
	if (c->body) {
		if (asprintf(&ct, "Content-Type: %s", c->content_type) < 0)
			return ct = NULL, -ENOMEM;
		hdr[n++] = ct;
	}
	if (k->token) {
		if (asprintf(&auth, "Authorization: Bearer %s", k->token) < 0)
			return auth = NULL, -ENOMEM;
		hdr[n++] = auth;
	}
	rq = (struct httpc_req){ .method = verb_method[c->verb], .path = c->path,
				 .headers = hdr, .n_headers = n, .body = c->body,
				 .body_len = c->body_len, .timeout_ms = c->timeout_ms };
	r = httpc_start(k->http, &rq, &call_handlers, c, &c->x);
	if (auth)
		explicit_bzero(auth, strlen(auth));
	if (r < 0)
		return r;
	c->attempts++;
	k->st.attempts++;
	if (c->attempts > 1)
		k->st.retries++;
	return 0;
}

static void call_free(struct kube_call *c)
{
	struct kube *k = c->k;

	call_stop_xfer(c);
	call_unready(c);
	TAILQ_REMOVE(&k->calls, c, link);
	if (c->retry_ev)
		event_free(c->retry_ev);
	free(c->path);
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

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct kube_call *c = arg;
	struct kube *k = c->k;
	int r;

	r = call_start(c);
	if (r < 0) {
		c->local_err = r;
		(void)snprintf(c->errtext, sizeof(c->errtext), "could not start request: %s",
			       strerror(-r));
		c->done = true;
		call_mark_ready(c);
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

static void status_text(char *buf, size_t n, long http, const struct kube_status *s)
{
	(void)snprintf(buf, n, "HTTP %ld %s: %s", http, s->reason ? s->reason : "(no reason)",
		       s->message ? s->message : "(no message)");
}

/* Builds c's result into res (body into *ret_body, owned by the caller). */
static void call_result(struct kube_call *c, struct kube_result *res, struct json_object **ret_body)
{
	struct json_object *body = NULL;

	*res = (struct kube_result){
		.http_status = c->http_status,
		.retry_after_s = c->retry_after_s > 0 ? (int)c->retry_after_s : -1,
		.warning = c->warning,
		.error_text = c->errtext,
		.attempts = c->attempts,
	};
	if (c->end_status) { /* a watch ended by an ERROR event */
		res->body = c->end_status;
		if (kube_status_parse(c->end_status, &res->status) == 0 && res->status.code)
			res->error = kube_errno_from_http(res->status.code, res->status.reason);
		if (res->error == 0)
			res->error = -EPROTO;
		(void)snprintf(c->errtext, sizeof(c->errtext), "watch ERROR event: %d %s: %s",
			       res->status.code, res->status.reason ? res->status.reason : "",
			       res->status.message ? res->status.message : "");
		if (res->status.retry_after_s >= 0 && res->retry_after_s < 0)
			res->retry_after_s = res->status.retry_after_s;
		return;
	}
	if (c->local_err) {
		res->error = c->local_err;
		if (c->errtext[0])
			return;
		if (c->local_err == -E2BIG)
			(void)snprintf(c->errtext, sizeof(c->errtext), "%s over %zu bytes",
				       c->stream_ok ? "watch line" : "response body",
				       c->stream_ok ? c->lines.max_line : c->max_body);
		else
			(void)snprintf(c->errtext, sizeof(c->errtext), "%s", strerror(-c->local_err));
		return;
	}
	if (c->xfer_err) {
		res->error = c->xfer_err;
		return;
	}
	if (c->stream_ok) { /* the server ended a watch normally */
		if (kube_lines_pending(&c->lines)) {
			res->error = -EPROTO;
			(void)snprintf(c->errtext, sizeof(c->errtext),
				       "watch stream ended inside a line (%zu bytes)",
				       kube_lines_pending(&c->lines));
		}
		return;
	}
	res->error = kube_errno_from_http(c->http_status, NULL);
	if (c->in_len && kube_json_parse(c->in, c->in_len, &body) == 0) {
		res->body = body;
		*ret_body = body;
	}
	if (res->error == 0) {
		if (c->in_len && !body) {
			res->error = -EPROTO;
			(void)snprintf(c->errtext, sizeof(c->errtext),
				       "HTTP %ld with a body that is not JSON (%zu bytes)",
				       c->http_status, c->in_len);
		}
		return;
	}
	if (body && kube_status_parse(body, &res->status) == 0) {
		res->error = kube_errno_from_http(c->http_status, res->status.reason);
		if (res->retry_after_s < 0 && res->status.retry_after_s >= 0)
			res->retry_after_s = res->status.retry_after_s;
		status_text(c->errtext, sizeof(c->errtext), c->http_status, &res->status);
	} else {
		(void)snprintf(c->errtext, sizeof(c->errtext), "HTTP %ld (no Status body)",
			       c->http_status);
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
		log_debug("request_retry", "path=%s attempt=%u error=%s delay_ms=%u",
			  log_quote(c->path), c->attempts, log_quote(res.error_text), delay);
		if (call_schedule(c, delay) == 0)
			return;
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

/* Delivers complete watch lines. Returns 0, or < 0 when the stream must end
 * (bad line; an ERROR event sets end_status and returns -ECANCELED). */
static int watch_drain(struct kube_call *c)
{
	struct kube *k = c->k;
	char *line;
	size_t n;
	int r;

	while (kube_lines_next(&c->lines, &line, &n) == 1) {
		struct kube_watch_event ev;

		r = kube_watch_event_parse(line, n, &ev);
		if (r < 0) {
			(void)snprintf(c->errtext, sizeof(c->errtext),
				       "watch: not a watch event (%zu bytes): %.64s", n, line);
			for (char *p = c->errtext; *p; p++)
				if ((unsigned char)*p < 0x20)
					*p = ' ';
			return r == -E2BIG ? r : -EPROTO;
		}
		if (ev.type == KUBE_EVENT_ERROR) {
			c->end_status = json_object_get(ev.object);
			kube_watch_event_done(&ev);
			return -ECANCELED;
		}
		k->st.watch_events++;
		c->on_event(c->userdata, &ev);
		kube_watch_event_done(&ev);
		if (k->dead || c->cancelled)
			return 0;
	}
	return 0;
}

static void call_process(struct kube_call *c)
{
	struct kube *k = c->k;
	int r;

	if (c->stream_ok) {
		r = watch_drain(c);
		if (k->dead || c->cancelled)
			return;
		if (r < 0) {
			call_stop_xfer(c);
			if (r != -ECANCELED)
				c->local_err = r;
			c->done = true;
		} else if (c->paused && c->x) {
			c->paused = false;
			httpc_xfer_resume(c->x);
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
			call_free(c);
	}
	k->dispatching = false;
	if (k->dead) {
		kube_destroy(k);
		return;
	}
	dt = clock_now_ms() - t0;
	if (dt > SLOW_DISPATCH_MS) {
		k->st.slow_dispatches++;
		if (clock_now_ms() - k->slow_logged_ms > 60000) { /* rate-limited */
			k->slow_logged_ms = clock_now_ms();
			log_warn("slow_dispatch", "ms=%lld budget_ms=%d",
				 (long long)dt, SLOW_DISPATCH_MS);
		}
	}
}

/* ---- public API ---------------------------------------------------------------------- */

static bool path_ok(const char *p)
{
	if (!p || p[0] != '/')
		return false;
	for (; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '#')
			return false;
	return true;
}

static int call_new(struct kube *k, enum call_kind kind, const char *path, struct kube_call **ret)
{
	struct kube_call *c;

	c = kind == CALL_WATCH ? calloc(1, sizeof(struct kube_watch)) : calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->k = k;
	c->kind = kind;
	TAILQ_INSERT_TAIL(&k->calls, c, link);
	backoff_init(&c->bo, k->o.backoff_initial_ms, k->o.backoff_max_ms);
	c->path = strdup(path);
	if (!c->path) {
		call_free(c);
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
	if (!k || !cb || !path_ok(path) || (unsigned)verb > KUBE_DELETE || o->timeout_ms < 0 ||
	    o->max_attempts < 0)
		return -EINVAL;
	if (k->dead) /* kube_free() was called in this callback round */
		return -ESHUTDOWN;
	if (verb == KUBE_GET ? body_json != NULL : (verb != KUBE_DELETE && !body_json))
		return -EINVAL;
	r = call_new(k, CALL_REQUEST, path, &c);
	if (r < 0)
		return r;
	c->verb = verb;
	c->done_cb = cb;
	c->userdata = userdata;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : k->o.timeout_ms;
	c->max_body = o->max_body && o->max_body < k->o.max_body ? o->max_body : k->o.max_body;
	c->max_attempts = o->max_attempts ? o->max_attempts : 1;
	c->lines.max_line = k->o.max_line;
	r = call_set_body(c, verb, body_json, o);
	if (r >= 0)
		r = call_start(c);
	if (r < 0) {
		call_free(c);
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
		call_stop_xfer(c);
		return;
	}
	call_free(c);
}

int kube_watch(struct kube *k, const char *path_with_query, const struct kube_watch_opts *o,
	       kube_event_fn on_event, kube_watch_end_fn on_end, void *userdata,
	       struct kube_watch **ret)
{
	static const struct kube_watch_opts none;
	struct kube_call *c = NULL;
	int r;

	if (!o)
		o = &none;
	if (!k || !on_event || !on_end || !path_ok(path_with_query) || o->timeout_ms < 0)
		return -EINVAL;
	if (k->dead)
		return -ESHUTDOWN;
	r = call_new(k, CALL_WATCH, path_with_query, &c);
	if (r < 0)
		return r;
	c->verb = KUBE_GET;
	c->on_event = on_event;
	c->on_end = on_end;
	c->userdata = userdata;
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : k->o.watch_timeout_ms;
	c->max_body = k->o.max_body;
	c->max_attempts = 1;
	c->lines.max_line = o->max_line && o->max_line < k->o.max_line ? o->max_line
									: k->o.max_line;
	r = call_start(c);
	if (r < 0) {
		call_free(c);
		return r;
	}
	if (ret)
		*ret = (struct kube_watch *)c;
	return 0;
}

void kube_watch_stop(struct kube_watch *w)
{
	kube_call_cancel(w ? &w->call : NULL);
}

void kube_get_stats(const struct kube *k, struct kube_stats *ret)
{
	*ret = k->st;
}

static void kube_destroy(struct kube *k)
{
	struct kube_call *c;

	while ((c = TAILQ_FIRST(&k->calls)))
		call_free(c);
	k->http = httpc_free(k->http);
	if (k->dispatch_ev)
		event_free(k->dispatch_ev);
	if (k->token_ev)
		event_free(k->token_ev);
	(void)kubeconfig_token_free(k->token);
	kubeconfig_free(k->cfg);
	free(k->user_agent);
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

int kube_new(struct event_base *base, const struct kubeconfig *cfg, const struct kube_opts *opts,
	     struct kube **ret)
{
	static const struct kube_opts none;
	_cleanup_(kube_freep) struct kube *k = NULL;
	struct httpc_tls tls;
	struct httpc_opts ho;
	struct timeval tv;
	int r;

	if (!opts)
		opts = &none;
	if (!base || !cfg || !cfg->server)
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	TAILQ_INIT(&k->calls);
	TAILQ_INIT(&k->ready);
	k->base = base;
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
	k->user_agent = strdup(opts->user_agent ? opts->user_agent : "dra-cpu");
	if (!k->user_agent)
		return -ENOMEM;
	r = kubeconfig_dup(cfg, &k->cfg);
	if (r < 0)
		return r;
	if (k->cfg->token_file) {
		r = kubeconfig_read_token(k->cfg->token_file, &k->token);
		if (r < 0)
			return r;
	} else if (k->cfg->token && !(k->token = strdup(k->cfg->token))) {
		return -ENOMEM;
	}
	tls = (struct httpc_tls){
		.ca_pem = k->cfg->ca_pem, .ca_pem_len = k->cfg->ca_pem_len, .ca_file = k->cfg->ca_file,
		.cert_pem = k->cfg->cert_pem, .cert_pem_len = k->cfg->cert_pem_len,
		.cert_file = k->cfg->cert_file, .key_pem = k->cfg->key_pem,
		.key_pem_len = k->cfg->key_pem_len, .key_file = k->cfg->key_file,
		.insecure = k->cfg->insecure,
	};
	ho = (struct httpc_opts){ .connect_timeout_ms = k->o.connect_timeout_ms };
	r = httpc_new(base, k->cfg->server, &tls, &ho, &k->http);
	if (r < 0)
		return r;
	k->dispatch_ev = event_new(base, -1, 0, on_dispatch, k);
	if (!k->dispatch_ev)
		return -ENOMEM;
	if (k->cfg->token_file) {
		k->token_ev = event_new(base, -1, EV_PERSIST, on_token_timer, k);
		tv = clock_tv_ms(k->o.token_refresh_ms);
		if (!k->token_ev || event_add(k->token_ev, &tv) < 0)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(k);
	return 0;
}
