/* kubelet-exact CPU allocation. See allocator.h for the contract and
 * docs/allocation.md (§n below) for the rules; allocator_priv.h for the
 * representation. This file is the accumulator of a run, kubelet's orders,
 * the packed taker and the policy; allocator_view.c builds the view and
 * allocator_distributed.c is the distributed taker.
 */
#include "core/allocator.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "core/allocator_priv.h"

/* ---- the accumulator -------------------------------------------------------------------- */

static int unit_size(const struct alloc_topo *t, int kind, int u)
{
	return t->k[kind].off[u + 1] - t->k[kind].off[u];
}

void alloc_acc_init(const struct alloc_topo *t, struct acc *s, const struct cpuset *available,
		    int need)
{
	int *cell_cnt = t->sc->cell_cnt;

	cpuset_and(&s->avail, available, &t->all);
	cpuset_zero(&s->result);
	s->need = need;
	/* Count per cell (siblings sit far apart, so increments rarely chain),
	 * then sum the cells of each unit and pair in a register. */
	memset(cell_cnt, 0, sizeof(int) * (size_t)t->n_cells);
	for (int w = 0; w <= (t->slot_len - 1) / 64; w++)
		for (uint64_t word = s->avail.w[w]; word; word &= word - 1)
			cell_cnt[t->cell[t->slot[w * 64 + __builtin_ctzll(word)]]]++;
	for (int l = 0; l < t->n_live; l++) {
		int i = t->live[l], nt = n_targets(t, i);
		const int *off = t->agg_off[i], *list = t->agg_list[i];

		for (int u = 0; u < nt; u++) {
			int sum = 0;

			for (int j = off[u]; j < off[u + 1]; j++)
				sum += cell_cnt[list[j]];
			s->cnt[i][u] = sum;
		}
	}
}

static void take_slot(const struct alloc_topo *t, struct acc *s, int slot)
{
	const struct slotinfo *si = &t->si[slot];
	int cpu = t->cpu[slot];

	if (!cpuset_has(&s->avail, cpu))
		return;
	cpuset_clear(&s->avail, cpu);
	cpuset_set(&s->result, cpu);
	s->need--;
	if (t->cells_are_cores)
		s->cnt[K_CORE][si->ix[K_CORE]]--;
	for (int l = 0; l < t->n_live; l++)
		s->cnt[t->live[l]][si->ix[t->live[l]]]--;
}

/* Takes the available CPUs of a unit (all of them when it is free). */
static void take_unit(const struct alloc_topo *t, struct acc *s, int kind, int u)
{
	const struct kind *k = &t->k[kind];

	for (int i = k->off[u]; i < k->off[u + 1]; i++)
		take_slot(t, s, k->list[i]);
}

/* ---- orders (§2) ------------------------------------------------------------------------ */

/* Sorts dense indices by (available count, index) ascending. Long lists arrive
 * in ascending index order, which the passes below keep for ties. Cores mostly
 * share one or two counts: a pass per distinct count beats a counting sort,
 * whose bucket increments would all hit the same counter in a row. */
static void sort_by_count(const struct alloc_topo *t, int *a, int n, const int *cnt, int kind)
{
	struct scratch *sc = t->sc;
	int lo, hi, m = 0;

	if (n < 2)
		return;
	if (n <= 16) {
		for (int i = 1; i < n; i++) {
			int x = a[i], j = i;

			while (j > 0 && (cnt[a[j - 1]] > cnt[x] ||
					 (cnt[a[j - 1]] == cnt[x] && a[j - 1] > x))) {
				a[j] = a[j - 1];
				j--;
			}
			a[j] = x;
		}
		return;
	}
	lo = hi = cnt[a[0]];
	for (int i = 1; i < n; i++) {
		int c = cnt[a[i]];

		lo = c < lo ? c : lo;
		hi = c > hi ? c : hi;
	}
	if (lo == hi)
		return;
	if (hi - lo <= 8) {
		for (int c = lo; c <= hi; c++)
			for (int i = 0; i < n; i++)
				if (cnt[a[i]] == c)
					sc->tmp[m++] = a[i];
	} else {
		memset(sc->bucket, 0, sizeof(int) * ((size_t)t->k[kind].maxsize + 1));
		for (int i = 0; i < n; i++)
			sc->bucket[cnt[a[i]]]++;
		for (int c = 0, sum = 0; c <= t->k[kind].maxsize; c++) {
			int b = sc->bucket[c];

			sc->bucket[c] = sum;
			sum += b;
		}
		for (int i = 0; i < n; i++)
			sc->tmp[sc->bucket[cnt[a[i]]]++] = a[i];
	}
	memcpy(a, sc->tmp, sizeof(int) * (size_t)n);
}

