/* HTTP/1.1 client on libevent with mbedTLS. See httpc.h.
 *
 * Internals. A transfer (struct httpc_xfer) owns a connection (struct
 * httpc_conn) from the moment it is attached until the response is complete;
 * then the connection goes back to the idle list or is closed. A new
 * connection belongs to the transfer that asked for it:
 *
 *   RESOLVING -> CONNECTING (next address on failure) -> HANDSHAKE -> READY
 *      (evdns)      (EV_WRITE)                        (mbedTLS WANT_*)
 *
 * Each connection has one fd event, re-armed for whatever the current step
 * waits for (mbedTLS may want to write while we read and the reverse). The
 * response is read into a per-transfer buffer and parsed in place; when the
 * user pauses, the unparsed rest stays in the buffer until resume.
 *
 * Re-entrancy: user callbacks run with the transfer marked busy; a cancel from
 * inside one only sets a flag, and the code that called back frees it.
 */
#include "kube/httpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "lib/clock.h"

#define LOG_MOD "http"
#include "lib/log.h"

#define READ_BUF (16u << 10)
#define READS_PER_ROUND 8 /* then yield to the loop: one big body must not starve others */
#define SYSTEM_CA_FILE "/etc/ssl/certs/ca-certificates.crt"
#define SYSTEM_CA_DIR "/etc/ssl/certs"

/* ---- the response parser ------------------------------------------------------------- */

enum {
	ST_HEAD,
	ST_LENGTH,
	ST_CHUNK_SIZE,
	ST_CHUNK_DATA,
	ST_CHUNK_CRLF,
	ST_TRAILERS,
	ST_UNTIL_EOF,
	ST_DONE,
};

void http1_parser_init(struct http1_parser *p, bool head_request)
{
	*p = (struct http1_parser){ .state = ST_HEAD, .no_body = head_request,
				    .retry_after_s = -1 };
}

void http1_parser_done(struct http1_parser *p)
{
	free(p->head);
	p->head = NULL;
	p->head_len = p->head_cap = 0;
}

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Parses a non-empty run of decimal digits below 2^62 into *ret. */
static int parse_u62(const char *s, size_t n, uint64_t *ret)
{
	uint64_t v = 0;

	if (n == 0)
		return -EPROTO;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_C(1) << 62) / 10)
			return -EPROTO;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*ret = v;
	return 0;
}

