/* httpc: a small asynchronous HTTP/1.1 client for one origin (the API server)
 * on the process's libevent loop, with TLS from mbedTLS.
 *
 * Why not libcurl: the kube client talks to exactly one server with a handful
 * of verbs, and libcurl (with OpenSSL, GnuTLS through librtmp, Kerberos, LDAP,
 * SSH...) was two thirds of the daemon's resident memory. This module is what
 * the driver needs and nothing else: HTTP/1.1 with keep-alive, chunked and
 * length-delimited bodies, TLS 1.2 (the API server's default minimum), bearer
 * tokens and client certificates, non-blocking DNS (numeric hosts skip it).
 *
 *   httpc_start() -> conn (idle one, or resolve -> connect -> TLS handshake)
 *                 -> write request -> parse response -> on_head, on_body*, on_done
 *
 * Every wait has a timeout: connect_timeout_ms covers resolve + TCP + TLS of a
 * new connection, the request's timeout_ms the whole transfer. A reused
 * keep-alive connection that turns out to be dead before the first response
 * byte is replaced once, transparently (nothing of the request was processed).
 * Callbacks run from httpc's own libevent handlers; inside on_head and on_body
 * the caller may cancel the transfer; after on_done the transfer is gone.
 *
 * Peer-controlled sizes are capped: response head HTTPC_MAX_HEAD, chunk-size
 * lines and trailers; the body is streamed to on_body (the caller caps it).
 * TLS: peer verification and host name (DNS or IP subjectAltName) are always
 * checked unless the caller asked for insecure; the trust anchors are the
 * given CA, else the system bundle. Proxies are not supported.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/cleanup.h"

struct event_base;
struct httpc;
struct httpc_xfer;

#define HTTPC_MAX_HEAD (64u << 10)  /* status line + headers (+ skipped 1xx heads) */
#define HTTPC_MAX_LINE 1024u	    /* chunk-size line, one trailer line */
#define HTTPC_MAX_TRAILERS (16u << 10)
#define HTTPC_WARNING_MAX 512u

/* Where trust and identity come from; NULL fields are absent. PEM data wins
 * over the file of the same kind. */
struct httpc_tls {
	const char *ca_pem;
	size_t ca_pem_len;
	const char *ca_file;
	const char *cert_pem;
	size_t cert_pem_len;
	const char *cert_file;
	const char *key_pem;
	size_t key_pem_len;
	const char *key_file;
	bool insecure; /* no peer verification: only when explicitly allowed */
};

struct httpc_opts {
	int connect_timeout_ms; /* 10000 */
	unsigned max_idle;	/* 4: keep-alive connections kept for reuse */
	int idle_timeout_ms;	/* 60000: an idle connection is closed after this */
};

/* Creates a client for server "http(s)://host[:port][/prefix]" (IPv6 hosts in
 * brackets). The TLS settings are copied; files are read at the first
 * connection (and again at the next one while they fail), so a bad CA or key
 * fails the transfers with -ENOKEY and a readable text rather than this call.
 * Returns 0 and *ret, -EINVAL (bad URL) or -ENOMEM. */
int httpc_new(struct event_base *base, const char *server, const struct httpc_tls *tls,
	      const struct httpc_opts *o, struct httpc **ret);

/* Closes every connection; transfers still running end without callbacks.
 * NULL-safe. Not from inside an httpc callback. Returns NULL. */
struct httpc *httpc_free(struct httpc *h);
DEFINE_FREEP(httpc, httpc_free)

/* The response head, borrowed for the duration of on_head. */
struct httpc_head {
	int status;		/* 100..599 */
	int retry_after_s;	/* Retry-After in delta-seconds, else -1 */
	const char *warning;	/* first Warning header value (sanitised, capped), or NULL */
};

struct httpc_handlers {
	/* The final (non-1xx) response head. Return 0, or -errno to abort. */
	int (*on_head)(void *userdata, const struct httpc_head *head);
	/* Body bytes as they arrive (chunked framing removed). Return 0 to go on,
	 * HTTPC_PAUSE to stop reading until httpc_xfer_resume(), -errno to abort. */
	int (*on_body)(void *userdata, const char *data, size_t n);
	/* Exactly once, last: err 0 = the whole response arrived. Otherwise -errno:
	 *   -ETIMEDOUT (connect or transfer), -ECONNREFUSED, -EHOSTUNREACH (DNS),
	 *   -ECONNRESET (closed early), -EKEYREJECTED (server certificate not
	 *   trusted or not for this host), -ENOKEY (our CA/cert/key unusable),
	 *   -ECONNABORTED (TLS handshake), -EPROTO (bad HTTP), or what a handler
	 *   returned. text: one readable line. sent: request bytes reached the
	 *   peer (so it may have acted on them). */
	void (*on_done)(void *userdata, int err, const char *text, bool sent);
};

