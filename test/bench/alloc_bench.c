/* alloc_bench: nanoseconds per alloc_take() on a 1024-CPU synthetic node
 * (2 sockets x 4 NUMA nodes x 64 cores x SMT-2, 2 L3 per node, siblings N and
 * N+512), per policy, claim size and fragmentation of the free pool.
 *
 * Build: cc -O2 -std=gnu11 -D_GNU_SOURCE -Iuser test/bench/alloc_bench.c \
 *        build/libdracpu.a $(pkg-config --libs json-c) -lm -o build/alloc_bench
 * Run:   build/alloc_bench [iterations]      (prints one line per case)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/allocator.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"

#define CORES 512

static uint64_t rng_state = 0x5eed;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Thread CPU time: other processes on a shared machine do not count, and the
 * best of BATCHES batches drops the ones disturbed by cache thrashing. */
#define BATCHES 5

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static struct alloc_cpu rows[2 * CORES];
	static const struct {
		const char *name;
		struct alloc_opts o;
	} pols[] = {
		{ "packed", { .policy = ALLOC_PACKED } },
		{ "packed+l3", { .policy = ALLOC_PACKED, .align_l3 = true } },
		{ "packed+full", { .policy = ALLOC_PACKED, .full_cores = true } },
		{ "spread-cores", { .policy = ALLOC_SPREAD_CORES } },
		{ "distributed", { .policy = ALLOC_DISTRIBUTED } },
	};
	static const int busy_pct[] = { 0, 25, 50, 90 };
	static const int sizes[] = { 1, 4, 16, 64, 256 };
	int iters = argc > 1 ? atoi(argv[1]) : 400;
	struct alloc_topo *t = NULL;
	struct errbuf why = { "" };
	double worst = 0;

	for (int th = 0; th < 2; th++)
		for (int c = 0; c < CORES; c++)
			rows[th * CORES + c] = (struct alloc_cpu){
				.cpu = th * CORES + c,
				.core = c,
				.socket = c / 256,
				.numa = c / 64,
				.l3 = c / 32,
			};
	if (alloc_topo_new(rows, 2 * CORES, NULL, &t, &why) < 0) {
		fprintf(stderr, "alloc_bench: %s\n", why.s);
		return 1;
	}
	printf("%-13s %5s %5s %8s %10s\n", "policy", "busy%", "count", "free", "ns/claim");
	for (size_t p = 0; p < sizeof(pols) / sizeof(pols[0]); p++)
		for (size_t b = 0; b < sizeof(busy_pct) / sizeof(busy_pct[0]); b++) {
			struct cpuset avail;

			/* fragmentation: busy whole cores and busy single threads, scattered */
			cpuset_zero(&avail);
			for (int c = 0; c < CORES; c++) {
				int r = (int)(rng() % 100);

				if (r >= busy_pct[b] || (r % 2 && r < busy_pct[b] / 2))
					cpuset_set(&avail, c);
				if (r >= busy_pct[b])
					cpuset_set(&avail, c + CORES);
			}
			for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
				struct cpuset got;
				double ns = 1e18;

				if (sizes[s] > cpuset_count(&avail) ||
				    (pols[p].o.full_cores && sizes[s] % 2))
					continue;
				for (int bt = 0; bt < BATCHES; bt++) {
					double t0 = now_ns(), dt;

					for (int i = 0; i < iters; i++)
						if (alloc_take(t, &avail, sizes[s], &pols[p].o,
							       &got, &why) < 0) {
							fprintf(stderr, "alloc_bench: %s\n", why.s);
							return 1;
						}
					dt = (now_ns() - t0) / iters;
					if (dt < ns)
						ns = dt;
				}
				if (ns > worst)
					worst = ns;
				printf("%-13s %5d %5d %8d %10.0f\n", pols[p].name, busy_pct[b],
				       sizes[s], cpuset_count(&avail), ns);
			}
		}
	printf("worst: %.0f ns per claim (target 50000)\n", worst);
	alloc_topo_free(t);
	return worst < 50000 ? 0 : 1;
}