/* True if the comma-separated list v (len n) holds token tok (any case). */
static bool list_has(const char *v, size_t n, const char *tok)
{
	size_t tl = strlen(tok);

	for (size_t i = 0; i < n;) {
		size_t j = i, e;

		while (j < n && v[j] != ',')
			j++;
		e = j;
		while (i < e && is_ows(v[i]))
			i++;
		while (e > i && is_ows(v[e - 1]))
			e--;
		if (e - i == tl && strncasecmp(v + i, tok, tl) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

/* One header field of the head; name and value trimmed. */
static int head_field(struct http1_parser *p, const char *name, size_t nl, const char *v,
		      size_t vl, uint64_t *clen, bool *has_clen, bool *chunked, bool *has_te)
{
#define IS(s) (nl == sizeof(s) - 1 && strncasecmp(name, s, nl) == 0)
	if (IS("Content-Length")) {
		uint64_t n;

		if (parse_u62(v, vl, &n) < 0 || (*has_clen && n != *clen))
			return -EPROTO;
		*clen = n;
		*has_clen = true;
	} else if (IS("Transfer-Encoding")) {
		/* Only "chunked", once: we never ask for a transfer coding. */
		if (*has_te || vl != 7 || strncasecmp(v, "chunked", 7) != 0)
			return -EPROTO;
		*has_te = *chunked = true;
	} else if (IS("Content-Encoding")) {
		if (!(vl == 8 && strncasecmp(v, "identity", 8) == 0))
			return -EPROTO; /* never asked for: we send no Accept-Encoding */
	} else if (IS("Connection")) {
		if (list_has(v, vl, "close"))
			p->keep_alive = false;
		else if (list_has(v, vl, "keep-alive"))
			p->keep_alive = true;
	} else if (IS("Retry-After")) {
		uint64_t s;

		/* delta-seconds only; an HTTP-date is ignored (the caller backs off) */
		if (p->retry_after_s < 0 && parse_u62(v, vl, &s) == 0)
			p->retry_after_s = s > INT_MAX ? INT_MAX : (int)s;
	} else if (IS("Warning")) {
		if (!p->warning[0] && vl) {
			size_t n = vl < sizeof(p->warning) - 1 ? vl : sizeof(p->warning) - 1;

			for (size_t i = 0; i < n; i++)
				p->warning[i] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? ' ' : v[i];
			p->warning[n] = 0;
		}
	}
	return 0;
#undef IS
}

/* The head in p->head is complete: status line and fields. Returns 1 for a
 * final head, 0 for an interim (1xx) one to skip, or -EPROTO. */
static int head_parse(struct http1_parser *p)
{
	const char *s = p->head, *end = p->head + p->head_len, *eol;
	bool has_clen = false, chunked = false, has_te = false;
	uint64_t clen = 0;
	int r, st;

	eol = memchr(s, '\n', (size_t)(end - s));
	if (!eol || eol - s < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') ||
	    s[8] != ' ' || s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' ||
	    s[11] < '0' || s[11] > '9' || (s + 12 < eol && s[12] != ' ' && s[12] != '\r'))
		return -EPROTO;
	st = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	p->keep_alive = s[7] == '1';
	p->retry_after_s = -1;
	p->warning[0] = 0;
	for (s = eol + 1; s < end; s = eol + 1) {
		const char *colon, *v, *ve;

		eol = memchr(s, '\n', (size_t)(end - s));
		if (!eol)
			return -EPROTO;
		ve = eol > s && eol[-1] == '\r' ? eol - 1 : eol;
		if (ve == s) /* the empty line that ends the head */
			break;
		colon = memchr(s, ':', (size_t)(ve - s));
		if (!colon || colon == s)
			return -EPROTO; /* no name; also rejects obs-fold continuation lines */
		for (const char *c = s; c < colon; c++)
			if (!is_tchar((unsigned char)*c))
				return -EPROTO;
		for (v = colon + 1; v < ve && is_ows(*v); v++)
			;
		while (ve > v && is_ows(ve[-1]))
			ve--;
		for (const char *c = v; c < ve; c++)
			if (*c == 0 || *c == '\r' || *c == '\n')
				return -EPROTO;
		r = head_field(p, s, (size_t)(colon - s), v, (size_t)(ve - v), &clen, &has_clen,
			       &chunked, &has_te);
		if (r < 0)
			return r;
	}
	if (st == 101)
		return -EPROTO; /* we never ask to switch protocols */
	if (st < 200)
		return 0;
	p->status = st;
	if (p->no_body || st == 204 || st == 304) {
		p->body = HTTP1_BODY_NONE;
	} else if (chunked) {
		p->body = HTTP1_BODY_CHUNKED;
		if (has_clen) /* RFC 9112 6.3: TE wins; the sender may be confused: do not reuse */
			p->keep_alive = false;
	} else if (has_clen) {
		p->body = HTTP1_BODY_LENGTH;
		p->left = clen;
	} else {
		p->body = HTTP1_BODY_EOF;
		p->keep_alive = false;
	}
	return 1;
}

/* Collects one line into p->line. Returns 1 (complete, without CR LF), 0 (needs
 * more; all of buf[*i..n) consumed) or -E2BIG. */
static int line_take(struct http1_parser *p, const char *buf, size_t n, size_t *i)
{
	while (*i < n) {
		char c = buf[(*i)++];

		if (c == '\n') {
			if (p->line_len && p->line[p->line_len - 1] == '\r')
				p->line_len--;
			p->line[p->line_len] = 0;
			return 1;
		}
		if (p->line_len >= sizeof(p->line) - 1)
			return -E2BIG;
		p->line[p->line_len++] = c;
	}
	return 0;
}

static int chunk_size(struct http1_parser *p)
{
	uint64_t v = 0;
	size_t i = 0;
	int d;

	for (; i < p->line_len; i++) {
		char c = p->line[i];

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			break;
		if (v >> 58)
			return -EPROTO;
		v = v << 4 | (uint64_t)d;
	}
	if (i == 0)
		return -EPROTO;
	while (i < p->line_len && is_ows(p->line[i]))
		i++;
	if (i < p->line_len && p->line[i] != ';')
		return -EPROTO; /* only chunk extensions may follow the size */
	p->left = v;
	return 0;
}

static int head_append(struct http1_parser *p, char c)
{
	if (p->head_len == p->head_cap) {
		size_t cap = p->head_cap ? p->head_cap * 2 : 1024;
		char *nh;

		if (cap > HTTPC_MAX_HEAD)
			cap = HTTPC_MAX_HEAD;
		nh = realloc(p->head, cap);
		if (!nh)
			return -ENOMEM;
		p->head = nh;
		p->head_cap = cap;
	}
	p->head[p->head_len++] = c;
	return 0;
}

static bool head_complete(const struct http1_parser *p)
{
	const char *h = p->head;
	size_t n = p->head_len;

	return n >= 2 && h[n - 1] == '\n' &&
	       (h[n - 2] == '\n' || (n >= 3 && h[n - 2] == '\r' && h[n - 3] == '\n'));
}

ssize_t http1_parse(struct http1_parser *p, const char *buf, size_t n, enum http1_event *ret_ev,
		    const char **ret_data, size_t *ret_len)
{
	size_t i = 0, take;
	int r;

	for (;;) {
		switch (p->state) {
		case ST_HEAD:
			while (i < n) {
				char c = buf[i++];

				if (++p->head_total > HTTPC_MAX_HEAD)
					return -E2BIG;
				if (p->head_len == 0 && (c == '\r' || c == '\n'))
					continue; /* stray line ends before a status line */
				r = head_append(p, c);
				if (r < 0)
					return r;
				if (c == '\n' && head_complete(p))
					break;
			}
			if (!(p->head_len && head_complete(p))) {
				*ret_ev = HTTP1_NEED_MORE;
				return (ssize_t)i;
			}
			r = head_parse(p);
			if (r < 0)
				return r;
			p->head_last = p->head_len;
			p->head_len = 0;
			if (r == 0) /* 1xx: the real head follows */
				continue;
			p->state = p->body == HTTP1_BODY_NONE	   ? ST_DONE
				   : p->body == HTTP1_BODY_LENGTH  ? ST_LENGTH
				   : p->body == HTTP1_BODY_CHUNKED ? ST_CHUNK_SIZE
								   : ST_UNTIL_EOF;
			*ret_ev = HTTP1_HEAD;
			return (ssize_t)i;
		case ST_LENGTH:
		case ST_CHUNK_DATA:
			if (p->left == 0) {
				p->state = p->state == ST_LENGTH ? ST_DONE : ST_CHUNK_CRLF;
				continue;
			}
			if (i == n) {
				*ret_ev = HTTP1_NEED_MORE;
				return (ssize_t)i;
			}
			take = n - i < p->left ? n - i : (size_t)p->left;
			p->left -= take;
			*ret_data = buf + i;
			*ret_len = take;
			*ret_ev = HTTP1_BODY;
			return (ssize_t)(i + take);
		case ST_UNTIL_EOF:
			if (i == n) {
				*ret_ev = HTTP1_NEED_MORE;
				return (ssize_t)i;
			}
			*ret_data = buf + i;
			*ret_len = n - i;
			*ret_ev = HTTP1_BODY;
			return (ssize_t)n;
		case ST_CHUNK_SIZE:
		case ST_CHUNK_CRLF:
		case ST_TRAILERS:
			r = line_take(p, buf, n, &i);
			if (r < 0)
				return r;
			if (r == 0) {
				*ret_ev = HTTP1_NEED_MORE;
				return (ssize_t)i;
			}
			if (p->state == ST_CHUNK_SIZE) {
				r = chunk_size(p);
				if (r < 0)
					return r;
				p->state = p->left ? ST_CHUNK_DATA : ST_TRAILERS;
			} else if (p->state == ST_CHUNK_CRLF) {
				if (p->line_len)
					return -EPROTO; /* chunk data longer than its size */
				p->state = ST_CHUNK_SIZE;
			} else if (p->line_len == 0) {
				p->state = ST_DONE;
			} else if ((p->trailer_bytes += p->line_len) > HTTPC_MAX_TRAILERS) {
				return -E2BIG;
			}
			p->line_len = 0;
			continue;
		case ST_DONE:
		default:
			*ret_ev = HTTP1_DONE;
			return (ssize_t)i;
		}
	}
}

int http1_parse_eof(const struct http1_parser *p)
{
	return p->state == ST_UNTIL_EOF || p->state == ST_DONE ? 0 : -ECONNRESET;
}

/* ---- URL ------------------------------------------------------------------------------- */

int httpc_url_parse(const char *url, struct httpc_url *ret)
{
	struct httpc_url u = { 0 };
	const char *s, *host, *hend, *port = NULL, *path;
	struct in6_addr a6;
	size_t hl, pl;

	if (!url)
		return -EINVAL;
	if (strncasecmp(url, "https://", 8) == 0)
		s = url + 8, u.tls = true;
	else if (strncasecmp(url, "http://", 7) == 0)
		s = url + 7;
	else
		return -EINVAL;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '?' || *c == '#' || *c == '@' ||
		    *c == '\\')
			return -EINVAL;
	path = s + strcspn(s, "/");
	if (*s == '[') {
		host = s + 1;
		hend = memchr(host, ']', (size_t)(path - host));
		if (!hend)
			return -EINVAL;
		if (hend + 1 < path) {
			if (hend[1] != ':')
				return -EINVAL;
			port = hend + 2;
		}
	} else {
		host = s;
		hend = memchr(s, ':', (size_t)(path - s));
		if (hend)
			port = hend + 1;
		else
			hend = path;
	}
	hl = (size_t)(hend - host);
	if (hl == 0 || hl >= sizeof(u.host))
		return -EINVAL;
	memcpy(u.host, host, hl);
	if (port) {
		pl = (size_t)(path - port);
		if (pl == 0 || pl >= 6)
			return -EINVAL;
		for (size_t i = 0; i < pl; i++)
			if (port[i] < '0' || port[i] > '9')
				return -EINVAL;
		memcpy(u.port, port, pl);
		if (strtol(u.port, NULL, 10) < 1 || strtol(u.port, NULL, 10) > 65535)
			return -EINVAL;
	} else {
		(void)snprintf(u.port, sizeof(u.port), "%s", u.tls ? "443" : "80");
	}
	pl = strlen(path);
	while (pl && path[pl - 1] == '/')
		pl--;
	if (pl >= sizeof(u.prefix))
		return -EINVAL;
	memcpy(u.prefix, path, pl);
	u.host_is_ip = inet_pton(AF_INET6, u.host, &a6) == 1 || inet_pton(AF_INET, u.host, &a6) == 1;
	if (*s == '[' && !u.host_is_ip)
		return -EINVAL;
	*ret = u;
	return 0;
}

/* ---- client and connection state ----------------------------------------------------- */

enum conn_state { CONN_RESOLVING, CONN_CONNECTING, CONN_HANDSHAKE, CONN_READY };

struct httpc_conn {
	struct httpc *h;
	struct httpc_xfer *x; /* NULL while idle */
	TAILQ_ENTRY(httpc_conn) link; /* h->idle while idle */
	bool idle;
	enum conn_state state;
	int fd;
	struct event *ev;
	short ev_what;	      /* what ev is armed for (0: not armed) */
	event_callback_fn ev_fn;
	struct event *timer;  /* connect timeout, then idle timeout */
	int64_t deadline;     /* of timer, CLOCK_MONOTONIC ms */
	bool ssl_on;
	mbedtls_ssl_context ssl;
	int sys_err;	      /* errno of the last failed socket call */
	struct evutil_addrinfo *ai, *ai_cur;
	struct evdns_getaddrinfo_request *dns;
	bool dns_inline;      /* inside evdns_getaddrinfo(): its callback may come now */
	bool dns_answered;
	int dns_err;
	char addr[INET6_ADDRSTRLEN + 8];
};

struct httpc_xfer {
	struct httpc *h;
	struct httpc_conn *c;
	TAILQ_ENTRY(httpc_xfer) link;
	char *method;
	char *out; /* the request: head and body; wiped when freed */
	size_t out_len, out_off;
	char *in;
	size_t in_off, in_len;
	struct http1_parser p;
	struct event *timer;
	struct event *kick; /* deferred attach / resume */
	int timeout_ms;
	int64_t deadline;
	bool attached, sent, got_bytes, reused, stale_retried, paused, busy, cancelled;
	struct httpc_handlers cb;
	void *userdata;
	char text[320];
};

struct httpc {
	struct event_base *base;
	struct httpc_url url;
	struct httpc_opts o;
	char *host_header;
	struct evdns_base *dns;
	TAILQ_HEAD(httpc_conn_list, httpc_conn) idle;
	unsigned n_idle;
	TAILQ_HEAD(httpc_xfer_list, httpc_xfer) xfers;
	struct httpc_stats st;
	/* TLS: the settings, and what was loaded from them (lazily) */
	struct httpc_tls tls;
	bool tls_loaded;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_ssl_config conf;
	mbedtls_x509_crt ca, cert;
	mbedtls_pk_context key;
	unsigned char ip[16]; /* the host as an address, for IP subjectAltName checks */
	size_t ip_len;
};

static void conn_close(struct httpc_conn *c);
static void xfer_process(struct httpc_xfer *x);
static void xfer_attach(struct httpc_xfer *x);
static void conn_step(struct httpc_conn *c);

/* Arms c's fd event for what (0: disarms it), calling fn once. */
static void conn_wait(struct httpc_conn *c, short what, event_callback_fn fn)
{
	if (c->ev_what == what && c->ev_fn == fn)
		return;
	(void)event_del(c->ev);
	c->ev_what = 0;
	c->ev_fn = NULL;
	if (!what)
		return;
	if (event_assign(c->ev, c->h->base, c->fd, what, fn, c) == 0 &&
	    event_add(c->ev, NULL) == 0) {
		c->ev_what = what;
		c->ev_fn = fn;
	}
}

/* Arms ev to fire ms from now and returns the deadline. */
static int64_t timer_arm(struct event *ev, int ms)
{
	struct timeval tv = clock_tv_ms(ms);

	(void)evtimer_add(ev, &tv);
	return clock_now_ms() + ms;
}

/* libevent's clock is coarse (jiffies) and its timers may fire a few ms
 * early: true if deadline has really passed, else re-arms ev for the rest. */
static bool timer_due(struct event *ev, int64_t deadline)
{
	int64_t left = deadline - clock_now_ms();

	if (left <= 0)
		return true;
	(void)timer_arm(ev, (int)left);
	return false;
}

static const char *tls_error(int e, char *buf, size_t n)
{
	mbedtls_strerror(e, buf, n);
	return buf;
}

/* ---- TLS settings -------------------------------------------------------------------- */

/* mbedTLS wants PEM NUL-terminated, with the NUL counted. */
static int pem_parse_crt(mbedtls_x509_crt *crt, const char *pem, size_t len)
{
	_cleanup_free_ unsigned char *b = malloc(len + 1);

	if (!b)
		return MBEDTLS_ERR_X509_ALLOC_FAILED;
	memcpy(b, pem, len);
	b[len] = 0;
	return mbedtls_x509_crt_parse(crt, b, len + 1);
}

static int pem_parse_key(mbedtls_pk_context *pk, const char *pem, size_t len)
{
	unsigned char *b = malloc(len + 1);
	int r;

	if (!b)
		return MBEDTLS_ERR_PK_ALLOC_FAILED;
	memcpy(b, pem, len);
	b[len] = 0;
	r = mbedtls_pk_parse_key(pk, b, len + 1, NULL, 0);
	explicit_bzero(b, len + 1);
	free(b);
	return r;
}

/* Verifies the IP subjectAltName for a numeric host (mbedTLS 2.28 matches
 * names only); for named hosts mbedTLS has done the DNS-name check itself. */
static int on_verify(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
	struct httpc *h = arg;

	if (depth != 0 || !h->ip_len)
		return 0;
	for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s && s->buf.p; s = s->next)
		if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
		    s->buf.len == h->ip_len && memcmp(s->buf.p, h->ip, h->ip_len) == 0)
			return 0;
	*flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
	return 0;
}

