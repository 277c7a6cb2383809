/* kubelet's takeByTopologyNUMADistributed (§6): the even share of a claim
 * from each of the fewest NUMA nodes that balance best, each share taken by
 * the packed taker on its node. See allocator.h.
 */
#include "core/allocator.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "lib/errbuf.h"
#include "core/allocator_priv.h"

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

/* One distributed run: the request, and the search's place. */
struct dist_run {
	int count, group;
	bool spread;
	int nn;	     /* NUMA nodes with available CPUs, in sc->numas (NUMA order) */
	double mean; /* the rounded mean of the available-after values (struct score) */
	int budget;  /* combination evaluations left (ALLOC_DIST_BUDGET) */
	int dist;    /* each node's even share for the current number of nodes */
	int n_best_rem;
};

/* rangeNUMANodesNeededToSatisfy (§6), on the table's counts. */
static void dist_range(const struct alloc_topo *t, const struct dist_run *d, int *ret_min,
		       int *ret_max)
{
	int groups = (t->n - 1) / d->group + 1;
	int per_node = (groups - 1) / t->k[K_NUMA].n + 1;
	int needed = (d->count - 1) / d->group + 1;

	*ret_min = (needed - 1) / per_node + 1;
	*ret_max = needed < d->nn ? needed : d->nn;
}

/* The remainder rem of a combination handed out in groups to each subset of
 * its n_rc nodes that have a group left after their share (sc->remcombo),
 * largest subsets first; sc->after holds the available-after values. The
 * best hand-out scored into *local (bound: as better()), its subset into
 * sc->local_rem and its size into *ret_n. Returns 1 when a subset beat
 * *local, 0 when none did, -EAGAIN when the budget ran out. */
static int dist_remainder(const struct alloc_topo *t, struct dist_run *d, int n_rc, int rem,
			  struct score *local, double bound, int *ret_n)
{
	struct scratch *sc = t->sc;
	int improved = 0;

	for (int m = n_rc; rem > 0 && m >= 1; m--) {
		first_combination(sc->sub, m);
		do {
			int sum = 0;

			if (--d->budget < 0)
				return -EAGAIN;
			for (int i = 0; i < m; i++)
				sum += sc->after[sc->remcombo[sc->sub[i]]];
			if (sum < rem)
				continue;
			memcpy(sc->after2, sc->after, sizeof(int) * (size_t)d->nn);
			for (int i = 0; i < m; i++)
				sc->subset[i] = sc->remcombo[sc->sub[i]];
			if (!hand_out(sc->after2, sc->subset, m, rem, d->group))
				continue;
			if (better(sc->after2, d->nn, d->mean, local, bound)) {
				improved = 1;
				*ret_n = m;
				memcpy(sc->local_rem, sc->subset, sizeof(int) * (size_t)m);
			}
		} while (next_combination(sc->sub, m, n_rc));
	}
	return improved;
}

/* Scores combination sc->combo of k nodes (positions into sc->numas): each
 * gives its even share, the remainder goes out by dist_remainder(). Returns
 * 1 when it beats *best (then updated, with sc->best_combo, sc->best_rem and
 * d->n_best_rem), 0 when not, -EAGAIN when the budget ran out. */
static int dist_try(const struct alloc_topo *t, struct dist_run *d, int k, struct score *best)
{
	struct scratch *sc = t->sc;
	int total = 0, groups = 0, rem, n_rc = 0, n_local_rem = 0, r;
	struct score local = { INFINITY, DBL_MAX };
	bool ok = true, have_local = false;

	if (--d->budget < 0)
		return -EAGAIN;
	for (int i = 0; i < k; i++) {
		int a = sc->avail_n[sc->combo[i]];

		total += a;
		groups += a / d->group;
		ok = ok && a >= d->dist;
	}
	if (total < d->count || groups * d->group < d->count || !ok)
		return 0;
	memcpy(sc->after, sc->avail_n, sizeof(int) * (size_t)d->nn);
	for (int i = 0; i < k; i++)
		sc->after[sc->combo[i]] -= d->dist;
	rem = d->count - d->dist * k;
	for (int i = 0; i < k; i++)
		if (sc->after[sc->combo[i]] >= d->group)
			sc->remcombo[n_rc++] = sc->combo[i];
	if (rem == 0)
		have_local = better(sc->after, d->nn, d->mean, &local, best->ss);
	r = dist_remainder(t, d, n_rc, rem, &local, best->ss, &n_local_rem);
	if (r < 0)
		return r;
	have_local = have_local || r > 0;
	if (!have_local || local.b >= best->b)
		return 0;
	*best = local;
	memcpy(sc->best_combo, sc->combo, sizeof(int) * (size_t)k);
	d->n_best_rem = n_local_rem;
	memcpy(sc->best_rem, sc->local_rem, sizeof(int) * (size_t)n_local_rem);
	return 1;
}

