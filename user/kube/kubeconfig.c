/* kubeconfig and in-cluster configuration. See kubeconfig.h for the contract.
 *
 * The YAML is loaded with libyaml's document API (a node graph; aliases are
 * references, never expanded) and only the few fixed paths we need are
 * walked, so input size bounds both memory and work. */
#include "kube/kubeconfig.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"

#define LOG_MOD "kubeconfig"
#include "lib/log.h"
#include "lib/num.h"

static void wipe_free(char *p, size_t n)
{
	if (!p)
		return;
	explicit_bzero(p, n);
	free(p);
}

char *kubeconfig_token_free(char *token)
{
	if (token)
		wipe_free(token, strlen(token));
	return NULL;
}

struct kubeconfig *kubeconfig_free(struct kubeconfig *c)
{
	if (!c)
		return NULL;
	free(c->server);
	free(c->ca_file);
	free(c->ca_pem);
	free(c->cert_file);
	free(c->cert_pem);
	free(c->key_file);
	wipe_free(c->key_pem, c->key_pem_len);
	(void)kubeconfig_token_free(c->token);
	free(c->token_file);
	if (c->proxy_url) /* may hold proxy credentials */
		wipe_free(c->proxy_url, strlen(c->proxy_url));
	free(c->namespace);
	free(c->source);
	free(c);
	return NULL;
}

/* ---- files --------------------------------------------------------------------------- */

/* Every file a kubeconfig names is read with fileio_read_mounted(): they are
 * links where the kubelet mounts them (the service account token is
 * ..data/token, the kubelet's client certificate kubelet-client-current.pem),
 * and a FIFO planted where a token should be is refused without a read. */
int kubeconfig_read_token(const char *path, char **ret)
{
	_cleanup_free_ char *raw = NULL;
	size_t len = 0, a = 0;
	char *tok;
	int r;

	r = fileio_read_mounted(path, KUBECONFIG_TOKEN_MAX, &raw, &len, NULL);
	if (r < 0)
		return r;
	while (a < len && isspace((unsigned char)raw[a]))
		a++;
	while (len > a && isspace((unsigned char)raw[len - 1]))
		len--;
	if (len == a) {
		explicit_bzero(raw, len);
		return -ENODATA;
	}
	for (size_t i = a; i < len; i++)
		if ((unsigned char)raw[i] < 0x20 || raw[i] == 0x7f) {
			explicit_bzero(raw, len);
			return -EBADMSG;
		}
	tok = strndup(raw + a, len - a);
	explicit_bzero(raw, len);
	if (!tok)
		return -ENOMEM;
	*ret = tok;
	return 0;
}

char *kubeconfig_pem_free(char *pem, size_t len)
{
	wipe_free(pem, len);
	return NULL;
}

int kubeconfig_read_pem(const char *path, const char *pem_label, char **ret, size_t *ret_len)
{
	char *raw = NULL, marker[64];
	size_t len = 0;
	int r;

	if (snprintf(marker, sizeof(marker), "%s-----", pem_label) >= (int)sizeof(marker))
		return -EINVAL;
	r = fileio_read_mounted(path, KUBECONFIG_PEM_MAX, &raw, &len, NULL);
	if (r < 0)
		return r;
	/* "-----BEGIN ": a file being rewritten may have its end but not its start. */
	if (!memmem(raw, len, "-----BEGIN ", 11) || !memmem(raw, len, marker, strlen(marker))) {
		wipe_free(raw, len);
		return -EBADMSG;
	}
	*ret = raw;
	*ret_len = len;
	return 0;
}

/* ---- base64 -------------------------------------------------------------------------- */

static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Standard alphabet with padding, line breaks ignored (Go's StdEncoding, which
 * is how client-go reads []byte fields). On error *ret_bad is the byte offset. */