/* Available CPUs of pair p of relation r. */
static int pair_cnt(const struct alloc_topo *t, const struct acc *s, int r, int p)
{
	return t->pure[r] ? s->cnt[rel_inner[r]][t->r[r].inner[p]] : s->cnt[PAIR(r)][p];
}

static unsigned next_stamp(const struct alloc_topo *t, int kind)
{
	struct scratch *sc = t->sc;

	if (++sc->stamp[kind] == 0) {
		memset(sc->mark[kind], 0, sizeof(unsigned) * (size_t)t->k[kind].n);
		sc->stamp[kind] = 1;
	}
	return sc->stamp[kind];
}

/* Units of a kind with available CPUs, sorted. */
static int order_top(const struct alloc_topo *t, const struct acc *s, int kind, int *out)
{
	int n = 0;

	for (int u = 0; u < t->k[kind].n; u++)
		if (s->cnt[kind][u] > 0)
			out[n++] = u;
	sort_by_count(t, out, n, s->cnt[kind], kind);
	return n;
}

/* For each outer unit in order, its inner units having available CPUs in it,
 * sorted by their whole available count, appended group after group. With
 * dedupe a unit already listed under an earlier outer unit is left out. */
static int order_nested(const struct alloc_topo *t, const struct acc *s, int r, const int *outer,
			int n_outer, int *out, bool dedupe)
{
	const struct rel *rl = &t->r[r];
	int inner = rel_inner[r], n = 0;
	unsigned stamp = dedupe ? next_stamp(t, inner) : 0;
	unsigned *mark = t->sc->mark[inner];

	for (int i = 0; i < n_outer; i++) {
		int o = outer[i], start = n;

		for (int p = rl->off[o]; p < rl->off[o + 1]; p++) {
			int u = rl->inner[p];

			if (pair_cnt(t, s, r, p) == 0)
				continue;
			if (dedupe) {
				if (mark[u] == stamp)
					continue;
				mark[u] = stamp;
			}
			out[n++] = u;
		}
		sort_by_count(t, out + start, n - start, s->cnt[inner], inner);
	}
	return n;
}

static int order_sockets(const struct alloc_topo *t, const struct acc *s, int *out);

int alloc_order_numa(const struct alloc_topo *t, const struct acc *s, int *out)
{
	int *sockets = t->sc->ord[K_SOCKET];
	int ns;

	if (t->numa_first)
		return order_top(t, s, K_NUMA, out);
	ns = order_top(t, s, K_SOCKET, sockets);
	return order_nested(t, s, R_NUMA_SOCKET, sockets, ns, out, true);
}

static int order_sockets(const struct alloc_topo *t, const struct acc *s, int *out)
{
	int *numas = t->sc->ord[K_NUMA];
	int nn;

	if (!t->numa_first)
		return order_top(t, s, K_SOCKET, out);
	nn = alloc_order_numa(t, s, numas);
	return order_nested(t, s, R_SOCKET_NUMA, numas, nn, out, true);
}

static int order_cores(const struct alloc_topo *t, const struct acc *s, int *out)
{
	int n;

	if (t->numa_first) {
		n = order_sockets(t, s, t->sc->ord[K_SOCKET]);
		return order_nested(t, s, R_CORE_SOCKET, t->sc->ord[K_SOCKET], n, out, true);
	}
	n = alloc_order_numa(t, s, t->sc->ord[K_NUMA]);
	return order_nested(t, s, R_CORE_NUMA, t->sc->ord[K_NUMA], n, out, true);
}

/* Both orientations: per NUMA node in NUMA order, its caches (§2). */
static int order_l3(const struct alloc_topo *t, const struct acc *s, int *out, bool dedupe)
{
	int n = alloc_order_numa(t, s, t->sc->ord[K_NUMA]);

	return order_nested(t, s, R_L3_NUMA, t->sc->ord[K_NUMA], n, out, dedupe);
}

static bool is_free(const struct alloc_topo *t, const struct acc *s, int kind, int u)
{
	switch (kind) {
	case K_CORE: /* §1.2: against the header */
		return s->cnt[kind][u] == t->per_core;
	case K_SOCKET:
		return s->cnt[kind][u] == t->per_socket;
	default: /* NUMA nodes and caches: against the table */
		return s->cnt[kind][u] == unit_size(t, kind, u);
	}
}

