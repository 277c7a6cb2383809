/* bpfmon's parsers of kernel text: /proc/schedstat and /proc/self/mountinfo.
 * The first byte picks the parser (even: schedstat, odd: mountinfo, bit 1
 * the hierarchy), the rest is the file. Never crashes, never writes past the
 * caller's array, returns only the documented codes. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pinning/bpfmon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	uint64_t wait[4];
	char *mnt = NULL, *root = NULL;
	int r;

	if (size < 1)
		return 0;
	if (!(data[0] & 1)) {
		r = bpfmon_schedstat_parse(text, size - 1, wait, 4);
		assert(r >= 0 || r == -EPROTO);
		return 0;
	}
	r = bpfmon_mountinfo_find(text, size - 1, data[0] & 2 ? BPFMON_CGROUP_V1 : BPFMON_CGROUP_V2,
				  &mnt, &root);
	assert(r == 0 || r == -ENOENT || r == -ENOMEM);
	if (r == 0) {
		assert(mnt && root);
		assert(strlen(mnt) < size && strlen(root) < size);
	}
	free(mnt);
	free(root);
	return 0;
}
