/* kubelet-exact CPU allocation. See allocator.h for the contract and
 * docs/allocation.md (§n below) for the rules.
 *
 * Representation. Every CPU of the table has a slot (ascending CPU id). Each
 * unit kind (core, socket, NUMA node, L3) maps its ids to dense indices in
 * ascending id order, so "lower id first" is "lower index first", and keeps the
 * slots of each unit (CSR lists). The nested orders of §2 need "the inner units
 * having available CPUs in this outer unit": relations hold the distinct
 * (inner, outer) pairs of the table, grouped by outer.
 *
 * A run keeps, besides the available and result sets, the available count of
 * every unit and of the pairs it needs. They are built once per run from
 * per-cell counts (a cell is a distinct (core, socket, node, cache) tuple,
 * about one per core) and updated as CPUs are taken. Relations where each
 * inner unit sits in one outer unit (the usual case) need no pair counts at
 * all. Orders filter units by count and sort by count with passes that keep
 * id order. A claim on 1024 CPUs stays in the microseconds and allocates
 * nothing: all scratch lives in the alloc_topo.
 */
#include "core/allocator.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "host/topo.h"

enum { K_CORE, K_SOCKET, K_NUMA, K_L3, K_N };

/* (inner, outer) relations used by the nested orders. */
enum { R_SOCKET_NUMA, R_NUMA_SOCKET, R_CORE_SOCKET, R_CORE_NUMA, R_L3_NUMA, R_CORE_L3, R_N };
static const int rel_inner[R_N] = { K_SOCKET, K_NUMA, K_CORE, K_CORE, K_L3, K_CORE };
static const int rel_outer[R_N] = { K_NUMA, K_SOCKET, K_SOCKET, K_NUMA, K_NUMA, K_L3 };

struct kind {
	int n;	  /* units */
	int *id;  /* dense index -> id, ascending */
	int *off; /* slots of unit u: list[off[u] .. off[u+1]), ascending */
	int *list;
	int maxsize; /* CPUs in the largest unit */
};

struct rel {
	int n_pairs;
	int *off;   /* pairs of outer o: off[o] .. off[o+1], inner ascending */
	int *inner; /* pair -> inner dense index */
};

/* Per slot: its unit in each kind, then its pair in each relation. */
#define N_IX (K_N + R_N)
#define PAIR(r) (K_N + (r))

struct slotinfo {
	int ix[N_IX];
};

/* The accumulator of one packed run (kubelet's cpuAccumulator). */
struct acc {
	struct cpuset avail; /* available table CPUs not taken yet */
	struct cpuset result;
	int need;
	int *cnt[N_IX]; /* available CPUs per unit (kinds), then per pair (relations) */
};

struct scratch {
	struct acc st;
	int *cell_cnt;	     /* available CPUs per cell */
	int *ord[K_N];	     /* orders, deduplicated, k.n entries */
	int *walk;	     /* L3 walk order with repeats, R_L3_NUMA pairs */
	int *cand;	     /* partial-L3 candidates, n entries */
	int *bucket;	     /* counting sort, maxsize + 1 entries */
	int *tmp;	     /* counting sort output, n entries */
	unsigned *mark[K_N]; /* dedupe marks */
	unsigned stamp[K_N];
	/* distributed search, n NUMA nodes each */
	int *numas, *avail_n, *after, *after2, *combo, *best_combo, *remcombo, *sub, *best_rem,
		*local_rem, *subset;
	struct cpuset d_avail, d_result, d_sub, d_got;
};