static int order_free(const struct alloc_topo *t, const struct acc *s, int kind, int *out)
{
	int n, m = 0;

	switch (kind) {
	case K_CORE:
		n = order_cores(t, s, out);
		break;
	case K_SOCKET:
		n = order_sockets(t, s, out);
		break;
	case K_NUMA:
		n = alloc_order_numa(t, s, out);
		break;
	default:
		n = order_l3(t, s, out, true);
		break;
	}
	for (int i = 0; i < n; i++)
		if (is_free(t, s, kind, out[i]))
			out[m++] = out[i];
	return m;
}

/* ---- takeByTopologyNUMAPacked (§3, §4, §5) ---------------------------------------------- */

/* Whole free units of a kind, each taken when the need covers its table size. */
static void take_full(const struct alloc_topo *t, struct acc *s, int kind)
{
	int *units = t->sc->ord[kind];
	int n = order_free(t, s, kind, units);

	for (int i = 0; i < n && s->need > 0; i++)
		if (s->need >= unit_size(t, kind, units[i]))
			take_unit(t, s, kind, units[i]);
}

/* §4 step 2: the lowest core ids of the cache, exactly the need or nothing. */
static void take_partial_l3(const struct alloc_topo *t, struct acc *s, int l3)
{
	const struct rel *rl = &t->r[R_CORE_L3];
	const struct kind *cores = &t->k[K_CORE];
	int per_core = t->per_core > 0 ? t->per_core : 1; /* kubelet divides by 0 */
	int want = (s->need + per_core - 1) / per_core, got = 0, n = 0, hi = 0;
	int *cand = t->sc->cand;

	for (int p = rl->off[l3]; p < rl->off[l3 + 1] && got < want; p++) {
		int c = rl->inner[p];

		if (pair_cnt(t, s, R_CORE_L3, p) == 0)
			continue;
		got++;
		/* every available CPU of the core, wherever it sits */
		for (int i = cores->off[c]; i < cores->off[c + 1]; i++) {
			int slot = cores->list[i];

			if (!cpuset_has(&s->avail, t->cpu[slot]))
				continue;
			if (n == 0 || t->cpu[slot] > t->cpu[cand[hi]])
				hi = n;
			cand[n++] = slot;
		}
	}
	if (t->per_core > 1 && s->need % 2 != 0 && n > s->need)
		cand[hi] = cand[--n]; /* drop the highest CPU id */
	if (n != s->need)
		return;
	for (int i = 0; i < n; i++)
		take_slot(t, s, cand[i]);
}

static void take_l3(const struct alloc_topo *t, struct acc *s)
{
	int *walk = t->sc->walk;
	int n = order_l3(t, s, walk, false); /* computed once, repeats kept (§4) */

	for (int i = 0; i < n; i++) {
		if (s->need >= t->per_l3)
			take_full(t, s, K_L3);
		if (s->need < 1)
			return;
		take_partial_l3(t, s, walk[i]);
		if (s->need < 1)
			return;
	}
}

static void take_full_cores(const struct alloc_topo *t, struct acc *s)
{
	take_full(t, s, K_CORE);
}

/* §3 step 4: one CPU at a time in the sorter's order. */
static void take_remaining(const struct alloc_topo *t, struct acc *s, bool spread)
{
	int kind = spread ? K_SOCKET : K_CORE;
	const struct kind *k = &t->k[kind];
	int *units = t->sc->ord[kind];
	int n = spread ? order_sockets(t, s, units) : order_cores(t, s, units);

	for (int i = 0; i < n; i++)
		for (int j = k->off[units[i]]; j < k->off[units[i] + 1]; j++) {
			take_slot(t, s, k->list[j]);
			if (s->need < 1)
				return;
		}
}

int alloc_not_enough(struct errbuf *eb, int count, const struct cpuset *available)
{
	return errbuf_fail(
		eb, -ENOSPC,
		"not enough cpus available to satisfy request: requested=%d, available=%d", count,
		cpuset_count(available));
}

int alloc_take_packed(const struct alloc_topo *t, const struct cpuset *available, int count,
		      bool spread, bool align_l3, struct cpuset *ret, struct errbuf *eb)
{
	struct acc *s = &t->sc->st;

	alloc_acc_init(t, s, available, count);
	if (s->need < 1)
		goto done;
	if (s->need > cpuset_count(&s->avail))
		return alloc_not_enough(eb, count, available);

	take_full(t, s, t->numa_first ? K_NUMA : K_SOCKET);
	if (s->need < 1)
		goto done;
	take_full(t, s, t->numa_first ? K_SOCKET : K_NUMA);
	if (s->need < 1)
		goto done;
	if (align_l3) {
		take_l3(t, s);
		if (s->need < 1)
			goto done;
	}
	if (!spread) {
		take_full_cores(t, s);
		if (s->need < 1)
			goto done;
	}
	take_remaining(t, s, spread);
	if (s->need < 1)
		goto done;
	return errbuf_fail(eb, -ENOSPC, "failed to allocate cpus");
done:
	*ret = s->result;
	return 0;
}

