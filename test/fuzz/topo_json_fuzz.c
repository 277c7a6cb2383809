/* topology JSON parser: never crashes, every error has a reason, and whatever
 * parses prints to JSON that parses to the same topology and prints the same
 * (the --print-topology output is a fixed point). */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/topo.h"
#include "host/topo_json.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *print(const struct topo *t, size_t *ret_len)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert(f);
	assert(topo_write_json(t, f) == 0);
	assert(fclose(f) == 0);
	*ret_len = len;
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf why = { "" };
	struct topo *t = NULL, *t2 = NULL;
	size_t len, len2;
	char *a, *b;
	int r;

	r = topo_parse_json((const char *)data, size, &t, &why);
	if (r < 0) {
		assert(!t);
		assert(memchr(why.s, 0, sizeof(why.s)) && why.s[0]);
		return 0;
	}
	assert(r == 0 && t && t->n_cpus >= 1);
	a = print(t, &len);
	r = topo_parse_json(a, len, &t2, &why);
	if (r < 0) {
		fprintf(stderr, "own output does not parse: %s\n%s", why.s, a);
		abort();
	}
	b = print(t2, &len2);
	assert(len == len2 && memcmp(a, b, len) == 0);
	assert(t2->n_cpus == t->n_cpus);
	assert(memcmp(t2->cpus, t->cpus, sizeof(*t->cpus) * (size_t)t->n_cpus) == 0);
	for (int i = 0; i < t->n_cpus; i++)
		assert(topo_cpu(t, t->cpus[i].cpu) == &t->cpus[i]);
	free(a);
	free(b);
	topo_free(t);
	topo_free(t2);
	return 0;
}