static int b64_decode(const char *s, size_t n, char **ret, size_t *ret_len, size_t *ret_bad)
{
	_cleanup_free_ char *out = NULL;
	uint32_t acc = 0;
	size_t o = 0, q = 0, pad = 0;

	out = malloc(n / 4 * 3 + 4);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int v;

		if (c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			/* Padding only in the last one or two positions of a quantum. */
			if (q < 2 || pad + q >= 4) {
				*ret_bad = i;
				return -EBADMSG;
			}
			pad++;
			if (q + pad == 4) {
				acc <<= 6 * pad;
				out[o++] = (char)(acc >> 16);
				if (pad == 1)
					out[o++] = (char)(acc >> 8);
				q = 0;
				acc = 0;
			}
			continue;
		}
		v = b64_val(c);
		if (v < 0 || pad) {
			*ret_bad = i;
			return -EBADMSG;
		}
		acc = acc << 6 | (uint32_t)v;
		if (++q == 4) {
			out[o++] = (char)(acc >> 16);
			out[o++] = (char)(acc >> 8);
			out[o++] = (char)acc;
			q = 0;
			acc = 0;
		}
	}
	if (q != 0) { /* a short last quantum, or "QQ=" without its second '=' */
		*ret_bad = n;
		return -EBADMSG;
	}
	out[o] = 0;
	*ret_len = o;
	*ret = TAKE_PTR(out);
	return 0;
}

/* ---- YAML walking -------------------------------------------------------------------- */

struct kcp {
	yaml_document_t *doc;
	struct errbuf *eb;
	const char *base_dir;
};

static void yaml_document_deletep(yaml_document_t **d)
{
	if (*d)
		yaml_document_delete(*d);
}

static yaml_node_t *kcp_node(struct kcp *p, int idx)
{
	return yaml_document_get_node(p->doc, idx);
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
	size_t l = strlen(s);

	return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == l &&
	       memcmp(n->data.scalar.value, s, l) == 0;
}

/* The value of key in mapping map, or NULL when absent. A key given twice is
 * an error: two readers of one file must not disagree about what it says. */
static int map_get(struct kcp *p, yaml_node_t *map, const char *what, const char *key,
		   yaml_node_t **ret)
{
	yaml_node_t *found = NULL;

	if (!map || map->type != YAML_MAPPING_NODE)
		return errbuf_fail(p->eb, -EINVAL, "%s: expected a mapping", what);
	for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
	     pr++) {
		yaml_node_t *k = kcp_node(p, pr->key);

		if (!scalar_is(k, key))
			continue;
		if (found)
			return errbuf_fail(p->eb, -EINVAL, "%s: duplicate key \"%s\"", what, key);
		found = kcp_node(p, pr->value);
	}
	*ret = found;
	return 0;
}

static bool scalar_is_null(const yaml_node_t *n)
{
	return n->data.scalar.length == 0 ||
	       (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		(scalar_is(n, "~") || scalar_is(n, "null") || scalar_is(n, "Null") ||
		 scalar_is(n, "NULL")));
}

/* map_get(), with a null or empty scalar read as absent (*ret NULL). */
static int map_get_value(struct kcp *p, yaml_node_t *map, const char *what, const char *key,
			 yaml_node_t **ret)
{
	yaml_node_t *v;
	int r;

	r = map_get(p, map, what, key, &v);
	if (r < 0)
		return r;
	*ret = v && !(v->type == YAML_SCALAR_NODE && scalar_is_null(v)) ? v : NULL;
	return 0;
}

/* A string value; *ret NULL when the key is absent, empty or null. */
static int get_str(struct kcp *p, yaml_node_t *map, const char *what, const char *key,
		   char **ret)
{
	yaml_node_t *v;
	int r;

	r = map_get_value(p, map, what, key, &v);
	if (r < 0)
		return r;
	if (!v) {
		*ret = NULL;
		return 0;
	}
	if (v->type != YAML_SCALAR_NODE)
		return errbuf_fail(p->eb, -EINVAL, "%s.%s: expected a string", what, key);
	if (memchr(v->data.scalar.value, 0, v->data.scalar.length))
		return errbuf_fail(p->eb, -EINVAL, "%s.%s: contains a NUL byte", what, key);
	*ret = strndup((const char *)v->data.scalar.value, v->data.scalar.length);
	return *ret ? 0 : -ENOMEM;
}

static int get_bool(struct kcp *p, yaml_node_t *map, const char *what, const char *key,
		    bool *ret)
{
	yaml_node_t *v;
	int r;

	r = map_get_value(p, map, what, key, &v);
	if (r < 0)
		return r;
	if (!v) {
		*ret = false;
		return 0;
	}
	if (v->type == YAML_SCALAR_NODE && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (scalar_is(v, "true") || scalar_is(v, "True") || scalar_is(v, "TRUE")) {
			*ret = true;
			return 0;
		}
		if (scalar_is(v, "false") || scalar_is(v, "False") || scalar_is(v, "FALSE")) {
			*ret = false;
			return 0;
		}
	}
	return errbuf_fail(p->eb, -EINVAL, "%s.%s: expected true or false", what, key);
}

