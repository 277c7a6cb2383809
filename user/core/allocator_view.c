/* Building the allocator's view of a machine (struct alloc_topo): the unit
 * tables, relations, cells and scratch space of allocator_priv.h, from a CPU
 * table and a header or from a struct topo. See allocator.h.
 */
#include "core/allocator.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "host/topo.h"
#include "core/allocator_priv.h"

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

/* Checks the rows (sorted by CPU id) and reads a missing socket, NUMA node or
 * cache as 0, as kubelet does; the CPUs into *all. */
static int check_rows(struct alloc_cpu *rows, int n, struct cpuset *all, struct errbuf *eb)
{
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
		cpuset_set(all, c->cpu);
	}
	return 0;
}

/* The header (hdr, or the distinct counts of the rows when NULL) and what
 * kubelet derives from it (§1.1, §1.5). */
static int set_header(struct alloc_topo *t, const struct alloc_cpu *rows, int n,
		      const struct alloc_header *hdr, struct errbuf *eb)
{
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
	return 0;
}

/* Slots: slot -> CPU id and CPU id -> slot, in the rows' order. */
static int build_slots(struct alloc_topo *t, const struct alloc_cpu *rows, int n)
{
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
	return 0;
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
	r = check_rows(rows, n, &t->all, eb);
	if (r < 0)
		return r;
	r = set_header(t, rows, n, hdr, eb);
	if (r < 0)
		return r;
	r = build_slots(t, rows, n);
	if (r < 0)
		return r;
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
