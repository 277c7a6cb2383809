/* CPU topology model: validation and derived facts (topo_build), and the
 * hwloc loaders. See topo.h for the invariants; the topology JSON is
 * topo_json.c's.
 *
 * hwloc does the discovery; sysfs is read a second time only to check the files
 * hwloc would silently misread (it parses them with atoi and turns garbage
 * into 0) and to tell CPU-less NUMA nodes apart, which hwloc 2.9's cpusets do
 * not. */
#include "host/topo.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hwloc.h>

#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#define LOG_MOD "topo"
#include "lib/log.h"
#include "lib/num.h"

struct topo *topo_free(struct topo *t)
{
	if (!t)
		return NULL;
	free(t->cpus);
	free(t->index);
	free(t);
	return NULL;
}

static int cmp_cpu(const void *a, const void *b)
{
	const struct topo_cpu *x = a, *y = b;

	return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

/* Number of distinct values >= 0 of an int field across the table. */
static int count_distinct(const struct topo_cpu *cpus, int n, size_t off)
{
	struct cpuset seen;
	int extra = 0;

	cpuset_zero(&seen);
	for (int i = 0; i < n; i++) {
		int v = *(const int *)((const char *)&cpus[i] + off);

		if (v < 0)
			continue;
		if (v < CPUSET_MAX) {
			if (!cpuset_has(&seen, v)) {
				cpuset_set(&seen, v);
				extra++;
			}
			continue;
		}
		/* Ids beyond the bitmap (sysfs L3 ids can be large): quadratic but rare. */
		bool dup = false;
		for (int j = 0; j < i && !dup; j++)
			dup = *(const int *)((const char *)&cpus[j] + off) == v;
		extra += !dup;
	}
	return extra;
}

int topo_build(const struct topo_cpu *cpus, int n, const struct cpuset *offline,
	       struct topo **ret, struct errbuf *eb)
{
	_cleanup_(topo_freep) struct topo *t = NULL;
	int max_core = -1;

	if (n <= 0)
		return errbuf_fail(eb, -EINVAL, "no online CPUs");
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cpus = malloc(sizeof(*t->cpus) * (size_t)n);
	if (!t->cpus)
		/* t is freed by _cleanup_(topo_freep), which cppcheck does not model */
		/* cppcheck-suppress memleak */
		return -ENOMEM;
	memcpy(t->cpus, cpus, sizeof(*t->cpus) * (size_t)n);
	qsort(t->cpus, (size_t)n, sizeof(*t->cpus), cmp_cpu);
	t->n_cpus = n;

	for (int i = 0; i < n; i++) {
		const struct topo_cpu *c = &t->cpus[i];

		if (c->cpu < 0 || c->cpu >= CPUSET_MAX)
			return errbuf_fail(eb, -EINVAL, "CPU id %d out of range 0-%d", c->cpu,
				    CPUSET_MAX - 1);
		if (cpuset_has(&t->online, c->cpu))
			return errbuf_fail(eb, -EINVAL, "CPU %d listed twice", c->cpu);
		if (c->core < 0 || c->core >= CPUSET_MAX)
			return errbuf_fail(eb, -EINVAL, "CPU %d: core %d out of range 0-%d", c->cpu,
				    c->core, CPUSET_MAX - 1);
		if (c->core_id < 0)
			return errbuf_fail(eb, -EINVAL, "CPU %d: negative core_id %d", c->cpu, c->core_id);
		if (c->numa < -1 || c->socket < -1 || c->l3 < -1)
			return errbuf_fail(eb, -EINVAL, "CPU %d: negative id other than -1", c->cpu);
		if (c->type > TOPO_CORE_E)
			return errbuf_fail(eb, -EINVAL, "CPU %d: bad core type", c->cpu);
		cpuset_set(&t->online, c->cpu);
		if (c->core > max_core)
			max_core = c->core;
	}
	if (offline) {
		if (cpuset_intersects(offline, &t->online))
			return errbuf_fail(eb, -EINVAL, "a CPU is listed both online and offline");
		t->offline = *offline;
	}

	/* SMT siblings share a core; they must then share socket and NUMA node. */
	{
		_cleanup_free_ int *first = malloc(sizeof(int) * (size_t)(max_core + 1));

		if (!first)
			return -ENOMEM;
		for (int i = 0; i <= max_core; i++)
			first[i] = -1;
		for (int i = 0; i < n; i++) {
			const struct topo_cpu *c = &t->cpus[i];
			int f = first[c->core];

			if (f < 0) {
				first[c->core] = i;
				continue;
			}
			t->smt = true;
			if (t->cpus[f].socket != c->socket || t->cpus[f].numa != c->numa)
				return errbuf_fail(eb, -EINVAL,
					    "CPUs %d and %d share core %d but not socket/NUMA node",
					    t->cpus[f].cpu, c->cpu, c->core);
		}
	}

	t->n_sockets = count_distinct(t->cpus, n, offsetof(struct topo_cpu, socket));
	t->n_numa = count_distinct(t->cpus, n, offsetof(struct topo_cpu, numa));
	t->n_cores = count_distinct(t->cpus, n, offsetof(struct topo_cpu, core));
	t->n_l3 = count_distinct(t->cpus, n, offsetof(struct topo_cpu, l3));

	t->index_len = t->cpus[n - 1].cpu + 1;
	t->index = malloc(sizeof(int) * (size_t)t->index_len);
	if (!t->index)
		return -ENOMEM;
	for (int i = 0; i < t->index_len; i++)
		t->index[i] = -1;
	for (int i = 0; i < n; i++)
		t->index[t->cpus[i].cpu] = i;

	*ret = TAKE_PTR(t);
	return 0;
}

const struct topo_cpu *topo_cpu(const struct topo *t, int cpu)
{
	if (cpu < 0 || cpu >= t->index_len || t->index[cpu] < 0)
		return NULL;
	return &t->cpus[t->index[cpu]];
}

const char *topo_core_type_name(enum topo_core_type type)
{
	switch (type) {
	case TOPO_CORE_P:
		return "p-core";
	case TOPO_CORE_E:
		return "e-core";
	default:
		return "standard";
	}
}

/* ---- environment for hwloc ------------------------------------------------------------ */

/* hwloc 2.x has no API for the filesystem root or the CPUID dump directory: its
 * backends read HWLOC_FSROOT / HWLOC_CPUID_PATH / HWLOC_COMPONENTS at load time.
 * We set them around hwloc_topology_load() and put back what was there before, so
 * the caller's environment is unchanged afterwards (single-threaded daemon: setenv
 * is not thread-safe). */
struct env_save {
	const char *name;
	char *old; /* copy of the previous value, NULL when it was unset */
};

struct env_scope {
	struct env_save vars[8];
	int n;
};

static void env_scope_restore(struct env_scope *s)
{
	while (s->n > 0) {
		struct env_save *v = &s->vars[--s->n];

		if (v->old)
			(void)setenv(v->name, v->old, 1);
		else
			(void)unsetenv(v->name);
		free(v->old);
		v->old = NULL;
	}
}

/* value NULL unsets name. */
static int env_scope_set(struct env_scope *s, const char *name, const char *value)
{
	const char *old = getenv(name);
	struct env_save *v;

	assert(s->n < (int)ARRAY_SIZE(s->vars));
	v = &s->vars[s->n];
	v->name = name;
	v->old = NULL;
	if (old) {
		v->old = strdup(old);
		if (!v->old)
			return -ENOMEM;
	}
	s->n++;
	if ((value ? setenv(name, value, 1) : unsetenv(name)) < 0)
		return -errno;
	return 0;
}

/* ---- sysfs files ---------------------------------------------------------------------- */

#define SYSFS_CPU "/sys/devices/system/cpu"
#define SYSFS_NODE "/sys/devices/system/node"
#define SYSFS_CPU_ATOM "/sys/devices/cpu_atom/cpus"
/* A cpulist naming every other one of 8192 CPUs is ~40 KiB; nothing we read is bigger. */
#define SYSFS_FILE_MAX (1u << 20)

/* Room after the root for the longest name we build,
 * "/sys/devices/system/node/node2147483647/cpulist" (48) or
 * "/sys/devices/system/cpu/cpu8191/cache/index63/shared_cpu_map" (61). */
#define SYSFS_SUFFIX_MAX 128
#define SYSFS_CACHE_INDEX_MAX 64
/* MAX_NUMNODES is 1 << CONFIG_NODES_SHIFT, at most 1024 on every arch today. */
#define SYSFS_NODES_MAX 4096

/* Formats root + the rest into path (PATH_MAX bytes). The loaders reject roots
 * longer than PATH_MAX - SYSFS_SUFFIX_MAX, so this cannot truncate. */
static void sysfs_path(char *path, const char *root, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void sysfs_path(char *path, const char *root, const char *fmt, ...)
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

static bool path_exists(const char *path)
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

struct sysfs_node {
	int id;
	struct cpuset cpus; /* cpulist (cpumap on old kernels) & the CPUs that exist */
};

/* What we read from sysfs ourselves, next to hwloc. */
struct sysfs_facts {
	const char *root; /* "" = the live machine */
	bool has_online;
	struct cpuset online; /* cpu/online */
	struct cpuset known;  /* cpu/present plus every cpuN directory */
	bool has_atom;
	struct cpuset atom; /* cpu_atom/cpus: the E-cores of an Intel hybrid */
	struct sysfs_node *nodes;
	int n_nodes; /* 0 when there is no node/ directory (hwloc then invents node 0) */
};

static void sysfs_facts_done(struct sysfs_facts *f)
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
static int per_cpu_fallback;
static char per_cpu_fallback_first[PATH_MAX];

static bool per_cpu_unusable(int r, const char *path)
{
	if (r != -ENODATA && (r >= 0 || r == -ENOENT || r == -EINVAL || r == -E2BIG ||
			      r == -ENOMEM))
		return false;
	if (!per_cpu_fallback++)
		(void)snprintf(per_cpu_fallback_first, sizeof(per_cpu_fallback_first), "%s (%s)",
			       path, r == -ENODATA ? "empty" : strerror(-r));
	return true;
}

/* Before hwloc: the CPU directory, cpu/online, cpu/present, per-CPU online files. */
static int sysfs_scan_cpus(struct sysfs_facts *f, struct errbuf *eb)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char path[PATH_MAX];
	struct cpuset dirs, present;
	struct dirent *de;
	int r;

	sysfs_path(path, f->root, SYSFS_CPU);
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

	sysfs_path(path, f->root, SYSFS_CPU "/present");
	r = sysfs_read_cpulist(path, &present, eb);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0)
		cpuset_or(&f->known, &f->known, &present);

	sysfs_path(path, f->root, SYSFS_CPU "/online");
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

		sysfs_path(p2, f->root, SYSFS_CPU "/present");
		sysfs_path(p3, f->root, SYSFS_CPU "/possible");
		if (path_exists(p2) || path_exists(p3))
			return errbuf_fail(eb, -ENOENT, "%s: missing", path);
	}
	/* Old kernels: hwloc reads cpuN/online ("0" = offline) with atoi. An
	 * empty or unreadable one says nothing, as for the other per-CPU files
	 * (per_cpu_unusable): the CPU is what its directory and the other
	 * lists say, online, as hwloc takes a CPU whose file it cannot read. */
	CPUSET_FOREACH(cpu, &dirs)
	{
		int v;

		sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/online", cpu);
		r = sysfs_read_int(path, 0, 1, &v, eb);
		if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
			return r;
	}
	return 0;
}

