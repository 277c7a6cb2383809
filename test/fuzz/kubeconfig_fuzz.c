/* kubeconfig parser: never crashes or leaks; a refusal always says why; an
 * accepted config is never insecure unless the caller allowed it, and always
 * names an http(s) server; a proxy-url it keeps has an allowed scheme and
 * nothing that could split a header. Each input runs with and without the
 * insecure flag. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kube/kubeconfig.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size, unsigned flags)
{
	struct kubeconfig *c = NULL;
	struct errbuf err = { "" };
	int r = kubeconfig_parse((const char *)data, size, "/base", NULL, flags, &c, &err);

	if (r < 0) {
		assert(!c);
		assert(r == -ENOMEM || err.s[0]);
		return;
	}
	assert(c && c->server && c->namespace && c->source);
	assert(strncmp(c->server, "https://", 8) == 0 ||
	       (strncmp(c->server, "http://", 7) == 0 && c->insecure));
	assert(!c->insecure || (flags & KUBECONFIG_ALLOW_INSECURE));
	assert(!(c->insecure && (c->ca_file || c->ca_pem)) || strncmp(c->server, "http://", 7) == 0);
	assert(!!(c->cert_file || c->cert_pem) == !!(c->key_file || c->key_pem));
	assert(!c->token || !strpbrk(c->token, "\r\n"));
	if (c->proxy_url) {
		assert(strncmp(c->proxy_url, "http://", 7) == 0 ||
		       strncmp(c->proxy_url, "https://", 8) == 0 ||
		       strncmp(c->proxy_url, "socks5://", 9) == 0);
		for (const char *p = c->proxy_url; *p; p++)
			assert((unsigned char)*p > 0x20 && *p != 0x7f);
	}
	kubeconfig_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one(data, size, 0);
	one(data, size, KUBECONFIG_ALLOW_INSECURE);
	return 0;
}