struct alloc_topo {
	struct alloc_header hdr;
	int per_core, per_socket, per_l3; /* header-derived (§1.1), 0 = unknown */
	bool numa_first;		  /* §1.5 */
	int n;				  /* table CPUs */
	int *cpu;			  /* slot -> CPU id */
	struct slotinfo *si;		  /* slot -> units and pairs */
	int *slot;			  /* CPU id -> slot or -1 */
	int slot_len;
	struct cpuset all;
	struct kind k[K_N];
	struct rel r[R_N];
	/* Cells: the distinct (core, socket, node, cache) tuples, about one per
	 * core. Every unit and pair is a union of cells, listed in agg_*. */
	int n_cells;
	int *cell; /* slot -> cell */
	int *agg_off[N_IX], *agg_list[N_IX];
	/* A pure relation has each inner unit in one outer unit only (cores in
	 * one socket, ...): its pair counts are the inner units' counts. Only
	 * the live counters (kinds, and impure relations the orientation uses)
	 * are kept; with cells one per core, the core counts are the cell counts. */
	bool pure[R_N];
	int live[N_IX], n_live;
	bool cells_are_cores;
	struct scratch *sc;
	void *blocks[128]; /* tnew() allocations, 73 today */
	int n_blocks;
};

/* ---- building the view ------------------------------------------------------------------ */

/* Zeroed array owned by t (freed with it). NULL on ENOMEM. */
static void *tnew(struct alloc_topo *t, size_t n, size_t size)
{
	void *p;

	if (t->n_blocks >= (int)ARRAY_SIZE(t->blocks))
		return NULL;
	p = calloc(n ? n : 1, size);
	if (p)
		t->blocks[t->n_blocks++] = p;
	return p;
}

