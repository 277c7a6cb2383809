/* cgroup (user/host/cgroup.c): the path rules and the parsers of what the
 * kernel and runtimes hand us. The whole input is a mountinfo text
 * (cgroup_mounts_parse); each line is also a pair "path dir" for the path
 * rules, a runtime cgroupsPath (cgroup_runtime_path) and a hierarchy path
 * under a mount (cgroup_mount_dir). Properties, not just "no crash":
 *   - a normalised path names the same cgroup: same depth, each under the
 *     other, no doubled or trailing slash;
 *   - "under" is reflexive for valid paths and every valid path is under "/";
 *   - a runtime path that converts is absolute, without "." or "..";
 *   - a directory under a mount starts with the mount point. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/cgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *p)
{
	int depth = cgroup_path_depth(p);
	char *n = NULL;
	int r = cgroup_path_normalize(p, strlen(p), &n);

	assert(r == 0 || r == -EINVAL);
	assert(r == 0 || p[0] != '/' || !*p);
	if (r == 0) {
		size_t len = strlen(n);

		assert(n[0] == '/' && !strstr(n, "//"));
		assert(len == 1 || n[len - 1] != '/');
		assert(cgroup_path_depth(n) == depth);
		if (depth >= 0) {
			assert(cgroup_path_is_under(p, n) && cgroup_path_is_under(n, p));
			assert(cgroup_path_is_under(p, p) && cgroup_path_is_under(p, "/"));
		}
		free(n);
	}
	if (depth < 0)
		assert(!cgroup_path_is_under(p, "/"));
}

static void check_line(char *line)
{
	struct cgroup_mount m = { "/sys/fs/cgroup", "/kubepods" };
	char *sp = strchr(line, ' ');
	char buf[PATH_MAX];
	int r;

	check_path(line);
	if (sp) {
		*sp = 0;
		(void)cgroup_path_is_under(line, sp + 1);
		check_path(sp + 1);
		*sp = ' ';
	}
	r = cgroup_runtime_path(line, buf, sizeof(buf));
	assert(r == 0 || r == -ENOENT || r == -EINVAL || r == -ENAMETOOLONG);
	if (r == 0)
		assert(buf[0] == '/' && cgroup_path_depth(buf) >= 0);
	r = cgroup_mount_dir(&m, line, buf, sizeof(buf));
	assert(r == 0 || r == -ENOENT || r == -EINVAL || r == -ENAMETOOLONG);
	if (r == 0)
		assert(!strncmp(buf, "/sys/fs/cgroup", 14) && (buf[14] == '/' || !buf[14]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1), *copy;
	struct cgroup_mounts m;
	int r;

	assert(text);
	memcpy(text, data, size);
	r = cgroup_mounts_parse(text, size, &m);
	assert(r == 0 || r == -EPROTO || r == -ENOMEM);
	if (r == 0) {
		enum cgroup_hier h;

		(void)cgroup_mounts_layout(&m);
		if (cgroup_mounts_pinning(&m, &h) == 0)
			assert(m.h[h].point && m.h[h].root);
		cgroup_mounts_done(&m);
	}
	/* Lines as C strings (a NUL ends a line early: paths never hold one). */
	copy = malloc(size + 1);
	assert(copy);
	memcpy(copy, data, size);
	copy[size] = 0;
	for (char *p = copy, *eol; p; p = eol ? eol + 1 : NULL) {
		eol = strchr(p, '\n');
		if (eol)
			*eol = 0;
		check_line(p);
	}
	free(copy);
	free(text);
	return 0;
}
