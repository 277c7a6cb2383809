/* The Kubernetes client's pure building blocks: watch-stream line framing,
 * JSON and Status parsing, HTTP status to errno, watch events and query
 * encoding. See kube.h.
 *
 * Apart from kube.c because none of this touches curl, the loop or a
 * struct kube: each piece reads bytes and returns a value, which is how the
 * unit tests and the fuzz targets drive them.
 */
#include "kube/kube.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/jsonc.h"

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
	/* Empty, and grown for a large event: give it back rather than keep it for a
	 * stream of small ones (lines returned earlier are dead by now: see .h). */
	if (l->len == 0 && l->cap > KUBE_LINES_KEEP) {
		free(l->buf);
		l->buf = NULL;
		l->cap = 0;
	}
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

static bool is_json_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Does the text hold the escape \u0000? json-c turns it into a NUL inside a
 * string (a key is cut there), and every name, path and log line after it
 * would see another string than the server sent. Exact, without a pass over
 * every byte: each "\u0000" found is an escape when an odd number of
 * backslashes runs up to its u ("\\u0000" is the six characters \u0000). */
static bool has_nul_escape(const char *s, size_t len)
{
	const char *p = s, *end = s + len;

	while ((p = memmem(p, (size_t)(end - p), "\\u0000", 6))) {
		size_t n = 1;

		while ((size_t)(p - s) >= n && p[-(ptrdiff_t)n] == '\\')
			n++;
		if (n % 2)
			return true;
		p += 1;
	}
	return false;
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
	if (memchr(s, 0, len) || has_nul_escape(s, len))
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
	kind = jsonc_str(o, "kind");
	status = jsonc_str(o, "status");
	has_code = json_int(o, "code", &code);
	if (!(kind && strcmp(kind, "Status") == 0) &&
	    !(has_code && status && (!strcmp(status, "Failure") || !strcmp(status, "Success"))))
		return -EPROTO;
	*ret = (struct kube_status){
		.code = code >= 0 && code <= 999 ? (int)code : 0,
		.status = status,
		.reason = jsonc_str(o, "reason"),
		.message = jsonc_str(o, "message"),
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
	type = jsonc_str(root, "type");
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
		ret->resource_version = jsonc_str(meta, "resourceVersion");
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