/* *-data fields: base64 of PEM. pem_marker must occur in the decoded bytes so
 * a wrong blob is reported here and not as an obscure TLS error later. */
static int get_b64(struct kcp *p, yaml_node_t *map, const char *what, const char *key,
		   const char *pem_marker, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *s = NULL;
	char *out = NULL;
	size_t n = 0, bad = 0;
	int r;

	r = get_str(p, map, what, key, &s);
	if (r < 0 || !s) {
		*ret = NULL;
		*ret_len = 0;
		return r;
	}
	r = b64_decode(s, strlen(s), &out, &n, &bad);
	if (r == -EBADMSG)
		return errbuf_fail(p->eb, r, "%s.%s: invalid base64 at byte %zu", what, key, bad);
	if (r < 0)
		return r;
	if (!memmem(out, n, pem_marker, strlen(pem_marker))) {
		wipe_free(out, n);
		return errbuf_fail(p->eb, -EINVAL, "%s.%s: decoded data is not PEM (no \"%s\")",
				   what,
				   key, pem_marker);
	}
	*ret = out;
	*ret_len = n;
	return 0;
}

/* A path value, resolved against the kubeconfig's directory when relative. */
static int get_path(struct kcp *p, yaml_node_t *map, const char *what, const char *key,
		    char **ret)
{
	_cleanup_free_ char *s = NULL;
	int r;

	r = get_str(p, map, what, key, &s);
	if (r < 0 || !s) {
		*ret = NULL;
		return r;
	}
	if (s[0] != '/' && p->base_dir && *p->base_dir) {
		if (asprintf(ret, "%s/%s", p->base_dir, s) < 0)
			return -ENOMEM;
		return 0;
	}
	*ret = TAKE_PTR(s);
	return 0;
}

static int refuse_key(struct kcp *p, yaml_node_t *map, const char *what, const char *key)
{
	yaml_node_t *v;
	int r;

	r = map_get_value(p, map, what, key, &v);
	if (r < 0)
		return r;
	if (v)
		return errbuf_fail(p->eb, -EOPNOTSUPP, "%s.%s is not supported", what, key);
	return 0;
}

/* In list `list_key` of the top-level mapping, the entry called name; returns
 * its `inner_key` mapping ("contexts" -> "context", the singular doubles as the
 * noun in messages). what_ret receives "list_key[name].inner_key". */
static int find_named(struct kcp *p, yaml_node_t *root, const char *list_key, const char *name,
		      const char *inner_key, char *what_ret, size_t what_len, yaml_node_t **ret)
{
	yaml_node_t *list, *found = NULL, *inner;
	int r;

	r = map_get(p, root, "kubeconfig", list_key, &list);
	if (r < 0)
		return r;
	if (list && list->type != YAML_SEQUENCE_NODE &&
	    !(list->type == YAML_SCALAR_NODE && scalar_is_null(list)))
		return errbuf_fail(p->eb, -EINVAL, "%s: expected a list", list_key);
	if (list && list->type == YAML_SEQUENCE_NODE)
		for (yaml_node_item_t *it = list->data.sequence.items.start;
		     it < list->data.sequence.items.top; it++) {
			yaml_node_t *e = kcp_node(p, *it), *n;

			r = map_get(p, e, list_key, "name", &n);
			if (r < 0)
				return r;
			if (!scalar_is(n, name))
				continue;
			if (found)
				return errbuf_fail(p->eb, -EINVAL,
						   "%s: two entries named \"%.64s\"",
						   list_key, name);
			found = e;
		}
	(void)snprintf(what_ret, what_len, "%s[%.64s].%s", list_key, name, inner_key);
	if (!found)
		return errbuf_fail(p->eb, -ENOENT, "%s \"%.64s\" not found in %s", inner_key, name,
				   list_key);
	r = map_get(p, found, what_ret, inner_key, &inner);
	if (r < 0)
		return r;
	if (!inner || inner->type != YAML_MAPPING_NODE)
		return errbuf_fail(p->eb, -EINVAL, "%s is not set", what_ret);
	*ret = inner;
	return 0;
}

/* Accepts http(s)://authority[/path] with a non-empty host and no userinfo,
 * query or fragment; lower-cases the scheme and drops trailing slashes. */
