/* The Kubernetes client's proxy: which proxy a server is reached through,
 * from the kubeconfig's proxy-url or the environment as Go's
 * http.ProxyFromEnvironment reads it, in the form curl takes. See kube.h.
 *
 * Apart from kube.c because it is decided once, when the client is made, and
 * touches no call: kube_new() asks kube_proxy_select() and logs the answer
 * with kube_proxy_log().
 */
#include "kube/kube.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "kube/kube_priv.h"

#define LOG_MOD "kube"
#include "lib/log.h"

/* ---- proxy --------------------------------------------------------------------------- */

static const char *getenv_any(const char *a, const char *b)
{
	const char *v = getenv(a);

	return v && *v ? v : getenv(b);
}

/* Go's http.ProxyFromEnvironment never proxies these. */
static bool host_is_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strcasecmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) ||
		       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return false;
}

static void curl_urlp(CURLU **u)
{
	if (*u)
		curl_url_cleanup(*u);
}

static void curl_freep(char **s)
{
	if (*s)
		curl_free(*s);
}

/* The server's host without brackets, as a malloc'd string. */
static int server_host(const char *server, char **ret)
{
	_cleanup_(curl_urlp) CURLU *u = curl_url();
	_cleanup_(curl_freep) char *h = NULL;
	size_t n;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK)
		return -EINVAL;
	n = strlen(h);
	if (n >= 2 && h[0] == '[' && h[n - 1] == ']')
		*ret = strndup(h + 1, n - 2);
	else
		*ret = strdup(h);
	return *ret ? 0 : -ENOMEM;
}

/* A proxy URL as curl takes it: a scheme always (http:// when none, as Go),
 * socks5 resolving names at the proxy (Go's SOCKS5 dialer sends names). */
static char *proxy_for_curl(const char *p)
{
	char *out = NULL;

	if (strncasecmp(p, "socks5://", 9) == 0)
		return asprintf(&out, "socks5h://%s", p + 9) < 0 ? NULL : out;
	if (!strstr(p, "://"))
		return asprintf(&out, "http://%s", p) < 0 ? NULL : out;
	return strdup(p);
}

int kube_proxy_select(const char *server, const char *proxy_url, char **ret_proxy,
		      char **ret_noproxy)
{
	_cleanup_free_ char *proxy = NULL, *noproxy = NULL, *host = NULL;
	const char *env, *no;
	bool https;
	int r;

	if (!server)
		return -EINVAL;
	r = server_host(server, &host);
	if (r < 0)
		return r;
	https = strncasecmp(server, "https://", 8) == 0;
	if (proxy_url) {
		/* client-go: an explicit proxy-url serves every request, NO_PROXY aside. */
		proxy = proxy_for_curl(proxy_url);
		noproxy = strdup("");
	} else {
		env = https ? getenv_any("HTTPS_PROXY", "https_proxy")
			    : getenv_any("HTTP_PROXY", "http_proxy");
		no = getenv_any("NO_PROXY", "no_proxy");
		proxy = env && *env && !host_is_loopback(host) ? proxy_for_curl(env) : strdup("");
		noproxy = strdup(no ? no : "");
	}
	if (!proxy || !noproxy)
		return -ENOMEM;
	*ret_proxy = TAKE_PTR(proxy);
	*ret_noproxy = TAKE_PTR(noproxy);
	return 0;
}

/* The proxy's host and port only: its URL may hold a password. */
void kube_proxy_log(const char *proxy)
{
	_cleanup_(curl_urlp) CURLU *u = curl_url();
	_cleanup_(curl_freep) char *scheme = NULL, *host = NULL, *port = NULL;

	if (!*proxy)
		return;
	if (!u || curl_url_set(u, CURLUPART_URL, proxy, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		log_info("proxy", "proxy=unparsable");
		return;
	}
	log_info("proxy", "scheme=%s host=%s port=%s", scheme, host, port);
}
