/* Device enumeration per mode. See devices.h for the naming contract. */
#include "core/devices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rtbudget.h"
#include "lib/errbuf.h"
#include "lib/num.h"

struct devices *devices_free(struct devices *d)
{
	if (!d)
		return NULL;
	for (int i = 0; i < d->n; i++)
		free(d->v[i].cpus);
	free(d->v);
	free(d);
	return NULL;
}

/* The kernel's flags for one CPU. */
static unsigned isol_flags(const struct isol *iso, int cpu)
{
	return (cpuset_has(&iso->domain, cpu) ? DEVICE_ISOL_DOMAIN : 0) |
	       (cpuset_has(&iso->nohz_full, cpu) ? DEVICE_ISOL_NOHZ_FULL : 0) |
	       (cpuset_has(&iso->managed_irq, cpu) ? DEVICE_ISOL_MANAGED_IRQ : 0);
}

/* A device of one CPU (s), with that CPU's topology and isolation (d's);
 * the name is the caller's. */
static void one_cpu(struct device *dev, const struct devices *d, enum device_kind kind,
		    const struct topo_cpu *s)
{
	memset(dev, 0, sizeof(*dev));
	dev->kind = kind;
	dev->id = s->cpu;
	dev->n_cpus = 1;
	dev->numa = s->numa;
	dev->socket = s->socket;
	dev->core_id = s->core_id;
	dev->l3 = s->l3;
	dev->type = s->type;
	dev->isolated = cpuset_has(&d->isol.isolated, s->cpu);
	dev->isol_flags = dev->isolated ? isol_flags(&d->isol, s->cpu) : 0;
}

static int build_individual(struct devices *d, const struct topo *t)
{
	/* next[i]: position of the next CPU of the same core as cpus[i], -1. */
	_cleanup_free_ int *next = malloc(sizeof(int) * (size_t)t->n_cpus);
	_cleanup_free_ int *last = malloc(sizeof(int) * CPUSET_MAX);
	struct cpuset done;
	int n = 0;

	if (!next || !last)
		return -ENOMEM;
	for (int i = 0; i < CPUSET_MAX; i++)
		last[i] = -1;
	for (int i = t->n_cpus - 1; i >= 0; i--) {
		next[i] = last[t->cpus[i].core];
		last[t->cpus[i].core] = i;
	}
	cpuset_zero(&done);
	CPUSET_FOREACH(cpu, &d->allocatable)
	{
		if (cpuset_has(&done, cpu))
			continue;
		/* The CPU, then its siblings: the allocatable CPUs of its core not
		 * yet emitted, ascending. cpu is the lowest such, so it comes first. */
		for (int i = t->index[cpu]; i >= 0; i = next[i]) {
			const struct topo_cpu *s = &t->cpus[i];
			struct device *dev;

			if (!cpuset_has(&d->allocatable, s->cpu) || cpuset_has(&done, s->cpu))
				continue;
			cpuset_set(&done, s->cpu);
			dev = &d->v[n];
			one_cpu(dev, d, DEVICE_CPU, s);
			(void)snprintf(dev->name, sizeof(dev->name), "cpudev%03d", n);
			n++;
		}
	}
	d->n = n;
	return 0;
}

/* The group of a CPU. CPUs the kernel puts in no NUMA node (their node is
 * offline, or the node directory is missing) are group -1, never node 0:
 * publishing them as node 0 would send NUMA-aligned claims to CPUs that are
 * not on it. A socket of -1 (no package at all) stays socket 0: the machine
 * then has one. */
static int group_key(const struct topo_cpu *c, enum device_kind kind)
{
	if (kind == DEVICE_NUMA)
		return c->numa < 0 ? -1 : c->numa;
	if (kind == DEVICE_SOCKET)
		return c->socket < 0 ? 0 : c->socket;
	return 0;
}

/* Ascending, -1 (no NUMA node) last so that the node devices keep their places. */
static int cmp_group(const void *a, const void *b)
{
	unsigned x = (unsigned)*(const int *)a, y = (unsigned)*(const int *)b;

	return (x > y) - (x < y);
}