static int check_server(char *s, bool *ret_http)
{
	size_t n, skip;
	char *host;

	if (strncasecmp(s, "https://", 8) == 0)
		skip = 8, *ret_http = false;
	else if (strncasecmp(s, "http://", 7) == 0)
		skip = 7, *ret_http = true;
	else
		return -EPROTONOSUPPORT;
	for (size_t i = 0; i < skip - 3; i++)
		s[i] = (char)tolower((unsigned char)s[i]);
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '?' || *c == '#' ||
		    *c == '\\')
			return -EINVAL;
	host = s + skip;
	n = strcspn(host, "/");
	if (n == 0 || host[0] == ':' || memchr(host, '@', n))
		return -EINVAL;
	n = strlen(s);
	while (n > skip && s[n - 1] == '/')
		s[--n] = 0;
	return 0;
}

/* proxy-url as client-go accepts it: http, https or socks5 (scheme lower-cased
 * here), a non-empty host, nothing that could split a header or a log line. */
static int check_proxy(char *s)
{
	static const char *const schemes[] = { "http://", "https://", "socks5://" };
	const char *host = NULL, *at, *end;

	for (size_t i = 0; i < ARRAY_SIZE(schemes) && !host; i++)
		if (strncasecmp(s, schemes[i], strlen(schemes[i])) == 0) {
			for (size_t j = 0; j < strlen(schemes[i]) - 3; j++)
				s[j] = (char)tolower((unsigned char)s[j]);
			host = s + strlen(schemes[i]);
		}
	if (!host)
		return -EPROTONOSUPPORT;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f)
			return -EINVAL;
	end = host + strcspn(host, "/?#");
	at = memrchr(host, '@', (size_t)(end - host));
	if (at)
		host = at + 1;
	if (host == end || *host == ':')
		return -EINVAL;
	return 0;
}

static int kc_cluster(struct kcp *p, yaml_node_t *cl, const char *what, unsigned flags,
		      struct kubeconfig *c)
{
	bool http = false, insecure = false;
	int r;

	r = get_str(p, cl, what, "server", &c->server);
	if (r < 0)
		return r;
	if (!c->server)
		return errbuf_fail(p->eb, -EINVAL, "%s.server is not set", what);
	r = check_server(c->server, &http);
	if (r == -EPROTONOSUPPORT)
		return errbuf_fail(p->eb, -EINVAL, "%s.server: must start with https://", what);
	if (r < 0)
		return errbuf_fail(p->eb, r,
				   "%s.server: not a valid URL (want https://host[:port][/path])",
				   what);
	r = get_path(p, cl, what, "certificate-authority", &c->ca_file);
	if (r < 0)
		return r;
	r = get_b64(p, cl, what, "certificate-authority-data", "-----BEGIN CERTIFICATE-----",
		    &c->ca_pem, &c->ca_pem_len);
	if (r < 0)
		return r;
	if (c->ca_pem) /* client-go: data wins over the file */
		c->ca_file = (free(c->ca_file), NULL);
	r = get_bool(p, cl, what, "insecure-skip-tls-verify", &insecure);
	if (r < 0)
		return r;
	if (insecure && (c->ca_file || c->ca_pem))
		return errbuf_fail(p->eb, -EINVAL,
				   "%s: certificate-authority(-data) together with "
				   "insecure-skip-tls-verify is not allowed",
				   what);
	r = refuse_key(p, cl, what, "tls-server-name");
	if (r < 0)
		return r;
	r = get_str(p, cl, what, "proxy-url", &c->proxy_url);
	if (r < 0)
		return r;
	/* The URL may hold a password: the messages never quote it. */
	r = c->proxy_url ? check_proxy(c->proxy_url) : 0;
	if (r == -EPROTONOSUPPORT)
		return errbuf_fail(p->eb, -EINVAL,
				   "%s.proxy-url: unsupported scheme, "
				   "must be http, https or socks5",
				   what);
	if (r < 0)
		return errbuf_fail(p->eb, r,
				   "%s.proxy-url: not a valid URL (want scheme://host[:port])",
				   what);
	if (insecure && !(flags & KUBECONFIG_ALLOW_INSECURE))
		return errbuf_fail(p->eb, -EPERM,
				   "%s.insecure-skip-tls-verify is true: refused without "
				   "--allow-insecure-kubeconfig",
				   what);
	if (http && !(flags & KUBECONFIG_ALLOW_INSECURE))
		return errbuf_fail(p->eb, -EPERM,
				   "%s.server is http:// (plain text): refused without "
				   "--allow-insecure-kubeconfig",
				   what);
	c->insecure = insecure || http;
	return 0;
}

