/* What the files of the allocator share and nothing outside it sees: the
 * view's representation (struct alloc_topo and its tables), the accumulator
 * of a packed run, and the steps one file calls in another. The allocator is
 * one module in three files: allocator.c the accumulator, kubelet's orders,
 * the packed taker and the policy; allocator_view.c builds struct alloc_topo;
 * allocator_distributed.c is the distributed taker (§6). Its public API is
 * allocator.h; include this header only from user/core/allocator*.c, after
 * core/allocator.h, whose types it uses (including allocator.h here would
 * read as an include circle to tools/check-layers.py).
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
#pragma once

#include <stdbool.h>

#include "lib/cpuset.h"

struct errbuf;

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
/* Units of a kind, or pairs of a relation. */
static inline int n_targets(const struct alloc_topo *t, int i)
{
	return i < K_N ? t->k[i].n : t->r[i - K_N].n_pairs;
}

/* allocator.c: the accumulator and the packed taker (§3, §4, §5). */
void alloc_acc_init(const struct alloc_topo *t, struct acc *s, const struct cpuset *available,
		    int need);
int alloc_order_numa(const struct alloc_topo *t, const struct acc *s, int *out);
int alloc_not_enough(struct errbuf *eb, int count, const struct cpuset *available);
int alloc_take_packed(const struct alloc_topo *t, const struct cpuset *available, int count,
		      bool spread, bool align_l3, struct cpuset *ret, struct errbuf *eb);

/* allocator_distributed.c: takeByTopologyNUMADistributed (§6). */
int alloc_take_distributed(const struct alloc_topo *t, const struct cpuset *available, int count,
			   int group, bool spread, struct cpuset *ret, struct errbuf *eb);