/* The per-CPU files hwloc turns into cores, packages and L3s. hwloc reads them
 * with atoi and a lenient mask parser, so "garbage" becomes core 0 or a PU
 * without a core: we reject what it would silently accept. */
static int sysfs_check_cpu(const struct sysfs_facts *f, int cpu, struct errbuf *eb)
{
	static const char *const masks[] = {"thread_siblings", "core_cpus", "core_siblings",
					    "package_cpus"};
	char path[PATH_MAX];
	struct cpuset set;
	int v, r;

	sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology", cpu);
	if (!path_exists(path))
		return errbuf_fail(eb, -ENOENT, "%s: missing for online CPU %d", path, cpu);

	sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology/core_id", cpu);
	r = sysfs_read_int(path, 0, INT_MAX, &v, eb);
	if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
		return r;
	sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology/physical_package_id", cpu);
	r = sysfs_read_int(path, -1, INT_MAX, &v, eb);
	if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(masks); i++) {
		sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/topology/%s", cpu, masks[i]);
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

		sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/cache/index%d/level", cpu, idx);
		r = sysfs_read_int(path, 0, 255, &level, eb);
		if (r == -ENOENT)
			break;
		if (per_cpu_unusable(r, path))
			continue;
		if (r < 0)
			return r;
		if (level != 3)
			continue;
		sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/cache/index%d/id", cpu, idx);
		r = sysfs_read_int(path, 0, INT_MAX, &v, eb);
		if (r < 0 && r != -ENOENT && !per_cpu_unusable(r, path))
			return r;
		sysfs_path(path, f->root, SYSFS_CPU "/cpu%d/cache/index%d/shared_cpu_map", cpu,
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
static int sysfs_scan_nodes(struct sysfs_facts *f, struct errbuf *eb)
{
	const struct cpuset *exist = f->has_online ? &f->online : &f->known;
	_cleanup_(closedirp) DIR *d = NULL;
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	int cap = 0, r;

	sysfs_path(dir, f->root, SYSFS_NODE);
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

		sysfs_path(path, f->root, SYSFS_NODE "/node%d/cpulist", id);
		r = sysfs_read_cpulist(path, &n->cpus, eb);
		if (r < 0 && r != -ENOENT)
			return r;
		has_list = r == 0;
		sysfs_path(path, f->root, SYSFS_NODE "/node%d/cpumap", id);
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

static int sysfs_scan_atom(struct sysfs_facts *f, struct errbuf *eb)
{
	char path[PATH_MAX];
	int r;

	sysfs_path(path, f->root, SYSFS_CPU_ATOM);
	r = sysfs_read_cpulist(path, &f->atom, eb);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	f->has_atom = true;
	return 0;
}

/* ---- hwloc ------------------------------------------------------------------------------ */

static void hwloc_topology_destroyp(hwloc_topology_t *t)
{
	if (*t)
		hwloc_topology_destroy(*t);
}

static void hwloc_bitmap_freep(hwloc_bitmap_t *b)
{
	if (*b)
		hwloc_bitmap_free(*b);
}

static int hwloc_load(hwloc_topology_t *ret, const char *what, struct errbuf *eb)
{
	_cleanup_(hwloc_topology_destroyp) hwloc_topology_t topo = NULL;
	static const hwloc_obj_type_t unused[] = {
		HWLOC_OBJ_L1CACHE,  HWLOC_OBJ_L2CACHE,	HWLOC_OBJ_L4CACHE,  HWLOC_OBJ_L5CACHE,
		HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2ICACHE, HWLOC_OBJ_L3ICACHE, HWLOC_OBJ_MISC,
	};

	if (hwloc_topology_init(&topo) < 0)
		return errbuf_fail(eb, -ENOMEM, "hwloc_topology_init failed");
	/* The whole machine, not only what our cgroup allows (the DaemonSet's own
	 * cpuset is not the node's). */
	if (hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) < 0)
		return errbuf_fail(eb, -EINVAL, "hwloc_topology_set_flags failed");
	for (size_t i = 0; i < ARRAY_SIZE(unused); i++)
		(void)hwloc_topology_set_type_filter(topo, unused[i], HWLOC_TYPE_FILTER_KEEP_NONE);
	(void)hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
	errno = 0;
	if (hwloc_topology_load(topo) < 0) {
		int e = errno > 0 ? errno : EIO;

		return errbuf_fail(eb, -e, "hwloc could not load %s: %s", what, strerror(e));
	}
	*ret = TAKE_PTR(topo);
	return 0;
}

static bool hwloc_index_known(unsigned idx)
{
	return idx != HWLOC_UNKNOWN_INDEX && idx <= INT_MAX;
}

/* True when every object of the type has a known os_index and no two share one:
 * then os_index is the id we report, otherwise hwloc's logical index or the
 * lowest CPU is (mixing the two could make distinct objects collide). */
static bool hwloc_os_indexes_usable(hwloc_topology_t topo, hwloc_obj_type_t type)
{
	int n = hwloc_get_nbobjs_by_type(topo, type);

	for (int i = 0; i < n; i++) {
		hwloc_obj_t a = hwloc_get_obj_by_type(topo, type, (unsigned)i);

		if (!hwloc_index_known(a->os_index))
			return false;
		for (int j = 0; j < i; j++)
			if (hwloc_get_obj_by_type(topo, type, (unsigned)j)->os_index == a->os_index)
				return false;
	}
	return true;
}

/* The NUMA node of a CPU: the node whose CPU list holds it. With sysfs nodes we
 * take sysfs's answer and check hwloc agrees (hwloc gives CPU-less nodes the
 * cpuset of their locality, so its cpusets alone can name several nodes);
 * without (CPUID dumps, kernels without NUMA) the one hwloc node covering it. */
static int numa_of(hwloc_topology_t topo, const struct sysfs_facts *f, int cpu, int *ret,
		   struct errbuf *eb)
{
	hwloc_obj_t node = NULL;
	int found = -1;

	if (f && f->n_nodes > 0) {
		for (int i = 0; i < f->n_nodes; i++) {
			if (!cpuset_has(&f->nodes[i].cpus, cpu))
				continue;
			if (found >= 0)
				return errbuf_fail(eb, -EINVAL,
					    "%s" SYSFS_NODE ": CPU %d is in node%d and node%d",
					    f->root, cpu, found, f->nodes[i].id);
			found = f->nodes[i].id;
		}
		if (found < 0) {
			*ret = -1;
			return 0;
		}
		while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)))
			if (node->os_index == (unsigned)found && node->cpuset &&
			    hwloc_bitmap_isset(node->cpuset, (unsigned)cpu))
				break;
		if (!node)
			return errbuf_fail(eb, -EINVAL,
				    "%s" SYSFS_NODE "/node%d/cpumap: lists CPU %d but hwloc does not"
				    " place it there",
				    f->root, found, cpu);
		*ret = found;
		return 0;
	}
	while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node))) {
		if (!node->cpuset || !hwloc_bitmap_isset(node->cpuset, (unsigned)cpu))
			continue;
		if (found >= 0)
			return errbuf_fail(eb, -EINVAL, "hwloc puts CPU %d in NUMA nodes %d and %u", cpu,
				    found, node->os_index);
		found = hwloc_index_known(node->os_index) ? (int)node->os_index
							   : (int)node->logical_index;
	}
	*ret = found;
	return 0;
}