static int kc_user(struct kcp *p, yaml_node_t *u, const char *what, struct kubeconfig *c)
{
	static const char *const unsupported[] = {
		"exec", "auth-provider", "username", "password", "as", "as-groups",
	};
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++) {
		r = refuse_key(p, u, what, unsupported[i]);
		if (r < 0)
			return r;
	}
	r = get_str(p, u, what, "token", &c->token);
	if (r < 0)
		return r;
	for (const char *t = c->token; t && *t; t++)
		if ((unsigned char)*t < 0x20 || *t == 0x7f)
			return errbuf_fail(p->eb, -EINVAL, "%s.token: contains a control character",
					   what);
	r = get_path(p, u, what, "tokenFile", &c->token_file);
	if (r < 0)
		return r;
	r = get_path(p, u, what, "client-certificate", &c->cert_file);
	if (r < 0)
		return r;
	r = get_b64(p, u, what, "client-certificate-data", "-----BEGIN CERTIFICATE-----",
		    &c->cert_pem, &c->cert_pem_len);
	if (r < 0)
		return r;
	r = get_path(p, u, what, "client-key", &c->key_file);
	if (r < 0)
		return r;
	r = get_b64(p, u, what, "client-key-data", "PRIVATE KEY-----", &c->key_pem,
		    &c->key_pem_len);
	if (r < 0)
		return r;
	if (c->cert_pem)
		c->cert_file = (free(c->cert_file), NULL);
	if (c->key_pem)
		c->key_file = (free(c->key_file), NULL);
	if ((c->cert_file || c->cert_pem) && !(c->key_file || c->key_pem))
		return errbuf_fail(p->eb, -EINVAL,
				   "%s: client-certificate(-data) is set but "
				   "client-key(-data) is not",
				   what);
	if ((c->key_file || c->key_pem) && !(c->cert_file || c->cert_pem))
		return errbuf_fail(p->eb, -EINVAL,
				   "%s: client-key(-data) is set but "
				   "client-certificate(-data) is not",
				   what);
	return 0;
}

static int kc_walk(struct kcp *p, unsigned flags, const char *source, struct kubeconfig *c)
{
	_cleanup_free_ char *ctx_name = NULL, *cluster_name = NULL, *user_name = NULL;
	char what[160];
	yaml_node_t *root, *ctx, *cl, *u;
	int r;

	c->source = strdup(source ? source : "kubeconfig");
	if (!c->source)
		return -ENOMEM;
	root = yaml_document_get_root_node(p->doc);
	if (!root)
		return errbuf_fail(p->eb, -EINVAL, "kubeconfig is empty");
	if (root->type != YAML_MAPPING_NODE)
		return errbuf_fail(p->eb, -EINVAL, "kubeconfig: top level is not a mapping");
	r = get_str(p, root, "kubeconfig", "current-context", &ctx_name);
	if (r < 0)
		return r;
	if (!ctx_name)
		return errbuf_fail(p->eb, -EINVAL, "current-context is not set");
	r = find_named(p, root, "contexts", ctx_name, "context", what, sizeof(what), &ctx);
	if (r < 0)
		return r;
	r = get_str(p, ctx, what, "cluster", &cluster_name);
	if (r < 0)
		return r;
	if (!cluster_name)
		return errbuf_fail(p->eb, -EINVAL, "%s.cluster is not set", what);
	r = get_str(p, ctx, what, "user", &user_name);
	if (r < 0)
		return r;
	r = get_str(p, ctx, what, "namespace", &c->namespace);
	if (r < 0)
		return r;

	r = find_named(p, root, "clusters", cluster_name, "cluster", what, sizeof(what), &cl);
	if (r < 0)
		return r;
	r = kc_cluster(p, cl, what, flags, c);
	if (r < 0)
		return r;
	if (user_name) { /* no user: anonymous, as kubectl allows */
		r = find_named(p, root, "users", user_name, "user", what, sizeof(what), &u);
		if (r < 0)
			return r;
		r = kc_user(p, u, what, c);
		if (r < 0)
			return r;
	}
	if (!c->namespace && !(c->namespace = strdup("default")))
		return -ENOMEM;
	return 0;
}

