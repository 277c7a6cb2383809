/* procfs (user/host/procfs.c): every input goes through every parser, so
 * corpus files are plain /proc text (schedstat, mountinfo, status,
 * stat, cgroup). Never crashes, never reads past the length (the copy has no
 * slack for ASan to miss), returns only the documented codes, and what it
 * returns lies within the input. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool inside(const char *text, size_t size, struct procfs_field f)
{
	return f.s >= text && f.len <= size && f.s + f.len <= text + size;
}

static void fuzz_mountinfo(const char *text, size_t size)
{
	const char *p = text, *end = text + size;
	struct procfs_mount m;
	int r, lines = 0;

	while ((r = procfs_mountinfo_next(&p, end, &m)) != 0) {
		assert(r == 1 || r == -EPROTO);
		assert(p >= text && p <= end);
		assert(++lines <= (int)size); /* each call moves past a line */
		if (r == 1) {
			char *point;

			assert(inside(text, size, m.root) && inside(text, size, m.point) &&
			       inside(text, size, m.fstype) && inside(text, size, m.source) &&
			       inside(text, size, m.super));
			point = procfs_unescape(m.point);
			assert(point && strlen(point) <= m.point.len);
			free(point);
			(void)procfs_list_has(m.super.s, m.super.len, "cpuset");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1), path[256];
	uint64_t wait[4];
	struct procfs_status status;
	struct procfs_stat stat;
	int r;

	assert(text);
	memcpy(text, data, size);
	r = procfs_schedstat_parse(text, size, wait, 4);
	assert(r >= 0 || r == -EPROTO);
	fuzz_mountinfo(text, size);
	r = procfs_status_parse(text, size, &status);
	assert(r == 0 || r == -EPROTO);
	if (r == 0)
		assert(strlen(status.name) < PROCFS_COMM_MAX && status.tgid >= 0);
	r = procfs_stat_parse(text, size, &stat);
	assert(r == 0 || r == -EPROTO);
	for (int v1 = 0; v1 <= 1; v1++) {
		r = procfs_cgroup_parse(text, size, v1 ? "cpuset" : NULL, path, sizeof(path));
		assert(r == 0 || r == -ENOENT || r == -EPROTO || r == -E2BIG);
		if (r == 0)
			assert(path[0] == '/' && strlen(path) < sizeof(path));
	}
	free(text);
	return 0;
}
