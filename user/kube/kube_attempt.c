/* One HTTP attempt of a Kubernetes client call: the curl easy handle with
 * its options, headers and credentials, the write, header and trace
 * callbacks that buffer what comes back, and what is kept of it when curl
 * reports the attempt done. See the state diagram in kube.c.
 *
 * Apart from kube.c because this is the part that speaks curl's easy API;
 * kube.c owns the multi handle, the queue of ready calls and the decisions
 * taken on a finished attempt (retry, result, callback).
 */
#include "kube/kube.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "lib/clock.h"
#include "kube/kube_priv.h"
#include "kube/kubeconfig.h"

#define LOG_MOD "kube"
#include "lib/log.h"

#define WARNING_MAX 512
/* TCP keep-alive probes after this idle time and between probes, as client-go's
 * dialer (30 s): a server that vanished is noticed under a long watch. */
#define KEEPALIVE_S 30L

/* ---- pure building blocks ------------------------------------------------------------ */

int kube_errno_from_curl(CURLcode c)
{
	switch (c) {
	case CURLE_OK:
		return 0;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_PROXY:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_PEER_FAILED_VERIFICATION:
		return -EKEYREJECTED;
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
		return -ENOKEY;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CIPHER:
		return -ECONNABORTED;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return -ECONNRESET;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_BAD_FUNCTION_ARGUMENT:
	case CURLE_UNKNOWN_OPTION:
		return -EINVAL;
	case CURLE_FILESIZE_EXCEEDED:
		return -E2BIG;
	case CURLE_ABORTED_BY_CALLBACK:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

/* ---- calls: one attempt -------------------------------------------------------------- */

static void slist_wipe_free(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i; i = i->next)
		explicit_bzero(i->data, strlen(i->data));
	curl_slist_free_all(l);
}

/* Removes the attempt's easy handle from the multi. Never from inside libcurl. */
void kube_call_stop_easy(struct kube_call *c)
{
	long n = 0;

	if (c->easy) {
		/* Here, not on completion: a watch that is stopped may be the one
		 * that opened the connection everything else shares. */
		if (curl_easy_getinfo(c->easy, CURLINFO_NUM_CONNECTS, &n) == CURLE_OK && n > 0)
			c->k->st.connections += (uint64_t)n;
		(void)curl_multi_remove_handle(c->k->multi, c->easy);
		curl_easy_cleanup(c->easy);
		c->easy = NULL;
	}
	slist_wipe_free(c->headers);
	c->headers = NULL;
	c->paused = false;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct kube_call *c = arg;
	size_t n = size * nmemb;
	int r;

	if (c->kind == CALL_WATCH && !c->status_seen) {
		long code = 0;

		(void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
		c->status_seen = true;
		c->stream_ok = code == 200;
	}
	if (c->stream_ok) {
		/* Back-pressure: complete lines waiting and a max_line of them already. */
		if (kube_lines_pending(&c->lines) - c->lines.cur > 0 &&
		    kube_lines_pending(&c->lines) >= c->lines.max_line) {
			c->paused = true;
			c->k->st.watch_pauses++;
			kube_call_mark_ready(c);
			return CURL_WRITEFUNC_PAUSE;
		}
		r = kube_lines_feed(&c->lines, data, n);
		if (r < 0) {
			c->local_err = r;
			return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
		}
		c->k->st.bytes_received += n;
		kube_call_mark_ready(c);
		return n;
	}
	if (n > c->max_body - c->in_len) {
		c->local_err = -E2BIG;
		return 0;
	}
	if (n > c->in_cap - c->in_len) {
		size_t cap = c->in_cap ? c->in_cap : 16384;
		char *nb;

		while (cap < c->in_len + n)
			cap *= 2;
		if (cap > c->max_body)
			cap = c->max_body;
		nb = realloc(c->in, cap);
		if (!nb) {
			c->local_err = -ENOMEM;
			return 0;
		}
		c->in = nb;
		c->in_cap = cap;
	}
	memcpy(c->in + c->in_len, data, n);
	c->in_len += n;
	c->k->st.bytes_received += n;
	return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct kube_call *c = arg;
	size_t n = size * nmemb, v = 8;

	if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) { /* a new response (proxy, 100, retry) */
		free(c->warning);
		c->warning = NULL;
	} else if (!c->warning && n > 8 && strncasecmp(data, "Warning:", 8) == 0) {
		while (v < n && (data[v] == ' ' || data[v] == '\t'))
			v++;
		while (n > v && (data[n - 1] == '\r' || data[n - 1] == '\n' || data[n - 1] == ' '))
			n--;
		c->warning = strndup(data + v, n - v > WARNING_MAX ? WARNING_MAX : n - v);
		for (char *p = c->warning; p && *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = ' ';
	}
	return size * nmemb;
}

/* Trace output (log level trace only): headers and curl's notes, with every
 * credential redacted. curl prints HTTP/2 request headers as text lines
 * ("[authorization: Bearer ...]"), so all kinds are filtered, not just
 * HEADER_OUT; "authorization" also catches Proxy-Authorization. */
static int on_curl_debug(CURL *e, curl_infotype type, char *data, size_t size, void *userp)
{
	const char *dir = type == CURLINFO_HEADER_OUT  ? "out"
			  : type == CURLINFO_HEADER_IN ? "in"
			  : type == CURLINFO_TEXT      ? "info"
						       : NULL;
	const char *p = data, *end = data + size;

	if (!dir)
		return 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		char line[256];
		char *hit;

		if (n && p[n - 1] == '\r')
			n--;
		if (n) {
			(void)snprintf(line, sizeof(line), "%.*s", (int)n, p);
			hit = strcasestr(line, "authorization");
			if (!hit)
				hit = strcasestr(line, "bearer");
			if (hit)
				(void)snprintf(hit, sizeof(line) - (size_t)(hit - line),
					       "%s", "<redacted>");
			log_emit(LOG_TRACE, LOG_MOD, "curl", "dir=%s line=%s", dir, log_quote(line));
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static void curl_easy_cleanupp(CURL **e)
{
	if (*e)
		curl_easy_cleanup(*e);
}

static void slist_wipe_freep(struct curl_slist **l)
{
	slist_wipe_free(*l);
}

static int header_add(struct curl_slist **l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int header_add(struct curl_slist **l, const char *fmt, ...)
{
	_cleanup_free_ char *h = NULL;
	struct curl_slist *n;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&h, fmt, ap);
	va_end(ap);
	if (r < 0) {
		h = NULL;
		return -ENOMEM;
	}
	n = curl_slist_append(*l, h);
	explicit_bzero(h, (size_t)r);
	if (!n)
		return -ENOMEM;
	*l = n;
	return 0;
}

static const char *const verb_method[] = {
	[KUBE_GET] = "GET",	   [KUBE_CREATE] = "POST",   [KUBE_UPDATE] = "PUT",
	[KUBE_PATCH] = "PATCH",	   [KUBE_DELETE] = "DELETE",
};

/* Sets an option unless an earlier one failed: the first failure is kept in cc. */
#define SET(opt, val)                                            \
	do {                                                     \
		if (cc == CURLE_OK)                              \
			cc = curl_easy_setopt(e, opt, val);      \
	} while (0)

/* Fresh per-attempt state. */
static void attempt_reset(struct kube_call *c)
{
	c->done = false;
	c->cres = CURLE_OK;
	c->local_err = 0;
	c->http_status = c->proxy_status = 0;
	c->retry_after_s = 0;
	c->status_seen = c->stream_ok = c->sent = false;
	c->in_len = 0;
	c->errbuf[0] = 0;
	errbuf_clear(&c->errtext);
	free(c->warning);
	c->warning = NULL;
	kube_lines_done(&c->lines);
}

/* The attempt's time: the call's, cut to what is left before its deadline.
 * Returns 0 and the time in *ret, or -ETIMEDOUT when the deadline passed. */
static int attempt_timeout(const struct kube_call *c, long *ret)
{
	long timeout = c->timeout_ms;

	if (c->deadline) {
		int64_t left = c->deadline - clock_now_ms();

		if (left <= 0)
			return -ETIMEDOUT;
		if (left < timeout)
			timeout = (long)left;
	}
	*ret = timeout;
	return 0;
}

static int attempt_headers(const struct kube_call *c, struct curl_slist **h)
{
	int r;

	r = header_add(h, "Accept: application/json");
	if (r >= 0 && c->body)
		r = header_add(h, "Content-Type: %s", c->content_type);
	if (r >= 0 && c->k->token)
		r = header_add(h, "Authorization: Bearer %s", c->k->token);
	if (r >= 0) /* no "Expect: 100-continue" round trip */
		r = header_add(h, "Expect:");
	return r;
}

static CURLcode set_connection(CURL *e, struct kube_call *c, long timeout)
{
	const struct kube *k = c->k;
	CURLcode cc = CURLE_OK;

	SET(CURLOPT_URL, c->url);
	SET(CURLOPT_PRIVATE, c);
	SET(CURLOPT_ERRORBUFFER, c->errbuf);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROTOCOLS_STR, k->cfg->insecure ? "http,https" : "https");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)k->o.connect_timeout_ms);
	SET(CURLOPT_TIMEOUT_MS, timeout);
	/* HTTP/2 over TLS when the server offers it in ALPN, else HTTP/1.1. PIPEWAIT:
	 * a transfer started while the first connection is in its TLS handshake
	 * waits for ALPN to say whether it can be a stream of that one. Not for
	 * plain http, never HTTP/2 here: curl would learn that only from the
	 * first response, and a slow one would hold every other transfer. */
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	SET(CURLOPT_PIPEWAIT, strncmp(c->url, "https://", 8) == 0 ? 1L : 0L);
	return cc;
}

/* The server's CA and the client certificate and key: the files' current
 * pair (kube_cred_refresh() just looked at them), else the inline PEM. */
static CURLcode set_tls(CURL *e, const struct kube *k)
{
	const struct kubeconfig *cfg = k->cfg;
	const char *cert = cfg->cert_pem, *key = cfg->key_pem;
	size_t cert_len = cfg->cert_pem_len, key_len = cfg->key_pem_len;
	CURLcode cc = CURLE_OK;

	if (k->cert.path) {
		cert = k->cert.pem;
		cert_len = k->cert.len;
	}
	if (k->key.path) {
		key = k->key.pem;
		key_len = k->key.len;
	}
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2); /* minimum; 1.3 when offered */
	SET(CURLOPT_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
	SET(CURLOPT_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
	if (cfg->ca_pem) {
		struct curl_blob b = { .data = cfg->ca_pem, .len = cfg->ca_pem_len,
				       .flags = CURL_BLOB_COPY };

		SET(CURLOPT_CAINFO_BLOB, &b);
		SET(CURLOPT_CAPATH, NULL); /* only the cluster's CA, not the system's too */
	} else if (cfg->ca_file) {
		SET(CURLOPT_CAINFO, cfg->ca_file);
		SET(CURLOPT_CAPATH, NULL);
	}
	if (cert) {
		struct curl_blob b = { .data = (void *)cert, .len = cert_len,
				       .flags = CURL_BLOB_COPY };

		SET(CURLOPT_SSLCERT_BLOB, &b);
	}
	if (key) {
		struct curl_blob b = { .data = (void *)key, .len = key_len,
				       .flags = CURL_BLOB_COPY };

		SET(CURLOPT_SSLKEY_BLOB, &b);
	}
	return cc;
}

static CURLcode set_request(CURL *e, struct kube_call *c, struct curl_slist *h)
{
	const struct kube *k = c->k;
	CURLcode cc = CURLE_OK;

	SET(CURLOPT_PROXY, k->proxy);
	SET(CURLOPT_NOPROXY, k->noproxy);
	SET(CURLOPT_HTTPHEADER, h);
	SET(CURLOPT_USERAGENT, k->user_agent);
	SET(CURLOPT_ACCEPT_ENCODING, "gzip"); /* as Go's transport; caps apply after decoding */
	/* HTTP/1.1 over TLS copies each request into this buffer (64 KiB by default)
	 * for as long as the transfer lives: a watch holds one. */
	SET(CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, KEEPALIVE_S);
	SET(CURLOPT_TCP_KEEPINTVL, KEEPALIVE_S);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, c);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, c);
	if (c->verb == KUBE_GET)
		SET(CURLOPT_HTTPGET, 1L);
	else if (c->verb != KUBE_CREATE)
		SET(CURLOPT_CUSTOMREQUEST, verb_method[c->verb]);
	if (c->body) {
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
		SET(CURLOPT_POSTFIELDS, c->body); /* c->body outlives the easy handle */
	}
	if (log_enabled(LOG_TRACE)) {
		SET(CURLOPT_DEBUGFUNCTION, on_curl_debug);
		SET(CURLOPT_VERBOSE, 1L);
	}
	return cc;
}