#define HTTPC_PAUSE 1

struct httpc_req {
	const char *method;	   /* "GET", "POST", ... */
	const char *path;	   /* appended to the server's prefix: "/api/v1/..." */
	const char *const *headers; /* extra "Name: value" lines (no CRLF), or NULL */
	size_t n_headers;
	const char *body;	   /* sent with Content-Length; may be NULL */
	size_t body_len;
	int timeout_ms;		   /* whole transfer; 0 = none (the caller must cancel) */
};

/* Starts a transfer; callbacks come later, from the loop, never from here.
 * The request is copied (and wiped when freed: it carries credentials).
 * Returns 0 and *ret (may be NULL), -EINVAL or -ENOMEM. */
int httpc_start(struct httpc *h, const struct httpc_req *rq, const struct httpc_handlers *cb,
		void *userdata, struct httpc_xfer **ret);

/* Ends a transfer without any further callback. NULL-safe; safe inside its
 * own on_head/on_body; not after its on_done. */
void httpc_xfer_cancel(struct httpc_xfer *x);

/* Reading resumes after on_body returned HTTPC_PAUSE (from the loop, later). */
void httpc_xfer_resume(struct httpc_xfer *x);

struct httpc_stats {
	uint64_t connects;	 /* connections established (TCP, and TLS where used) */
	uint64_t reuses;	 /* transfers that ran on a kept-alive connection */
	uint64_t stale_retries;	 /* reused connections found dead and replaced */
};
void httpc_get_stats(const struct httpc *h, struct httpc_stats *ret);

/* ---- building blocks, public for the unit tests and fuzz targets -------------------- */

/* A server URL taken apart. */
struct httpc_url {
	bool tls;
	char host[256];	  /* without brackets */
	char port[8];
	char prefix[512]; /* "" or "/path" without a trailing '/' */
	bool host_is_ip;
};
int httpc_url_parse(const char *url, struct httpc_url *ret);

/* An incremental HTTP/1.1 response parser (RFC 9112): feed it bytes, take
 * events one at a time. Body spans point into the caller's buffer. */
enum http1_event {
	HTTP1_NEED_MORE, /* every byte given was consumed */
	HTTP1_HEAD,	 /* the final response head is complete (see the fields) */
	HTTP1_BODY,	 /* body bytes in *ret_data, *ret_len */
	HTTP1_DONE,	 /* the message is complete; bytes after it are not ours */
};

enum http1_body { HTTP1_BODY_NONE, HTTP1_BODY_LENGTH, HTTP1_BODY_CHUNKED, HTTP1_BODY_EOF };

struct http1_parser {
	/* results, valid from HTTP1_HEAD on */
	int status;
	int retry_after_s;
	bool keep_alive;
	enum http1_body body;
	char warning[HTTPC_WARNING_MAX];
	/* internals */
	int state;
	bool no_body; /* the request was HEAD */
	char *head;   /* the head being collected */
	size_t head_len, head_cap, head_total;
	size_t head_last; /* length of the last head parsed (for tracing) */
	char line[HTTPC_MAX_LINE];
	size_t line_len;
	uint64_t left; /* of the body or current chunk */
	size_t trailer_bytes;
};

void http1_parser_init(struct http1_parser *p, bool head_request);
void http1_parser_done(struct http1_parser *p);
/* Consumes from buf[0..n): returns the number of bytes used (>= 0) and sets
 * *ret_ev (and for HTTP1_BODY *ret_data, *ret_len), or -EPROTO (bad syntax),
 * -E2BIG (over a cap), -ENOMEM. Call again with the rest after each event. */
ssize_t http1_parse(struct http1_parser *p, const char *buf, size_t n, enum http1_event *ret_ev,
		    const char **ret_data, size_t *ret_len);
/* The peer closed: 0 if that completes the message (a body delimited by the
 * close), else -ECONNRESET. */
int http1_parse_eof(const struct http1_parser *p);