static void tls_unload(struct httpc *h)
{
	mbedtls_ssl_config_free(&h->conf);
	mbedtls_x509_crt_free(&h->ca);
	mbedtls_x509_crt_free(&h->cert);
	mbedtls_pk_free(&h->key);
	mbedtls_ctr_drbg_free(&h->drbg);
	mbedtls_entropy_free(&h->entropy);
	h->tls_loaded = false;
}

/* Loads trust anchors and our identity. Returns 0 or -ENOKEY/-ENOMEM with text.
 * On the loop: small bounded local reads, once per client (again only after a
 * failure); the system bundle, used only without a configured CA, is the
 * largest at about 200 KiB. */
static int tls_load(struct httpc *h, char *text, size_t tn)
{
	static const char pers[] = "dra-cpu httpc";
	const struct httpc_tls *t = &h->tls;
	char eb[128];
	int r;

	if (h->tls_loaded)
		return 0;
	mbedtls_entropy_init(&h->entropy);
	mbedtls_ctr_drbg_init(&h->drbg);
	mbedtls_ssl_config_init(&h->conf);
	mbedtls_x509_crt_init(&h->ca);
	mbedtls_x509_crt_init(&h->cert);
	mbedtls_pk_init(&h->key);
	h->tls_loaded = true;
	r = mbedtls_ctr_drbg_seed(&h->drbg, mbedtls_entropy_func, &h->entropy,
				  (const unsigned char *)pers, sizeof(pers) - 1);
	if (r == 0)
		r = mbedtls_ssl_config_defaults(&h->conf, MBEDTLS_SSL_IS_CLIENT,
						MBEDTLS_SSL_TRANSPORT_STREAM,
						MBEDTLS_SSL_PRESET_DEFAULT);
	if (r != 0) {
		(void)snprintf(text, tn, "TLS setup: %s", tls_error(r, eb, sizeof(eb)));
		tls_unload(h);
		return -ENOMEM;
	}
	mbedtls_ssl_conf_min_version(&h->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_rng(&h->conf, mbedtls_ctr_drbg_random, &h->drbg);
	if (t->insecure) {
		mbedtls_ssl_conf_authmode(&h->conf, MBEDTLS_SSL_VERIFY_NONE);
	} else {
		const char *what = "certificate-authority-data";

		if (t->ca_pem) {
			r = pem_parse_crt(&h->ca, t->ca_pem, t->ca_pem_len);
		} else if (t->ca_file) {
			what = t->ca_file;
			r = mbedtls_x509_crt_parse_file(&h->ca, t->ca_file);
		} else {
			what = SYSTEM_CA_FILE;
			r = mbedtls_x509_crt_parse_file(&h->ca, SYSTEM_CA_FILE);
			if (r < 0 || !h->ca.raw.p) {
				what = SYSTEM_CA_DIR;
				r = mbedtls_x509_crt_parse_path(&h->ca, SYSTEM_CA_DIR);
			}
		}
		/* > 0: some certificates in a bundle did not parse; the rest serve */
		if (r < 0 || !h->ca.raw.p) {
			(void)snprintf(text, tn, "CA certificates from %s: %s", what,
				       r < 0 ? tls_error(r, eb, sizeof(eb)) : "none found");
			tls_unload(h);
			return -ENOKEY;
		}
		mbedtls_ssl_conf_authmode(&h->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
		mbedtls_ssl_conf_ca_chain(&h->conf, &h->ca, NULL);
		mbedtls_ssl_conf_verify(&h->conf, on_verify, h);
	}
	if (t->cert_pem || t->cert_file || t->key_pem || t->key_file) {
		const char *what = t->cert_file ? t->cert_file : "client-certificate-data";

		if (t->cert_pem)
			r = pem_parse_crt(&h->cert, t->cert_pem, t->cert_pem_len);
		else if (t->cert_file)
			r = mbedtls_x509_crt_parse_file(&h->cert, t->cert_file);
		else
			r = MBEDTLS_ERR_X509_BAD_INPUT_DATA; /* a key without a certificate */
		if (r >= 0) {
			what = t->key_file ? t->key_file : "client-key-data";
			if (t->key_pem)
				r = pem_parse_key(&h->key, t->key_pem, t->key_pem_len);
			else if (t->key_file)
				r = mbedtls_pk_parse_keyfile(&h->key, t->key_file, NULL);
			else
				r = MBEDTLS_ERR_PK_KEY_INVALID_FORMAT; /* a certificate without a key */
		}
		if (r >= 0)
			r = mbedtls_ssl_conf_own_cert(&h->conf, &h->cert, &h->key);
		if (r != 0) {
			(void)snprintf(text, tn, "client certificate/key %s: %s", what,
				       tls_error(r, eb, sizeof(eb)));
			tls_unload(h);
			return -ENOKEY;
		}
	}
	return 0;
}

/* ---- socket I/O (plain or TLS) ------------------------------------------------------- */

static int bio_send(void *arg, const unsigned char *buf, size_t len)
{
	struct httpc_conn *c = arg;
	ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);

	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_WRITE;
	c->sys_err = errno;
	return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
						      : MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *arg, unsigned char *buf, size_t len)
{
	struct httpc_conn *c = arg;
	ssize_t n = recv(c->fd, buf, len, 0);

	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EINTR)
		return MBEDTLS_ERR_SSL_WANT_READ;
	c->sys_err = errno;
	return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
}