static void group_name(struct device *dev, enum device_kind kind, int id, bool iso)
{
	const char *p = iso ? "cpuiso" : "cpudev";

	if (kind == DEVICE_NUMA && id < 0)
		(void)snprintf(dev->name, sizeof(dev->name), "%snonuma", p);
	else if (kind == DEVICE_NUMA)
		(void)snprintf(dev->name, sizeof(dev->name), "%snuma%03d", p, id);
	else if (kind == DEVICE_SOCKET)
		(void)snprintf(dev->name, sizeof(dev->name), "%ssocket%03d", p, id);
	else
		(void)snprintf(dev->name, sizeof(dev->name), "%smachine", p);
}

/* One device per group of the CPUs in set (the ordinary or the isolated
 * allocatable CPUs), appended in group order. */
static int build_groups(struct devices *d, const struct topo *t, const struct cpuset *set,
			bool iso)
{
	/* Group ids ascending. Package ids can be large (8442 on a Kunpeng 920),
	 * so collect and sort them rather than index a bitmap. */
	_cleanup_free_ int *ids = malloc(sizeof(int) * (size_t)t->n_cpus);
	int n_ids = 0, n_groups = 0;
	struct device *v;

	if (!ids)
		return -ENOMEM;
	for (int i = 0; i < t->n_cpus; i++)
		if (cpuset_has(set, t->cpus[i].cpu))
			ids[n_ids++] = group_key(&t->cpus[i], d->kind);
	qsort(ids, (size_t)n_ids, sizeof(*ids), cmp_group);
	for (int k = 0; k < n_ids; k++)
		n_groups += k == 0 || ids[k - 1] != ids[k];
	if (n_groups == 0)
		return 0;
	/* Room for the groups alone: a node of 1024 CPUs has a handful. */
	v = realloc(d->v, sizeof(*v) * (size_t)(d->n + n_groups));
	if (!v)
		return -ENOMEM;
	d->v = v;
	memset(&d->v[d->n], 0, sizeof(*v) * (size_t)n_groups);
	for (int k = 0; k < n_ids; k++) {
		struct device *dev = &d->v[d->n];
		int id = ids[k];

		if (k > 0 && ids[k - 1] == id)
			continue;
		dev->cpus = calloc(1, sizeof(*dev->cpus));
		if (!dev->cpus)
			return -ENOMEM;
		d->n++;
		dev->kind = d->kind;
		dev->id = id;
		dev->numa = dev->socket = -1;
		dev->l3 = -1;
		dev->isolated = iso;
		dev->isol_flags = iso ? ~0u : 0;
		for (int i = 0; i < t->n_cpus; i++) {
			const struct topo_cpu *c = &t->cpus[i];

			if (group_key(c, d->kind) != id || !cpuset_has(set, c->cpu))
				continue;
			if (!dev->n_cpus++ && d->kind != DEVICE_MACHINE) {
				dev->socket = c->socket < 0 ? 0 : c->socket;
				if (d->kind == DEVICE_NUMA)
					dev->numa = id; /* -1: no NUMA attributes */
			}
			cpuset_set(dev->cpus, c->cpu);
			if (iso)
				dev->isol_flags &= isol_flags(&d->isol, c->cpu);
		}
		group_name(dev, d->kind, id, iso);
	}
	return 0;
}

int devices_build(const struct topo *t, const struct cpuset *reserved, int mode, int group_by,
		  struct devices **ret)
{
	return devices_build_isol(t, reserved, NULL, mode, group_by, ret);
}

int devices_build_isol(const struct topo *t, const struct cpuset *reserved,
		       const struct isol *isol, int mode, int group_by, struct devices **ret)
{
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset ordinary;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->allocatable = t->online;
	if (reserved)
		cpuset_andnot(&d->allocatable, &d->allocatable, reserved);
	if (cpuset_is_empty(&d->allocatable))
		return -EINVAL;
	if (isol)
		d->isol = *isol;
	cpuset_and(&d->isolated, &d->allocatable, &d->isol.isolated);
	cpuset_andnot(&ordinary, &d->allocatable, &d->isolated);
	d->smt = t->smt;
	if (mode == DEVICES_INDIVIDUAL) {
		d->kind = DEVICE_CPU;
		d->v = calloc((size_t)cpuset_count(&d->allocatable), sizeof(*d->v));
		if (!d->v)
			return -ENOMEM;
		r = build_individual(d, t);
	} else {
		d->kind = group_by == DEVICES_BY_SOCKET	  ? DEVICE_SOCKET
			  : group_by == DEVICES_BY_MACHINE ? DEVICE_MACHINE
							  : DEVICE_NUMA;
		r = build_groups(d, t, &ordinary, false);
		if (r == 0)
			r = build_groups(d, t, &d->isolated, true);
	}
	if (r < 0)
		return r;
	*ret = TAKE_PTR(d);
	return 0;
}