/* P/E cores: the kernel's cpu_atom PMU lists the E-cores of an Intel hybrid
 * (since 5.13); failing that, hwloc's cpukinds: kinds its x86 backend
 * labelled (CoreType=IntelAtom/IntelCore), or, on heterogeneous ARM
 * (big.LITTLE, DynamIQ: a Cortex-X or A7x with A5x cores), kinds told apart
 * by the kernel's cpu_capacity (hwloc's LinuxCapacity), ranked by hwloc's
 * efficiency: the least capable kind is e-core, every other kind p-core.
 * One kind, or kinds told apart only by frequency (Intel Turbo Boost Max
 * favoured cores), is not hybrid for us: standard. */
struct kind_info {
	int efficiency;	    /* hwloc's rank, -1 unknown */
	long capacity;	    /* LinuxCapacity, -1 when absent */
	enum topo_core_type intel; /* from CoreType, STANDARD when absent */
};

static void kind_infos(const struct hwloc_info_s *infos, unsigned n, struct kind_info *k)
{
	k->capacity = -1;
	k->intel = TOPO_CORE_STANDARD;
	for (unsigned j = 0; j < n; j++) {
		if (!strcmp(infos[j].name, "CoreType")) {
			if (!strcmp(infos[j].value, "IntelAtom"))
				k->intel = TOPO_CORE_E;
			else if (!strcmp(infos[j].value, "IntelCore"))
				k->intel = TOPO_CORE_P;
		} else if (!strcmp(infos[j].name, "LinuxCapacity")) {
			long long v;

			if (num_parse_ll(infos[j].value, NULL, 1, LONG_MAX, &v) == 0)
				k->capacity = v;
		}
	}
}

