/* The sysfs side of the topology loader: reading the files hwloc would
 * silently misread (it parses them with atoi and turns garbage into 0) and
 * telling CPU-less NUMA nodes apart, which hwloc 2.9's cpusets do not. The
 * facts land in struct sysfs_facts (topo_priv.h) for topo.c to check hwloc
 * against. See topo.h.
 */
#include "host/topo.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/num.h"
#include "host/topo_priv.h"

/* ---- sysfs files ---------------------------------------------------------------------- */

#define SYSFS_CPU_ATOM "/sys/devices/cpu_atom/cpus"
/* A cpulist naming every other one of 8192 CPUs is ~40 KiB; nothing we read is bigger. */
#define SYSFS_FILE_MAX (1u << 20)

#define SYSFS_CACHE_INDEX_MAX 64
/* MAX_NUMNODES is 1 << CONFIG_NODES_SHIFT, at most 1024 on every arch today. */
#define SYSFS_NODES_MAX 4096

void topo_sysfs_path(char *path, const char *root, const char *fmt, ...)
{
	size_t n = strlen(root);
	va_list ap;
	int m;

	assert(n < PATH_MAX - SYSFS_SUFFIX_MAX);
	memcpy(path, root, n);
	va_start(ap, fmt);
	m = vsnprintf(path + n, SYSFS_SUFFIX_MAX, fmt, ap);
	va_end(ap);
	assert(m >= 0 && m < SYSFS_SUFFIX_MAX);
}

/* Reads a sysfs file. -ENOENT is returned quietly (the caller knows whether the
 * file is optional); other errors fill eb with the path. */
static int sysfs_read(const char *path, char **ret, size_t *ret_len, struct errbuf *eb)
{
	struct buf b = BUF_INIT(SYSFS_FILE_MAX);
	int r = fileio_read_at(AT_FDCWD, path, FILEIO_FOLLOW, &b, NULL);

	if (r == -ENOENT)
		return r;
	if (r < 0)
		return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	/* Callers parse in place: the buffer is theirs, NUL-terminated. */
	*ret = buf_take(&b, ret_len);
	return *ret ? 0 : -ENOMEM;
}

/* The length of a sysfs value without its framing: the newline, NUL padding
 * (some ARM kernels) and stray extra newlines (hand-edited captures such as
 * nvidiagpunumanodes' shared_cpu_map). */
static size_t sysfs_trim(const char *s, size_t len)
{
	while (len > 0 && (s[len - 1] == '\0' || s[len - 1] == '\n'))
		len--;
	return len;
}

/* A decimal integer in [min, max]; hwloc reads these with atoi and turns garbage
 * into 0, so we check them ourselves (lib/num). */
static int sysfs_read_int(const char *path, long min, long max, int *ret, struct errbuf *eb)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	long long v;
	int r;

	r = sysfs_read(path, &buf, &len, eb);
	if (r < 0)
		return r;
	len = sysfs_trim(buf, len);
	if (len == 0)
		return errbuf_fail(eb, -ENODATA, "%s: empty", path);
	buf[len] = '\0';
	r = num_parse_ll(buf, NULL, min, max, &v);
	if (r == -EINVAL)
		return errbuf_fail(eb, -EINVAL, "%s: not an integer: \"%.32s\"", path, buf);
	if (r < 0)
		return errbuf_fail(eb, -EINVAL, "%s: %.32s out of range %ld-%ld", path, buf, min, max);
	*ret = (int)v;
	return 0;
}

static int sysfs_read_cpulist(const char *path, struct cpuset *ret, struct errbuf *eb)
{
	_cleanup_free_ char *buf = NULL;
	struct errbuf pwhy = { "" };
	size_t len;
	int r;

	r = sysfs_read(path, &buf, &len, eb);
	if (r < 0)
		return r;
	/* An empty file is a truncated one: sysfs writes "\n" for an empty list. */
	if (len == 0)
		return errbuf_fail(eb, -EINVAL, "%s: empty file", path);
	r = cpuset_parse_n(buf, sysfs_trim(buf, len), ret, &pwhy);
	if (r < 0)
		return errbuf_fail(eb, r == -ERANGE ? -E2BIG : -EINVAL, "%s: %s", path, pwhy.s);
	return 0;
}