int kubeconfig_parse(const char *data, size_t len, const char *base_dir, const char *source,
		     unsigned flags, struct kubeconfig **ret, struct errbuf *eb)
{
	_cleanup_(kubeconfig_freep) struct kubeconfig *c = NULL;
	_cleanup_(yaml_document_deletep) yaml_document_t *docp = NULL;
	yaml_document_t doc;
	yaml_parser_t parser;
	struct kcp p = { .doc = &doc, .eb = eb, .base_dir = base_dir };
	int r;

	errbuf_clear(eb);
	if (len > KUBECONFIG_MAX_SIZE)
		return errbuf_fail(eb, -E2BIG, "kubeconfig: larger than %u bytes",
				   KUBECONFIG_MAX_SIZE);
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	if (!yaml_parser_load(&parser, &doc)) {
		r = errbuf_fail(eb, parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL,
				"kubeconfig: YAML error at line %zu column %zu: %s%s%s",
				parser.problem_mark.line + 1, parser.problem_mark.column + 1,
				parser.problem ? parser.problem : "unknown",
				parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		return r;
	}
	yaml_parser_delete(&parser);
	docp = &doc;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = kc_walk(&p, flags, source, c);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}

static int check_readable(const char *key, const char *path, struct errbuf *eb)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (!path)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0)
		return errbuf_fail(eb, -errno, "%s %s: %s", key, path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return errbuf_fail(eb, -EINVAL, "%s %s: not a regular file", key, path);
	return 0;
}

/* The client certificate and key are read again whenever they change (kube_cred.c):
 * what is there at start must already be usable. */
static int check_pem(const char *key, const char *path, const char *label, struct errbuf *eb)
{
	char *pem = NULL;
	size_t len = 0;
	int r;

	if (!path)
		return 0;
	r = kubeconfig_read_pem(path, label, &pem, &len);
	(void)kubeconfig_pem_free(pem, len);
	if (r == -EBADMSG)
		return errbuf_fail(eb, r, "%s %s: no PEM \"%s\" block", key, path, label);
	if (r == -E2BIG)
		return errbuf_fail(eb, r, "%s %s: larger than %u bytes", key, path,
				   KUBECONFIG_PEM_MAX);
	if (r < 0)
		return errbuf_fail(eb, r, "%s %s: %s", key, path, strerror(-r));
	return 0;
}

static int check_token_file(const char *key, const char *path, struct errbuf *eb)
{
	char *tok = NULL;
	int r;

	if (!path)
		return 0;
	r = kubeconfig_read_token(path, &tok);
	(void)kubeconfig_token_free(tok);
	if (r == -ENODATA)
		return errbuf_fail(eb, r, "%s %s: empty", key, path);
	if (r == -EBADMSG)
		return errbuf_fail(eb, r, "%s %s: contains a control character", key, path);
	if (r == -E2BIG)
		return errbuf_fail(eb, r, "%s %s: larger than %u bytes", key, path,
				   KUBECONFIG_TOKEN_MAX);
	if (r < 0)
		return errbuf_fail(eb, r, "%s %s: %s", key, path, strerror(-r));
	return 0;
}

int kubeconfig_load(const char *path, unsigned flags, struct kubeconfig **ret,
		    struct errbuf *eb)
{
	_cleanup_(kubeconfig_freep) struct kubeconfig *c = NULL;
	_cleanup_free_ char *data = NULL, *dir = NULL;
	const char *slash;
	size_t len = 0;
	int r;

	errbuf_clear(eb);
	r = fileio_read_mounted(path, KUBECONFIG_MAX_SIZE, &data, &len, NULL);
	if (r == -E2BIG)
		return errbuf_fail(eb, r, "kubeconfig %s: larger than %u bytes", path,
				   KUBECONFIG_MAX_SIZE);
	if (r < 0)
		return errbuf_fail(eb, r, "kubeconfig %s: %s", path, strerror(-r));
	slash = strrchr(path, '/');
	dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return -ENOMEM;
	r = kubeconfig_parse(data, len, dir, path, flags, &c, eb);
	if (r < 0)
		return r;
	r = check_readable("certificate-authority", c->ca_file, eb);
	if (r < 0)
		return r;
	r = check_pem("client-certificate", c->cert_file, "CERTIFICATE", eb);
	if (r < 0)
		return r;
	r = check_pem("client-key", c->key_file, "PRIVATE KEY", eb);
	if (r < 0)
		return r;
	r = check_token_file("tokenFile", c->token_file, eb);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}