/* ---- the policy (§7) -------------------------------------------------------------------- */

static int take_policy(const struct alloc_topo *t, const struct cpuset *available, int count,
		       const struct alloc_opts *o, int group, struct cpuset *ret, struct errbuf *eb)
{
	switch (o->policy) {
	case ALLOC_DISTRIBUTED:
		return alloc_take_distributed(t, available, count, group, false, ret, eb);
	case ALLOC_SPREAD_CORES:
		return alloc_take_packed(t, available, count, true, false, ret, eb);
	default:
		return alloc_take_packed(t, available, count, false, o->align_l3, ret, eb);
	}
}

/* kubelet's option validation (policy_options.go) for the combinations it refuses. */
static int check_opts(const struct alloc_opts *o, struct errbuf *eb)
{
	const char *a = NULL, *b = NULL;

	if (o->policy < ALLOC_PACKED || o->policy > ALLOC_SPREAD_CORES)
		return errbuf_fail(eb, -EINVAL, "unknown allocation policy %d", (int)o->policy);
	if (o->group_size < 0)
		return errbuf_fail(eb, -EINVAL, "negative group size %d", o->group_size);
	if (o->policy == ALLOC_SPREAD_CORES && o->full_cores)
		a = "full-pcpus-only", b = "distribute-cpus-across-cores";
	else if (o->policy == ALLOC_SPREAD_CORES && o->align_l3)
		a = "prefer-align-cpus-by-uncorecache", b = "distribute-cpus-across-cores";
	else if (o->policy == ALLOC_DISTRIBUTED && o->align_l3)
		a = "prefer-align-cpus-by-uncorecache", b = "distribute-cpus-across-numa";
	if (a)
		return errbuf_fail(
			eb, -EINVAL,
			"static policy options %s and %s can not be used at the same time", a, b);
	return 0;
}

/* available minus every thread of the cores of reserved CPUs (§7). */
static int physical_available(const struct alloc_topo *t, const struct cpuset *available,
			      const struct cpuset *reserved)
{
	struct cpuset phys = *available;
	const struct kind *k = &t->k[K_CORE];

	if (reserved)
		CPUSET_FOREACH(cpu, reserved)
		{
			int slot = cpu < t->slot_len ? t->slot[cpu] : -1, u;

			if (slot < 0)
				continue;
			u = t->si[slot].ix[K_CORE];
			for (int i = k->off[u]; i < k->off[u + 1]; i++)
				cpuset_clear(&phys, t->cpu[k->list[i]]);
		}
	return cpuset_count(&phys);
}

/* ---- mixed nodes: whole cores and threads (beyond kubelet, allocator.h) ------------------ */

/* The CPUs of available whose core is wholly available (whole = true), or
 * only partly (whole = false: a sibling is held elsewhere or not online). */
static void cores_by_wholeness(const struct alloc_topo *t, const struct cpuset *available,
			       bool whole, struct cpuset *ret)
{
	const struct kind *k = &t->k[K_CORE];

	cpuset_zero(ret);
	for (int u = 0; u < k->n; u++) {
		int have = 0;

		for (int i = k->off[u]; i < k->off[u + 1]; i++)
			have += cpuset_has(available, t->cpu[k->list[i]]);
		if (have == 0 || (have == unit_size(t, K_CORE, u)) != whole)
			continue;
		for (int i = k->off[u]; i < k->off[u + 1]; i++)
			if (cpuset_has(available, t->cpu[k->list[i]]))
				cpuset_set(ret, t->cpu[k->list[i]]);
	}
}

/* The policy, with spare_cores: the threads that would break a wholly free
 * core come from broken cores instead, when there are some, then the rest is
 * the policy's choice. Those threads are the last count % CPUs-per-core of a
 * packed or distributed claim (the rest fills whole cores, which keeps each
 * claim on cores of its own: a claim spread over other claims' half cores
 * leaves half cores again when it ends), and every thread of a spread-cores
 * claim, which wants one thread per core anyway. */
static int take_sparing(const struct alloc_topo *t, const struct cpuset *available, int count,
			const struct alloc_opts *o, int group, struct cpuset *ret,
			struct errbuf *eb)
{
	struct cpuset broken, r1, r2, rest;
	int n, r, want;