/* Returns bytes (> 0), 0 at EOF, -EAGAIN with *want set, or -ECONNRESET. */
static int conn_io(struct httpc_conn *c, bool write, const char *wbuf, char *rbuf, size_t n,
		   short *want)
{
	int r;

	if (c->ssl_on)
		r = write ? mbedtls_ssl_write(&c->ssl, (const unsigned char *)wbuf, n)
			  : mbedtls_ssl_read(&c->ssl, (unsigned char *)rbuf, n);
	else
		r = write ? bio_send(c, (const unsigned char *)wbuf, n)
			  : bio_recv(c, (unsigned char *)rbuf, n);
	if (r >= 0)
		return r;
	if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) {
		*want = r == MBEDTLS_ERR_SSL_WANT_READ ? EV_READ : EV_WRITE;
		return -EAGAIN;
	}
	if (r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
		return 0;
	if (!c->sys_err)
		c->sys_err = ECONNRESET;
	return -ECONNRESET;
}

/* ---- transfers: end ------------------------------------------------------------------ */

static void xfer_free(struct httpc_xfer *x)
{
	if (x->c) {
		x->c->x = NULL;
		conn_close(x->c);
	}
	TAILQ_REMOVE(&x->h->xfers, x, link);
	if (x->timer)
		event_free(x->timer);
	if (x->kick)
		event_free(x->kick);
	http1_parser_done(&x->p);
	if (x->out)
		explicit_bzero(x->out, x->out_len);
	free(x->out);
	free(x->in);
	free(x->method);
	free(x);
}

