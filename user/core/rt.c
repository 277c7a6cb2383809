/* The real-time ledger and the kernel's limits. See rt.h. */
#include "core/rt.h"

#define LOG_MOD "rt"
#include "core/state.h"
#include "host/sched.h"
#include "lib/log.h"

struct used {
	int cpu;
	int64_t milli, capacity;
};

static int add_used(void *ud, const struct state_claim *c)
{
	struct used *u = ud;

	if (!c->rt || !cpuset_view_has(&c->cpus, u->cpu))
		return 0;
	if (c->n_results == 0) {
		u->milli += u->capacity; /* no record of what it holds: all of it */
		return 0;
	}
	for (int i = 0; i < c->n_results; i++)
		if (cpuset_view_has(&c->results[i].cpus, u->cpu))
			u->milli += c->results[i].rt_milli;
	return 0;
}

int64_t rt_cpu_used_milli(const struct state *s, int cpu, const struct rt_limits *l)
{
	struct used u = { .cpu = cpu, .capacity = l->capacity_milli };

	(void)state_foreach_claim(s, add_used, &u);
	return u.milli;
}

struct rt_limits rt_limits_of(const struct sched_limits *sl)
{
	return (struct rt_limits){ .capacity_milli = sl->capacity_milli,
				   .period_min_ns = sl->period_min_ns,
				   .period_max_ns = sl->period_max_ns };
}

int rt_limits_read(const struct cpuset *cpus, int64_t headroom_milli, struct rt_limits *ret,
		   struct errbuf *eb)
{
	struct sched_limits_opts so = { .cpus = cpus, .headroom_milli = headroom_milli };
	struct sched_limits sl;
	int r = sched_limits_read_opts("", NULL, &so, &sl, eb);

	if (r < 0)
		return r;
	*ret = rt_limits_of(&sl);
	log_debug("rt_limits", "capacity_milli=%lld servers_milli=%lld fair_source=%s",
		  (long long)sl.capacity_milli, (long long)sl.servers_milli, sl.fair_source);
	return 0;
}