struct alloc_topo *alloc_topo_free(struct alloc_topo *t)
{
	if (!t)
		return NULL;
	for (int i = 0; i < t->n_blocks; i++)
		free(t->blocks[i]);
	free(t);
	return NULL;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_row(const void *a, const void *b)
{
	return cmp_int(&((const struct alloc_cpu *)a)->cpu, &((const struct alloc_cpu *)b)->cpu);
}

static int row_id(const struct alloc_cpu *c, int kind)
{
	switch (kind) {
	case K_CORE:
		return c->core;
	case K_SOCKET:
		return c->socket;
	case K_NUMA:
		return c->numa;
	default:
		return c->l3;
	}
}

/* Dense indices of one kind: sorted distinct ids, CSR slot lists. */
static int build_kind(struct alloc_topo *t, const struct alloc_cpu *rows, int kind)
{
	struct kind *k = &t->k[kind];
	_cleanup_free_ int *v = malloc(sizeof(int) * (size_t)t->n);
	_cleanup_free_ int *fill = NULL;

	if (!v)
		return -ENOMEM;
	for (int i = 0; i < t->n; i++)
		v[i] = row_id(&rows[i], kind);
	qsort(v, (size_t)t->n, sizeof(int), cmp_int);
	k->n = 0;
	for (int i = 0; i < t->n; i++)
		if (i == 0 || v[i] != v[i - 1])
			v[k->n++] = v[i];
	k->id = tnew(t, (size_t)k->n, sizeof(int));
	k->off = tnew(t, (size_t)k->n + 1, sizeof(int));
	k->list = tnew(t, (size_t)t->n, sizeof(int));
	fill = calloc((size_t)k->n, sizeof(int));
	if (!k->id || !k->off || !k->list || !fill)
		return -ENOMEM;
	memcpy(k->id, v, sizeof(int) * (size_t)k->n);
	for (int s = 0; s < t->n; s++) {
		int id = row_id(&rows[s], kind);
		int *p = bsearch(&id, k->id, (size_t)k->n, sizeof(int), cmp_int);

		t->si[s].ix[kind] = (int)(p - k->id);
		k->off[p - k->id + 1]++;
	}
	k->maxsize = 0;
	for (int u = 0; u < k->n; u++) {
		int size = k->off[u + 1];

		if (size > k->maxsize)
			k->maxsize = size;
		k->off[u + 1] += k->off[u];
	}
	for (int s = 0; s < t->n; s++) {
		int u = t->si[s].ix[kind];

		k->list[k->off[u] + fill[u]++] = s;
	}
	return 0;
}

/* Distinct (inner, outer) pairs grouped by outer, inner ascending. */
static int build_rel(struct alloc_topo *t, int r)
{
	const struct kind *in = &t->k[rel_inner[r]], *out = &t->k[rel_outer[r]];
	struct rel *rl = &t->r[r];
	_cleanup_free_ int64_t *key = malloc(sizeof(int64_t) * (size_t)t->n);
	int n = 0;

	if (!key)
		return -ENOMEM;
	for (int s = 0; s < t->n; s++)
		key[s] = (int64_t)t->si[s].ix[rel_outer[r]] * in->n + t->si[s].ix[rel_inner[r]];
	qsort(key, (size_t)t->n, sizeof(int64_t), cmp_i64);
	for (int i = 0; i < t->n; i++)
		if (i == 0 || key[i] != key[i - 1])
			key[n++] = key[i];
	rl->n_pairs = n;
	rl->off = tnew(t, (size_t)out->n + 1, sizeof(int));
	rl->inner = tnew(t, (size_t)n, sizeof(int));
	if (!rl->off || !rl->inner)
		return -ENOMEM;
	for (int p = 0; p < n; p++) {
		rl->inner[p] = (int)(key[p] % in->n);
		rl->off[key[p] / in->n + 1]++;
	}
	for (int o = 0; o < out->n; o++)
		rl->off[o + 1] += rl->off[o];
	for (int s = 0; s < t->n; s++) {
		int64_t k = (int64_t)t->si[s].ix[rel_outer[r]] * in->n + t->si[s].ix[rel_inner[r]];
		int64_t *p = bsearch(&k, key, (size_t)n, sizeof(int64_t), cmp_i64);

		t->si[s].ix[PAIR(r)] = (int)(p - key);
	}
	return 0;
}

/* Units of a kind, or pairs of a relation. */
static int n_targets(const struct alloc_topo *t, int i)
{
	return i < K_N ? t->k[i].n : t->r[i - K_N].n_pairs;
}

static int build_cells(struct alloc_topo *t)
{
	_cleanup_free_ int64_t *key = malloc(sizeof(int64_t) * (size_t)t->n);
	_cleanup_free_ int *first = NULL, *fill = NULL;
	int n = 0;

	if (!key)
		return -ENOMEM;
	for (int s = 0; s < t->n; s++) {
		int64_t k = 0;

		for (int i = 0; i < K_N; i++) /* dense indices < CPUSET_MAX: 13 bits */
			k = k << 13 | t->si[s].ix[i];
		key[s] = k;
	}
	qsort(key, (size_t)t->n, sizeof(int64_t), cmp_i64);
	for (int i = 0; i < t->n; i++)
		if (i == 0 || key[i] != key[i - 1])
			key[n++] = key[i];
	t->n_cells = n;
	t->cell = tnew(t, (size_t)t->n, sizeof(int));
	first = malloc(sizeof(int) * (size_t)n);
	fill = malloc(sizeof(int) * (size_t)t->n);
	if (!t->cell || !first || !fill)
		return -ENOMEM;
	for (int c = 0; c < n; c++)
		first[c] = -1;
	for (int s = 0; s < t->n; s++) {
		int64_t k = 0, *p;

		for (int i = 0; i < K_N; i++)
			k = k << 13 | t->si[s].ix[i];
		p = bsearch(&k, key, (size_t)n, sizeof(int64_t), cmp_i64);
		t->cell[s] = (int)(p - key);
		if (first[t->cell[s]] < 0)
			first[t->cell[s]] = s;
	}
	/* per target (unit or pair): its cells, CSR */
	for (int i = 0; i < N_IX; i++) {
		int nt = n_targets(t, i);

		t->agg_off[i] = tnew(t, (size_t)nt + 1, sizeof(int));
		t->agg_list[i] = tnew(t, (size_t)n, sizeof(int));
		if (!t->agg_off[i] || !t->agg_list[i])
			return -ENOMEM;
		for (int c = 0; c < n; c++)
			t->agg_off[i][t->si[first[c]].ix[i] + 1]++;
		for (int u = 0; u < nt; u++)
			t->agg_off[i][u + 1] += t->agg_off[i][u];
		memset(fill, 0, sizeof(int) * (size_t)nt);
		for (int c = 0; c < n; c++) {
			int u = t->si[first[c]].ix[i];

			t->agg_list[i][t->agg_off[i][u] + fill[u]++] = c;
		}
	}
	return 0;
}

static void choose_live(struct alloc_topo *t)
{
	bool used[R_N] = { false };

	used[t->numa_first ? R_SOCKET_NUMA : R_NUMA_SOCKET] = true;
	used[t->numa_first ? R_CORE_SOCKET : R_CORE_NUMA] = true;
	used[R_L3_NUMA] = used[R_CORE_L3] = true;
	t->cells_are_cores = t->n_cells == t->k[K_CORE].n;
	t->n_live = 0;
	for (int k = 0; k < K_N; k++)
		if (k != K_CORE || !t->cells_are_cores)
			t->live[t->n_live++] = k;
	for (int r = 0; r < R_N; r++) {
		t->pure[r] = t->r[r].n_pairs == t->k[rel_inner[r]].n;
		if (used[r] && !t->pure[r])
			t->live[t->n_live++] = PAIR(r);
	}
}

static int build_scratch(struct alloc_topo *t)
{
	struct scratch *sc = tnew(t, 1, sizeof(*sc));
	int maxsize = 0, nn = t->k[K_NUMA].n, *p;

	if (!sc)
		return -ENOMEM;
	t->sc = sc;
	choose_live(t);
	sc->cell_cnt = tnew(t, (size_t)t->n_cells, sizeof(int));
	if (!sc->cell_cnt)
		return -ENOMEM;
	for (int i = 0; i < N_IX; i++) {
		sc->st.cnt[i] = i == K_CORE && t->cells_are_cores
					? sc->cell_cnt
					: tnew(t, (size_t)n_targets(t, i), sizeof(int));
		if (!sc->st.cnt[i])
			return -ENOMEM;
	}
	for (int k = 0; k < K_N; k++) {
		sc->ord[k] = tnew(t, (size_t)t->k[k].n, sizeof(int));
		sc->mark[k] = tnew(t, (size_t)t->k[k].n, sizeof(unsigned));
		if (!sc->ord[k] || !sc->mark[k])
			return -ENOMEM;
		if (t->k[k].maxsize > maxsize)
			maxsize = t->k[k].maxsize;
	}
	sc->walk = tnew(t, (size_t)t->r[R_L3_NUMA].n_pairs, sizeof(int));
	sc->cand = tnew(t, (size_t)t->n, sizeof(int));
	sc->tmp = tnew(t, (size_t)t->n, sizeof(int));
	sc->bucket = tnew(t, (size_t)maxsize + 1, sizeof(int));
	/* eleven arrays of nn ints for the distributed search */
	p = tnew(t, (size_t)nn * 11, sizeof(int));
	if (!sc->walk || !sc->cand || !sc->tmp || !sc->bucket || !p)
		return -ENOMEM;
	sc->numas = p;
	sc->avail_n = p + nn;
	sc->after = p + 2 * nn;
	sc->after2 = p + 3 * nn;
	sc->combo = p + 4 * nn;
	sc->best_combo = p + 5 * nn;
	sc->remcombo = p + 6 * nn;
	sc->sub = p + 7 * nn;
	sc->best_rem = p + 8 * nn;
	sc->local_rem = p + 9 * nn;
	sc->subset = p + 10 * nn;
	return 0;
}

static int distinct(const struct alloc_cpu *rows, int n, int kind)
{
	_cleanup_free_ int *v = malloc(sizeof(int) * (size_t)n);
	int d = 0;

	if (!v)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		v[i] = row_id(&rows[i], kind);
	qsort(v, (size_t)n, sizeof(int), cmp_int);
	for (int i = 0; i < n; i++)
		d += i == 0 || v[i] != v[i - 1];
	return d;
}

int alloc_topo_new(const struct alloc_cpu *cpus, int n, const struct alloc_header *hdr,
		   struct alloc_topo **ret, struct errbuf *eb)
{
	_cleanup_(alloc_topo_freep) struct alloc_topo *t = NULL;
	_cleanup_free_ struct alloc_cpu *rows = NULL;
	int r;

