/* rtmon: the real-time monitor (bpf/rt.bpf.c) and sole owner of its
 * skeleton. It watches the real-time CPUs it is told of, knows which cgroups
 * own a claim on each, and gives back what the kernel saw per deadline task
 * (budget, CPU time per period, overruns, throttles, misses) and per CPU
 * (tasks no claim owns).
 *
 *   rtctl/bpf-verify ──watch/own──> rt_cpus[], rt_owners (BPF maps)
 *                                        │ sched_switch on those CPUs only
 *   snapshot <── rt_tasks, rt_cpus <─────┘
 *
 * Loading fails cleanly (-errno with eb) where the kernel lacks tp_btf or
 * BTF; the daemon then serves without the monitor and says so.
 * Single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/cleanup.h"
#include "rt.h"

struct errbuf;
struct rtmon;

struct rtmon_opts {
	bool cgroup_v1;	 /* name tasks by their v1 cpuset cgroup (else v2) */
	bool self_stats; /* bpf_enable_stats(): run time of the program (make bench) */
};

int rtmon_new(const struct rtmon_opts *o, struct rtmon **ret, struct errbuf *eb);
struct rtmon *rtmon_free(struct rtmon *m);
DEFINE_FREEP(rtmon, rtmon_free)

/* A real-time CPU to watch (or not). -EINVAL out of range. */
int rtmon_watch(struct rtmon *m, int cpu, bool on);
/* Tasks of cgroup_id belong on cpu (a claim's container) or no longer do. */
int rtmon_own(struct rtmon *m, uint64_t cgroup_id, int cpu, bool on);

/* One deadline task as the kernel saw it. */
struct rtmon_task {
	uint32_t pid;
	struct rt_task s;
};

/* Every deadline task seen on a watched CPU, tasks that exited included
 * until rtmon_prune(). *ret is malloc'ed (caller frees), *n its length. */
int rtmon_tasks(struct rtmon *m, struct rtmon_task **ret, int *n);
/* Forgets tasks that no longer exist. Returns how many. */
int rtmon_prune(struct rtmon *m);
/* The counters of one CPU. */
int rtmon_cpu(struct rtmon *m, int cpu, struct rt_cpu *ret);

/* CPU time per period at quantile q (0..1) from the task's histogram: the
 * upper edge of the bucket holding it, in ns (0 without periods). */
uint64_t rtmon_quantile_ns(const struct rt_task *t, double q);

/* Run time and runs of the program since load (with self_stats). */
int rtmon_prog_stats(const struct rtmon *m, uint64_t *ret_ns, uint64_t *ret_cnt);
