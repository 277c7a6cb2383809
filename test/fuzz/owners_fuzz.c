/* bpf-verify's input parsers (user/pinning/owners.c): every input goes through both
 * of them, so corpus files are plain text (the /proc parsers it also uses are
 * host/procfs, fuzzed by procfs_fuzz).
 *   - owners.json (verify_owners_add_json);
 *   - each line as an --exclusive CPUS=CGROUP flag, into one owner table.
 * Never crashes; returns only the documented codes, with a reason when it
 * fails; whatever it accepts keeps the owner invariants (CPU sets non-empty
 * and disjoint, their union the exclusive set, absolute paths without a
 * trailing '/', at most VERIFY_OWNERS_MAX owners). */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "pinning/owners.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_owners(const struct verify_owners *o)
{
	struct cpuset all;

	cpuset_zero(&all);
	assert(o->n >= 0 && o->n <= VERIFY_OWNERS_MAX);
	for (int i = 0; i < o->n; i++) {
		const struct verify_owner *w = &o->v[i];
		size_t len = strlen(w->cgroup);

		assert(!cpuset_is_empty(&w->cpus));
		assert(!cpuset_intersects(&all, &w->cpus));
		cpuset_or(&all, &all, &w->cpus);
		assert(w->cgroup[0] == '/' && len < PATH_MAX);
		assert(len == 1 || w->cgroup[len - 1] != '/');
		for (int j = 0; j < i; j++)
			assert(strcmp(o->v[j].cgroup, w->cgroup));
		CPUSET_FOREACH(cpu, &w->cpus)
		assert(verify_owner_of(o, cpu) == i);
	}
	assert(cpuset_equal(&all, &o->exclusive));
}

static void check_error(int r, const struct errbuf *why)
{
	assert(r == -EPROTO || r == -EINVAL || r == -E2BIG);
	assert(memchr(why->s, 0, sizeof(why->s)) && why->s[0]);
}

static void fuzz_json(const char *text, size_t size)
{
	struct verify_owners *o = NULL;
	struct errbuf why = { "" };
	int r;

	assert(verify_owners_new(&o) == 0);
	r = verify_owners_add_json(o, text, size, &why);
	if (r < 0)
		check_error(r, &why);
	check_owners(o); /* entries before a bad one may stay: still consistent */
	verify_owners_free(o);
}

static void fuzz_flags(const char *text, size_t size)
{
	struct verify_owners *o = NULL;
	const char *p = text, *end = text + size;

	assert(verify_owners_new(&o) == 0);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct errbuf why = { "" };
		char *line;
		int n_before = o->n, r;
		struct cpuset before = o->exclusive;

		if (!eol)
			eol = end;
		line = strndup(p, (size_t)(eol - p));
		assert(line);
		r = verify_owners_add_flag(o, line, &why);
		if (r < 0) {
			check_error(r, &why);
			/* A refused flag leaves the table as it was. */
			assert(o->n == n_before && cpuset_equal(&before, &o->exclusive));
		}
		free(line);
		p = eol + 1;
	}
	check_owners(o);
	verify_owners_free(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The parsers take a length; a copy without slack lets ASan catch any
	 * read past it. */
	char *text = malloc(size ? size : 1);

	assert(text);
	memcpy(text, data, size);
	fuzz_json(text, size);
	fuzz_flags(text, size);
	free(text);
	return 0;
}