	if (!cpus || n <= 0)
		return errbuf_fail(eb, -EINVAL, "no CPUs");
	if (n > CPUSET_MAX)
		return errbuf_fail(eb, -EINVAL, "more than %d CPUs", CPUSET_MAX);
	rows = malloc(sizeof(*rows) * (size_t)n);
	t = calloc(1, sizeof(*t));
	if (!rows || !t)
		return -ENOMEM;
	memcpy(rows, cpus, sizeof(*rows) * (size_t)n);
	qsort(rows, (size_t)n, sizeof(*rows), cmp_row);
	for (int i = 0; i < n; i++) {
		struct alloc_cpu *c = &rows[i];

		if (c->cpu < 0 || c->cpu >= CPUSET_MAX)
			return errbuf_fail(eb, -EINVAL, "CPU id %d out of range 0-%d", c->cpu,
					   CPUSET_MAX - 1);
		if (i > 0 && rows[i - 1].cpu == c->cpu)
			return errbuf_fail(eb, -EINVAL, "CPU %d listed twice", c->cpu);
		if (c->core < 0)
			return errbuf_fail(eb, -EINVAL, "CPU %d: negative core id %d", c->cpu,
					   c->core);
		/* kubelet reads a missing socket, NUMA node or uncore cache as 0 */
		if (c->socket < 0)
			c->socket = 0;
		if (c->numa < 0)
			c->numa = 0;
		if (c->l3 < 0)
			c->l3 = 0;
		cpuset_set(&t->all, c->cpu);
	}
	if (hdr) {
		if (hdr->cpus < 0 || hdr->cores < 0 || hdr->sockets < 0 || hdr->numa < 0 ||
		    hdr->l3 < 0)
			return errbuf_fail(eb, -EINVAL, "negative count in topology header");
		t->hdr = *hdr;
	} else {
		int d[K_N];

		for (int k = 0; k < K_N; k++) {
			d[k] = distinct(rows, n, k);
			if (d[k] < 0)
				return d[k];
		}
		t->hdr = (struct alloc_header){ .cpus = n,
						.cores = d[K_CORE],
						.sockets = d[K_SOCKET],
						.numa = d[K_NUMA],
						.l3 = d[K_L3] };
	}
	t->per_core = t->hdr.cores ? t->hdr.cpus / t->hdr.cores : 0;
	t->per_socket = t->hdr.sockets ? t->hdr.cpus / t->hdr.sockets : 0;
	t->per_l3 = t->hdr.l3 ? t->hdr.cpus / t->hdr.l3 : 0;
	t->numa_first = t->hdr.sockets >= t->hdr.numa;

