/* cpuset list parser: never crashes; whatever parses formats back to a string
 * that parses to the same set (canonical form is a fixed point). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cpuset.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cpuset a, b;
	struct errbuf why = { "" };
	char *s, *t;

	if (cpuset_parse_n((const char *)data, size, &a, &why) < 0) {
		assert(memchr(why.s, 0, sizeof(why.s)) && why.s[0]);
		return 0;
	}
	s = cpuset_to_string(&a);
	assert(s);
	assert(cpuset_parse(s, &b, &why) == 0);
	assert(cpuset_equal(&a, &b));
	t = cpuset_to_string(&b);
	assert(t && strcmp(s, t) == 0);
	assert(cpuset_count(&a) == 0 || cpuset_first(&a) == cpuset_nth(&a, 0));
	free(s);
	free(t);
	return 0;
}
