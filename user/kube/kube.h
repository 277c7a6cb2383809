/* kube: an asynchronous Kubernetes REST client on the process's libevent loop.
 *
 * Transfers run on libcurl's multi-socket interface, driven by the loop:
 * curl's sockets and its timer are libevent events, so nothing blocks. HTTP/2
 * when the server offers it (ALPN), with every request and every watch
 * multiplexed as streams of one connection; HTTP/1.1 with keep-alive
 * otherwise. At most KUBE_MAX_CONNECTIONS connections to the server, and
 * KUBE_MAX_STREAMS streams on each: transfers beyond that wait in curl for a
 * free one. Every user callback runs from kube's own dispatcher, never from
 * inside libcurl, so a callback may start requests, cancel calls, stop
 * watches or free the client; after kube_free() no callback runs.
 *
 *   kube_request() -> call -> attempt (one curl transfer) -> done -------+-> cb(result), once
 *                      ^   401 + token file: re-read token, once       |
 *                      +-- backoff timer <- 429/503 (any verb), 5xx and|
 *                          transport errors (GET only), max_attempts,  |
 *                          never past the call's deadline -------------+
 *
 *   kube_watch() -> stream -> line splitter -> JSON -> on_event()* -> on_end(result), once
 *
 * Ownership: struct kube owns the curl handles, every libevent event and
 * buffer. A struct kube_call is valid from kube_request() until its callback
 * returns or kube_call_cancel(); a struct kube_watch until on_end returns or
 * kube_watch_stop(). Everything a callback receives (result, body, event
 * object, strings) is borrowed for the duration of the callback: take a
 * json_object_get() reference to keep an object.
 *
 * Limits (hard caps a peer cannot raise): response body 16 MiB, watch line
 * 4 MiB (both -E2BIG), JSON depth 64 (-EPROTO), strict UTF-8, per-attempt
 * total timeout and connect timeout (TCP, proxy and TLS) on every transfer.
 * A watch whose consumer lags is paused (curl stops reading that stream), so
 * a fast server cannot make us buffer more than about two lines of it.
 *
 * Trust and identity: TLS 1.2 or 1.3 (OpenSSL), peer and host name always
 * verified unless the kubeconfig was explicitly allowed to be insecure; the
 * trust anchor is the kubeconfig's CA when it names one, else the system
 * bundle; only https:// unless allowed insecure; redirects are never
 * followed. Client certificate and key come from the kubeconfig (inline or
 * files); files are read again when they change on disk (the kubelet rotates
 * them), and the next connection presents the new pair. The bearer token is
 * sent from the current value of the token file, re-read every minute and
 * after any 401, and is never logged (the HTTP trace redacts it).
 *
 * Proxies, as client-go: the kubeconfig's proxy-url for every request if set;
 * else HTTPS_PROXY (HTTP_PROXY for an http:// server) and NO_PROXY from the
 * environment at kube_new(), never for localhost or a loopback address.
 *
 * Errors: functions return -errno. A result's error is 0 for a 2xx reply, else:
 *   400/422 -EINVAL  401 -EACCES  403 -EPERM  404 -ENOENT  405 -EOPNOTSUPP
 *   409 AlreadyExists -EEXIST, other 409 (Conflict) -EBUSY  410 -ESTALE
 *   413 -E2BIG  429/503 -EAGAIN  504 -ETIMEDOUT  other 4xx -EPROTO  5xx -EIO
 *   transport: -ETIMEDOUT, -ECONNREFUSED (also a proxy that refused the
 *   tunnel), -EHOSTUNREACH (DNS, of the server or the proxy), -ECONNRESET,
 *   -EKEYREJECTED (TLS peer verification failed), -ENOKEY (bad local cert/key/CA
 *   file), -ECONNABORTED (TLS handshake), -E2BIG (cap), -EPROTO (bad JSON).
 * http_status and status.reason carry the detail; error_text one readable line.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct event_base;
struct json_object;
struct kubeconfig;
struct kube;
struct kube_call;
struct kube_watch;

#define KUBE_MAX_BODY_DEFAULT (16u << 20)
#define KUBE_MAX_LINE_DEFAULT (4u << 20)
#define KUBE_JSON_MAX_DEPTH 64
/* A server's Retry-After above this is clamped (a bad proxy must not park us). */
#define KUBE_RETRY_AFTER_MAX_S 600
/* Connections to the server: HTTP/2 needs one; HTTP/1.1 one per transfer in flight. */
#define KUBE_MAX_CONNECTIONS 4
/* Concurrent HTTP/2 streams per connection (the server may allow fewer). */
#define KUBE_MAX_STREAMS 100