/* The kernel's bitmap format ("%*pb"): comma-separated groups of up to 8 hex
 * digits, most significant first, e.g. "00000000,0000ffff". hwloc parses these
 * leniently; we need them exact. */
static int parse_cpumask(const char *s, size_t len, struct cpuset *ret, const char *path,
			 struct errbuf *eb)
{
	struct cpuset set;
	size_t end = sysfs_trim(s, len);
	int bit = 0;

	if (end == 0)
		return errbuf_fail(eb, -ENODATA, "%s: empty", path);
	cpuset_zero(&set);
	/* Walk the groups from the least significant (last) one. */
	while (end > 0) {
		size_t start = end;

		while (start > 0 && s[start - 1] != ',')
			start--;
		if (start == end || end - start > 8)
			return errbuf_fail(eb, -EINVAL, "%s: bad mask group at offset %zu", path, start);
		for (size_t i = end; i > start; i--) {
			char c = s[i - 1];
			int v;

			if (c >= '0' && c <= '9')
				v = c - '0';
			else if (c >= 'a' && c <= 'f')
				v = c - 'a' + 10;
			else if (c >= 'A' && c <= 'F')
				v = c - 'A' + 10;
			else
				return errbuf_fail(eb, -EINVAL, "%s: bad character at offset %zu", path,
					    i - 1);
			for (int b = 0; b < 4; b++) {
				int cpu = bit + (int)(end - i) * 4 + b;

				if (!(v & (1 << b)))
					continue;
				if (cpu >= CPUSET_MAX)
					return errbuf_fail(eb, -E2BIG, "%s: names CPU %d or above", path,
						    CPUSET_MAX);
				cpuset_set(&set, cpu);
			}
		}
		bit += 32;
		if (start == 0)
			break;
		end = start - 1;
		if (end == 0)
			return errbuf_fail(eb, -EINVAL, "%s: leading comma", path);
		if (bit > CPUSET_MAX + 32 * 1024)
			return errbuf_fail(eb, -E2BIG, "%s: mask too long", path);
	}
	*ret = set;
	return 0;
}

static int sysfs_read_cpumask(const char *path, struct cpuset *ret, struct errbuf *eb)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r;

	r = sysfs_read(path, &buf, &len, eb);
	if (r < 0)
		return r;
	return parse_cpumask(buf, len, ret, path, eb);
}

bool topo_sysfs_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* "<prefix><digits>" with nothing else; the id in *ret. */
static bool parse_dir_id(const char *name, const char *prefix, int *ret)
{
	size_t pl = strlen(prefix);
	const char *p = name + pl;
	long v = 0;

	if (strncmp(name, prefix, pl) != 0 || !*p)
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || v > INT_MAX / 10)
			return false;
		v = v * 10 + (*p - '0');
	}
	if (v > INT_MAX)
		return false;
	*ret = (int)v;
	return true;
}

void topo_sysfs_facts_done(struct sysfs_facts *f)
{
	free(f->nodes);
	f->nodes = NULL;
	f->n_nodes = 0;
}

/* A per-CPU file that is empty (-ENODATA) or cannot be read at all (a
 * directory, a dangling link, EACCES, EIO) says nothing rather than
 * something wrong: hwloc then builds the CPU from the lists that name it
 * elsewhere (its siblings' and its package's masks, the node lists), so the
 * machine is not refused for it. Garbage in a readable file is still refused:
 * hwloc would misread that silently. Counted, and the first one named, for
 * the caller to log once. */
int topo_sysfs_fallbacks;
char topo_sysfs_fallback_first[PATH_MAX];

static bool per_cpu_unusable(int r, const char *path)
{
	if (r != -ENODATA && (r >= 0 || r == -ENOENT || r == -EINVAL || r == -E2BIG ||
			      r == -ENOMEM))
		return false;
	if (!topo_sysfs_fallbacks++)
		(void)snprintf(topo_sysfs_fallback_first, sizeof(topo_sysfs_fallback_first),
			       "%s (%s)", path, r == -ENODATA ? "empty" : strerror(-r));
	return true;
}