int devices_add_rt(struct devices *d, const struct topo *t, const struct cpuset *rt,
		   int64_t capacity_milli)
{
	int n = cpuset_count(rt);
	struct device *v;

	if (d->n_rt || !cpuset_is_subset(rt, &t->online) || cpuset_intersects(rt, &d->allocatable) ||
	    capacity_milli <= 0)
		return -EINVAL;
	CPUSET_FOREACH(cpu, rt)
	if (!topo_cpu(t, cpu))
		return -EINVAL;
	if (n == 0)
		return 0;
	v = realloc(d->v, sizeof(*v) * (size_t)(d->n + n));
	if (!v)
		return -ENOMEM;
	d->v = v;
	CPUSET_FOREACH(cpu, rt)
	{
		const struct topo_cpu *s = topo_cpu(t, cpu);
		struct device *dev = &d->v[d->n++];

		one_cpu(dev, d, DEVICE_RT, s);
		(void)snprintf(dev->name, sizeof(dev->name), "cpurt%03d", cpu);
		dev->rt_capacity_milli = capacity_milli;
	}
	d->n_rt = n;
	d->rt = *rt;
	return 0;
}

int devices_set_rt_capacity(struct devices *d, int64_t capacity_milli)
{
	if (capacity_milli <= 0)
		return -EINVAL;
	for (int i = d->n - d->n_rt; i < d->n; i++)
		d->v[i].rt_capacity_milli = capacity_milli;
	return 0;
}

void devices_replace(struct devices *d, struct devices *with)
{
	struct devices old = *d;

	*d = *with;
	*with = old;
	(void)devices_free(with);
}

/* cpurtNNN: the CPU id, at least 3 digits, no sign, no leading junk. */
static const struct device *find_rt(const struct devices *d, const char *name)
{
	int cpu;

	if (strlen(name) < 8 || name[5] < '0' || name[5] > '9')
		return NULL;
	if (num_parse_int(name + 5, NULL, 0, CPUSET_MAX - 1, &cpu) < 0 ||
	    !cpuset_has(&d->rt, cpu))
		return NULL;
	for (int i = d->n - d->n_rt; i < d->n; i++)
		if (d->v[i].id == cpu && !strcmp(d->v[i].name, name))
			return &d->v[i];
	return NULL;
}

const struct device *devices_find(const struct devices *d, const char *name)
{
	if (!strncmp(name, "cpurt", 5))
		return find_rt(d, name);
	if (d->kind == DEVICE_CPU) {
		int i;

		/* cpudevNNN: at least 3 digits, no sign, no leading junk. */
		if (strncmp(name, "cpudev", 6) != 0 || strlen(name) < 9 || name[6] < '0' ||
		    name[6] > '9')
			return NULL;
		if (d->n - d->n_rt < 1 ||
		    num_parse_int(name + 6, NULL, 0, d->n - d->n_rt - 1, &i) < 0 ||
		    strcmp(d->v[i].name, name) != 0)
			return NULL;
		return &d->v[i];
	}
	for (int i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].name, name))
			return &d->v[i];
	return NULL;
}

void device_cpus(const struct device *dev, struct cpuset *ret)
{
	if (dev->cpus) {
		*ret = *dev->cpus;
		return;
	}
	cpuset_zero(ret);
	cpuset_set(ret, dev->id);
}

