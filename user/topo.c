/* CPU topology model: validation and derived facts (topo_build), plus the
 * loaders and the JSON printer. See topo.h for the invariants. */
#include "topo.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *why, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *why, int r, const char *fmt, ...)
{
	va_list ap;

	if (why) {
		va_start(ap, fmt);
		(void)vsnprintf(why, TOPO_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return r;
}

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
	       struct topo **ret, char *why)
{
	_cleanup_(topo_freep) struct topo *t = NULL;
	int max_core = -1;

	if (n <= 0)
		return fail(why, -EINVAL, "no online CPUs");
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cpus = malloc(sizeof(*t->cpus) * (size_t)n);
	if (!t->cpus)
		return -ENOMEM;
	memcpy(t->cpus, cpus, sizeof(*t->cpus) * (size_t)n);
	qsort(t->cpus, (size_t)n, sizeof(*t->cpus), cmp_cpu);
	t->n_cpus = n;

	for (int i = 0; i < n; i++) {
		const struct topo_cpu *c = &t->cpus[i];

		if (c->cpu < 0 || c->cpu >= CPUSET_MAX)
			return fail(why, -EINVAL, "CPU id %d out of range 0-%d", c->cpu,
				    CPUSET_MAX - 1);
		if (cpuset_has(&t->online, c->cpu))
			return fail(why, -EINVAL, "CPU %d listed twice", c->cpu);
		if (c->core < 0 || c->core >= CPUSET_MAX)
			return fail(why, -EINVAL, "CPU %d: core %d out of range 0-%d", c->cpu,
				    c->core, CPUSET_MAX - 1);
		if (c->numa < -1 || c->socket < -1 || c->l3 < -1)
			return fail(why, -EINVAL, "CPU %d: negative id other than -1", c->cpu);
		if (c->type > TOPO_CORE_E)
			return fail(why, -EINVAL, "CPU %d: bad core type", c->cpu);
		cpuset_set(&t->online, c->cpu);
		if (c->core > max_core)
			max_core = c->core;
	}
	if (offline) {
		if (cpuset_intersects(offline, &t->online))
			return fail(why, -EINVAL, "a CPU is listed both online and offline");
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
				return fail(why, -EINVAL,
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