static int core_types(hwloc_topology_t topo, const struct sysfs_facts *f,
		      struct topo_cpu *rows, int n)
{
	_cleanup_(hwloc_bitmap_freep) hwloc_bitmap_t set = NULL;
	_cleanup_free_ struct kind_info *kinds = NULL;
	bool intel = false, by_capacity = true;
	int nr, least = -1;

	if (f && f->has_atom) {
		for (int i = 0; i < n; i++)
			rows[i].type = cpuset_has(&f->atom, rows[i].cpu) ? TOPO_CORE_E : TOPO_CORE_P;
		return 0;
	}
	nr = hwloc_cpukinds_get_nr(topo, 0);
	if (nr <= 1)
		return 0;
	set = hwloc_bitmap_alloc();
	kinds = calloc((size_t)nr, sizeof(*kinds));
	if (!set || !kinds)
		return -ENOMEM;
	for (int k = 0; k < nr; k++) {
		struct hwloc_info_s *infos = NULL;
		unsigned n_infos = 0;

		kinds[k].efficiency = -1;
		if (hwloc_cpukinds_get_info(topo, (unsigned)k, NULL, &kinds[k].efficiency, &n_infos,
					    &infos, 0) < 0) {
			by_capacity = false;
			continue;
		}
		kind_infos(infos, n_infos, &kinds[k]);
		intel |= kinds[k].intel != TOPO_CORE_STANDARD;
		by_capacity &= kinds[k].capacity > 0;
	}
	/* Capacities must tell every kind apart, or the kinds differ in
	 * something else (frequency) and the cores are not of two designs. */
	for (int a = 0; by_capacity && a < nr; a++)
		for (int b = a + 1; b < nr; b++)
			if (kinds[a].capacity == kinds[b].capacity)
				by_capacity = false;
	if (!intel && by_capacity)
		for (int k = 0; k < nr; k++)
			if (least < 0 || kinds[k].efficiency < kinds[least].efficiency ||
			    (kinds[k].efficiency == kinds[least].efficiency &&
			     kinds[k].capacity < kinds[least].capacity))
				least = k;
	for (int k = 0; k < nr; k++) {
		enum topo_core_type type = TOPO_CORE_STANDARD;

		if (intel)
			type = kinds[k].intel;
		else if (least >= 0)
			type = k == least ? TOPO_CORE_E : TOPO_CORE_P;
		if (type == TOPO_CORE_STANDARD ||
		    hwloc_cpukinds_get_info(topo, (unsigned)k, set, NULL, NULL, NULL, 0) < 0)
			continue;
		for (int i = 0; i < n; i++)
			if (hwloc_bitmap_isset(set, (unsigned)rows[i].cpu))
				rows[i].type = type;
	}
	return 0;
}

