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

int alloc_take_distributed(const struct alloc_topo *t, const struct cpuset *available, int count,
			   int group, bool spread, struct cpuset *ret, struct errbuf *eb)
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