	t->n = n;
	t->cpu = tnew(t, (size_t)n, sizeof(int));
	t->si = tnew(t, (size_t)n, sizeof(*t->si));
	t->slot_len = rows[n - 1].cpu + 1;
	t->slot = tnew(t, (size_t)t->slot_len, sizeof(int));
	if (!t->cpu || !t->si || !t->slot)
		return -ENOMEM;
	for (int i = 0; i < t->slot_len; i++)
		t->slot[i] = -1;
	for (int s = 0; s < n; s++) {
		t->cpu[s] = rows[s].cpu;
		t->slot[rows[s].cpu] = s;
	}
	for (int k = 0; k < K_N; k++) {
		r = build_kind(t, rows, k);
		if (r < 0)
			return r;
	}
	for (int i = 0; i < R_N; i++) {
		r = build_rel(t, i);
		if (r < 0)
			return r;
	}
	r = build_cells(t);
	if (r < 0)
		return r;
	r = build_scratch(t);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(t);
	return 0;
}

int alloc_topo_from_topo_header(const struct topo *t, const struct alloc_header *hdr,
				struct alloc_topo **ret, struct errbuf *eb)
{
	_cleanup_free_ struct alloc_cpu *rows = NULL;

	if (!t || t->n_cpus <= 0)
		return errbuf_fail(eb, -EINVAL, "no CPUs");
	rows = malloc(sizeof(*rows) * (size_t)t->n_cpus);
	if (!rows)
		return -ENOMEM;
	for (int i = 0; i < t->n_cpus; i++) {
		const struct topo_cpu *c = &t->cpus[i];

		rows[i] = (struct alloc_cpu){ .cpu = c->cpu,
					      .core = c->core,
					      .socket = c->socket,
					      .numa = c->numa,
					      .l3 = c->l3 };
	}
	/* no header: distinct counts after -1 became 0, so no package = one socket */
	return alloc_topo_new(rows, t->n_cpus, hdr, ret, eb);
}

int alloc_topo_from_topo(const struct topo *t, struct alloc_topo **ret)
{
	return alloc_topo_from_topo_header(t, NULL, ret, NULL);
}

const struct alloc_header *alloc_topo_header(const struct alloc_topo *t)
{
	return &t->hdr;
}

int alloc_topo_cpus_per_core(const struct alloc_topo *t)
{
	return t->per_core;
}

/* ---- the accumulator -------------------------------------------------------------------- */

static int unit_size(const struct alloc_topo *t, int kind, int u)
{
	return t->k[kind].off[u + 1] - t->k[kind].off[u];
}

static void alloc_acc_init(const struct alloc_topo *t, struct acc *s,
			   const struct cpuset *available, int need)
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

static int alloc_order_numa(const struct alloc_topo *t, const struct acc *s, int *out)
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

static int alloc_not_enough(struct errbuf *eb, int count, const struct cpuset *available)
{
	return errbuf_fail(
		eb, -ENOSPC,
		"not enough cpus available to satisfy request: requested=%d, available=%d", count,
		cpuset_count(available));
}

static int alloc_take_packed(const struct alloc_topo *t, const struct cpuset *available,
			     int count, bool spread, bool align_l3, struct cpuset *ret,
			     struct errbuf *eb)
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

/* ---- takeByTopologyNUMADistributed (§6) ------------------------------------------------- */

/* Go's math.Round(x*1000)/1000: half away from zero, like C's round(). */
static double round3(double x)
{
	return round(x * 1000) / 1000;
}

/* kubelet's balance score is the population standard deviation of the
 * available-after values, mean rounded to 3 decimals first, result rounded
 * (§6). Every evaluation of one search leaves the same total (all available
 * CPUs minus the request), so the rounded mean is one constant and the score
 * is a non-decreasing function of the sum of squared deviations: a candidate
 * whose sum is not below the current best's cannot win kubelet's strict "<",
 * and its score is not computed. Ties after rounding are still decided on the
 * rounded scores, as kubelet does. */
struct score {
	double ss; /* sum of squares of the best so far, INFINITY = none */
	double b;  /* its rounded score, DBL_MAX = none */
};

static double sum_squares(const int *v, int n, double mean)
{
	double ss = 0;

	for (int i = 0; i < n; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	return ss;
}

/* True when the values score strictly better than *best (and *best is
 * updated); bound: a sum of squares that cannot win anyway (INFINITY = none). */
static bool better(const int *v, int n, double mean, struct score *best, double bound)
{
	double ss = sum_squares(v, n, mean), b;

	if (ss >= best->ss || ss >= bound)
		return false;
	b = round3(sqrt(ss / n));
	if (b >= best->b)
		return false;
	best->ss = ss;
	best->b = b;
	return true;
}

/* Next k-combination of positions 0..n-1 in lexicographic order; false at the end. */
static bool next_combination(int *idx, int k, int n)
{
	int i = k - 1;

	while (i >= 0 && idx[i] == n - k + i)
		i--;
	if (i < 0)
		return false;
	idx[i]++;
	for (int j = i + 1; j < k; j++)
		idx[j] = idx[j - 1] + 1;
	return true;
}

static void first_combination(int *idx, int k)
{
	for (int i = 0; i < k; i++)
		idx[i] = i;
}

/* Hands `rem` CPUs out in groups to the subset (positions into numas), cycling
 * (§6). Returns false when a pass hands nothing out: kubelet would spin. */
static bool hand_out(int *after, const int *subset, int m, int rem, int group)
{
	while (rem > 0) {
		bool progress = false;

		for (int i = 0; i < m && rem > 0; i++) {
			if (after[subset[i]] < group)
				continue;
			after[subset[i]] -= group;
			rem -= group;
			progress = true;
		}
		if (!progress)
			return false;
	}
	return true;
}

/* The available CPUs of NUMA node (dense) u within a. */
static void numa_cpus(const struct alloc_topo *t, int u, const struct cpuset *a, struct cpuset *ret)
{
	const struct kind *k = &t->k[K_NUMA];

	cpuset_zero(ret);
	for (int i = k->off[u]; i < k->off[u + 1]; i++)
		if (cpuset_has(a, t->cpu[k->list[i]]))
			cpuset_set(ret, t->cpu[k->list[i]]);
}

/* Packed on the available CPUs of one NUMA node; the result is taken from the
 * distributed accumulator. kubelet ignores the error here (then its accounting
 * check fails), so do we. */
static void take_from_numa(const struct alloc_topo *t, int u, int count, bool spread)
{
	struct scratch *sc = t->sc;

	numa_cpus(t, u, &sc->d_avail, &sc->d_sub);
	if (alloc_take_packed(t, &sc->d_sub, count, spread, false, &sc->d_got, NULL) < 0)
		cpuset_zero(&sc->d_got);
	cpuset_andnot(&sc->d_avail, &sc->d_avail, &sc->d_got);
	cpuset_or(&sc->d_result, &sc->d_result, &sc->d_got);
}

static int alloc_take_distributed(const struct alloc_topo *t, const struct cpuset *available,
				  int count, int group, bool spread, struct cpuset *ret,
				  struct errbuf *eb)
{
	struct scratch *sc = t->sc;
	struct acc *s = &sc->st;
	int nn, min_k, max_k, budget = ALLOC_DIST_BUDGET, total_avail = 0;
	double mean;

	if (count % group != 0)
		return alloc_take_packed(t, available, count, spread, false, ret, eb);
	alloc_acc_init(t, s, available, count);
	if (count < 1) {
		cpuset_zero(ret);
		return 0;
	}
	if (count > cpuset_count(&s->avail))
		return alloc_not_enough(eb, count, available);

	nn = alloc_order_numa(t, s, sc->ord[K_NUMA]);
	memcpy(sc->numas, sc->ord[K_NUMA], sizeof(int) * (size_t)nn);
	for (int i = 0; i < nn; i++) {
		sc->avail_n[i] = s->cnt[K_NUMA][sc->numas[i]];
		total_avail += sc->avail_n[i];
	}
	mean = round3((double)(total_avail - count) / nn);
	{
		/* rangeNUMANodesNeededToSatisfy: table counts */
		int groups = (t->n - 1) / group + 1;
		int per_node = (groups - 1) / t->k[K_NUMA].n + 1;
		int needed = (count - 1) / group + 1;

		min_k = (needed - 1) / per_node + 1;
		max_k = needed < nn ? needed : nn;
	}

	for (int k = min_k; k <= max_k; k++) {
		struct score best = { INFINITY, DBL_MAX };
		int n_best_rem = 0, dist = (count / k / group) * group;
		bool found = false;

		first_combination(sc->combo, k);
		do {
			int total = 0, groups = 0, rem, n_rc = 0, n_local_rem = 0;
			struct score local = { INFINITY, DBL_MAX };
			bool ok = true, have_local = false;

			if (best.b == 0)
				break;
			if (--budget < 0)
				goto fallback;
			for (int i = 0; i < k; i++) {
				int a = sc->avail_n[sc->combo[i]];

				total += a;
				groups += a / group;
				ok = ok && a >= dist;
			}
			if (total < count || groups * group < count || !ok)
				continue;
			memcpy(sc->after, sc->avail_n, sizeof(int) * (size_t)nn);
			for (int i = 0; i < k; i++)
				sc->after[sc->combo[i]] -= dist;
			rem = count - dist * k;
			for (int i = 0; i < k; i++)
				if (sc->after[sc->combo[i]] >= group)
					sc->remcombo[n_rc++] = sc->combo[i];
			if (rem == 0)
				have_local = better(sc->after, nn, mean, &local, best.ss);
			for (int m = n_rc; rem > 0 && m >= 1; m--) {
				first_combination(sc->sub, m);
				do {
					int sum = 0;

					if (--budget < 0)
						goto fallback;
					for (int i = 0; i < m; i++)
						sum += sc->after[sc->remcombo[sc->sub[i]]];
					if (sum < rem)
						continue;
					memcpy(sc->after2, sc->after, sizeof(int) * (size_t)nn);
					for (int i = 0; i < m; i++)
						sc->subset[i] = sc->remcombo[sc->sub[i]];
					if (!hand_out(sc->after2, sc->subset, m, rem, group))
						continue;
					if (better(sc->after2, nn, mean, &local, best.ss)) {
						have_local = true;
						n_local_rem = m;
						memcpy(sc->local_rem, sc->subset,
						       sizeof(int) * (size_t)m);
					}
				} while (next_combination(sc->sub, m, n_rc));
			}
			if (have_local && local.b < best.b) {
				best = local;
				found = true;
				memcpy(sc->best_combo, sc->combo, sizeof(int) * (size_t)k);
				n_best_rem = n_local_rem;
				memcpy(sc->best_rem, sc->local_rem,
				       sizeof(int) * (size_t)n_local_rem);
			}
		} while (next_combination(sc->combo, k, nn));
		if (!found)
			continue;

		/* allocate: even share from each node, then the remainder round-robin */
		sc->d_avail = s->avail;
		cpuset_zero(&sc->d_result);
		for (int i = 0; i < k; i++)
			take_from_numa(t, sc->numas[sc->best_combo[i]], dist, spread);
		for (int rem = count - dist * k; rem > 0;) {
			bool progress = false;

			for (int i = 0; i < n_best_rem && rem > 0; i++) {
				int u = sc->numas[sc->best_rem[i]];

				numa_cpus(t, u, &sc->d_avail, &sc->d_sub);
				if (cpuset_count(&sc->d_sub) < group)
					continue;
				take_from_numa(t, u, group, spread);
				rem -= group;
				progress = true;
			}
			if (!progress)
				break;
		}
		{
			int left = count - cpuset_count(&sc->d_result);

			if (left > 0)
				return errbuf_fail(eb, -ENOSPC,
						   "accounting error, not enough CPUs allocated, "
						   "remaining: %d",
						   left);
			if (left < 0)
				return errbuf_fail(
					eb, -ENOSPC,
					"accounting error, too many CPUs allocated, remaining: %d",
					left);
		}
		*ret = sc->d_result;
		return 0;
	}
fallback:
	return alloc_take_packed(t, available, count, spread, false, ret, eb);
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