/* Before hwloc: the CPU directory, cpu/online, cpu/present, per-CPU online files. */
int topo_sysfs_scan_cpus(struct sysfs_facts *f, struct errbuf *eb)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char path[PATH_MAX];
	struct cpuset dirs, present;
	struct dirent *de;
	int r;

	topo_sysfs_path(path, f->root, SYSFS_CPU);
	d = opendir(path);
	if (!d) {
		r = -errno;
		return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	}
	cpuset_zero(&dirs);
	while ((errno = 0, de = readdir(d))) {
		int cpu;

		if (!parse_dir_id(de->d_name, "cpu", &cpu))
			continue;
		if (cpu >= CPUSET_MAX)
			return errbuf_fail(eb, -E2BIG, "%s/%s: CPU id above %d", path, de->d_name,
				    CPUSET_MAX - 1);
		cpuset_set(&dirs, cpu);
	}
	if (errno) {
		r = -errno;
		return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	}
	f->known = dirs;

	topo_sysfs_path(path, f->root, SYSFS_CPU "/present");
	r = sysfs_read_cpulist(path, &present, eb);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0)
		cpuset_or(&f->known, &f->known, &present);

	topo_sysfs_path(path, f->root, SYSFS_CPU "/online");
	r = sysfs_read_cpulist(path, &f->online, eb);
	if (r < 0 && r != -ENOENT)
		return r;
	f->has_online = r == 0;
	if (f->has_online) {
		if (cpuset_is_empty(&f->online))
			return errbuf_fail(eb, -EINVAL, "%s: no CPU online", path);
		return 0;
	}

	/* online, possible and present are one table in the kernel (cpu_attrs[] in
	 * drivers/base/cpu.c): one without the others is a damaged tree, not an old
	 * one (the old captures here have none of the three). */
	{
		char p2[PATH_MAX], p3[PATH_MAX];

		topo_sysfs_path(p2, f->root, SYSFS_CPU "/present");
		topo_sysfs_path(p3, f->root, SYSFS_CPU "/possible");
		if (topo_sysfs_exists(p2) || topo_sysfs_exists(p3))
			return errbuf_fail(eb, -ENOENT, "%s: missing", path);
	}
	/* Old kernels: hwloc reads cpuN/online ("0" = offline) with atoi. An
	 * empty or unreadable one says nothing, as for the other per-CPU files
	 * (per_cpu_unusable): the CPU is what its directory and the other
	 * lists say, online, as hwloc takes a CPU whose file it cannot read. */
	CPUSET_FOREACH(cpu, &dirs)
	{
		int v;

		topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/online", cpu);
		r = sysfs_read_int(path, 0, 1, &v, eb);
		if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
			return r;
	}
	return 0;
}

/* The per-CPU files hwloc turns into cores, packages and L3s. hwloc reads them
 * with atoi and a lenient mask parser, so "garbage" becomes core 0 or a PU
 * without a core: we reject what it would silently accept. */
int topo_sysfs_check_cpu(const struct sysfs_facts *f, int cpu, struct errbuf *eb)
{
	static const char *const masks[] = {"thread_siblings", "core_cpus", "core_siblings",
					    "package_cpus"};
	char path[PATH_MAX];
	struct cpuset set;
	int v, r;

	topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology", cpu);
	if (!topo_sysfs_exists(path))
		return errbuf_fail(eb, -ENOENT, "%s: missing for online CPU %d", path, cpu);

	topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology/core_id", cpu);
	r = sysfs_read_int(path, 0, INT_MAX, &v, eb);
	if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
		return r;
	topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology/physical_package_id", cpu);
	r = sysfs_read_int(path, -1, INT_MAX, &v, eb);
	if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(masks); i++) {
		topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology/%s", cpu, masks[i]);
		r = sysfs_read_cpumask(path, &set, eb);
		if (r == -ENOENT || per_cpu_unusable(r, path))
			continue;
		if (r < 0)
			return r;
		if (!cpuset_has(&set, cpu))
			return errbuf_fail(eb, -EINVAL, "%s: does not contain CPU %d itself", path, cpu);
	}

	/* L3: index<N>/level == 3, then its id and CPU list. */
	for (int idx = 0; idx < SYSFS_CACHE_INDEX_MAX; idx++) {
		int level;

		topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/cache/index%d/level", cpu, idx);
		r = sysfs_read_int(path, 0, 255, &level, eb);
		if (r == -ENOENT)
			break;
		if (per_cpu_unusable(r, path))
			continue;
		if (r < 0)
			return r;
		if (level != 3)
			continue;
		topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/cache/index%d/id", cpu, idx);
		r = sysfs_read_int(path, 0, INT_MAX, &v, eb);
		if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
			return r;
		topo_sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/cache/index%d/shared_cpu_map", cpu,
			   idx);
		r = sysfs_read_cpumask(path, &set, eb);
		if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
			return r;
		if (r == 0 && !cpuset_has(&set, cpu))
			return errbuf_fail(eb, -EINVAL, "%s: does not contain CPU %d itself", path, cpu);
	}
	return 0;
}

