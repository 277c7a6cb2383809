/* topo: hwloc discovery against the real-machine captures of testdata/topologies
 * (every fact of expected.json), corrupt captures, the topology JSON (format,
 * round trip, strictness) and the synthetic fixtures of test/data/topo.
 *
 * The captures are extracted once per run into a temporary directory (group
 * setup); tests that damage one undo it in their teardown. The captures are
 * test/data/topologies (TOPO_DIR overrides). */
#include <errno.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "host/topo.h"
#include "host/topo_json.h"
#include "lib/errbuf.h"

extern char **environ;

#define TOPO_DATA "test/data/topo"

/* Extracted captures and expected.json, shared by every test of the group. */
static char base_dir[PATH_MAX];
static struct json_object *expected;

/* snprintf that fails the test instead of truncating. */
static void xsnprintf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void xsnprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < size);
}

static const char *topo_dir(void)
{
	const char *d = getenv("TOPO_DIR");

	return d && *d ? d : "test/data/topologies";
}

static int run(const char *const argv[])
{
	pid_t pid;
	int st;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
		return -1;
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void rm_rf(const char *dir)
{
	(void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const char *content, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(fwrite(content, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static struct json_object *expected_entry(const char *file)
{
	struct json_object *list, *e, *v;

	assert_true(json_object_object_get_ex(expected, "topologies", &list));
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		e = json_object_array_get_idx(list, i);
		assert_true(json_object_object_get_ex(e, "file", &v));
		if (strcmp(json_object_get_string(v), file) == 0)
			return e;
	}
	fail_msg("%s: not in expected.json", file);
	return NULL;
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("expected.json: no \"%s\"", key);
	return v;
}

static const char *get_str(struct json_object *o, const char *key)
{
	return json_object_get_string(get(o, key));
}

/* An int member, -1 for null. */
static int get_int_or_null(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	return v ? json_object_get_int(v) : -1;
}

static struct cpuset cpus_of(const char *list)
{
	struct cpuset s;
	struct errbuf why = { "" };

	if (cpuset_parse(list, &s, &why) < 0)
		fail_msg("expected.json: bad cpulist \"%s\": %s", list, why.s);
	return s;
}

/* Where the capture's top directory landed under base_dir. */
static void capture_root(struct json_object *e, char *buf, size_t size)
{
	xsnprintf(buf, size, "%s/%s", base_dir, get_str(e, "top_dir"));
}

/* hwloc is built for x86 here, and so has its x86 backend: an x86 CPUID dump
 * it cannot read (-EOPNOTSUPP) is then a failure, not a skip. Elsewhere
 * (arm64) the dumps are skipped with topo_load_cpuid_dump()'s reason. The
 * linux-fsroot captures are files only, read by hwloc's linux backend alone,
 * which every build has: they must match expected.json on every build (the
 * aarch64 one under qemu-user included), whatever machine they came from. */
#if defined(__x86_64__) || defined(__i386__)
static const bool hwloc_is_x86 = true;
#else
static const bool hwloc_is_x86 = false;
#endif

/* Loads a capture the way its format requires, with the extra hwloc environment
 * expected.json was computed with (e.g. HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES); the
 * variables the loaders manage themselves are left to them. */
static int load_capture(struct json_object *e, const char *root, struct topo **ret,
			struct errbuf *why)
{
	static const char *const managed[] = {"HWLOC_FSROOT", "HWLOC_COMPONENTS",
					      "HWLOC_CPUID_PATH", "HWLOC_THISSYSTEM",
					      "HWLOC_X86_TOPOEXT_NUMANODES"};
	struct json_object *env = get(e, "hwloc_env");
	const char *format = get_str(e, "format");
	int r = -EINVAL;

	json_object_object_foreach(env, k1, v1)
	{
		bool skip = false;

		for (size_t i = 0; i < ARRAY_SIZE(managed); i++)
			skip |= strcmp(k1, managed[i]) == 0;
		if (!skip)
			assert_int_equal(setenv(k1, json_object_get_string(v1), 1), 0);
	}
	if (strcmp(format, "linux-fsroot") == 0)
		r = topo_load_hwloc(root, ret, why);
	else if (strcmp(format, "x86-cpuid-dump") == 0)
		r = topo_load_cpuid_dump(root, ret, why);
	else
		fail_msg("unknown capture format %s", format);
	json_object_object_foreach(env, k2, v2)
	{
		(void)v2;
		if (strncmp(k2, "HWLOC_", 6) == 0)
			(void)unsetenv(k2);
	}
	return r;
}

/* Equal keys on one side iff equal values on the other: the grouping is the same
 * whatever the numbering. */
static void assert_same_grouping(const int *a, const int *b, int n, const char *what,
				 const int *cpus)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if ((a[i] == a[j]) != (b[i] == b[j]))
				fail_msg("%s: CPUs %d and %d grouped %s by hwloc 2.9 but %s by us", what,
					 cpus[i], cpus[j], a[i] == a[j] ? "together" : "apart",
					 b[i] == b[j] ? "together" : "apart");
}

/* hwloc 2.9 names P/E cores only through CoreType, and only when it sees
 * more than one kind; none of the captures has sysfs cpu_atom. */
static enum topo_core_type expected_type(struct json_object *e, int cpu)
{
	struct json_object *kinds = get(e, "core_kinds");

	if (json_object_array_length(kinds) < 2)
		return TOPO_CORE_STANDARD;
	for (size_t k = 0; k < json_object_array_length(kinds); k++) {
		struct json_object *kind = json_object_array_get_idx(kinds, k);
		struct cpuset s = cpus_of(get_str(kind, "cpus"));
		const char *info = get_str(kind, "info");

		if (!cpuset_has(&s, cpu))
			continue;
		if (strstr(info, "CoreType=IntelAtom"))
			return TOPO_CORE_E;
		if (strstr(info, "CoreType=IntelCore"))
			return TOPO_CORE_P;
	}
	return TOPO_CORE_STANDARD;
}

static void expect_field(int cpu, const char *field, int got, int want)
{
	if (got != want)
		fail_msg("CPU %d: %s %d, expected %d", cpu, field, got, want);
}

static void assert_matches_expected(const struct topo *t, struct json_object *e)
{
	struct json_object *per_cpu = get(e, "per_cpu"), *numa_cpus = get(e, "numa_cpus");
	struct json_object *l3_cpus = get(e, "l3_cpus");
	struct cpuset online = cpus_of(get_str(e, "cpus_online"));
	struct cpuset offline = cpus_of(get_str(e, "cpus_offline_known_to_hwloc"));
	bool core_id_is_os = strcmp(get_str(e, "core_id_source"), "os_index") == 0;
	const char *l3_key = get(e, "l3_key") ? get_str(e, "l3_key") : NULL;
	int n = (int)json_object_array_length(per_cpu);
	int *cpus, *exp_core, *our_core, *exp_l3, *our_l3;
	int numa_with_cpus = 0;

	assert_true(cpuset_equal(&t->online, &online));
	assert_true(cpuset_equal(&t->offline, &offline));
	assert_int_equal(t->n_cpus, json_object_get_int(get(e, "pus")));
	assert_int_equal(n, t->n_cpus);
	assert_int_equal(t->n_sockets, json_object_get_int(get(e, "sockets")));
	assert_int_equal(t->n_cores, json_object_get_int(get(e, "cores")));
	assert_int_equal(t->n_l3, json_object_get_int(get(e, "l3_caches")));
	assert_int_equal(t->smt, json_object_get_int(get(e, "smt_width")) > 1);

	/* NUMA: CPU-less nodes (memory only) are not in our model. */
	assert_int_equal(json_object_object_length(numa_cpus),
			 json_object_get_int(get(e, "numa_nodes")));
	json_object_object_foreach(numa_cpus, node, list)
	{
		struct cpuset s = cpus_of(json_object_get_string(list));

		if (cpuset_is_empty(&s))
			continue;
		numa_with_cpus++;
		CPUSET_FOREACH(cpu, &s)
		{
			if (!topo_cpu(t, cpu))
				fail_msg("CPU %d of node %s missing", cpu, node);
			expect_field(cpu, "numa", topo_cpu(t, cpu)->numa, (int)strtol(node, NULL, 10));
		}
	}
	assert_int_equal(t->n_numa, numa_with_cpus);

	cpus = calloc((size_t)n, sizeof(int));
	exp_core = calloc((size_t)n, sizeof(int));
	our_core = calloc((size_t)n, sizeof(int));
	exp_l3 = calloc((size_t)n, sizeof(int));
	our_l3 = calloc((size_t)n, sizeof(int));
	assert_true(cpus && exp_core && our_core && exp_l3 && our_l3);
	for (int i = 0; i < n; i++) {
		struct json_object *row = json_object_array_get_idx(per_cpu, i);
		int cpu = json_object_get_int(get(row, "cpu"));
		const struct topo_cpu *c = topo_cpu(t, cpu);

		if (!c)
			fail_msg("CPU %d missing", cpu);
		cpus[i] = cpu;
		expect_field(cpu, "socket", c->socket, get_int_or_null(row, "socket"));
		expect_field(cpu, "numa", c->numa, get_int_or_null(row, "numa"));
		exp_core[i] = json_object_get_int(get(row, "core_logical"));
		our_core[i] = c->core;
		expect_field(cpu, "core_id", c->core_id,
			     core_id_is_os ? json_object_get_int(get(row, "core")) : c->core);
		exp_l3[i] = get_int_or_null(row, "l3");
		our_l3[i] = c->l3;
		if (exp_l3[i] < 0)
			expect_field(cpu, "l3", c->l3, -1);
		else if (strcmp(l3_key, "os_index") == 0)
			expect_field(cpu, "l3", c->l3, exp_l3[i]);
		if (c->type != expected_type(e, cpu))
			fail_msg("CPU %d: core type %s, expected %s", cpu,
				 topo_core_type_name(c->type),
				 topo_core_type_name(expected_type(e, cpu)));
	}
	assert_same_grouping(exp_core, our_core, n, "core (SMT siblings)", cpus);
	assert_same_grouping(exp_l3, our_l3, n, "L3", cpus);

	/* l3_cpus says the same as per_cpu l3; check it on its own anyway. */
	json_object_object_foreach(l3_cpus, key, list2)
	{
		struct cpuset s = cpus_of(json_object_get_string(list2));
		int first = -2;

		(void)key;
		CPUSET_FOREACH(cpu, &s)
		{
			if (first == -2)
				first = topo_cpu(t, cpu)->l3;
			assert_int_not_equal(first, -1);
			assert_int_equal(topo_cpu(t, cpu)->l3, first);
		}
	}
	free(cpus);
	free(exp_core);
	free(our_core);
	free(exp_l3);
	free(our_l3);
}

static char *write_to_string(const struct topo *t)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	assert_non_null(f);
	assert_int_equal(topo_write_json(t, f), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* ---- captures ------------------------------------------------------------------------ */

static void test_topo_load_capture_matches_expected(void **state)
{
	const char *file = *state;
	struct json_object *e = expected_entry(file);
	char root[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;
	int r;

	capture_root(e, root, sizeof(root));
	r = load_capture(e, root, &t, &why);
	if (r == -EOPNOTSUPP && !hwloc_is_x86) {
		print_message("skipped: %s\n", why.s);
		skip();
	}
	if (r < 0)
		fail_msg("%s: %d %s", file, r, why.s);
	assert_matches_expected(t, e);
	topo_free(t);
}

/* The table below must name every tarball shipped, and expected.json too. */
static const char *const captures[] = {
	"2i386-2c-nohugepage.tar.bz2",
	"32intel64-2p8co2t+8ve.tar.bz2",
	"32intel64-2p8co2t+8ve-isolated.tar.bz2",
	"20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2",
	"Intel-RaptorLake-Corei7-1370P.tar.bz2",
	"128arm-2pa2n8cluster4co.tar.bz2",
	"64amd64-4s2n4ca2co.tar.bz2",
	"AMD-17h-Zen-2xEpyc-7451.tar.bz2",
	"nvidiagpunumanodes.tar.bz2",
	"16em64t-4s2c2t-offlines.tar.bz2",
	"2ps3-2t.tar.bz2",
	"32amd64-4s2n4c-cgroup2.tar.bz2",
};

static void test_topo_every_capture_is_tested(void **state)
{
	char pattern[PATH_MAX];
	glob_t g;

	xsnprintf(pattern, sizeof(pattern), "%s/*.tar.bz2", topo_dir());
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, ARRAY_SIZE(captures));
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *name = strrchr(g.gl_pathv[i], '/') + 1;
		bool found = false;

		for (size_t j = 0; j < ARRAY_SIZE(captures); j++)
			found |= strcmp(name, captures[j]) == 0;
		if (!found)
			fail_msg("%s has no test", name);
		(void)expected_entry(name);
	}
	globfree(&g);
	assert_int_equal(json_object_array_length(get(expected, "topologies")),
			 ARRAY_SIZE(captures));
}

static void test_topo_load_hwloc_live_machine_has_cpus(void **state)
{
	struct errbuf why = { "" };
	struct topo *t = NULL;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (topo_load_hwloc(NULL, &t, &why) < 0)
		fail_msg("live machine: %s", why.s);
	assert_true(t->n_cpus >= 1);
	assert_int_equal(t->n_cpus, n);
	assert_int_equal(cpuset_count(&t->online), t->n_cpus);
	topo_free(t);
}

static void test_topo_load_hwloc_restores_environment(void **state)
{
	struct json_object *e = expected_entry("2i386-2c-nohugepage.tar.bz2");
	char root[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	capture_root(e, root, sizeof(root));
	assert_int_equal(setenv("HWLOC_COMPONENTS", "bogus-but-restored", 1), 0);
	(void)unsetenv("HWLOC_FSROOT");
	if (topo_load_hwloc(root, &t, &why) < 0)
		fail_msg("%s", why.s);
	assert_string_equal(getenv("HWLOC_COMPONENTS"), "bogus-but-restored");
	assert_null(getenv("HWLOC_FSROOT"));
	assert_int_equal(t->n_cpus, 2);
	topo_free(t);
	(void)unsetenv("HWLOC_COMPONENTS");
}

/* ---- corrupt captures ---------------------------------------------------------------- */

/* Damage done to the shared extraction by one test, undone by its teardown
 * (which cmocka runs even when the test fails), so no test copies a capture. */
enum mutation_kind { MUT_WROTE, MUT_CREATED, MUT_MOVED, MUT_MKDIR };

static struct mutation {
	enum mutation_kind kind;
	char path[PATH_MAX];
	char *saved; /* MUT_WROTE: the old content */
	size_t len;
} mutations[160]; /* room for a file per CPU of the 128-CPU capture */
static int n_mutations;

static struct mutation *mutation_new(enum mutation_kind kind, const char *path)
{
	struct mutation *m;

	assert_true(n_mutations < (int)ARRAY_SIZE(mutations));
	m = &mutations[n_mutations++];
	*m = (struct mutation){.kind = kind};
	xsnprintf(m->path, sizeof(m->path), "%s", path);
	return m;
}

static void root_of(const char *top_dir, char *root, size_t size)
{
	xsnprintf(root, size, "%s/%s", base_dir, top_dir);
}

/* Replaces (or creates) root/rel with content. */
static void mutate_write(const char *root, const char *rel, const char *content)
{
	char path[PATH_MAX];
	struct mutation *m;
	FILE *f;

	xsnprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "r");
	if (f) {
		m = mutation_new(MUT_WROTE, path);
		m->saved = malloc(1 << 16);
		assert_non_null(m->saved);
		m->len = fread(m->saved, 1, 1 << 16, f);
		(void)fclose(f);
	} else {
		(void)mutation_new(MUT_CREATED, path);
	}
	write_file(path, content, strlen(content));
}

/* Moves root/rel (file or directory) out of the way. */
static void mutate_remove(const char *root, const char *rel)
{
	char path[PATH_MAX], moved[PATH_MAX + 8];

	xsnprintf(path, sizeof(path), "%s/%s", root, rel);
	xsnprintf(moved, sizeof(moved), "%s.moved", path);
	assert_int_equal(rename(path, moved), 0);
	(void)mutation_new(MUT_MOVED, path);
}

static void mutate_mkdir(const char *root, const char *rel)
{
	char path[PATH_MAX];

	xsnprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(mkdir(path, 0755), 0);
	(void)mutation_new(MUT_MKDIR, path);
}

static int undo_mutations(void **state)
{
	while (n_mutations > 0) {
		struct mutation *m = &mutations[--n_mutations];
		char moved[PATH_MAX + 8];

		switch (m->kind) {
		case MUT_WROTE:
			write_file(m->path, m->saved, m->len);
			break;
		case MUT_CREATED:
			(void)unlink(m->path);
			break;
		case MUT_MOVED:
			xsnprintf(moved, sizeof(moved), "%s.moved", m->path);
			(void)rename(moved, m->path);
			break;
		case MUT_MKDIR:
			(void)rmdir(m->path);
			break;
		}
		free(m->saved);
		m->saved = NULL;
	}
	return 0;
}

/* Loads root and expects err with every part in why. */
static void assert_load_fails(const char *root, int err, const char *part)
{
	struct errbuf why = { "" };
	struct topo *t = NULL;
	int r = topo_load_hwloc(root, &t, &why);

	if (r >= 0) {
		topo_free(t);
		fail_msg("%s loaded, expected error with '%s'", root, part);
	}
	if (!strstr(why.s, part))
		fail_msg("error '%s' lacks '%s'", why.s, part);
	assert_int_equal(r, err);
	assert_null(t);
}

#define INTEL "32intel64-2p8co2t+8ve"
#define CPUDIR "sys/devices/system/cpu"

/* Kernels since 5.13 list an Intel hybrid's E-cores in cpu_atom/cpus (the
 * capture predates that: add it). */
static void test_topo_load_hwloc_reads_e_cores_from_cpu_atom(void **state)
{
	char root[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	root_of("20em64t-hybrid-1p6c2t+2ca4co1t", root, sizeof(root));
	mutate_mkdir(root, "sys/devices/cpu_atom");
	mutate_write(root, "sys/devices/cpu_atom/cpus", "12-19\n");
	if (topo_load_hwloc(root, &t, &why) < 0)
		fail_msg("%s", why.s);
	assert_int_equal(t->n_cpus, 20);
	for (int i = 0; i < t->n_cpus; i++)
		assert_int_equal(t->cpus[i].type, t->cpus[i].cpu >= 12 ? TOPO_CORE_E : TOPO_CORE_P);
	topo_free(t);
}

/* One damaged capture per row: what is done to it, and the error and the
 * part of the reason that loading it must give. Each row runs as its own
 * test, named after it, and its damage is undone in the teardown. */
enum step_op { STEP_NONE = 0, STEP_WRITE, STEP_REMOVE, STEP_MKDIR };

static const struct corrupt_case {
	const char *name;
	const char *capture; /* top directory of the extracted capture */
	struct step {
		enum step_op op;
		const char *rel, *content;
	} steps[2];
	int err;
	const char *why;
} corrupt_cases[] = {
	{ "garbage_core_id", INTEL, { { STEP_WRITE, CPUDIR "/cpu3/topology/core_id", "garbage\n" } },
	  -EINVAL, "/sys/devices/system/cpu/cpu3/topology/core_id: not an" },
	{ "garbage_package_id", INTEL,
	  { { STEP_WRITE, CPUDIR "/cpu9/topology/physical_package_id", "1x\n" } }, -EINVAL,
	  "cpu9/topology/physical_package_id: not an integer" },
	{ "sibling_mask_without_self", INTEL,
	  { { STEP_WRITE, CPUDIR "/cpu0/topology/core_cpus", "00000000,00000002\n" } }, -EINVAL,
	  "cpu0/topology/core_cpus: does not contain CPU 0" },
	{ "missing_cpu_online", INTEL, { { STEP_REMOVE, CPUDIR "/online", NULL } }, -ENOENT,
	  "/sys/devices/system/cpu/online: missing" },
	{ "garbage_cpu_online", INTEL, { { STEP_WRITE, CPUDIR "/online", "0-31x\n" } }, -EINVAL,
	  "/sys/devices/system/cpu/online: " },
	{ "empty_cpu_online", INTEL, { { STEP_WRITE, CPUDIR "/online", "" } }, -EINVAL,
	  "/sys/devices/system/cpu/online: empty file" },
	{ "no_cpu_online", INTEL, { { STEP_WRITE, CPUDIR "/online", "\n" } }, -EINVAL,
	  "/sys/devices/system/cpu/online: no CPU online" },
	{ "online_cpu_without_topology", INTEL, { { STEP_REMOVE, CPUDIR "/cpu7/topology", NULL } },
	  -ENOENT, "cpu7/topology: missing for online CPU 7" },
	{ "online_list_naming_missing_cpu", INTEL, { { STEP_WRITE, CPUDIR "/online", "0-32\n" } },
	  -ENOENT, "cpu32/topology: missing for online CPU 32" },
	{ "garbage_l3_id", INTEL, { { STEP_WRITE, CPUDIR "/cpu20/cache/index3/id", "one\n" } },
	  -EINVAL, "cpu20/cache/index3/id: not an integer" },
	{ "garbage_node_cpulist", INTEL,
	  { { STEP_WRITE, "sys/devices/system/node/node1/cpulist", "8-15,24-\n" } }, -EINVAL,
	  "/sys/devices/system/node/node1/cpulist: " },
	{ "node_cpumap_disagreeing", INTEL,
	  { { STEP_WRITE, "sys/devices/system/node/node0/cpumap",
	      "00000000,00000000,00000000,00000000\n" } },
	  -EINVAL, "node0/cpumap: disagrees with cpulist" },
	{ "node_cpumap_bad_character", INTEL,
	  { { STEP_WRITE, "sys/devices/system/node/node0/cpumap", "00ff,zz\n" } }, -EINVAL,
	  "node0/cpumap: bad character" },
	{ "garbage_cpu_atom", INTEL,
	  { { STEP_MKDIR, "sys/devices/cpu_atom", NULL },
	    { STEP_WRITE, "sys/devices/cpu_atom/cpus", "twelve\n" } },
	  -EINVAL, "/sys/devices/cpu_atom/cpus: " },
	/* Old kernels have no cpu/online (16em64t-4s2c2t-offlines): hwloc reads
	 * cpuN/online with atoi. */
	{ "garbage_per_cpu_online", "16em64t-4s2c2t-offlines",
	  { { STEP_WRITE, CPUDIR "/cpu3/online", "yes\n" } }, -EINVAL,
	  "cpu3/online: not an integer" },
};

/* An empty or unreadable per-CPU file says nothing, not something wrong:
 * the machine loads, and to what the lists that name the CPU elsewhere say,
 * the same topology as the undamaged capture. */
static void test_topo_load_hwloc_per_cpu_files_fall_back(void **state)
{
	static const struct {
		const char *rel;
		enum step_op op;
	} cases[] = {
		{ CPUDIR "/cpu17/topology/core_id", STEP_WRITE },
		{ CPUDIR "/cpu5/topology/thread_siblings", STEP_WRITE },
		{ CPUDIR "/cpu9/topology/physical_package_id", STEP_WRITE },
		{ CPUDIR "/cpu9/topology/core_siblings", STEP_WRITE },
		{ CPUDIR "/cpu20/cache/index3/id", STEP_WRITE },
		{ CPUDIR "/cpu20/cache/index3/shared_cpu_map", STEP_WRITE },
		{ CPUDIR "/cpu3/topology/core_id", STEP_MKDIR }, /* unreadable */
	};
	char root[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *clean = NULL, *t = NULL;
	_cleanup_free_ char *want = NULL;

	root_of(INTEL, root, sizeof(root));
	assert_int_equal(topo_load_hwloc(root, &clean, &why), 0);
	want = write_to_string(clean);
	topo_free(clean);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *got = NULL;

		if (cases[i].op == STEP_WRITE) {
			mutate_write(root, cases[i].rel, "");
		} else {
			mutate_remove(root, cases[i].rel);
			mutate_mkdir(root, cases[i].rel);
		}
		if (topo_load_hwloc(root, &t, &why) < 0)
			fail_msg("%s: refused: %s", cases[i].rel, why.s);
		got = write_to_string(t);
		t = topo_free(t);
		if (strcmp(got, want) != 0)
			fail_msg("%s: another topology:\n%s\nwant\n%s", cases[i].rel, got, want);
		(void)undo_mutations(NULL);
	}
}

/* Old kernels' captures have no cpu/online list, only per-CPU online files:
 * an empty one says nothing either, and the machine loads as the undamaged
 * capture does (the CPU with a topology online, the one without offline). */
static void test_topo_load_hwloc_empty_per_cpu_online_falls_back(void **state)
{
	static const char *const rels[] = {
		CPUDIR "/cpu2/online", /* offline: "0", no topology */
		CPUDIR "/cpu3/online", /* online: no file, a topology */
	};
	char root[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *clean = NULL, *t = NULL;
	_cleanup_free_ char *want = NULL;

	root_of("16em64t-4s2c2t-offlines", root, sizeof(root));
	assert_int_equal(topo_load_hwloc(root, &clean, &why), 0);
	want = write_to_string(clean);
	topo_free(clean);
	for (size_t i = 0; i < ARRAY_SIZE(rels); i++) {
		_cleanup_free_ char *got = NULL;

		mutate_write(root, rels[i], "");
		if (topo_load_hwloc(root, &t, &why) < 0)
			fail_msg("%s: refused: %s", rels[i], why.s);
		got = write_to_string(t);
		t = topo_free(t);
		if (strcmp(got, want) != 0)
			fail_msg("%s: another topology:\n%s\nwant\n%s", rels[i], got, want);
		(void)undo_mutations(NULL);
	}
}

/* Heterogeneous ARM: cores of different designs have different
 * cpu_capacity; hwloc ranks its kinds by efficiency and the least capable
 * kind is e-core, the others p-core. The ARM capture gets capacities
 * written in: 2 tiers (big.LITTLE), 3 tiers (Cortex-X, A7x, A5x). */
static void test_topo_load_hwloc_arm_core_kinds_by_capacity(void **state)
{
	static const struct {
		int tiers[3]; /* capacity of CPUs 0-31, 32-63, 64-127 */
		enum topo_core_type want[3];
	} cases[] = {
		{ { 1024, 446, 446 }, { TOPO_CORE_P, TOPO_CORE_E, TOPO_CORE_E } },
		{ { 1024, 870, 300 }, { TOPO_CORE_P, TOPO_CORE_P, TOPO_CORE_E } },
		{ { 300, 1024, 1024 }, { TOPO_CORE_E, TOPO_CORE_P, TOPO_CORE_P } },
		{ { 1024, 1024, 1024 }, { TOPO_CORE_STANDARD, TOPO_CORE_STANDARD,
					  TOPO_CORE_STANDARD } },
	};
	char root[PATH_MAX], rel[96], val[16];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	root_of("128arm-2pa2n8cluster4co", root, sizeof(root));
	for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
		for (int cpu = 0; cpu < 128; cpu++) {
			int tier = cpu < 32 ? 0 : cpu < 64 ? 1 : 2;

			xsnprintf(rel, sizeof(rel), CPUDIR "/cpu%d/cpu_capacity", cpu);
			xsnprintf(val, sizeof(val), "%d\n", cases[k].tiers[tier]);
			mutate_write(root, rel, val);
		}
		if (topo_load_hwloc(root, &t, &why) < 0)
			fail_msg("case %zu: %s", k, why.s);
		for (int i = 0; i < t->n_cpus; i++) {
			int cpu = t->cpus[i].cpu, tier = cpu < 32 ? 0 : cpu < 64 ? 1 : 2;

			if (t->cpus[i].type != cases[k].want[tier])
				fail_msg("case %zu: CPU %d is %s", k, cpu,
					 topo_core_type_name(t->cpus[i].type));
		}
		t = topo_free(t);
		(void)undo_mutations(NULL);
	}
}

/* A NUMA node that is offline (its directory gone) leaves its CPUs in no
 * node: -1, never node 0. */
static void test_topo_load_hwloc_cpus_of_an_offline_node_have_none(void **state)
{
	char root[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	root_of(INTEL, root, sizeof(root));
	mutate_remove(root, "sys/devices/system/node/node0");
	mutate_write(root, "sys/devices/system/node/online", "1\n");
	mutate_write(root, "sys/devices/system/node/has_cpu", "1\n");
	if (topo_load_hwloc(root, &t, &why) < 0)
		fail_msg("%s", why.s);
	for (int i = 0; i < t->n_cpus; i++) {
		int cpu = t->cpus[i].cpu;

		assert_int_equal(t->cpus[i].numa, (cpu % 16) < 8 ? -1 : 1);
	}
	assert_int_equal(t->n_numa, 1);
	topo_free(t);
}

static void test_topo_load_hwloc_rejects(void **state)
{
	const struct corrupt_case *c = *state;
	char root[PATH_MAX];

	root_of(c->capture, root, sizeof(root));
	for (size_t i = 0; i < ARRAY_SIZE(c->steps) && c->steps[i].op; i++) {
		const struct step *s = &c->steps[i];

		switch (s->op) {
		case STEP_WRITE:
			mutate_write(root, s->rel, s->content);
			break;
		case STEP_REMOVE:
			mutate_remove(root, s->rel);
			break;
		case STEP_MKDIR:
			mutate_mkdir(root, s->rel);
			break;
		case STEP_NONE:
			break;
		}
	}
	assert_load_fails(root, c->err, c->why);
}

static void test_topo_load_hwloc_rejects_missing_root(void **state)
{
	char root[PATH_MAX];

	xsnprintf(root, sizeof(root), "%s/does-not-exist", base_dir);
	assert_load_fails(root, -ENOENT, "does-not-exist: No such file");
	xsnprintf(root, sizeof(root), "%s/empty-root", base_dir);
	assert_int_equal(mkdir(root, 0755), 0);
	assert_load_fails(root, -ENOENT, "empty-root/sys/devices/system/cpu: No such file");
	assert_int_equal(rmdir(root), 0);
}

static void test_topo_load_cpuid_dump_rejects_missing_dump(void **state)
{
	struct errbuf why = { "" };
	struct topo *t = NULL;

	assert_int_equal(topo_load_cpuid_dump(base_dir, &t, &why), -ENOENT);
	assert_non_null(strstr(why.s, "/pu0: No such file"));
	assert_null(t);
}

/* ---- JSON ---------------------------------------------------------------------------- */

static const struct topo_cpu small_rows[] = {
	{.cpu = 0, .socket = 0, .numa = 0, .core = 0, .core_id = 0, .l3 = 0},
	{.cpu = 1, .socket = 0, .numa = 0, .core = 1, .core_id = 4, .l3 = 0, .type = TOPO_CORE_E},
	{.cpu = 4, .socket = 0, .numa = 0, .core = 0, .core_id = 0, .l3 = 0, .type = TOPO_CORE_P},
	{.cpu = 3, .socket = 1, .numa = -1, .core = 2, .core_id = 0, .l3 = -1},
};

static void test_topo_write_json_prints_exact_format(void **state)
{
	struct cpuset off = cpus_of("2,5-6");
	struct topo *t = NULL;
	char *s;

	assert_int_equal(topo_build(small_rows, 4, &off, &t, NULL), 0);
	s = write_to_string(t);
	assert_string_equal(
		s, "{\"cpus\": ["
		   "{\"cpu\": 0, \"socket\": 0, \"numa\": 0, \"core\": 0, \"coreId\": 0, \"l3\": 0, "
		   "\"coreType\": \"standard\"}, "
		   "{\"cpu\": 1, \"socket\": 0, \"numa\": 0, \"core\": 1, \"coreId\": 4, \"l3\": 0, "
		   "\"coreType\": \"e-core\"}, "
		   "{\"cpu\": 3, \"socket\": 1, \"numa\": -1, \"core\": 2, \"coreId\": 0, \"l3\": -1, "
		   "\"coreType\": \"standard\"}, "
		   "{\"cpu\": 4, \"socket\": 0, \"numa\": 0, \"core\": 0, \"coreId\": 0, \"l3\": 0, "
		   "\"coreType\": \"p-core\"}], "
		   "\"offline\": \"2,5-6\", \"sockets\": 2, \"numaNodes\": 1, \"cores\": 3, "
		   "\"l3Caches\": 1, \"smtEnabled\": true}\n");
	free(s);
	topo_free(t);

	assert_int_equal(topo_build(small_rows, 1, NULL, &t, NULL), 0);
	s = write_to_string(t);
	assert_non_null(strstr(s, "], \"offline\": \"\", \"sockets\": 1, \"numaNodes\": 1, "
				  "\"cores\": 1, \"l3Caches\": 1, \"smtEnabled\": false}\n"));
	free(s);
	topo_free(t);
}

static void test_topo_write_json_reports_write_error(void **state)
{
	struct topo *t = NULL;
	FILE *f = fopen("/dev/full", "w");

	assert_non_null(f);
	assert_int_equal(setvbuf(f, NULL, _IONBF, 0), 0);
	assert_int_equal(topo_build(small_rows, 4, NULL, &t, NULL), 0);
	assert_int_equal(topo_write_json(t, f), -EIO);
	(void)fclose(f);
	topo_free(t);
}

static void test_topo_parse_json_fills_optional_fields(void **state)
{
	static const char in[] =
		"{\"cpus\": [{\"cpu\": 2, \"socket\": 0, \"numa\": 0, \"core\": 7, \"uncore\": 3},"
		" {\"cpu\": 0, \"socket\": 0, \"numa\": 0, \"core\": 5, \"l3\": -1,"
		"  \"coreType\": \"p-core\"}]}";
	struct errbuf why = { "" };
	struct topo *t = NULL;

	if (topo_parse_json(in, strlen(in), &t, &why) < 0)
		fail_msg("%s", why.s);
	assert_int_equal(t->n_cpus, 2);
	assert_int_equal(t->cpus[0].cpu, 0); /* sorted */
	assert_int_equal(t->cpus[0].core_id, 5);
	assert_int_equal(t->cpus[0].type, TOPO_CORE_P);
	assert_int_equal(topo_cpu(t, 2)->l3, 3);
	assert_int_equal(topo_cpu(t, 2)->core_id, 7);
	assert_int_equal(topo_cpu(t, 2)->type, TOPO_CORE_STANDARD);
	assert_true(cpuset_is_empty(&t->offline));
	assert_int_equal(t->n_l3, 1);
	assert_false(t->smt);
	topo_free(t);
}

static void test_topo_json_round_trips_every_capture(void **state)
{
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(captures); i++) {
		struct json_object *e = expected_entry(captures[i]);
		char root[PATH_MAX];
		struct errbuf why = { "" };
		struct topo *t = NULL, *t2 = NULL;
		char *a, *b;

		capture_root(e, root, sizeof(root));
		r = load_capture(e, root, &t, &why);
		if (r == -EOPNOTSUPP && !hwloc_is_x86) {
			print_message("not round-tripped: %s\n", why.s);
			continue;
		}
		if (r < 0)
			fail_msg("%s: %s", captures[i], why.s);
		a = write_to_string(t);
		if (topo_parse_json(a, strlen(a), &t2, &why) < 0)
			fail_msg("%s: own JSON does not parse: %s\n%s", captures[i], why.s, a);
		b = write_to_string(t2);
		assert_string_equal(a, b);
		assert_int_equal(t2->n_cpus, t->n_cpus);
		assert_memory_equal(t2->cpus, t->cpus, sizeof(*t->cpus) * (size_t)t->n_cpus);
		assert_true(cpuset_equal(&t2->offline, &t->offline));
		free(a);
		free(b);
		topo_free(t);
		topo_free(t2);
	}
}

#define ROW(extra) "{\"cpu\": 0, \"socket\": 0, \"numa\": 0, \"core\": 0, \"l3\": 0" extra "}"
#define DOC(rows, extra) "{\"cpus\": [" rows "]" extra "}"

static void test_topo_parse_json_rejects_bad_input(void **state)
{
	static const struct {
		const char *in;
		int err;
		const char *why;
	} cases[] = {
		{"", -EINVAL, "JSON ends early"},
		{"{\"cpus\": [", -EINVAL, "JSON ends early"},
		{"{\"cpus\": [}", -EINVAL, "JSON syntax error at offset 10"},
		{DOC(ROW(""), "") " x", -EINVAL, "JSON syntax error"},
		{"[]", -EINVAL, "top level must be an object"},
		{"{}", -EINVAL, "missing \"cpus\""},
		{"{\"cpus\": {}}", -EINVAL, "\"cpus\" must be an array"},
		{"{\"cpus\": []}", -EINVAL, "\"cpus\" is empty"},
		{"{\"cpus\": [1]}", -EINVAL, "cpus[0]: must be an object"},
		{DOC(ROW(""), ", \"nodes\": 1"), -EINVAL, "unknown key \"nodes\""},
		{DOC(ROW(", \"die\": 0"), ""), -EINVAL, "cpus[0] (CPU 0): unknown key \"die\""},
		{DOC("{\"socket\": 0}", ""), -EINVAL, "cpus[0]: missing \"cpu\""},
		{DOC("{\"cpu\": 3, \"numa\": 0, \"core\": 0, \"l3\": 0}", ""), -EINVAL,
		 "cpus[0] (CPU 3): missing \"socket\""},
		{DOC("{\"cpu\": 3, \"socket\": 0, \"core\": 0, \"l3\": 0}", ""), -EINVAL,
		 "cpus[0] (CPU 3): missing \"numa\""},
		{DOC("{\"cpu\": 3, \"socket\": 0, \"numa\": 0, \"l3\": 0}", ""), -EINVAL,
		 "cpus[0] (CPU 3): missing \"core\""},
		{DOC("{\"cpu\": 3, \"socket\": 0, \"numa\": 0, \"core\": 0}", ""), -EINVAL,
		 "cpus[0] (CPU 3): missing \"l3\""},
		{DOC("{\"cpu\": \"0\"}", ""), -EINVAL, "cpus[0]: \"cpu\" must be an integer"},
		{DOC("{\"cpu\": 1.5}", ""), -EINVAL, "cpus[0]: \"cpu\" must be an integer"},
		{DOC("{\"cpu\": 1e2}", ""), -EINVAL, "cpus[0]: \"cpu\" must be an integer"},
		{DOC("{\"cpu\": NaN}", ""), -EINVAL, "cpus[0]: \"cpu\" must be an integer"},
		{DOC("{\"cpu\": true}", ""), -EINVAL, "cpus[0]: \"cpu\" must be an integer"},
		{DOC("{\"cpu\": 8192}", ""), -EINVAL, "cpus[0]: \"cpu\" 8192 out of range 0-8191"},
		{DOC("{\"cpu\": -1}", ""), -EINVAL, "\"cpu\" -1 out of range"},
		{DOC("{\"cpu\": 99999999999999999999}", ""), -EINVAL, "\"cpu\" 9223372036854775807 out"},
		{DOC("{\"cpu\": 1, \"socket\": -2, \"numa\": 0, \"core\": 0, \"l3\": 0}", ""), -EINVAL,
		 "cpus[0] (CPU 1): \"socket\" -2 out of range -1-2147483647"},
		{DOC("{\"cpu\": 1, \"socket\": 0, \"numa\": 2147483648, \"core\": 0, \"l3\": 0}", ""),
		 -EINVAL, "(CPU 1): \"numa\" 2147483648 out of range"},
		{DOC("{\"cpu\": 1, \"socket\": 0, \"numa\": 0, \"core\": 8192, \"l3\": 0}", ""), -EINVAL,
		 "(CPU 1): \"core\" 8192 out of range 0-8191"},
		{DOC(ROW(", \"coreId\": -1"), ""), -EINVAL, "(CPU 0): \"coreId\" -1 out of range"},
		{DOC(ROW(", \"coreId\": null"), ""), -EINVAL, "(CPU 0): \"coreId\" must be an integer"},
		{DOC(ROW(", \"uncore\": 0"), ""), -EINVAL, "(CPU 0): both \"l3\" and its alias"},
		{DOC(ROW(", \"coreType\": \"big\""), ""), -EINVAL, "(CPU 0): \"coreType\" must be"},
		{DOC(ROW(", \"coreType\": 1"), ""), -EINVAL, "(CPU 0): \"coreType\" must be"},
		{DOC(ROW("") "," ROW(""), ""), -EINVAL, "cpus[1]: CPU 0 listed twice"},
		{DOC(ROW("") ", {\"cpu\": 1, \"socket\": 1, \"numa\": 0, \"core\": 0, \"l3\": 0}", ""),
		 -EINVAL, "CPUs 0 and 1 share core 0 but not socket/NUMA node"},
		{DOC(ROW(""), ", \"offline\": \"1-\""), -EINVAL, "\"offline\": "},
		{DOC(ROW(""), ", \"offline\": \"8192\""), -E2BIG, "\"offline\": "},
		{DOC(ROW(""), ", \"offline\": [1]"), -EINVAL, "\"offline\" must be a CPU list string"},
		{DOC(ROW(""), ", \"offline\": \"0-1\""), -EINVAL, "both online and offline"},
		{DOC(ROW(""), ", \"sockets\": 2"), -EINVAL, "\"sockets\" is 2 but the CPUs give 1"},
		{DOC(ROW(""), ", \"numaNodes\": 0"), -EINVAL, "\"numaNodes\" is 0 but the CPUs give 1"},
		{DOC(ROW(""), ", \"cores\": 2"), -EINVAL, "\"cores\" is 2 but the CPUs give 1"},
		{DOC(ROW(""), ", \"l3Caches\": 0"), -EINVAL, "\"l3Caches\" is 0 but the CPUs give 1"},
		{DOC(ROW(""), ", \"cores\": -1"), -EINVAL, "\"cores\" -1 out of range"},
		{DOC(ROW(""), ", \"smtEnabled\": true"), -EINVAL,
		 "\"smtEnabled\" is true but the CPUs give false"},
		{DOC(ROW(""), ", \"smtEnabled\": 1"), -EINVAL, "\"smtEnabled\" must be true or false"},
		{"{\"cpus\": [[[[[[[[1]]]]]]]]}", -E2BIG, "JSON nested deeper than 4 levels"},
		{DOC("{\"cpu\": {\"a\": [1]}}", ""), -E2BIG, "JSON nested deeper than 4 levels"},
		{DOC("{\"cpu\": {\"a\": 1}}", ""), -EINVAL, "\"cpu\" must be an integer"},
		{"{\"cpus\": [{\"cpu\": \"\xff\"}]}", -EINVAL, "JSON syntax error"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct errbuf why = { "" };
		struct topo *t = NULL;
		int r = topo_parse_json(cases[i].in, strlen(cases[i].in), &t, &why);

		if (r != cases[i].err || !strstr(why.s, cases[i].why))
			fail_msg("case %zu %s: got %d '%s', want %d '%s'", i, cases[i].in, r, why.s,
				 cases[i].err, cases[i].why);
		assert_null(t);
	}
}

static void test_topo_parse_json_rejects_nul_byte(void **state)
{
	static const char in[] = DOC(ROW(""), "") "\0";
	struct errbuf why = { "" };
	struct topo *t = NULL;

	assert_int_equal(topo_parse_json(in, sizeof(in) - 1, &t, &why), -EINVAL);
	assert_non_null(strstr(why.s, "NUL byte at offset"));
	assert_null(t);
}

static void test_topo_parse_json_rejects_oversized_input(void **state)
{
	size_t len = (16u << 20) + 1;
	char *big = malloc(len);
	struct errbuf why = { "" };
	struct topo *t = NULL;

	assert_non_null(big);
	memset(big, ' ', len);
	assert_int_equal(topo_parse_json(big, len, &t, &why), -E2BIG);
	assert_non_null(strstr(why.s, "more than 16777216"));
	free(big);
}

static void test_topo_parse_json_rejects_more_than_8192_cpus(void **state)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	struct errbuf why = { "" };
	struct topo *t = NULL;

	assert_non_null(f);
	fputs("{\"cpus\": [", f);
	for (int i = 0; i <= 8192; i++)
		fprintf(f, "%s{\"cpu\": %d, \"socket\": 0, \"numa\": 0, \"core\": 0, \"l3\": 0}",
			i ? ", " : "", i);
	fputs("]}", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(topo_parse_json(buf, size, &t, &why), -E2BIG);
	assert_non_null(strstr(why.s, "\"cpus\" has 8193 entries, more than 8192"));
	free(buf);
}

static void test_topo_load_json_file_names_the_file(void **state)
{
	char path[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	xsnprintf(path, sizeof(path), "%s/bad.json", base_dir);
	write_file(path, "{\"cpus\": 1}", 11);
	assert_int_equal(topo_load_json_file(path, &t, &why), -EINVAL);
	assert_non_null(strstr(why.s, "bad.json: \"cpus\" must be an array"));
	xsnprintf(path, sizeof(path), "%s/none.json", base_dir);
	assert_int_equal(topo_load_json_file(path, &t, &why), -ENOENT);
	assert_non_null(strstr(why.s, "none.json: No such file"));
	assert_null(t);
}

static void test_topo_load_json_file_rejects_oversized_file(void **state)
{
	char path[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	xsnprintf(path, sizeof(path), "%s/huge.json", base_dir);
	write_file(path, "", 0);
	assert_int_equal(truncate(path, (16 << 20) + 1), 0);
	assert_int_equal(topo_load_json_file(path, &t, &why), -E2BIG);
	assert_non_null(strstr(why.s, "huge.json: more than 16777216 bytes"));
	assert_int_equal(unlink(path), 0);
}

/* A FIFO where the topology file belongs is refused at once, not read
 * (which would block until a writer came). */
static void test_topo_load_json_file_refuses_a_fifo(void **state)
{
	char path[PATH_MAX];
	struct errbuf why = { "" };
	struct topo *t = NULL;

	xsnprintf(path, sizeof(path), "%s/fifo.json", base_dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(topo_load_json_file(path, &t, &why), -EINVAL);
	assert_non_null(strstr(why.s, "fifo.json: is a FIFO"));
	assert_null(t);
	assert_int_equal(unlink(path), 0);
}

/* test/data/topo/synthetic-1024.json: 4 sockets x 2 NUMA x 64 cores x 2
 * threads, siblings N and N+512 (gen_topology.py). */
static void test_topo_load_json_file_loads_1024_cpus(void **state)
{
	struct errbuf why = { "" };
	struct topo *t = NULL;
	char *a;

	if (topo_load_json_file(TOPO_DATA "/synthetic-1024.json", &t, &why) < 0)
		fail_msg("%s", why.s);
	assert_int_equal(t->n_cpus, 1024);
	assert_int_equal(t->n_sockets, 4);
	assert_int_equal(t->n_numa, 8);
	assert_int_equal(t->n_cores, 512);
	assert_int_equal(t->n_l3, 8);
	assert_true(t->smt);
	assert_true(cpuset_is_empty(&t->offline));
	for (int cpu = 0; cpu < 512; cpu++) {
		const struct topo_cpu *a0 = topo_cpu(t, cpu), *b0 = topo_cpu(t, cpu + 512);

		assert_int_equal(a0->core, b0->core);
		assert_int_equal(a0->socket, cpu / 128);
		assert_int_equal(a0->numa, cpu / 64);
		assert_int_equal(a0->core_id, cpu % 128);
	}
	/* The fixture is what we print. */
	{
		FILE *f = fopen(TOPO_DATA "/synthetic-1024.json", "r");
		char *line = NULL;
		size_t cap = 0;

		assert_non_null(f);
		assert_true(getline(&line, &cap, f) > 0);
		a = write_to_string(t);
		assert_string_equal(a, line);
		free(a);
		free(line);
		(void)fclose(f);
	}
	topo_free(t);
}

static void test_topo_load_json_file_loads_384_cpus(void **state)
{
	struct errbuf why = { "" };
	struct topo *t = NULL;

	if (topo_load_json_file(TOPO_DATA "/synthetic-384.json", &t, &why) < 0)
		fail_msg("%s", why.s);
	assert_int_equal(t->n_cpus, 384);
	assert_int_equal(t->n_sockets, 2);
	assert_int_equal(t->n_numa, 2);
	assert_int_equal(t->n_cores, 192);
	assert_true(t->smt);
	assert_int_equal(topo_cpu(t, 7)->core, topo_cpu(t, 7 + 192)->core);
	assert_int_equal(topo_cpu(t, 96)->socket, 1);
	topo_free(t);
}

/* ---- setup --------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	char path[PATH_MAX];

	xsnprintf(path, sizeof(path), "%s/expected.json", topo_dir());
	expected = json_object_from_file(path);
	if (!expected) {
		fprintf(stderr, "topo_test: cannot read %s (set TOPO_DIR)\n", path);
		return -1;
	}
	/* The captures are ~25k small files: on tmpfs unless TMPDIR says otherwise. */
	if (getenv("TMPDIR") && *getenv("TMPDIR"))
		xsnprintf(base_dir, sizeof(base_dir), "%s/topo-test.XXXXXX", getenv("TMPDIR"));
	else if (access("/dev/shm", W_OK) == 0)
		xsnprintf(base_dir, sizeof(base_dir), "/dev/shm/topo-test.XXXXXX");
	else
		xsnprintf(base_dir, sizeof(base_dir), "/tmp/topo-test.XXXXXX");
	if (!mkdtemp(base_dir))
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(captures); i++) {
		xsnprintf(path, sizeof(path), "%s/%s", topo_dir(), captures[i]);
		if (run((const char *const[]){"tar", "-xjf", path, "-C", base_dir, NULL}) < 0) {
			fprintf(stderr, "topo_test: cannot extract %s\n", path);
			return -1;
		}
	}
	return 0;
}

static int group_teardown(void **state)
{
	rm_rf(base_dir);
	(void)json_object_put(expected);
	return 0;
}

int main(void)
{
	static const struct CMUnitTest others[] = {
		cmocka_unit_test(test_topo_every_capture_is_tested),
		cmocka_unit_test(test_topo_json_round_trips_every_capture),
		cmocka_unit_test_teardown(test_topo_load_hwloc_reads_e_cores_from_cpu_atom, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_per_cpu_files_fall_back, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_empty_per_cpu_online_falls_back,
					  undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_arm_core_kinds_by_capacity,
					  undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_cpus_of_an_offline_node_have_none,
					  undo_mutations),
		cmocka_unit_test(test_topo_load_hwloc_live_machine_has_cpus),
		cmocka_unit_test(test_topo_load_hwloc_restores_environment),
		cmocka_unit_test(test_topo_load_hwloc_rejects_missing_root),
		cmocka_unit_test(test_topo_load_cpuid_dump_rejects_missing_dump),
		cmocka_unit_test(test_topo_write_json_prints_exact_format),
		cmocka_unit_test(test_topo_write_json_reports_write_error),
		cmocka_unit_test(test_topo_parse_json_fills_optional_fields),
		cmocka_unit_test(test_topo_parse_json_rejects_bad_input),
		cmocka_unit_test(test_topo_parse_json_rejects_nul_byte),
		cmocka_unit_test(test_topo_parse_json_rejects_oversized_input),
		cmocka_unit_test(test_topo_parse_json_rejects_more_than_8192_cpus),
		cmocka_unit_test(test_topo_load_json_file_names_the_file),
		cmocka_unit_test(test_topo_load_json_file_rejects_oversized_file),
		cmocka_unit_test(test_topo_load_json_file_refuses_a_fifo),
		cmocka_unit_test(test_topo_load_json_file_loads_1024_cpus),
		cmocka_unit_test(test_topo_load_json_file_loads_384_cpus),
	};
	enum {
		N_CAPTURES = ARRAY_SIZE(captures),
		N_CORRUPT = ARRAY_SIZE(corrupt_cases),
		N = N_CAPTURES + N_CORRUPT + ARRAY_SIZE(others)
	};
	static char names[N_CAPTURES + N_CORRUPT][96];
	struct CMUnitTest tests[N];

	/* One test per capture and per damaged capture, named after its row. */
	for (size_t i = 0; i < N_CAPTURES; i++) {
		xsnprintf(names[i], sizeof(names[i]), "test_topo_load_capture_matches_expected(%s)",
			 captures[i]);
		tests[i] = (struct CMUnitTest){
			.name = names[i],
			.test_func = test_topo_load_capture_matches_expected,
			.initial_state = (void *)captures[i],
		};
	}
	for (size_t i = 0; i < N_CORRUPT; i++) {
		size_t k = N_CAPTURES + i;

		xsnprintf(names[k], sizeof(names[k]), "test_topo_load_hwloc_rejects(%s)",
			  corrupt_cases[i].name);
		tests[k] = (struct CMUnitTest){
			.name = names[k],
			.test_func = test_topo_load_hwloc_rejects,
			.teardown_func = undo_mutations,
			.initial_state = (void *)&corrupt_cases[i],
		};
	}
	memcpy(&tests[N_CAPTURES + N_CORRUPT], others, sizeof(others));
	/* cmocka_run_group_tests() only takes arrays of static size. */
	return _cmocka_run_group_tests("topo", tests, N, group_setup, group_teardown);
}