/* The CPU table from a loaded topology. f is NULL for sources without sysfs. */
static int discover(hwloc_topology_t topo, const struct sysfs_facts *f, struct topo **ret,
		    struct errbuf *eb)
{
	_cleanup_free_ struct topo_cpu *rows = NULL;
	struct cpuset online, offline;
	bool pkg_os, l3_os;
	int n, n_cores;
	int r;

	n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
	if (n <= 0)
		return errbuf_fail(eb, -EINVAL, "hwloc found no CPUs");
	if (n > CPUSET_MAX)
		return errbuf_fail(eb, -E2BIG, "hwloc found %d CPUs, more than %d", n, CPUSET_MAX);
	cpuset_zero(&online);
	for (int i = 0; i < n; i++) {
		hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);

		if (pu->os_index >= CPUSET_MAX)
			return errbuf_fail(eb, -E2BIG, "hwloc found CPU %u, above %d", pu->os_index,
				    CPUSET_MAX - 1);
		cpuset_set(&online, (int)pu->os_index);
	}

	if (f) {
		if (f->has_online && !cpuset_equal(&online, &f->online)) {
			_cleanup_free_ char *a = cpuset_to_string(&f->online);
			_cleanup_free_ char *b = cpuset_to_string(&online);

			/* First name the CPU whose topology/ is missing, if that is why. */
			CPUSET_FOREACH(cpu, &f->online)
			{
				r = sysfs_check_cpu(f, cpu, eb);
				if (r < 0)
					return r;
			}
			return errbuf_fail(eb, -EINVAL, "%s" SYSFS_CPU "/online: lists %s but hwloc found %s",
				    f->root, a ? a : "?", b ? b : "?");
		}
		CPUSET_FOREACH(cpu, &online)
		{
			r = sysfs_check_cpu(f, cpu, eb);
			if (r < 0)
				return r;
		}
	}

	rows = calloc((size_t)n, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	pkg_os = hwloc_os_indexes_usable(topo, HWLOC_OBJ_PACKAGE);
	l3_os = hwloc_os_indexes_usable(topo, HWLOC_OBJ_L3CACHE);
	n_cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
	for (int i = 0; i < n; i++) {
		hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);
		hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu);
		hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
		hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, pu);
		struct topo_cpu *c = &rows[i];

		c->cpu = (int)pu->os_index;
		c->socket = !pkg ? -1 : pkg_os ? (int)pkg->os_index : (int)pkg->logical_index;
		/* A PU hwloc left without a Core is a core of its own. */
		c->core = core ? (int)core->logical_index : n_cores + (int)pu->logical_index;
		c->core_id = core && hwloc_index_known(core->os_index) ? (int)core->os_index
								       : c->core;
		c->l3 = !l3	 ? -1
			: l3_os ? (int)l3->os_index
				 : hwloc_bitmap_first(l3->cpuset);
		r = numa_of(topo, f, c->cpu, &c->numa, eb);
		if (r < 0)
			return r;
	}
	r = core_types(topo, f, rows, n);
	if (r < 0)
		return r;

	/* Offline: CPUs the machine has (sysfs present/cpuN, or hwloc's complete
	 * cpuset for dumps) that are not in the topology. */
	cpuset_zero(&offline);
	if (f) {
		cpuset_andnot(&offline, &f->known, &online);
	} else {
		hwloc_const_bitmap_t all = hwloc_topology_get_complete_cpuset(topo);
		int cpu;

		hwloc_bitmap_foreach_begin(cpu, all)
		{
			if (cpu >= CPUSET_MAX)
				break;
			if (!cpuset_has(&online, cpu))
				cpuset_set(&offline, cpu);
		}
		hwloc_bitmap_foreach_end();
	}
	return topo_build(rows, n, &offline, ret, eb);
}

