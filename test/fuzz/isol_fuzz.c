/* The kernel command line as the isolation reader takes it: any bytes (up to
 * the first NUL) through isol_parse_cmdline(). Never crashes; on success the
 * sets hold only CPU ids below CPUSET_MAX; on failure the outputs are
 * untouched and the error says something. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/isol.h"
#include "lib/errbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	struct cpuset d, n, m;
	struct errbuf eb = { "" };
	int r;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	cpuset_zero(&d);
	cpuset_set(&d, 1);
	r = isol_parse_cmdline(buf, &d, &n, &m, &eb);
	assert(r == 0 || r == -EINVAL || r == -ERANGE);
	if (r < 0) {
		assert(eb.s[0]);
		assert(cpuset_count(&d) == 1 && cpuset_has(&d, 1));
	} else {
		assert(cpuset_last(&d) < CPUSET_MAX && cpuset_last(&n) < CPUSET_MAX);
		assert(cpuset_last(&m) < CPUSET_MAX);
	}
	free(buf);
	return 0;
}