/* Client-wide settings; zero fields take the default shown. */
struct kube_opts {
	int connect_timeout_ms;	      /* 10000: TCP + TLS handshake */
	int timeout_ms;		      /* 30000: default total time of one request attempt */
	int watch_timeout_ms;	      /* 900000: default total time of one watch stream */
	size_t max_body;	      /* KUBE_MAX_BODY_DEFAULT */
	size_t max_line;	      /* KUBE_MAX_LINE_DEFAULT */
	int token_refresh_ms;	      /* 60000: token file re-read period */
	uint32_t backoff_initial_ms;  /* 500 */
	uint32_t backoff_max_ms;      /* 30000 */
	const char *user_agent;	      /* "dra-cpu"; copied */
};

/* Creates a client for cfg (deep-copied: cfg may be freed after). Reads the
 * token file once (a failure here is an error: -errno). Returns 0 and *ret,
 * caller frees with kube_free(). opts: NULL = all defaults. */
int kube_new(struct event_base *base, const struct kubeconfig *cfg, const struct kube_opts *opts,
	     struct kube **ret);

/* Cancels every call and watch without calling their callbacks, releases
 * everything. NULL-safe; safe inside any kube callback. Returns NULL. */
struct kube *kube_free(struct kube *k);
DEFINE_FREEP(kube, kube_free)

enum kube_verb {
	KUBE_GET,    /* get an object, or list a collection */
	KUBE_CREATE, /* POST */
	KUBE_UPDATE, /* PUT; optimistic concurrency via metadata.resourceVersion in the body */
	KUBE_PATCH,  /* PATCH; content type from kube_req_opts (default merge-patch) */
	KUBE_DELETE, /* DELETE; optional preconditions in kube_req_opts */
};

/* Per-request settings; a zeroed struct (or NULL) takes the client defaults. */
struct kube_req_opts {
	int timeout_ms;	  /* total time of each attempt; 0 = client default */
	int deadline_ms;  /* total time of the call, retries included; 0 = none. No
			   * retry starts after it (whatever Retry-After says: the
			   * caller gets the last answer instead) and the last
			   * attempt's timeout is cut to what is left of it. */
	int max_attempts; /* 0 or 1 = no retry (the 401 token retry is extra) */
	size_t max_body;  /* 0 = client default; never above it */
	const char *content_type;     /* PATCH only: default application/merge-patch+json */
	const char *precondition_uid; /* DELETE only: DeleteOptions.preconditions, */
	const char *precondition_rv;  /* sent as the body when body_json is NULL */
};

/* A Kubernetes Status (every non-2xx body, and ERROR watch events). Strings
 * borrowed from the parsed JSON; NULL when absent. */
struct kube_status {
	int code;	     /* the Status's own code (0 if absent) */
	const char *status;  /* "Failure" / "Success" */
	const char *reason;  /* "NotFound", "Conflict", "Expired", ... */
	const char *message; /* human readable */
	int retry_after_s;   /* details.retryAfterSeconds, or -1 */
};

struct kube_result {
	int error;		    /* 0 = 2xx (or a normal watch end), else -errno, see above */
	long http_status;	    /* 0 when no HTTP response arrived */
	struct json_object *body;   /* parsed JSON body or NULL; borrowed */
	struct kube_status status;  /* from a Status body; code 0 when there was none */
	int retry_after_s;	    /* Retry-After header or details.retryAfterSeconds, -1 */
	const char *warning;	    /* first Warning header (dropped fields...), or NULL */
	const char *error_text;	    /* one line; "" on success; never NULL; no secrets */
	unsigned attempts;	    /* HTTP attempts made, retries included */
};

typedef void (*kube_done_fn)(void *userdata, const struct kube_result *r);

/* Starts an asynchronous request for path ("/apis/...", optionally with a
 * query; see kube_query_add()) with an optional JSON body (copied). Returns 0
 * and, if ret_call is not NULL, a handle for kube_call_cancel(); cb then runs
 * exactly once, later, from the loop (unless cancelled or the client freed).
 * Returns -EINVAL (bad path/verb/options), -ENOMEM, or -ESHUTDOWN (kube_free()
 * was called earlier in this callback) and never calls cb then. */