int topo_load_hwloc(const char *sysfs_root, struct topo **ret, struct errbuf *eb)
{
	_cleanup_(sysfs_facts_done) struct sysfs_facts f = {.root = sysfs_root ? sysfs_root : ""};
	_cleanup_(env_scope_restore) struct env_scope env = {.n = 0};
	_cleanup_(hwloc_topology_destroyp) hwloc_topology_t topo = NULL;
	struct stat st;
	int r;

	if (sysfs_root) {
		if (strlen(sysfs_root) >= PATH_MAX - SYSFS_SUFFIX_MAX)
			return errbuf_fail(eb, -ENAMETOOLONG, "%.64s...: path too long", sysfs_root);
		if (stat(sysfs_root, &st) < 0) {
			r = -errno;
			return errbuf_fail(eb, r, "%s: %s", sysfs_root, strerror(-r));
		}
		if (!S_ISDIR(st.st_mode))
			return errbuf_fail(eb, -ENOTDIR, "%s: not a directory", sysfs_root);
	}
	per_cpu_fallback = 0;
	per_cpu_fallback_first[0] = 0;
	r = sysfs_scan_cpus(&f, eb);
	if (r < 0)
		return r;
	r = sysfs_scan_nodes(&f, eb);
	if (r < 0)
		return r;
	r = sysfs_scan_atom(&f, eb);
	if (r < 0)
		return r;

	/* Whatever would point hwloc somewhere else than the tree we just read goes. */
	if ((r = env_scope_set(&env, "HWLOC_FSROOT", sysfs_root)) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_XMLFILE", NULL)) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_SYNTHETIC", NULL)) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_CPUID_PATH", NULL)) < 0)
		return errbuf_fail(eb, r, "setenv: %s", strerror(-r));
	/* A capture: the linux backend alone, or hwloc's x86 backend adds the host's
	 * CPUID (model, caches, even an L3 on ARM captures). */
	if (sysfs_root && (r = env_scope_set(&env, "HWLOC_COMPONENTS", "linux,stop")) < 0)
		return errbuf_fail(eb, r, "setenv: %s", strerror(-r));
	r = hwloc_load(&topo, sysfs_root ? sysfs_root : "the machine", eb);
	env_scope_restore(&env);
	if (r < 0)
		return r;
	r = discover(topo, &f, ret, eb);
	if (r == 0 && per_cpu_fallback)
		log_warn("topology_sysfs_fallback",
			 "files=%d first=%s action=\"taken from the lists that name the CPU "
			 "elsewhere\"",
			 per_cpu_fallback, log_quote(per_cpu_fallback_first));
	return r;
}

