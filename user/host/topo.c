/* CPU topology model: validation and derived facts (topo_build), and the
 * hwloc loaders. See topo.h for the invariants; the topology JSON is
 * topo_json.c's.
 *
 * hwloc does the discovery; sysfs is read a second time (topo_sysfs.c) only
 * to check the files hwloc would silently misread (it parses them with atoi
 * and turns garbage into 0) and to tell CPU-less NUMA nodes apart, which
 * hwloc 2.9's cpusets do not. */
#include "host/topo.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hwloc.h>

#include "lib/errbuf.h"
#define LOG_MOD "topo"
#include "lib/log.h"
#include "lib/num.h"
#include "host/topo_priv.h"

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

/* Each CPU of the sorted table within range and listed once, and not also
 * offline; the online set into t, the highest core number into *ret_max_core. */
static int check_cpus(struct topo *t, const struct cpuset *offline, int *ret_max_core,
		      struct errbuf *eb)
{
	int max_core = -1;

	for (int i = 0; i < t->n_cpus; i++) {
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
	*ret_max_core = max_core;
	return 0;
}

/* SMT siblings share a core; they must then share socket and NUMA node. Sets
 * t->smt when a core has several CPUs. */
static int check_siblings(struct topo *t, int max_core, struct errbuf *eb)
{
	_cleanup_free_ int *first = malloc(sizeof(int) * (size_t)(max_core + 1));

	if (!first)
		return -ENOMEM;
	for (int i = 0; i <= max_core; i++)
		first[i] = -1;
	for (int i = 0; i < t->n_cpus; i++) {
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
	return 0;
}

/* The unit counts and the CPU id -> row index. */
static int derive(struct topo *t)
{
	int n = t->n_cpus;

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
	return 0;
}

int topo_build(const struct topo_cpu *cpus, int n, const struct cpuset *offline,
	       struct topo **ret, struct errbuf *eb)
{
	_cleanup_(topo_freep) struct topo *t = NULL;
	int max_core = -1, r;

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

	r = check_cpus(t, offline, &max_core, eb);
	if (r < 0)
		return r;
	r = check_siblings(t, max_core, eb);
	if (r < 0)
		return r;
	r = derive(t);
	if (r < 0)
		return r;
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
 * (since 5.13: d9977c43bff8 "perf/x86: Register hybrid PMUs", and the cpus
 * file 58ae30c29a37 "perf/x86/intel: Add attr_update for Hybrid PMUs");
 * failing that, hwloc's cpukinds: kinds its x86 backend
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

/* The CPUs hwloc found, into *ret (at most CPUSET_MAX of them, ids below it). */
static int hwloc_online(hwloc_topology_t topo, int n, struct cpuset *ret, struct errbuf *eb)
{
	struct cpuset online;

	cpuset_zero(&online);
	for (int i = 0; i < n; i++) {
		hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);

		if (pu->os_index >= CPUSET_MAX)
			return errbuf_fail(eb, -E2BIG, "hwloc found CPU %u, above %d", pu->os_index,
				    CPUSET_MAX - 1);
		cpuset_set(&online, (int)pu->os_index);
	}
	*ret = online;
	return 0;
}

/* hwloc's CPUs held against sysfs: the same online set, and per CPU the files
 * hwloc would misread (naming first the CPU whose topology/ is missing, when
 * that is why the sets differ). */
static int check_sysfs(const struct sysfs_facts *f, const struct cpuset *online,
		       struct errbuf *eb)
{
	int r;

	if (f->has_online && !cpuset_equal(online, &f->online)) {
		_cleanup_free_ char *a = cpuset_to_string(&f->online);
		_cleanup_free_ char *b = cpuset_to_string(online);

		/* First name the CPU whose topology/ is missing, if that is why. */
		CPUSET_FOREACH(cpu, &f->online)
		{
			r = topo_sysfs_check_cpu(f, cpu, eb);
			if (r < 0)
				return r;
		}
		return errbuf_fail(eb, -EINVAL, "%s" SYSFS_CPU "/online: lists %s but hwloc found %s",
			    f->root, a ? a : "?", b ? b : "?");
	}
	CPUSET_FOREACH(cpu, online)
	{
		r = topo_sysfs_check_cpu(f, cpu, eb);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One row per PU of hwloc's: its socket, core, L3 and NUMA node. */
static int fill_rows(hwloc_topology_t topo, const struct sysfs_facts *f, struct topo_cpu *rows,
		     int n, struct errbuf *eb)
{
	bool pkg_os = hwloc_os_indexes_usable(topo, HWLOC_OBJ_PACKAGE);
	bool l3_os = hwloc_os_indexes_usable(topo, HWLOC_OBJ_L3CACHE);
	int n_cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
	int r;

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
	return 0;
}

/* Offline: CPUs the machine has (sysfs present/cpuN, or hwloc's complete
 * cpuset for dumps) that are not in the topology. */
static void offline_cpus(hwloc_topology_t topo, const struct sysfs_facts *f,
			 const struct cpuset *online, struct cpuset *ret)
{
	cpuset_zero(ret);
	if (f) {
		cpuset_andnot(ret, &f->known, online);
	} else {
		hwloc_const_bitmap_t all = hwloc_topology_get_complete_cpuset(topo);
		int cpu;

		hwloc_bitmap_foreach_begin(cpu, all)
		{
			if (cpu >= CPUSET_MAX)
				break;
			if (!cpuset_has(online, cpu))
				cpuset_set(ret, cpu);
		}
		hwloc_bitmap_foreach_end();
	}
}

/* The CPU table from a loaded topology. f is NULL for sources without sysfs. */
static int discover(hwloc_topology_t topo, const struct sysfs_facts *f, struct topo **ret,
		    struct errbuf *eb)
{
	_cleanup_free_ struct topo_cpu *rows = NULL;
	struct cpuset online, offline;
	int n, r;

	n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
	if (n <= 0)
		return errbuf_fail(eb, -EINVAL, "hwloc found no CPUs");
	if (n > CPUSET_MAX)
		return errbuf_fail(eb, -E2BIG, "hwloc found %d CPUs, more than %d", n, CPUSET_MAX);
	r = hwloc_online(topo, n, &online, eb);
	if (r < 0)
		return r;
	if (f) {
		r = check_sysfs(f, &online, eb);
		if (r < 0)
			return r;
	}

	rows = calloc((size_t)n, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	r = fill_rows(topo, f, rows, n, eb);
	if (r < 0)
		return r;
	r = core_types(topo, f, rows, n);
	if (r < 0)
		return r;
	offline_cpus(topo, f, &online, &offline);
	return topo_build(rows, n, &offline, ret, eb);
}

int topo_load_hwloc(const char *sysfs_root, struct topo **ret, struct errbuf *eb)
{
	_cleanup_(topo_sysfs_facts_done) struct sysfs_facts f = {
		.root = sysfs_root ? sysfs_root : ""
	};
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
	topo_sysfs_fallbacks = 0;
	topo_sysfs_fallback_first[0] = 0;
	r = topo_sysfs_scan_cpus(&f, eb);
	if (r < 0)
		return r;
	r = topo_sysfs_scan_nodes(&f, eb);
	if (r < 0)
		return r;
	r = topo_sysfs_scan_atom(&f, eb);
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
	if (r == 0 && topo_sysfs_fallbacks)
		log_warn("topology_sysfs_fallback",
			 "files=%d first=%s action=\"taken from the lists that name the CPU "
			 "elsewhere\"",
			 topo_sysfs_fallbacks, log_quote(topo_sysfs_fallback_first));
	return r;
}

/* Whether this hwloc has its x86 backend, asked by naming it:
 * hwloc_topology_set_components() refuses (EINVAL) a component it does not
 * have, and hwloc builds that one only for x86 machines. */
static bool hwloc_has_x86_backend(void)
{
	_cleanup_(hwloc_topology_destroyp) hwloc_topology_t topo = NULL;

	if (hwloc_topology_init(&topo) < 0)
		return true; /* the load itself will say what is wrong */
	return hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
					     "x86") == 0;
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
	topo_sysfs_path(path, dir, "/pu0");
	if (!topo_sysfs_exists(path)) {
		r = -errno;
		return errbuf_fail(eb, r, "%s: %s", path, strerror(-r));
	}
	if (!hwloc_has_x86_backend())
		return errbuf_fail(eb, -EOPNOTSUPP,
				   "%s: this hwloc has no x86 backend (hwloc builds it for x86 "
				   "machines only): an x86 CPUID dump is read on x86",
				   dir);
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