int kube_request(struct kube *k, enum kube_verb verb, const char *path, const char *body_json,
		 const struct kube_req_opts *o, kube_done_fn cb, void *userdata,
		 struct kube_call **ret_call);

/* Aborts a call; its callback will not run. NULL-safe. Not for a call whose
 * callback already returned (the handle is gone). */
void kube_call_cancel(struct kube_call *c);

enum kube_event_type {
	KUBE_EVENT_ADDED,
	KUBE_EVENT_MODIFIED,
	KUBE_EVENT_DELETED,
	KUBE_EVENT_BOOKMARK,
	KUBE_EVENT_ERROR, /* never passed to on_event: it ends the watch (see kube_watch) */
};

struct kube_watch_event {
	enum kube_event_type type;
	struct json_object *object;   /* the event's object, borrowed from root */
	const char *resource_version; /* object.metadata.resourceVersion, or NULL */
	struct json_object *root;     /* the whole event */
};

/* In on_event, ev and everything in it are borrowed. */
typedef void (*kube_event_fn)(void *userdata, const struct kube_watch_event *ev);
typedef void (*kube_watch_end_fn)(void *userdata, const struct kube_result *r);

struct kube_watch_opts {
	int timeout_ms;	 /* total stream time; 0 = the query's timeoutSeconds= plus a
			  * slack (a tenth, at most 30 s, plus 1 s) when it asks for
			  * one, else the client default. With a value here, ask the
			  * server to end first: put timeoutSeconds= (smaller) in the
			  * query. */
	size_t max_line; /* 0 = client default; never above it */
};

/* Starts a watch on path_with_query, which must ask for one ("...?watch=1",
 * usually with allowWatchBookmarks=true, resourceVersion=, timeoutSeconds=).
 * Events arrive in order through on_event. The watch ends exactly once through
 * on_end, after the last event:
 *   error 0, http 200        the server closed the stream normally: re-watch
 *                            from the last resourceVersion seen
 *   ERROR event              error from the Status code (410 Expired/Gone:
 *                            -ESTALE, see kube_is_expired(): re-list), status set
 *   non-200 reply            as for kube_request (a 401 is retried once after
 *                            re-reading the token file, before any event)
 *   -E2BIG                   a line above max_line
 *   -EPROTO                  a line that is not a watch event, or the stream
 *                            ended inside a line
 *   transport errors         as for kube_request
 * No automatic re-watch: the caller owns the resourceVersion and the backoff.
 * Returns 0 and *ret (may be NULL) or -EINVAL/-ENOMEM/-ESHUTDOWN (callbacks never run). */
int kube_watch(struct kube *k, const char *path_with_query, const struct kube_watch_opts *o,
	       kube_event_fn on_event, kube_watch_end_fn on_end, void *userdata,
	       struct kube_watch **ret);

/* How long a watch that asks the server for timeoutSeconds=s may stream before
 * the client ends it as dead (a server or proxy that lost it and went
 * silent): s plus a slack for the server's own close (a tenth, at most 30 s,
 * plus 1 s), in ms. A caller that must notice a dead watch within a budget
 * asks for less than the budget by that slack. */
int kube_watch_deadline_ms(int timeout_s);

/* Ends a watch without calling on_end. NULL-safe, safe inside its on_event. */
void kube_watch_stop(struct kube_watch *w);

/* True when r says the resourceVersion is too old (HTTP 410 or a Status with
 * code 410, reasons Expired and Gone): drop the cache, re-list, re-watch. */
bool kube_is_expired(const struct kube_result *r);

/* Appends "?key=value" or "&key=value" to *path, percent-encoding value (RFC
 * 3986 unreserved characters pass). *path is a malloc'd string (or NULL for
 * ""), reallocated in place. Returns 0 or -ENOMEM; on error *path is intact. */
int kube_query_add(char **path, const char *key, const char *value);