#undef SET

/* Starts one attempt of c with the current token and client certificate.
 * Outside libcurl only. */
int kube_call_start(struct kube_call *c)
{
	struct kube *k = c->k;
	_cleanup_(curl_easy_cleanupp) CURL *e = NULL;
	_cleanup_(slist_wipe_freep) struct curl_slist *h = NULL;
	long timeout;
	CURLcode cc;
	CURLMcode mc;
	int r;

	attempt_reset(c);
	r = attempt_timeout(c, &timeout);
	if (r < 0)
		return r;
	(void)kube_cred_refresh(k, false);

	e = curl_easy_init();
	if (!e)
		return -ENOMEM;
	r = attempt_headers(c, &h);
	if (r < 0)
		return r;

	cc = set_connection(e, c, timeout);
	if (cc == CURLE_OK)
		cc = set_tls(e, k);
	if (cc == CURLE_OK)
		cc = set_request(e, c, h);
	if (cc != CURLE_OK)
		return kube_errno_from_curl(cc);
	mc = curl_multi_add_handle(k->multi, e);
	if (mc != CURLM_OK)
		return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
	c->easy = TAKE_PTR(e);
	c->headers = TAKE_PTR(h);
	c->attempts++;
	k->st.attempts++;
	if (c->attempts > 1)
		k->st.retries++;
	return 0;
}

/* After curl reported the attempt done: keep what the result needs, drop the easy. */
void kube_call_collect(struct kube_call *c, CURLcode res)
{
	struct kube *k = c->k;
	curl_off_t ra = 0, pre = 0;
	long ver = 0;

	c->cres = res;
	(void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->http_status);
	(void)curl_easy_getinfo(c->easy, CURLINFO_HTTP_CONNECTCODE, &c->proxy_status);
	if (curl_easy_getinfo(c->easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
		c->retry_after_s = ra > KUBE_RETRY_AFTER_MAX_S ? KUBE_RETRY_AFTER_MAX_S : (long)ra;
	if (curl_easy_getinfo(c->easy, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK)
		c->sent = pre > 0;
	if (c->http_status > 0)
		c->sent = true;
	if (c->http_status > 0 &&
	    curl_easy_getinfo(c->easy, CURLINFO_HTTP_VERSION, &ver) == CURLE_OK &&
	    ver == CURL_HTTP_VERSION_2_0)
		k->st.http2++;
	kube_call_stop_easy(c);
	c->done = true;
	kube_call_mark_ready(c);
}
