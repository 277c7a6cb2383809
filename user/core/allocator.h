/* The allocator: which CPUs a claim gets, chosen exactly as kubelet's CPU
 * manager would choose them (pkg/kubelet/cm/cpumanager/cpu_assignment.go at
 * kubernetes fd5b2efa, described rule by rule in docs/allocation.md; section
 * numbers below refer to it).
 *
 * Two objects:
 *
 *   struct alloc_topo   a read-only view of the machine in kubelet's terms: a
 *                       table of CPUs (core, socket, NUMA node, L3 id) plus a
 *                       "header" of counts. kubelet derives per-unit sizes from
 *                       the header (CPUs per core = CPUs / cores, ...), not from
 *                       the table, and some of its test fixtures declare headers
 *                       that differ from their tables; alloc_topo_new() takes an
 *                       explicit header for them, alloc_topo_from_topo() derives
 *                       it from a struct topo. Built once per topology; it owns
 *                       precomputed unit tables and the scratch space the hot path
 *                       works in, so a claim allocates no memory.
 *   struct alloc_opts   the kubelet policy options that change the choice.
 *
 *        struct topo ──alloc_topo_from_topo()──> struct alloc_topo ──alloc_take()──> cpuset
 *   (tests: table + header ──alloc_topo_new()──┘)
 *
 * Invariants of every successful alloc_take(): the result is a subset of the
 * available set, has exactly `count` CPUs, and with full_cores holds whole
 * cores only (when the request passes kubelet's SMT checks and the header's
 * CPUs-per-core matches the table); with full_cores and strict_cores, every
 * core it touches is also wholly available, whatever the available set.
 *
 * Where this port deliberately differs from kubelet (each is unreachable with a
 * header that agrees with the table, and none is reached by kubelet's tests):
 *  - a unit listed twice in kubelet's nested orders (a socket spanning NUMA
 *    nodes on a NUMA-first machine, a core spanning sockets) is taken once,
 *    where kubelet would count it twice and hand out fewer CPUs than asked;
 *  - taking a "free" whole socket or core takes its available CPUs only, where
 *    kubelet takes every CPU the table lists for it, available or not;
 *  - kubelet's distributed search keeps slices that later combinations
 *    overwrite (k >= 4); we keep the combination that actually scored best;
 *  - the distributed search has a work budget (ALLOC_DIST_BUDGET combination
 *    evaluations); past it we fall back to the packed algorithm, as kubelet does
 *    when no combination qualifies, instead of searching for minutes;
 *  - loops that can spin forever in kubelet (remainder hand-out when no node
 *    can take a group) stop and report an accounting error.
 *
 * Not thread-safe: calls on one alloc_topo must not overlap (the daemon has
 * one thread).
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct alloc_topo;
struct errbuf;
struct topo;

/* Combination evaluations the distributed search may spend (see above). */
#define ALLOC_DIST_BUDGET 200000

/* One CPU of the table. Negative socket, numa or l3 ids (machine reports none)
 * are read as 0, as kubelet reads a missing id. core: CPUs with the same core id
 * are one core, wherever they sit (kubelet's core ids are global). */
struct alloc_cpu {
	int cpu;
	int core;
	int socket;
	int numa;
	int l3;
};

/* kubelet's CPUTopology counts. 0 means "unknown" exactly as in kubelet: a 0
 * NUMA count makes the machine NUMA-first, a 0 L3 count makes CPUs-per-L3 0
 * (whole-cache taking always tried), a 0 core or socket count disables whole
 * cores or sockets. */
struct alloc_header {
	int cpus, cores, sockets, numa, l3;
};

enum alloc_policy {
	ALLOC_PACKED = 0,   /* takeByTopologyNUMAPacked, packed CPU sorting (default) */
	ALLOC_DISTRIBUTED,  /* takeByTopologyNUMADistributed (distribute-cpus-across-numa) */
	ALLOC_SPREAD_CORES, /* packed with spread CPU sorting (distribute-cpus-across-cores) */
};

