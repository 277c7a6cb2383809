/* cores_bench: what a random churn of mixed claims does to fullCores claims on an
 * SMT-2 node in grouped mode (issue 21 §3), under three ways of deciding:
 *
 *   main     kubelet's choice as the driver made it before: fullCores runs
 *            kubelet's SMT checks, which count free CPUs, so a claim can get
 *            threads whose siblings other claims hold;
 *   kubelet  kubelet's placement for every claim, but fullCores counts and
 *            takes wholly free cores only (strict_cores);
 *   driver   strict_cores, plus spare_cores for claims without fullCores
 *            (threads of broken cores first): what the driver does now.
 *
 * Node: 2 sockets x 2 NUMA nodes x 16 cores x SMT-2 (128 CPUs, siblings c and
 * c + 64, 2 L3 per node), one device per NUMA node (--group-by numa). Each
 * tick one claim arrives: a quarter ask for fullCores (2, 4, 6 or 8 CPUs),
 * the others for 1-8 CPUs (one in ten with spread-cores, the rest packed with
 * L3 alignment, the driver's default). Lifetimes are exponential with a mean
 * that keeps the node about 85 % allocated. The scheduler sees capacity only:
 * it takes the first NUMA device with enough free CPUs (first fit), or leaves
 * the claim unschedulable. A claim the allocator refuses is dropped (its pod
 * would fail Prepare). Same seeds for every variant, so the three see the
 * same arrivals until their choices diverge.
 *
 * Counted per variant: fullCores claims scheduled, refused by the driver,
 * placed on a shared core (a thread whose sibling another claim holds).
 * Prints one JSON object per variant.
 *
 * Run: build/cores_bench [claims per seed] [seeds]
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/allocator.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"

#define CORES 64
#define CPUS (2 * CORES)
#define NODES 4
#define PER_NODE (CPUS / NODES)
#define FULL_PCT 25
#define LOAD 0.85

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static double uniform(void)
{
	return (double)(rng() >> 11) / (double)(1ULL << 53);
}

struct live {
	struct cpuset cpus;
	long until;
	int node, size;
};

struct tally {
	long full, full_refused, full_shared, claims, placed, unschedulable, spare_taken;
};

enum variant { V_MAIN, V_KUBELET, V_DRIVER, V_N };
static const char *const vnames[V_N] = { "main", "kubelet", "driver" };

static int sibling(int cpu)
{
	return cpu < CORES ? cpu + CORES : cpu - CORES;
}

static void run(const struct alloc_topo *t, enum variant v, uint64_t seed, long claims,
		struct tally *ty)
{
	static struct live live[CPUS];
	struct cpuset node_cpus[NODES], free_set;
	int n_live = 0, used[NODES] = { 0 };
	double mean_size = (FULL_PCT * 5.0 + (100 - FULL_PCT) * 4.5) / 100;
	double mean_life = LOAD * CPUS / mean_size;

	rng_state = seed;
	cpuset_zero(&free_set);
	for (int i = 0; i < NODES; i++)
		cpuset_zero(&node_cpus[i]);
	for (int c = 0; c < CPUS; c++) {
		cpuset_set(&free_set, c);
		cpuset_set(&node_cpus[(c % CORES) / (CORES / NODES)], c);
	}
	for (long tick = 0; tick < claims; tick++) {
		struct alloc_opts o = { .policy = ALLOC_PACKED, .align_l3 = true };
		bool full = (int)(rng() % 100) < FULL_PCT;
		int size = full ? 2 * (1 + (int)(rng() % 4)) : 1 + (int)(rng() % 8);
		long life = 1 + (long)(-log(1 - uniform()) * mean_life);
		struct cpuset avail, got, broken;
		struct errbuf why = { "" };
		int node = -1;

		if (!full && rng() % 10 == 0)
			o = (struct alloc_opts){ .policy = ALLOC_SPREAD_CORES };
		for (int i = 0; i < n_live; i++)
			if (live[i].until <= tick) {
				cpuset_or(&free_set, &free_set, &live[i].cpus);
				used[live[i].node] -= live[i].size;
				live[i--] = live[--n_live];
			}
		ty->claims++;
		ty->full += full;
		for (int i = 0; i < NODES && node < 0; i++)
			if (used[i] + size <= PER_NODE)
				node = i;
		if (node < 0) {
			ty->unschedulable++;
			ty->full -= full;
			continue;
		}
		o.full_cores = full;
		o.strict_cores = v != V_MAIN;
		o.spare_cores = v == V_DRIVER;
		cpuset_and(&avail, &free_set, &node_cpus[node]);
		if (alloc_take(t, &avail, size, &o, &got, &why) < 0) {
			if (!full)
				fprintf(stderr, "cores_bench: a claim without fullCores refused: %s\n",
					why.s);
			ty->full_refused++;
			continue;
		}
		if (full)
			CPUSET_FOREACH(cpu, &got)
			{
				if (!cpuset_has(&got, sibling(cpu)) &&
				    !cpuset_has(&free_set, sibling(cpu))) {
					ty->full_shared++;
					break;
				}
			}
		cpuset_zero(&broken);
		CPUSET_FOREACH(cpu, &avail)
		{
			if (!cpuset_has(&avail, sibling(cpu)))
				cpuset_set(&broken, cpu);
		}
		cpuset_and(&broken, &broken, &got);
		ty->spare_taken += cpuset_count(&broken);
		cpuset_andnot(&free_set, &free_set, &got);
		used[node] += size;
		live[n_live++] = (struct live){ .cpus = got, .until = tick + life, .node = node,
						.size = size };
		ty->placed++;
	}
}

int main(int argc, char **argv)
{
	static struct alloc_cpu rows[CPUS];
	long claims = argc > 1 ? atol(argv[1]) : 20000;
	int seeds = argc > 2 ? atoi(argv[2]) : 5;
	struct alloc_topo *t = NULL;
	struct errbuf why = { "" };

	for (int th = 0; th < 2; th++)
		for (int c = 0; c < CORES; c++) {
			int node = c / (CORES / NODES);

			rows[th * CORES + c] = (struct alloc_cpu){
				.cpu = th * CORES + c,
				.core = c,
				.socket = node / 2,
				.numa = node,
				.l3 = node * 2 + (c % (CORES / NODES)) / (CORES / NODES / 2),
			};
		}
	if (alloc_topo_new(rows, CPUS, NULL, &t, &why) < 0) {
		fprintf(stderr, "cores_bench: %s\n", why.s);
		return 2;
	}
	for (int v = 0; v < V_N; v++) {
		struct tally ty = { 0 };

		for (int s = 0; s < seeds; s++)
			run(t, (enum variant)v, 0x5eed + (uint64_t)s * 7919, claims, &ty);
		printf("{\"variant\": \"%s\", \"claims\": %ld, \"placed\": %ld, "
		       "\"unschedulable\": %ld, \"full\": %ld, \"full_refused\": %ld, "
		       "\"full_shared\": %ld, \"broken_threads_taken\": %ld, "
		       "\"seeds\": %d, \"full_pct\": %d, \"load\": %.2f}\n",
		       vnames[v], ty.claims, ty.placed, ty.unschedulable, ty.full, ty.full_refused,
		       ty.full_shared, ty.spare_taken, seeds, FULL_PCT, LOAD);
	}
	alloc_topo_free(t);
	return 0;
}