/* The transfer is over: one callback, then gone. keep: the connection may be reused. */
static void xfer_end(struct httpc_xfer *x, int err, bool keep)
{
	struct httpc *h = x->h;
	struct httpc_conn *c = x->c;

	if (c) {
		x->c = NULL;
		c->x = NULL;
		if (keep && err == 0 && h->n_idle < h->o.max_idle) {
			c->idle = true;
			TAILQ_INSERT_TAIL(&h->idle, c, link);
			h->n_idle++;
			c->deadline = timer_arm(c->timer, h->o.idle_timeout_ms);
			conn_step(c); /* arms the idle watch */
		} else {
			conn_close(c);
		}
	}
	if (err && !x->text[0])
		(void)snprintf(x->text, sizeof(x->text), "%s", strerror(-err));
	x->busy = true;
	x->cb.on_done(x->userdata, err, err ? x->text : "", x->sent);
	xfer_free(x);
}

static void xfer_fail(struct httpc_xfer *x, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void xfer_fail(struct httpc_xfer *x, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(x->text, sizeof(x->text), fmt, ap);
	va_end(ap);
	xfer_end(x, err, false);
}

/* Idempotent methods may be repeated after the peer dropped a kept-alive
 * connection without answering (RFC 9110 9.2.2); others only if nothing left. */
static bool xfer_may_replay(const struct httpc_xfer *x)
{
	static const char *const idem[] = { "GET", "HEAD", "PUT", "DELETE", "OPTIONS" };

	if (!x->reused || x->got_bytes || x->stale_retried)
		return false;
	if (x->out_off == 0)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(idem); i++)
		if (strcmp(x->method, idem[i]) == 0)
			return true;
	return false;
}

/* A kept-alive connection died under a fresh request: once, on a new one. */
static void xfer_replay(struct httpc_xfer *x)
{
	struct httpc_conn *c = x->c;

	x->c = NULL;
	c->x = NULL;
	conn_close(c);
	x->h->st.stale_retries++;
	x->stale_retried = true;
	x->reused = x->sent = false;
	x->out_off = 0;
	x->in_off = x->in_len = 0;
	log_debug("stale_connection", "method=%s action=reconnecting", x->method);
	xfer_attach(x);
}

/* ---- transfers: request and response ------------------------------------------------- */

static void on_conn_event(evutil_socket_t fd, short what, void *arg);

static void trace_head(const char *dir, const char *head, size_t len)
{
	const char *p = head, *end = head + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		char line[256];

		if (n && p[n - 1] == '\r')
			n--;
		if (n) {
			(void)snprintf(line, sizeof(line), "%.*s", (int)n, p);
			if (strncasecmp(line, "authorization:", 14) == 0)
				(void)snprintf(line + 14, sizeof(line) - 14, " <redacted>");
			for (char *q = line; *q; q++)
				if ((unsigned char)*q < 0x20)
					*q = ' ';
			log_emit(LOG_TRACE, LOG_MOD, "http", "dir=%s line=%s", dir,
				 log_quote(line));
		}
		p = nl ? nl + 1 : end;
	}
}

/* Runs the parser over the buffered input, calling the user. Returns 1 when
 * the caller must stop (transfer ended, cancelled or paused), 0 for more input. */
static int xfer_parse(struct httpc_xfer *x)
{
	for (;;) { /* also with no input: a state may complete without bytes */
		enum http1_event ev;
		const char *data = NULL;
		size_t len = 0;
		ssize_t used;
		int r = 0;

		used = http1_parse(&x->p, x->in + x->in_off, x->in_len - x->in_off, &ev, &data,
				   &len);
		if (used < 0) {
			if (used == -E2BIG)
				xfer_fail(x, -EPROTO, "response head or chunk framing over its cap");
			else
				xfer_fail(x, (int)used, "malformed HTTP response");
			return 1;
		}
		x->in_off += (size_t)used;
		switch (ev) {
		case HTTP1_NEED_MORE:
			return 0;
		case HTTP1_HEAD: {
			struct httpc_head hd = { .status = x->p.status,
						 .retry_after_s = x->p.retry_after_s,
						 .warning = x->p.warning[0] ? x->p.warning : NULL };

			if (log_enabled(LOG_TRACE))
				trace_head("in", x->p.head, x->p.head_last);
			x->busy = true;
			r = x->cb.on_head ? x->cb.on_head(x->userdata, &hd) : 0;
			break;
		}
		case HTTP1_BODY:
			x->busy = true;
			r = x->cb.on_body ? x->cb.on_body(x->userdata, data, len) : 0;
			break;
		case HTTP1_DONE:
			/* Bytes after the message, or TLS records still buffered: the
			 * peer is confused or talking ahead; do not reuse. */
			xfer_end(x, 0, x->p.keep_alive && x->in_off == x->in_len &&
					       !(x->c->ssl_on && mbedtls_ssl_check_pending(&x->c->ssl)));
			return 1;
		}
		x->busy = false;
		if (x->cancelled) {
			xfer_free(x);
			return 1;
		}
		if (r < 0) {
			xfer_fail(x, r, "aborted by the receiver: %s", strerror(-r));
			return 1;
		}
		if (r == HTTPC_PAUSE) {
			x->paused = true;
			return 1;
		}
	}
	return 0;
}