int topo_load_cpuid_dump(const char *dir, struct topo **ret, struct errbuf *eb)
{
	_cleanup_(env_scope_restore) struct env_scope env = {.n = 0};
	_cleanup_(hwloc_topology_destroyp) hwloc_topology_t topo = NULL;
	char path[PATH_MAX];
	int r;

	if (strlen(dir) >= PATH_MAX - SYSFS_SUFFIX_MAX)
		return errbuf_fail(eb, -ENAMETOOLONG, "%.64s...: path too long", dir);
	/* Without pu0 hwloc's x86 backend quietly finds nothing. */
	sysfs_path(path, dir, "/pu0");
	if (!path_exists(path)) {
		r = -errno;
		return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	}
	if ((r = env_scope_set(&env, "HWLOC_CPUID_PATH", dir)) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_COMPONENTS", "x86,stop")) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_THISSYSTEM", "0")) < 0 ||
	    /* AMD topoext NUMA nodes: the only NUMA information a dump has (hwloc's
	     * tests/hwloc/x86 driver sets it too). */
	    (r = env_scope_set(&env, "HWLOC_X86_TOPOEXT_NUMANODES", "1")) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_FSROOT", NULL)) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_XMLFILE", NULL)) < 0 ||
	    (r = env_scope_set(&env, "HWLOC_SYNTHETIC", NULL)) < 0)
		return errbuf_fail(eb, r, "setenv: %s", strerror(-r));
	r = hwloc_load(&topo, dir, eb);
	env_scope_restore(&env);
	if (r < 0)
		return r;
	return discover(topo, NULL, ret, eb);
}