int devices_build_node(const struct topo *t, const struct cpuset *reserved,
		       const struct cpuset *rt_cpus, const struct isol *isol, int mode,
		       int group_by, const struct rt_limits *rt, struct devices **ret)
{
	_cleanup_(devices_freep) struct devices *d = NULL;
	struct cpuset off;
	int r;

	cpuset_zero(&off);
	if (reserved)
		cpuset_or(&off, &off, reserved);
	if (rt_cpus)
		cpuset_or(&off, &off, rt_cpus);
	r = devices_build_isol(t, &off, isol, mode, group_by, &d);
	if (r < 0)
		return r;
	if (rt && rt_cpus && !cpuset_is_empty(rt_cpus)) {
		r = devices_add_rt(d, t, rt_cpus, rt->capacity_milli);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(d);
	return 0;
}

int devices_smt_layout(const struct topo *t, char *buf, size_t size)
{
	/* a CPU's sibling, or -1; strides of the pairs seen, ascending */
	_cleanup_free_ int *sib = NULL;
	struct cpuset single, done;
	size_t len = 0;
	int max = -1, r;

	for (int i = 0; i < t->n_cpus; i++)
		max = t->cpus[i].cpu > max ? t->cpus[i].cpu : max;
	sib = malloc(sizeof(*sib) * (size_t)(max + 1));
	if (!sib)
		return -ENOMEM;
	for (int c = 0; c <= max; c++)
		sib[c] = -1;
	cpuset_zero(&single);
	for (int i = 0; i < t->n_cpus; i++) {
		const struct topo_cpu *a = &t->cpus[i];
		int n = 0;

		for (int j = 0; j < t->n_cpus; j++) {
			if (j == i || t->cpus[j].core != a->core)
				continue;
			if (++n > 1)
				return -EOPNOTSUPP;
			sib[a->cpu] = t->cpus[j].cpu;
		}
		if (!n)
			cpuset_set(&single, a->cpu);
	}
	cpuset_zero(&done);
	buf[0] = '\0';
	for (;;) {
		struct cpuset set;
		int stride = INT32_MAX;
		char list[4096];

		/* the smallest stride not written yet */
		for (int c = 0; c <= max; c++)
			if (sib[c] > c && !cpuset_has(&done, c) && sib[c] - c < stride)
				stride = sib[c] - c;
		if (stride == INT32_MAX)
			break;
		cpuset_zero(&set);
		for (int c = 0; c <= max; c++)
			if (sib[c] > c && sib[c] - c == stride) {
				cpuset_set(&set, c);
				cpuset_set(&set, sib[c]);
				cpuset_set(&done, c);
			}
		r = cpuset_format(&set, list, sizeof(list));
		if (r < 0)
			return r;
		r = snprintf(buf + len, size - len, "%s%s>%d", len ? ";" : "", list, stride);
		if (r < 0 || (size_t)r >= size - len)
			return -E2BIG;
		len += (size_t)r;
	}
	if (!cpuset_is_empty(&single)) {
		char list[4096];

		r = cpuset_format(&single, list, sizeof(list));
		if (r < 0)
			return r;
		r = snprintf(buf + len, size - len, "%s%s", len ? ";" : "", list);
		if (r < 0 || (size_t)r >= size - len)
			return -E2BIG;
		len += (size_t)r;
	}
	return (int)len;
}

int devices_external_layout(const struct topo *t, const struct devices *d, char *buf,
			    size_t size, struct errbuf *eb)
{
	char ids[DEVICES_STRING_MAX + 1];
	int r = devices_smt_layout(t, buf, size);

	if (r == -EOPNOTSUPP)
		return errbuf_fail(eb, r, "a core has three or more CPUs: dra.cpu/smtLayout "
					  "cannot say it");
	if (r < 0 || r > DEVICES_STRING_MAX)
		return errbuf_fail(eb, -E2BIG, "the SMT layout of this node is longer than %d "
					      "bytes", DEVICES_STRING_MAX);
	for (int i = 0; i < d->n; i++) {
		struct cpuset cpus;

		if (d->v[i].kind == DEVICE_CPU || d->v[i].kind == DEVICE_RT)
			continue;
		device_cpus(&d->v[i], &cpus);
		if (cpuset_format(&cpus, ids, sizeof(ids)) < 0)
			return errbuf_fail(eb, -E2BIG,
					   "the CPU list of device %s is longer than %d bytes: "
					   "group by a smaller unit",
					   d->v[i].name, DEVICES_STRING_MAX);
	}
	return 0;
}
