/* PCIe roots from sysfs text: the input is "<directory name>\n<cpulistaffinity>"
 * repeated (records split on a blank line), each added with pcie_add_root().
 * Never crashes or leaks; the roots stay sorted, unique, named like roots and
 * with non-empty CPU sets; every record is added, left out or refused. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/pcie.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pcie p = { 0 };
	char *buf = malloc(size + 1), *rec;
	int tries = 0;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	for (rec = buf; rec && *rec && tries < 1024; tries++) {
		char *end = strstr(rec, "\n\n"), *nl;
		int before = p.n, skipped = p.n_skipped, r;

		if (end)
			*end = 0;
		nl = strchr(rec, '\n');
		if (nl)
			*nl = 0;
		r = pcie_add_root(&p, rec, nl ? nl + 1 : NULL, nl ? strlen(nl + 1) : 0);
		assert(r == 1 || r == 0 || r == -EINVAL || r == -EEXIST || r == -E2BIG);
		assert(p.n == before + (r == 1));
		assert(p.n_skipped == skipped + (r == 0));
		rec = end ? end + 2 : NULL;
	}
	for (int i = 0; i < p.n; i++) {
		assert(pcie_is_root_name(p.v[i].name));
		assert(!cpuset_is_empty(&p.v[i].cpus));
		assert(i == 0 || strcmp(p.v[i - 1].name, p.v[i].name) < 0);
	}
	free(p.v);
	free(buf);
	return 0;
}
