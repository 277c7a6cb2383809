/* The real-time monitor's skeleton and maps. See rtmon.h. */
#include "pinning/rtmon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define LOG_MOD "rtmon"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "pinning.h"
#include "rt.skel.h"

/* The layout bpf/rt.bpf.c writes: pinned. */
_Static_assert(sizeof(struct rt_cpu) == 104, "ABI with bpf/rt.bpf.c");
_Static_assert(sizeof(struct rt_owner_key) == 16, "ABI with bpf/rt.bpf.c");
_Static_assert(sizeof(struct rt_task) == 400, "ABI with bpf/rt.bpf.c");

struct rtmon {
	struct rt_bpf *skel;
	int ncpu;
	int stats_fd; /* bpf_enable_stats(), -1 when off */
};

int rtmon_new(const struct rtmon_opts *o, struct rtmon **ret, struct errbuf *eb)
{
	_cleanup_(rtmon_freep) struct rtmon *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->stats_fd = -1;
	m->ncpu = libbpf_num_possible_cpus();
	if (m->ncpu <= 0)
		return errbuf_fail(eb, m->ncpu ? m->ncpu : -EINVAL, "cannot count the CPUs");
	m->skel = rt_bpf__open();
	if (!m->skel)
		return errbuf_fail(eb, -errno, "opening the real-time monitor: %s",
				   strerror(errno));
	m->skel->rodata->cgroup_mode = o->cgroup_v1 ? PINNING_CGROUP_V1 : PINNING_CGROUP_V2;
	r = bpf_map__set_max_entries(m->skel->maps.rt_cpus, (__u32)m->ncpu);
	if (r < 0)
		return errbuf_fail(eb, r, "sizing rt_cpus: %s", strerror(-r));
	r = rt_bpf__load(m->skel);
	if (r < 0)
		return errbuf_fail(eb, r, "loading the real-time monitor: %s (needs BTF and tp_btf)",
				   strerror(-r));
	r = rt_bpf__attach(m->skel);
	if (r < 0)
		return errbuf_fail(eb, r, "attaching the real-time monitor: %s", strerror(-r));
	if (o->self_stats) {
		m->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (m->stats_fd < 0)
			log_warn("rt_self_stats_off", "reason=%s", log_quote(strerror(errno)));
	}
	*ret = TAKE_PTR(m);
	return 0;
}

struct rtmon *rtmon_free(struct rtmon *m)
{
	if (!m)
		return NULL;
	rt_bpf__destroy(m->skel);
	if (m->stats_fd >= 0)
		(void)close(m->stats_fd);
	free(m);
	return NULL;
}

int rtmon_watch(struct rtmon *m, int cpu, bool on)
{
	struct rt_cpu c = { 0 };
	__u32 key = (__u32)cpu;
	int r;

	if (cpu < 0 || cpu >= m->ncpu)
		return -EINVAL;
	/* Counters start afresh when a CPU starts being watched. */
	if (on) {
		r = bpf_map__lookup_elem(m->skel->maps.rt_cpus, &key, sizeof(key), &c, sizeof(c), 0);
		if (r < 0)
			return r;
		if (c.watched)
			return 0;
		memset(&c, 0, sizeof(c));
	}
	c.watched = on;
	return bpf_map__update_elem(m->skel->maps.rt_cpus, &key, sizeof(key), &c, sizeof(c),
				    BPF_ANY);
}

int rtmon_own(struct rtmon *m, uint64_t cgroup_id, int cpu, bool on)
{
	struct rt_owner_key k = { .cgroup_id = cgroup_id, .cpu = (__u32)cpu };
	__u32 one = 1;
	int r;

	if (cpu < 0 || cpu >= m->ncpu || !cgroup_id)
		return -EINVAL;
	if (on)
		return bpf_map__update_elem(m->skel->maps.rt_owners, &k, sizeof(k), &one,
					    sizeof(one), BPF_ANY);
	r = bpf_map__delete_elem(m->skel->maps.rt_owners, &k, sizeof(k), 0);
	return r == -ENOENT ? 0 : r;
}

int rtmon_tasks(struct rtmon *m, struct rtmon_task **ret, int *n)
{
	struct bpf_map *map = m->skel->maps.rt_tasks;
	struct rtmon_task *v = calloc(RT_TASKS_MAX, sizeof(*v));
	__u32 key, next;
	int k = 0, r;
	bool first = true;

	if (!v)
		return -ENOMEM;
	while (k < RT_TASKS_MAX) {
		r = bpf_map__get_next_key(map, first ? NULL : &key, &next, sizeof(next));
		if (r == -ENOENT)
			break;
		if (r < 0) {
			free(v);
			return r;
		}
		first = false;
		key = next;
		if (bpf_map__lookup_elem(map, &key, sizeof(key), &v[k].s, sizeof(v[k].s), 0) < 0)
			continue; /* gone meanwhile */
		v[k].pid = key;
		k++;
	}
	*ret = v;
	*n = k;
	return 0;
}

int rtmon_prune(struct rtmon *m)
{
	struct rtmon_task *v;
	int n, gone = 0, r;

	r = rtmon_tasks(m, &v, &n);
	if (r < 0)
		return r;
	for (int i = 0; i < n; i++)
		if (kill((pid_t)v[i].pid, 0) < 0 && errno == ESRCH &&
		    bpf_map__delete_elem(m->skel->maps.rt_tasks, &v[i].pid, sizeof(v[i].pid), 0) == 0)
			gone++;
	free(v);
	return gone;
}

int rtmon_cpu(struct rtmon *m, int cpu, struct rt_cpu *ret)
{
	__u32 key = (__u32)cpu;

	if (cpu < 0 || cpu >= m->ncpu)
		return -EINVAL;
	return bpf_map__lookup_elem(m->skel->maps.rt_cpus, &key, sizeof(key), ret, sizeof(*ret), 0);
}

uint64_t rtmon_quantile_ns(const struct rt_task *t, double q)
{
	uint64_t total = 0, seen = 0, want;

	for (int i = 0; i < RT_HIST_SLOTS; i++)
		total += t->hist[i];
	if (!total)
		return 0;
	want = (uint64_t)(q * (double)total + 0.999999);
	if (want < 1)
		want = 1;
	for (int i = 0; i < RT_HIST_SLOTS; i++) {
		seen += t->hist[i];
		if (seen >= want) {
			uint64_t edge = (uint64_t)(i + 1) * t->dl_runtime / RT_HIST_PER_BUDGET;

			/* The open last bucket, or an edge above what was ever
			 * seen: the maximum is the better bound. */
			return i == RT_HIST_SLOTS - 1 || edge > t->max_ns ? t->max_ns : edge;
		}
	}
	return t->max_ns;
}

int rtmon_prog_stats(const struct rtmon *m, uint64_t *ret_ns, uint64_t *ret_cnt)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(bpf_program__fd(m->skel->progs.handle_rt_switch), &info, &len) <
	    0)
		return -errno;
	*ret_ns = info.run_time_ns;
	*ret_cnt = info.run_cnt;
	return 0;
}