/* Writes the rest of the request, then reads and parses what is there. */
static void xfer_process(struct httpc_xfer *x)
{
	struct httpc_conn *c = x->c;
	short want = 0;
	int n;

	while (x->out_off < x->out_len) {
		n = conn_io(c, true, x->out + x->out_off, NULL, x->out_len - x->out_off, &want);
		if (n == -EAGAIN) {
			conn_wait(c, want, on_conn_event);
			return;
		}
		if (n <= 0) {
			if (xfer_may_replay(x)) {
				xfer_replay(x);
				return;
			}
			xfer_fail(x, -ECONNRESET, "sending the request to %s: %s", c->addr,
				  strerror(c->sys_err ? c->sys_err : ECONNRESET));
			return;
		}
		x->out_off += (size_t)n;
		x->sent = true;
	}
	for (int round = 0;; round++) {
		if (xfer_parse(x))
			return;
		if (round == READS_PER_ROUND) {
			/* let the loop breathe; come back at once */
			conn_wait(c, 0, NULL);
			event_active(x->kick, EV_READ, 0);
			return;
		}
		n = conn_io(c, false, NULL, x->in, READ_BUF, &want);
		if (n == -EAGAIN) {
			conn_wait(c, want, on_conn_event);
			return;
		}
		if (n > 0) {
			x->in_off = 0;
			x->in_len = (size_t)n;
			x->got_bytes = true;
			continue;
		}
		if (n == 0 && http1_parse_eof(&x->p) == 0) {
			/* the body ran to the close: complete, not reusable */
			x->p.state = ST_DONE;
			x->p.keep_alive = false;
			(void)xfer_parse(x);
			return;
		}
		if (xfer_may_replay(x)) {
			xfer_replay(x);
			return;
		}
		if (!x->got_bytes)
			xfer_fail(x, -ECONNRESET, "%s closed the connection without a response",
				  c->addr);
		else
			xfer_fail(x, -ECONNRESET,
				  "%s closed the connection in the middle of the response (%s)",
				  c->addr, n == 0 ? "EOF" : strerror(c->sys_err));
		return;
	}
}

/* ---- connections --------------------------------------------------------------------- */

static void conn_close(struct httpc_conn *c)
{
	struct httpc *h = c->h;

	if (c->idle) {
		TAILQ_REMOVE(&h->idle, c, link);
		h->n_idle--;
	}
	if (c->dns) /* calls on_dns with EVUTIL_EAI_CANCEL, which ignores it */
		evdns_getaddrinfo_cancel(c->dns);
	if (c->ai)
		evutil_freeaddrinfo(c->ai);
	if (c->ev)
		event_free(c->ev);
	if (c->timer)
		event_free(c->timer);
	if (c->ssl_on) {
		(void)mbedtls_ssl_close_notify(&c->ssl); /* best effort, never waits */
		mbedtls_ssl_free(&c->ssl);
	}
	if (c->fd >= 0)
		(void)close(c->fd);
	free(c);
}

/* A connection step failed: the transfer that owns it fails with it. */
static void conn_fail(struct httpc_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void conn_fail(struct httpc_conn *c, int err, const char *fmt, ...)
{
	struct httpc_xfer *x = c->x;
	va_list ap;

	if (!x) {
		conn_close(c);
		return;
	}
	va_start(ap, fmt);
	(void)vsnprintf(x->text, sizeof(x->text), fmt, ap);
	va_end(ap);
	xfer_end(x, err, false);
}

static void on_idle_event(evutil_socket_t fd, short what, void *arg)
{
	/* Idle: anything readable is the peer closing (or talking out of turn). */
	conn_close(arg);
}

static void on_conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct httpc_conn *c = arg;

	if (!timer_due(c->timer, c->deadline))
		return;
	if (c->idle) {
		conn_close(c);
		return;
	}
	conn_fail(c, -ETIMEDOUT, "connecting to %s:%s timed out after %d ms", c->h->url.host,
		  c->h->url.port, c->h->o.connect_timeout_ms);
}

static void conn_connect_next(struct httpc_conn *c);

static void conn_handshake(struct httpc_conn *c)
{
	struct httpc *h = c->h;
	char eb[160], vb[256];
	uint32_t flags;
	int r;

	r = mbedtls_ssl_handshake(&c->ssl);
	if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) {
		conn_wait(c, r == MBEDTLS_ERR_SSL_WANT_READ ? EV_READ : EV_WRITE, on_conn_event);
		return;
	}
	if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
		flags = mbedtls_ssl_get_verify_result(&c->ssl);
		vb[0] = 0;
		(void)mbedtls_x509_crt_verify_info(vb, sizeof(vb), "", flags);
		for (char *p = vb; *p; p++)
			if (*p == '\n')
				*p = p[1] ? ';' : 0;
		conn_fail(c, -EKEYREJECTED, "TLS: server certificate of %s rejected: %s",
			  h->url.host, vb[0] ? vb : "verification failed");
		return;
	}
	if (r != 0) {
		if (r == MBEDTLS_ERR_NET_CONN_RESET || r == MBEDTLS_ERR_NET_RECV_FAILED ||
		    r == MBEDTLS_ERR_NET_SEND_FAILED || r == MBEDTLS_ERR_SSL_CONN_EOF)
			conn_fail(c, -ECONNRESET, "TLS handshake with %s: connection closed (%s)",
				  c->addr, tls_error(r, eb, sizeof(eb)));
		else
			conn_fail(c, -ECONNABORTED, "TLS handshake with %s failed: %s", c->addr,
				  tls_error(r, eb, sizeof(eb)));
		return;
	}
	c->state = CONN_READY;
	conn_step(c);
}

/* The TCP connection is up: TLS, or ready. */
static void conn_connected(struct httpc_conn *c)
{
	struct httpc *h = c->h;
	struct httpc_xfer *x = c->x;
	int r;

	if (!h->url.tls) {
		c->state = CONN_READY;
		conn_step(c);
		return;
	}
	r = tls_load(h, x->text, sizeof(x->text));
	if (r < 0) {
		xfer_end(x, r, false);
		return;
	}
	mbedtls_ssl_init(&c->ssl);
	c->ssl_on = true;
	r = mbedtls_ssl_setup(&c->ssl, &h->conf);
	/* SNI and the name check; for an IP the check is ours (on_verify) and
	 * RFC 6066 forbids an address as SNI. */
	if (r == 0 && !h->url.host_is_ip)
		r = mbedtls_ssl_set_hostname(&c->ssl, h->url.host);
	if (r != 0) {
		conn_fail(c, -ENOMEM, "TLS session setup failed");
		return;
	}
	mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
	c->state = CONN_HANDSHAKE;
	conn_handshake(c);
}

static void conn_connect_done(struct httpc_conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		c->sys_err = err;
		conn_wait(c, 0, NULL);
		(void)close(c->fd);
		c->fd = -1;
		c->ai_cur = c->ai_cur->ai_next;
		conn_connect_next(c);
		return;
	}
	conn_connected(c);
}