struct alloc_opts {
	enum alloc_policy policy;
	bool align_l3;	 /* prefer-align-cpus-by-uncorecache (packed only) */
	bool full_cores; /* full-pcpus-only: kubelet's two SMT checks first; with
			  * ALLOC_DISTRIBUTED the group size becomes CPUs per core */
	int group_size;	 /* ALLOC_DISTRIBUTED cpuGroupSize; 0 = 1, or CPUs per core
			  * with full_cores */
	/* CPUs the node reserves (not part of available). Only full_cores uses it:
	 * the sibling threads of reserved CPUs do not count as free physical CPUs.
	 * NULL = none. */
	const struct cpuset *reserved;
	/* kubelet's NUMA hint: take min(count, |prefer & available|) CPUs from the
	 * preferred ones first, the rest from everything else. NULL = no hint. */
	const struct cpuset *prefer;
	/* Beyond kubelet, for a node where claims that want whole cores and claims
	 * that do not share the pool (kubelet's full-pcpus-only is node-wide, so
	 * its available set is made of whole cores; a claim's is not).
	 * strict_cores: with full_cores, a CPU counts as free (second SMT check)
	 * and may be taken only when every thread of its core is available, so
	 * the result never shares a core with anyone.
	 * spare_cores: without full_cores, the available threads whose core is
	 * not wholly available (a sibling is held elsewhere) are taken first, up
	 * to count, each part by the policy, so a claim that does not care
	 * breaks no whole core while such threads are left. */
	bool strict_cores;
	bool spare_cores;
};

/* Builds a view from a table of n CPUs (any order, copied) and a header
 * (NULL = distinct counts of the table). Caller frees *ret with
 * alloc_topo_free(). Errors: -ENOMEM, or -EINVAL with eb (may be NULL)
 * naming the fault: no CPUs, a CPU id out of
 * 0..CPUSET_MAX-1 or repeated, a negative core id or header count. */
int alloc_topo_new(const struct alloc_cpu *cpus, int n, const struct alloc_header *hdr,
		   struct alloc_topo **ret, struct errbuf *eb);

/* The view of a struct topo: its online CPUs, its machine-unique core numbers
 * (so siblings are exactly the CPUs sharing a core, unlike kubelet on machines
 * whose core ids restart per socket), and a header of distinct counts with a
 * machine that reports no package counted as one socket. Caller frees *ret
 * with alloc_topo_free(). */
int alloc_topo_from_topo(const struct topo *t, struct alloc_topo **ret);

/* Same with an explicit header (NULL = as above), to replay what kubelet's
 * CPUTopology would say of the machine; errors as alloc_topo_new(). */
int alloc_topo_from_topo_header(const struct topo *t, const struct alloc_header *hdr,
				struct alloc_topo **ret, struct errbuf *eb);

/* NULL-safe; returns NULL. */
struct alloc_topo *alloc_topo_free(struct alloc_topo *t);
DEFINE_FREEP(alloc_topo, alloc_topo_free)

/* The header in use and kubelet's derived CPUs-per-core (0 when unknown). */
const struct alloc_header *alloc_topo_header(const struct alloc_topo *t);
int alloc_topo_cpus_per_core(const struct alloc_topo *t);

/* Chooses count CPUs among available (CPUs outside the table are ignored but
 * counted in error texts, as kubelet counts them). Returns 0 and the set in
 * *ret, or:
 *   -EINVAL  bad arguments, an option combination kubelet refuses, or
 *            "SMT Alignment Error: requested N cpus not multiple cpus per core = C"
 *   -ENOSPC  "not enough cpus available to satisfy request: requested=N, available=M",
 *            "SMT Alignment Error: not enough free physical CPUs: ...", or the
 *            allocation could not be completed ("failed to allocate cpus")
 * with kubelet's exact text in eb (may be NULL). A count
 * of 0 succeeds with an empty set. */
int alloc_take(const struct alloc_topo *t, const struct cpuset *available, int count,
	       const struct alloc_opts *o, struct cpuset *ret, struct errbuf *eb);

/* Introspection of kubelet's orders (its accumulator tests, and `--explain`). */
enum alloc_level {
	ALLOC_LEVEL_CORE,
	ALLOC_LEVEL_SOCKET,
	ALLOC_LEVEL_NUMA,
	ALLOC_LEVEL_L3,
};

/* The ids of the wholly free units of a level given available, in the order the
 * packed algorithm visits them (§2, §3). Writes at most max ids to ret_ids and
 * returns how many there are. */
int alloc_free_units(const struct alloc_topo *t, const struct cpuset *available,
		     enum alloc_level level, int *ret_ids, int max);

/* The single-CPU order of the packed (spread = false) or spread sorter over
 * available (§2). Writes at most max CPU ids and returns how many there are. */
int alloc_cpu_order(const struct alloc_topo *t, const struct cpuset *available, bool spread,
		    int *ret_cpus, int max);