/* Counters for /metrics (the caller registers a collector that copies them). */
struct kube_stats {
	uint64_t attempts;	     /* HTTP attempts started, watches included */
	uint64_t retries;	     /* attempts that were retries (backoff or 401) */
	uint64_t failures;	     /* results delivered with error != 0 */
	uint64_t token_reloads;	     /* token file reads that changed the token */
	uint64_t token_read_errors;  /* token file reads that failed (kept the old one) */
	uint64_t too_big;	     /* bodies or watch lines over the cap */
	uint64_t watch_events;	     /* events delivered to on_event */
	uint64_t watch_pauses;	     /* watch streams held back for the consumer to catch up */
	uint64_t bytes_received;     /* response body bytes */
	uint64_t slow_dispatches;    /* callback rounds that held the loop > 10 ms */
	uint64_t connections;	     /* connections opened to the server (or through the proxy) */
	uint64_t http2;		     /* attempts answered over HTTP/2 */
	uint64_t cert_reloads;	     /* client certificate/key files read again after a change */
	uint64_t cert_read_errors;   /* reads of them that failed (kept the old pair) */
};
void kube_get_stats(const struct kube *k, struct kube_stats *ret);

/* ---- building blocks, public for the unit tests and fuzz targets -------------------- */

/* Parses exactly len bytes of JSON whose top level is an object or an array,
 * strictly (RFC 8259, valid UTF-8, nothing but whitespace after it), nesting
 * at most KUBE_JSON_MAX_DEPTH. Returns 0 and a new reference in *ret
 * (json_object_put() it), -EPROTO, or -E2BIG (len above INT_MAX). */
int kube_json_parse(const char *s, size_t len, struct json_object **ret);

/* Fills *ret from a Status object (kind "Status", or a "status" field of
 * "Failure"/"Success" with a code). Strings borrowed from o. -EPROTO if o is
 * not a Status; *ret untouched then. */
int kube_status_parse(struct json_object *o, struct kube_status *ret);

/* The result error for an HTTP status (and Status reason, may be NULL), per
 * the table above; 0 for 2xx. */
int kube_errno_from_http(long http_status, const char *reason);

/* Decodes one watch line into *ret: {"type": one of the five, "object": {...}}.
 * On success ret->root is a new reference the caller releases with
 * kube_watch_event_done(). -EPROTO for anything else; -E2BIG above INT_MAX. */
int kube_watch_event_parse(const char *line, size_t len, struct kube_watch_event *ret);
void kube_watch_event_done(struct kube_watch_event *ev);

/* The proxy for server by client-go's rules. proxy_url (the kubeconfig's):
 * used for every request, NO_PROXY does not apply. Else HTTPS_PROXY or
 * https_proxy (HTTP_PROXY or http_proxy for an http:// server; a value
 * without a scheme means http://), none for localhost and loopback
 * addresses, and NO_PROXY or no_proxy as the exceptions (matched by
 * libcurl: names and their subdomains, addresses, CIDR ranges, "*").
 * socks5:// becomes socks5h:// (the proxy resolves names, as in Go).
 * Returns 0, *ret_proxy ("" = connect directly) and *ret_noproxy ("" =
 * none), both malloc'd; -EINVAL for a server URL libcurl cannot parse,
 * -ENOMEM. Reads the environment: call it once, at start. */
int kube_proxy_select(const char *server, const char *proxy_url, char **ret_proxy,
		      char **ret_noproxy);

/* Splits a byte stream into lines ('\n', optional '\r' before it dropped,
 * empty lines skipped), holding at most one partial line of max_line bytes:
 * a longer line fails the splitter with -E2BIG for good. A buffer grown past
 * KUBE_LINES_KEEP for a large line is freed once it is empty again. */
#define KUBE_LINES_KEEP (16u << 10)
struct kube_lines {
	char *buf;
	size_t off;	  /* start of unconsumed bytes */
	size_t len;	  /* bytes held */
	size_t cap;
	size_t scanned;	  /* bytes from off known to hold no '\n' */
	size_t cur;	  /* length of the unterminated last line */
	size_t max_line;
	int failed;	  /* sticky -E2BIG */
};

void kube_lines_init(struct kube_lines *l, size_t max_line);
void kube_lines_done(struct kube_lines *l);
/* Appends n bytes. Returns 0, -E2BIG (a line over max_line) or -ENOMEM. */
int kube_lines_feed(struct kube_lines *l, const char *data, size_t n);
/* Returns 1 and the next complete line (NUL-terminated, borrowed until the
 * next feed) or 0 when none is complete. */
int kube_lines_next(struct kube_lines *l, char **ret_line, size_t *ret_len);
/* Bytes held: complete lines not yet taken plus the partial line. */
size_t kube_lines_pending(const struct kube_lines *l);