static void conn_connect_next(struct httpc_conn *c)
{
	static const int one = 1;
	struct evutil_addrinfo *a;

	for (a = c->ai_cur; a; a = c->ai_cur = a->ai_next) {
		void *ip = a->ai_family == AF_INET6
				   ? (void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr
				   : (void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr;

		if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
			continue;
		(void)inet_ntop(a->ai_family, ip, c->addr, sizeof(c->addr));
		c->fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			c->sys_err = errno;
			continue;
		}
		(void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		(void)setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		if (connect(c->fd, a->ai_addr, a->ai_addrlen) == 0) {
			conn_connected(c);
			return;
		}
		if (errno == EINPROGRESS) {
			c->state = CONN_CONNECTING;
			conn_wait(c, EV_WRITE, on_conn_event);
			return;
		}
		c->sys_err = errno;
		(void)close(c->fd);
		c->fd = -1;
	}
	conn_fail(c, c->sys_err == ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED,
		  "cannot connect to %s:%s: %s", c->h->url.host, c->h->url.port,
		  strerror(c->sys_err ? c->sys_err : EADDRNOTAVAIL));
}

static void conn_resolved(struct httpc_conn *c)
{
	if (c->dns_err) {
		conn_fail(c, -EHOSTUNREACH, "cannot resolve %s: %s", c->h->url.host,
			  evutil_gai_strerror(c->dns_err));
		return;
	}
	c->ai_cur = c->ai;
	conn_connect_next(c);
}

static void on_dns(int err, struct evutil_addrinfo *res, void *arg)
{
	struct httpc_conn *c = arg;

	if (err == EVUTIL_EAI_CANCEL)
		return; /* conn_close() is under way */
	c->dns = NULL;
	c->ai = res;
	c->dns_err = err;
	c->dns_answered = true;
	if (!c->dns_inline)
		conn_resolved(c);
}

static void conn_resolve(struct httpc_conn *c)
{
	struct httpc *h = c->h;
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
					 .ai_protocol = IPPROTO_TCP };
	struct evdns_getaddrinfo_request *rq;

	c->state = CONN_RESOLVING;
	if (h->url.host_is_ip) { /* no DNS: the loop never waits for an address */
		hints.ai_flags = EVUTIL_AI_NUMERICHOST | EVUTIL_AI_NUMERICSERV;
		c->dns_err = evutil_getaddrinfo(h->url.host, h->url.port, &hints, &c->ai);
		conn_resolved(c);
		return;
	}
	if (!h->dns) {
		h->dns = evdns_base_new(h->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
							 EVDNS_BASE_DISABLE_WHEN_INACTIVE);
		if (!h->dns) {
			conn_fail(c, -EHOSTUNREACH, "cannot resolve %s: no resolver (%s)",
				  h->url.host, "/etc/resolv.conf");
			return;
		}
	}
	hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
	c->dns_inline = true;
	rq = evdns_getaddrinfo(h->dns, h->url.host, h->url.port, &hints, on_dns, c);
	c->dns_inline = false;
	if (c->dns_answered) /* answered from /etc/hosts or a literal, inside the call */
		conn_resolved(c);
	else
		c->dns = rq;
}

/* Moves c on according to its state. */
static void conn_step(struct httpc_conn *c)
{
	if (c->idle) {
		conn_wait(c, EV_READ, on_idle_event);
		return;
	}
	switch (c->state) {
	case CONN_CONNECTING:
		conn_connect_done(c);
		break;
	case CONN_HANDSHAKE:
		conn_handshake(c);
		break;
	case CONN_READY:
		if (!c->x)
			return;
		if (!c->x->attached) {
			c->h->st.connects++;
			c->x->attached = true;
			(void)evtimer_del(c->timer);
		}
		if (!c->x->paused)
			xfer_process(c->x);
		break;
	case CONN_RESOLVING:
		break;
	}
}

static void on_conn_event(evutil_socket_t fd, short what, void *arg)
{
	struct httpc_conn *c = arg;

	c->ev_what = 0; /* one-shot */
	c->ev_fn = NULL;
	conn_step(c);
}

static int conn_new(struct httpc *h, struct httpc_xfer *x, struct httpc_conn **ret)
{
	struct httpc_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	/* The loop's cached time may be stale by a whole round: timeouts count from now. */
	(void)event_base_update_cache_time(h->base);
	c->h = h;
	c->x = x;
	c->fd = -1;
	c->ev = event_new(h->base, -1, 0, on_conn_event, c);
	c->timer = evtimer_new(h->base, on_conn_timer, c);
	if (!c->ev || !c->timer) {
		conn_close(c);
		return -ENOMEM;
	}
	c->deadline = timer_arm(c->timer, h->o.connect_timeout_ms);
	*ret = c;
	return 0;
}

/* Is an idle connection still usable? Not if the peer closed it or sent
 * anything while it sat in the pool. */
static bool conn_alive(struct httpc_conn *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return !(c->ssl_on && mbedtls_ssl_check_pending(&c->ssl));
	return false;
}

static void xfer_attach(struct httpc_xfer *x)
{
	struct httpc *h = x->h;
	struct httpc_conn *c;
	int r;

	while ((c = TAILQ_FIRST(&h->idle))) {
		TAILQ_REMOVE(&h->idle, c, link);
		h->n_idle--;
		c->idle = false;
		if (!conn_alive(c)) {
			conn_close(c);
			continue;
		}
		(void)evtimer_del(c->timer);
		conn_wait(c, 0, NULL);
		c->x = x;
		x->c = c;
		x->reused = x->attached = true;
		h->st.reuses++;
		xfer_process(x);
		return;
	}
	r = conn_new(h, x, &c);
	if (r < 0) {
		xfer_fail(x, r, "out of memory for a connection");
		return;
	}
	x->c = c;
	x->attached = false;
	conn_resolve(c);
}

static void on_xfer_timer(evutil_socket_t fd, short what, void *arg)
{
	struct httpc_xfer *x = arg;

	if (!timer_due(x->timer, x->deadline))
		return;
	xfer_fail(x, -ETIMEDOUT, "request timed out after %d ms%s", x->timeout_ms,
		  x->got_bytes ? " (response incomplete)" : "");
}

static void on_xfer_kick(evutil_socket_t fd, short what, void *arg)
{
	struct httpc_xfer *x = arg;

	if (!x->c) {
		xfer_attach(x);
		return;
	}
	if (!x->paused && x->c->state == CONN_READY)
		xfer_process(x);
}

/* ---- public API ---------------------------------------------------------------------- */

static bool header_ok(const char *h)
{
	const char *colon = strchr(h, ':');

	if (!colon || colon == h)
		return false;
	for (const char *c = h; c < colon; c++)
		if (!is_tchar((unsigned char)*c))
			return false;
	return !strpbrk(colon, "\r\n");
}

/* "METHOD prefix+path HTTP/1.1", Host, the caller's headers, Content-Length, body. */
static int request_build(const struct httpc *h, const struct httpc_req *rq, char **ret,
			 size_t *ret_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int bad = 0;

	f = open_memstream(&buf, &len);
	if (!f)
		return -ENOMEM;
	bad |= fprintf(f, "%s %s%s HTTP/1.1\r\nHost: %s\r\n", rq->method, h->url.prefix,
		       rq->path, h->host_header) < 0;
	for (size_t i = 0; i < rq->n_headers; i++)
		bad |= fprintf(f, "%s\r\n", rq->headers[i]) < 0;
	if (rq->body || strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0 ||
	    strcmp(rq->method, "PATCH") == 0)
		bad |= fprintf(f, "Content-Length: %zu\r\n", rq->body ? rq->body_len : 0) < 0;
	bad |= fputs("\r\n", f) == EOF;
	if (rq->body && rq->body_len)
		bad |= fwrite(rq->body, 1, rq->body_len, f) != rq->body_len;
	if (fclose(f) != 0 || bad) {
		if (buf)
			explicit_bzero(buf, len);
		return -ENOMEM;
	}
	*ret_len = len;
	*ret = TAKE_PTR(buf);
	return 0;
}

int httpc_start(struct httpc *h, const struct httpc_req *rq, const struct httpc_handlers *cb,
		void *userdata, struct httpc_xfer **ret)
{
	struct httpc_xfer *x;
	int r;

	if (!h || !rq || !cb || !cb->on_done || !rq->method || !rq->path || rq->path[0] != '/' ||
	    rq->timeout_ms < 0 || (rq->n_headers && !rq->headers))
		return -EINVAL;
	for (const char *m = rq->method; *m; m++)
		if (!is_tchar((unsigned char)*m))
			return -EINVAL;
	for (const char *p = rq->path; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return -EINVAL;
	for (size_t i = 0; i < rq->n_headers; i++)
		if (!rq->headers[i] || !header_ok(rq->headers[i]))
			return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->h = h;
	TAILQ_INSERT_TAIL(&h->xfers, x, link);
	x->cb = *cb;
	x->userdata = userdata;
	x->timeout_ms = rq->timeout_ms;
	http1_parser_init(&x->p, strcmp(rq->method, "HEAD") == 0);
	x->method = strdup(rq->method);
	x->in = malloc(READ_BUF);
	x->kick = event_new(h->base, -1, 0, on_xfer_kick, x);
	x->timer = evtimer_new(h->base, on_xfer_timer, x);
	if (!x->method || !x->in || !x->kick || !x->timer) {
		xfer_free(x);
		return -ENOMEM;
	}
	r = request_build(h, rq, &x->out, &x->out_len);
	if (r < 0) {
		xfer_free(x);
		return r;
	}
	if (log_enabled(LOG_TRACE))
		trace_head("out", x->out, x->out_len - (rq->body ? rq->body_len : 0));
	(void)event_base_update_cache_time(h->base);
	if (rq->timeout_ms)
		x->deadline = timer_arm(x->timer, rq->timeout_ms);
	event_active(x->kick, EV_TIMEOUT, 0);
	if (ret)
		*ret = x;
	return 0;
}

void httpc_xfer_cancel(struct httpc_xfer *x)
{
	if (!x)
		return;
	if (x->busy) {
		x->cancelled = true;
		return;
	}
	xfer_free(x);
}

void httpc_xfer_resume(struct httpc_xfer *x)
{
	if (!x || !x->paused)
		return;
	x->paused = false;
	event_active(x->kick, EV_READ, 0);
}

void httpc_get_stats(const struct httpc *h, struct httpc_stats *ret)
{
	*ret = h->st;
}

struct httpc *httpc_free(struct httpc *h)
{
	struct httpc_xfer *x;
	struct httpc_conn *c;

	if (!h)
		return NULL;
	while ((x = TAILQ_FIRST(&h->xfers)))
		xfer_free(x);
	while ((c = TAILQ_FIRST(&h->idle)))
		conn_close(c);
	if (h->dns)
		evdns_base_free(h->dns, 0);
	if (h->tls_loaded)
		tls_unload(h);
	if (h->tls.key_pem)
		explicit_bzero((char *)h->tls.key_pem, h->tls.key_pem_len);
	free((char *)h->tls.ca_pem);
	free((char *)h->tls.ca_file);
	free((char *)h->tls.cert_pem);
	free((char *)h->tls.cert_file);
	free((char *)h->tls.key_pem);
	free((char *)h->tls.key_file);
	free(h->host_header);
	free(h);
	return NULL;
}

static int dup_mem(const char *s, size_t n, const char **ret)
{
	char *d;

	*ret = NULL;
	if (!s)
		return 0;
	d = malloc(n + 1);
	if (!d)
		return -ENOMEM;
	memcpy(d, s, n);
	d[n] = 0;
	*ret = d;
	return 0;
}

int httpc_new(struct event_base *base, const char *server, const struct httpc_tls *tls,
	      const struct httpc_opts *o, struct httpc **ret)
{
	static const struct httpc_tls no_tls;
	static const struct httpc_opts none;
	_cleanup_(httpc_freep) struct httpc *h = NULL;
	bool default_port;
	int r;

	if (!base || !server)
		return -EINVAL;
	if (!tls)
		tls = &no_tls;
	if (!o)
		o = &none;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	TAILQ_INIT(&h->idle);
	TAILQ_INIT(&h->xfers);
	h->base = base;
	r = httpc_url_parse(server, &h->url);
	if (r < 0)
		return r;
	h->o = *o;
	if (h->o.connect_timeout_ms <= 0)
		h->o.connect_timeout_ms = 10000;
	if (h->o.idle_timeout_ms <= 0)
		h->o.idle_timeout_ms = 60000;
	if (!o->max_idle)
		h->o.max_idle = 4;
	default_port = strcmp(h->url.port, h->url.tls ? "443" : "80") == 0;
	if (asprintf(&h->host_header, strchr(h->url.host, ':') ? "[%s]%s%s" : "%s%s%s",
		     h->url.host, default_port ? "" : ":", default_port ? "" : h->url.port) < 0) {
		h->host_header = NULL;
		return -ENOMEM;
	}
	if (inet_pton(AF_INET, h->url.host, h->ip) == 1)
		h->ip_len = 4;
	else if (inet_pton(AF_INET6, h->url.host, h->ip) == 1)
		h->ip_len = 16;
	h->tls.insecure = tls->insecure;
	h->tls.ca_pem_len = tls->ca_pem_len;
	h->tls.cert_pem_len = tls->cert_pem_len;
	h->tls.key_pem_len = tls->key_pem_len;
	if (dup_mem(tls->ca_pem, tls->ca_pem_len, &h->tls.ca_pem) < 0 ||
	    dup_mem(tls->cert_pem, tls->cert_pem_len, &h->tls.cert_pem) < 0 ||
	    dup_mem(tls->key_pem, tls->key_pem_len, &h->tls.key_pem) < 0 ||
	    dup_mem(tls->ca_file, tls->ca_file ? strlen(tls->ca_file) : 0, &h->tls.ca_file) < 0 ||
	    dup_mem(tls->cert_file, tls->cert_file ? strlen(tls->cert_file) : 0,
		    &h->tls.cert_file) < 0 ||
	    dup_mem(tls->key_file, tls->key_file ? strlen(tls->key_file) : 0,
		    &h->tls.key_file) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(h);
	return 0;
}