/* ---- in-cluster ---------------------------------------------------------------------- */

static bool host_ok(const char *h)
{
	if (!*h)
		return false;
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && !strchr(".-:%_", *h))
			return false;
	return true;
}

int kubeconfig_in_cluster(const char *sa_dir, unsigned flags, struct kubeconfig **ret,
			  struct errbuf *eb)
{
	_cleanup_(kubeconfig_freep) struct kubeconfig *c = NULL;
	_cleanup_free_ char *ca = NULL, *ns_file = NULL;
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *pod_ns = getenv("POD_NAMESPACE");
	int pn, r;

	errbuf_clear(eb);
	if (!sa_dir)
		sa_dir = KUBECONFIG_SA_DIR;
	if (!host || !*host || !port || !*port)
		return errbuf_fail(eb, -ENOENT,
				   "not running in a cluster: KUBERNETES_SERVICE_HOST and "
				   "KUBERNETES_SERVICE_PORT must be set (or pass --kubeconfig)");
	if (!host_ok(host))
		return errbuf_fail(eb, -EINVAL,
				   "KUBERNETES_SERVICE_HOST: not a host name or address");
	if (num_parse_int(port, NULL, 1, 65535, &pn) < 0)
		return errbuf_fail(eb, -EINVAL, "KUBERNETES_SERVICE_PORT: not a port (1-65535)");
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* net.JoinHostPort: an address with ':' is IPv6 and needs brackets. */
	if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%d" : "https://%s:%d", host,
		     pn) < 0)
		return -ENOMEM;
	if (asprintf(&c->token_file, "%s/token", sa_dir) < 0 ||
	    asprintf(&ca, "%s/ca.crt", sa_dir) < 0 ||
	    asprintf(&ns_file, "%s/namespace", sa_dir) < 0 || !(c->source = strdup("in-cluster")))
		return -ENOMEM;
	r = check_token_file("service account token", c->token_file, eb);
	if (r < 0)
		return r;
	if (access(ca, R_OK) == 0) {
		c->ca_file = TAKE_PTR(ca);
	} else {
		/* client-go logs and goes on with the system roots; so do we, loudly. */
		r = -errno;
		log_warn_errno(r, "incluster_ca_unreadable", "path=%s action=using_system_roots",
			       ca);
	}
	if (pod_ns && *pod_ns) {
		c->namespace = strdup(pod_ns);
	} else {
		char *ns = NULL;

		/* Not a secret, but the same trimmed small-file read fits. */
		if (kubeconfig_read_token(ns_file, &ns) == 0)
			c->namespace = ns;
		else
			c->namespace = strdup("default");
	}
	if (!c->namespace)
		return -ENOMEM;
	(void)flags; /* in-cluster is always verified TLS: nothing to allow */
	*ret = TAKE_PTR(c);
	return 0;
}

/* ---- copy ---------------------------------------------------------------------------- */

static int dup_str(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

static int dup_blob(const char *s, size_t n, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = malloc(n + 1);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, s, n);
	(*ret)[n] = 0;
	return 0;
}

int kubeconfig_dup(const struct kubeconfig *c, struct kubeconfig **ret)
{
	_cleanup_(kubeconfig_freep) struct kubeconfig *d = NULL;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->insecure = c->insecure;
	d->ca_pem_len = c->ca_pem_len;
	d->cert_pem_len = c->cert_pem_len;
	d->key_pem_len = c->key_pem_len;
	if (dup_str(c->server, &d->server) < 0 || dup_str(c->ca_file, &d->ca_file) < 0 ||
	    dup_blob(c->ca_pem, c->ca_pem_len, &d->ca_pem) < 0 ||
	    dup_str(c->cert_file, &d->cert_file) < 0 ||
	    dup_blob(c->cert_pem, c->cert_pem_len, &d->cert_pem) < 0 ||
	    dup_str(c->key_file, &d->key_file) < 0 ||
	    dup_blob(c->key_pem, c->key_pem_len, &d->key_pem) < 0 ||
	    dup_str(c->token, &d->token) < 0 || dup_str(c->token_file, &d->token_file) < 0 ||
	    dup_str(c->proxy_url, &d->proxy_url) < 0 ||
	    dup_str(c->namespace, &d->namespace) < 0 || dup_str(c->source, &d->source) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(d);
	return 0;
}