	if (!o->spare_cores || o->full_cores)
		return take_policy(t, available, count, o, group, ret, eb);
	want = o->policy == ALLOC_SPREAD_CORES ? count
	       : t->per_core > 1		? count % t->per_core
						: 0;
	cores_by_wholeness(t, available, false, &broken);
	n = cpuset_count(&broken);
	if (n == 0 || want == 0)
		return take_policy(t, available, count, o, group, ret, eb);
	r = take_policy(t, &broken, want < n ? want : n, o, group, &r1, eb);
	if (r < 0)
		return r;
	cpuset_andnot(&rest, available, &r1);
	r = take_policy(t, &rest, count - cpuset_count(&r1), o, group, &r2, eb);
	if (r < 0)
		return r;
	cpuset_or(ret, &r1, &r2);
	return 0;
}

int alloc_take(const struct alloc_topo *t, const struct cpuset *available, int count,
	       const struct alloc_opts *o, struct cpuset *ret, struct errbuf *eb)
{
	static const struct alloc_opts defaults;
	struct cpuset r1, r2, part, whole;
	int group, r;

	if (!o)
		o = &defaults;
	if (!t || !available || !ret)
		return errbuf_fail(eb, -EINVAL, "missing argument");
	if (count < 0)
		return errbuf_fail(eb, -EINVAL, "negative CPU count %d", count);
	r = check_opts(o, eb);
	if (r < 0)
		return r;
	if (o->full_cores && o->strict_cores) {
		/* only whole cores are free physical CPUs, and only they are taken */
		cores_by_wholeness(t, available, true, &whole);
		available = &whole;
	}
	if (o->full_cores) {
		/* kubelet would divide by a CPUs-per-core of 0; read it as 1 */
		int per_core = t->per_core > 0 ? t->per_core : 1, phys;

		if (count % per_core != 0)
			return errbuf_fail(eb, -EINVAL,
					   "SMT Alignment Error: requested %d cpus not multiple "
					   "cpus per core = %d",
					   count, t->per_core);
		phys = physical_available(t, available, o->reserved);
		if (count > phys)
			return errbuf_fail(
				eb, -ENOSPC,
				"SMT Alignment Error: not enough free physical CPUs: available "
				"physical CPUs = %d, requested CPUs = %d, CPUs per core = %d",
				phys, count, t->per_core);
	}
	group = o->group_size;
	if (group == 0)
		group = o->full_cores && t->per_core > 0 ? t->per_core : 1;

	if (!o->prefer)
		return take_sparing(t, available, count, o, group, ret, eb);

	/* the hint: aligned CPUs first, then the rest (policy_static.go allocateCPUs) */
	cpuset_and(&part, available, o->prefer);
	r = take_sparing(t, &part, count < cpuset_count(&part) ? count : cpuset_count(&part), o,
			 group, &r1, eb);
	if (r < 0)
		return r;
	cpuset_andnot(&part, available, &r1);
	r = take_sparing(t, &part, count - cpuset_count(&r1), o, group, &r2, eb);
	if (r < 0)
		return r;
	cpuset_or(ret, &r1, &r2);
	return 0;
}

/* ---- introspection ---------------------------------------------------------------------- */

int alloc_free_units(const struct alloc_topo *t, const struct cpuset *available,
		     enum alloc_level level, int *ret_ids, int max)
{
	static const int kinds[] = { K_CORE, K_SOCKET, K_NUMA, K_L3 };
	struct acc *s = &t->sc->st;
	int kind, n, *units;

	if ((unsigned)level >= ARRAY_SIZE(kinds))
		return -EINVAL;
	kind = kinds[level];
	units = t->sc->ord[kind];
	alloc_acc_init(t, s, available, 0);
	n = order_free(t, s, kind, units);
	for (int i = 0; i < n && i < max; i++)
		ret_ids[i] = t->k[kind].id[units[i]];
	return n;
}

int alloc_cpu_order(const struct alloc_topo *t, const struct cpuset *available, bool spread,
		    int *ret_cpus, int max)
{
	struct acc *s = &t->sc->st;
	int kind = spread ? K_SOCKET : K_CORE, m = 0, n;
	const struct kind *k = &t->k[kind];
	int *units = t->sc->ord[kind];

	alloc_acc_init(t, s, available, 0);
	n = spread ? order_sockets(t, s, units) : order_cores(t, s, units);
	for (int i = 0; i < n; i++)
		for (int j = k->off[units[i]]; j < k->off[units[i] + 1]; j++) {
			int cpu = t->cpu[k->list[j]];

			if (!cpuset_has(&s->avail, cpu))
				continue;
			if (m < max)
				ret_cpus[m] = cpu;
			m++;
		}
	return m;
}