/* NUMA nodes as sysfs lists them. hwloc reads nodeN/cpumap; we read cpulist when
 * there is one (and check cpumap says the same), cpumap alone on old kernels. */
int topo_sysfs_scan_nodes(struct sysfs_facts *f, struct errbuf *eb)
{
	const struct cpuset *exist = f->has_online ? &f->online : &f->known;
	_cleanup_(closedirp) DIR *d = NULL;
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	int cap = 0, r;

	topo_sysfs_path(dir, f->root, SYSFS_NODE);
	d = opendir(dir);
	if (!d) {
		r = -errno;
		if (r == -ENOENT)
			return 0; /* no NUMA support in the kernel (2ps3-2t): hwloc invents node 0 */
		return errbuf_fail(eb, r, "%s: %s", dir, strerror(-r));
	}
	while ((errno = 0, de = readdir(d))) {
		struct sysfs_node *n;
		struct cpuset map;
		bool has_list;
		int id;

		if (!parse_dir_id(de->d_name, "node", &id))
			continue;
		if (f->n_nodes >= SYSFS_NODES_MAX)
			return errbuf_fail(eb, -E2BIG, "%s: more than %d nodes", dir, SYSFS_NODES_MAX);
		if (f->n_nodes == cap) {
			cap = cap ? cap * 2 : 16;
			n = realloc(f->nodes, sizeof(*n) * (size_t)cap);
			if (!n)
				return -ENOMEM;
			f->nodes = n;
		}
		n = &f->nodes[f->n_nodes++];
		n->id = id;

		topo_sysfs_path(path, f->root, SYSFS_NODE "/node%d/cpulist", id);
		r = sysfs_read_cpulist(path, &n->cpus, eb);
		if (r < 0 && r != -ENOENT)
			return r;
		has_list = r == 0;
		topo_sysfs_path(path, f->root, SYSFS_NODE "/node%d/cpumap", id);
		r = sysfs_read_cpumask(path, &map, eb);
		if (r == -ENOENT && !has_list)
			return errbuf_fail(eb, -ENOENT, "%s: missing, and so is cpulist", path);
		if (r < 0 && r != -ENOENT)
			return r;
		if (r == 0 && !has_list)
			n->cpus = map;
		/* Only CPUs that exist count: captures with CPUs cut out (nvidiagpunumanodes)
		 * fixed cpumap but left cpulist naming the missing ones. */
		cpuset_and(&n->cpus, &n->cpus, exist);
		cpuset_and(&map, &map, exist);
		if (r == 0 && !cpuset_equal(&map, &n->cpus))
			return errbuf_fail(eb, -EINVAL, "%s: disagrees with cpulist", path);
	}
	if (errno) {
		r = -errno;
		return errbuf_fail(eb, r, "%s: %s", dir, strerror(-r));
	}
	return 0;
}

int topo_sysfs_scan_atom(struct sysfs_facts *f, struct errbuf *eb)
{
	char path[PATH_MAX];
	int r;

	topo_sysfs_path(path, f->root, SYSFS_CPU_ATOM);
	r = sysfs_read_cpulist(path, &f->atom, eb);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	f->has_atom = true;
	return 0;
}