/* The best combination of k nodes, every one tried in lexicographic order
 * until a perfect balance (score 0). Returns 1 when one qualifies (in
 * sc->best_combo), 0 when none does, -EAGAIN when the budget ran out. */
static int dist_search(const struct alloc_topo *t, struct dist_run *d, int k)
{
	struct scratch *sc = t->sc;
	struct score best = { INFINITY, DBL_MAX };
	int found = 0;

	d->dist = (d->count / k / d->group) * d->group;
	d->n_best_rem = 0;
	first_combination(sc->combo, k);
	do {
		int r;

		if (best.b == 0)
			break;
		r = dist_try(t, d, k, &best);
		if (r < 0)
			return r;
		found = found || r > 0;
	} while (next_combination(sc->combo, k, d->nn));
	return found;
}

/* Takes the combination found for k nodes: the even share from each node,
 * then the remainder round-robin in groups to sc->best_rem, each part by the
 * packed taker on its node. */
static int dist_take(const struct alloc_topo *t, const struct dist_run *d, int k,
		     struct cpuset *ret, struct errbuf *eb)
{
	struct scratch *sc = t->sc;
	int left;

	sc->d_avail = sc->st.avail;
	cpuset_zero(&sc->d_result);
	for (int i = 0; i < k; i++)
		take_from_numa(t, sc->numas[sc->best_combo[i]], d->dist, d->spread);
	for (int rem = d->count - d->dist * k; rem > 0;) {
		bool progress = false;

		for (int i = 0; i < d->n_best_rem && rem > 0; i++) {
			int u = sc->numas[sc->best_rem[i]];

			numa_cpus(t, u, &sc->d_avail, &sc->d_sub);
			if (cpuset_count(&sc->d_sub) < d->group)
				continue;
			take_from_numa(t, u, d->group, d->spread);
			rem -= d->group;
			progress = true;
		}
		if (!progress)
			break;
	}
	left = d->count - cpuset_count(&sc->d_result);
	if (left > 0)
		return errbuf_fail(eb, -ENOSPC,
				   "accounting error, not enough CPUs allocated, remaining: %d",
				   left);
	if (left < 0)
		return errbuf_fail(eb, -ENOSPC,
				   "accounting error, too many CPUs allocated, remaining: %d", left);
	*ret = sc->d_result;
	return 0;
}

int alloc_take_distributed(const struct alloc_topo *t, const struct cpuset *available, int count,
			   int group, bool spread, struct cpuset *ret, struct errbuf *eb)
{
	struct scratch *sc = t->sc;
	struct acc *s = &sc->st;
	struct dist_run d = {
		.count = count, .group = group, .spread = spread, .budget = ALLOC_DIST_BUDGET
	};
	int min_k, max_k, total_avail = 0;

	if (count % group != 0)
		return alloc_take_packed(t, available, count, spread, false, ret, eb);
	alloc_acc_init(t, s, available, count);
	if (count < 1) {
		cpuset_zero(ret);
		return 0;
	}
	if (count > cpuset_count(&s->avail))
		return alloc_not_enough(eb, count, available);

	d.nn = alloc_order_numa(t, s, sc->ord[K_NUMA]);
	memcpy(sc->numas, sc->ord[K_NUMA], sizeof(int) * (size_t)d.nn);
	for (int i = 0; i < d.nn; i++) {
		sc->avail_n[i] = s->cnt[K_NUMA][sc->numas[i]];
		total_avail += sc->avail_n[i];
	}
	d.mean = round3((double)(total_avail - count) / d.nn);
	dist_range(t, &d, &min_k, &max_k);
	for (int k = min_k; k <= max_k; k++) {
		int r = dist_search(t, &d, k);

		if (r < 0) /* the budget ran out: packed, as when nothing qualifies */
			break;
		if (r > 0)
			return dist_take(t, &d, k, ret, eb);
	}
	return alloc_take_packed(t, available, count, spread, false, ret, eb);
}
