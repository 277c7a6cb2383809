/* CPU hotplug: the online set from sysfs. See hotplug.h. */
#include "host/hotplug.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"

#define ONLINE_MAX (64 * 1024)

/* 1 online, 0 offline, -errno (-ENOENT: no such file). */
static int read_flag(const char *path)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = fileio_read(path, 64, &text, &len, NULL);

	if (r < 0)
		return r;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	if (len == 1 && (text[0] == '0' || text[0] == '1'))
		return text[0] - '0';
	return -EINVAL;
}

int hotplug_online(const char *sysfs_root, const struct cpuset *known, struct cpuset *ret,
		   struct errbuf *eb)
{
	const char *root = sysfs_root ? sysfs_root : "";
	_cleanup_free_ char *text = NULL;
	struct errbuf peb = { "" };
	struct cpuset online;
	char path[4096];
	size_t len = 0;
	int r;

	if (snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/online", root) >=
	    (int)sizeof(path))
		return errbuf_fail(eb, -ENAMETOOLONG, "sysfs root path too long");
	r = fileio_read(path, ONLINE_MAX, &text, &len, *root && known ? NULL : eb);
	if (r == -ENOENT && *root && known) {
		/* An old kernel's capture: no global list, only per-CPU files
		 * (topo_sysfs.c reads it so too). A CPU with a topology is online unless
		 * its file says 0; one without is not (an offline CPU's directory
		 * holds nothing but its online file). */
		cpuset_zero(&online);
		CPUSET_FOREACH(cpu, known)
		{
			(void)snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/topology",
				       root, cpu);
			if (access(path, F_OK) == 0)
				cpuset_set(&online, cpu);
		}
	} else if (r < 0) {
		return *root && known ? errbuf_fail(eb, r, "%s: %s", path, strerror(-r)) : r;
	} else {
		r = cpuset_parse_n(text, len, &online, &peb);
		if (r < 0)
			return errbuf_fail(eb, r, "%s: %s", path, peb.s);
	}
	if (*root && known) {
		/* An empty or garbled file says nothing: the CPU stays as above. */
		CPUSET_FOREACH(cpu, known)
		{
			(void)snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/online",
				       root, cpu);
			r = read_flag(path);
			if (r == 0)
				cpuset_clear(&online, cpu);
			else if (r == 1)
				cpuset_set(&online, cpu);
		}
	}
	if (cpuset_is_empty(&online))
		return errbuf_fail(eb, -EINVAL, "%s/sys/devices/system/cpu/online: no CPU online",
				   root);
	*ret = online;
	return 0;
}

int hotplug_memory_nodes(const char *sysfs_root, struct cpuset *ret, struct errbuf *eb)
{
	_cleanup_free_ char *text = NULL;
	struct errbuf peb = { "" };
	struct cpuset nodes;
	char path[4096];
	size_t len = 0;
	int r;

	if (snprintf(path, sizeof(path), "%s/sys/devices/system/node/has_memory",
		     sysfs_root ? sysfs_root : "") >= (int)sizeof(path))
		return errbuf_fail(eb, -ENAMETOOLONG, "sysfs root path too long");
	r = fileio_read(path, ONLINE_MAX, &text, &len, eb);
	if (r < 0)
		return r;
	r = cpuset_parse_n(text, len, &nodes, &peb);
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", path, peb.s);
	*ret = nodes;
	return 0;
}
