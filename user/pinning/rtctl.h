/* rtctl: real-time claims in the kernel. Each real-time CPU with a prepared
 * claim is its own root domain (host/rtdomain.h); the container holding a
 * real-time claim gets its main task under the claim's policy; a claim that
 * goes ends its tasks.
 *
 *   claim prepared (state) ──> v1: CPU isolated (counted per claim)
 *   CreateContainer ─────────> runtime with NRI >= 0.11 on a v1 node: the
 *                              policy for the runtime to apply (reset on fork;
 *                              the caller makes it NRI's LinuxScheduler)
 *   Start / Synchronize ─────> v2: the container's cgroup a partition; then,
 *                              whoever was to apply it, check the main task
 *                              in the kernel (sched_getattr) and else
 *                              sched_setattr it here: pinned to the claim's
 *                              first CPU, retried every retry_ms while the
 *                              kernel answers EPERM for a task still counted
 *                              on its old CPU, up to retry_max_ms
 *   failure (EBUSY, EPERM, vanished, unknown budget)
 *                           ──> onFailure evict: the runtime evicts it (NRI
 *                              UpdateContainers); warn: it runs on without
 *                              guarantees; both logged and counted (the
 *                              eviction goes through rtctl_set_evict())
 *   StopContainer ───────────> what its cgroup still holds is killed (forked
 *                              children); v2: partition undone; the record
 *                              stays until the claim goes
 *   claim unprepared ────────> tasks still in its container are killed, then
 *                              what still runs real-time on its CPUs alone
 *                              (pinning/rtsweep.h); never switched back to
 *                              SCHED_OTHER (a blocked deadline task's
 *                              bandwidth would stay charged); the CPU's last
 *                              claim: isolation undone
 *
 * A container holds at most one real-time claim and no other dra.cpu claim
 * (its main task takes one policy, on one CPU). After a restart the claims
 * come back from state and Synchronize names the containers: tasks already
 * under their policy are left as they are (the kernel charged them once).
 *
 * Metrics (per scrape, from the monitor, by claim and CPU): dra_cpu_rt_tasks,
 * dra_cpu_rt_runtime_seconds (CPU time per period), dra_cpu_rt_throttled_total,
 * dra_cpu_rt_overruns_total, dra_cpu_rt_deadline_misses_total,
 * dra_cpu_rt_bandwidth_used; per CPU dra_cpu_rt_foreign_switches_total.
 *
 * NRI triggers it (nri/pools.c), but nothing here is NRI's: containers come
 * as struct rtctl_container, the policy goes back as a struct rt_budget, and
 * an eviction goes out through a callback.
 *
 * Single-threaded, on the loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/cdi.h"
#include "lib/cleanup.h"

struct errbuf;
struct event_base;
struct metrics;
struct rt_budget;
struct rt_limits;
struct rtctl;
struct rtmon;
struct state;
struct state_claim;

struct rtctl_opts {
	const struct rt_limits *limits;
	int cgroup_version;	 /* 1 or 2; 0: probe */
	const char *cgroup_root; /* v1 cpuset mount or v2 root; NULL: probed */
	const char *state_dir;	 /* record of the node changes (rtdomain.h) */
	const char *proc_root;	 /* NULL: "" (this machine) */
	unsigned retry_ms;	 /* 0: 10 */
	unsigned retry_max_ms;	 /* 0: 2000 */
	unsigned refresh_ms;	 /* 0: 5000: v1 isolation walked again */
	/* The real-time monitor (borrowed; NULL: none): told which CPUs to
	 * watch and which cgroups own them; its counts become dra_cpu_rt_*
	 * metrics by claim and CPU, and <state_dir>/rt-owners.json tells
	 * bpf-verify --realtime the same. */
	struct rtmon *mon;
	/* A container's real-time policy could not be applied (NULL: nobody
	 * is told): its pod (namespace: the claim's), the claim, why, and
	 * evicted (true) or left running without guarantees. Borrowed for the
	 * call, which must not block. */
	void (*on_failure)(void *ud, const char *pod, const char *pod_uid, const char *container,
			   const struct state_claim *claim, const char *why, bool evicted);
	void *report_ud;
};

/* state, metrics and base are borrowed. Isolates the CPUs of the real-time
 * claims state already holds, and puts back what a previous run left when
 * it holds none. */
int rtctl_new(struct event_base *base, struct state *state, struct metrics *m,
	      const struct rtctl_opts *o, struct rtctl **ret);
struct rtctl *rtctl_free(struct rtctl *rt);
DEFINE_FREEP(rtctl, rtctl_free)

/* A container as the runtime reports it (borrowed for the call). */
struct rtctl_container {
	const char *id, *name, *pod; /* pod: its name, "" when unknown */
	const char *pod_uid;	     /* NULL or "" when unknown */
	const char *cgroups_path;    /* the runtime's cgroupsPath (host/cgroup.h) */
	uint32_t pid;		     /* its main task, 0 when it does not run yet */
};

/* Has the runtime evict container_id (why: for its event); 0 or -errno. */
typedef int (*rtctl_evict_fn)(void *ud, const char *container_id, const char *why);
/* Where evictions go (fn NULL: none, an eviction then fails and is logged). */
void rtctl_set_evict(struct rtctl *rt, rtctl_evict_fn fn, void *ud);

/* The kernel's limits changed (host/schedwatch.h): l is copied. */
void rtctl_set_limits(struct rtctl *rt, const struct rt_limits *l);

/* Who the runtime is (NRI Configure): decides whether it applies the
 * scheduler adjustment itself. */
void rtctl_configured(struct rtctl *rt, const char *name, const char *version,
		      const char *nri_version);
/* True when a runtime so named applies NRI's LinuxScheduler (NRI v0.11:
 * containerd 2.2.1, CRI-O 1.35.0, or nri_version v0.11.0 and later). */
bool rtctl_runtime_applies_scheduler(const char *name, const char *version,
				     const char *nri_version);

/* The container being created with these claims (uids). Refuses (-EINVAL
 * with eb) a container mixing a real-time claim with other claims. 1 with
 * *sched set when the runtime is to apply the claim's policy in the
 * container (always with reset on fork; sched may be NULL: not asked), 0
 * when not or when nothing real-time is involved. */
int rtctl_create(struct rtctl *rt, const struct rtctl_container *c,
		 const char (*uids)[CDI_UID_MAX], int n, struct rt_budget *sched,
		 struct errbuf *eb);
/* The container runs (Start, PostCreate, Synchronize): its pid is known. */
void rtctl_started(struct rtctl *rt, const struct rtctl_container *c,
		   const char (*uids)[CDI_UID_MAX], int n);
/* The container stopped or was removed. */
void rtctl_stopped(struct rtctl *rt, const char *container_id);

/* Counters for tests and /metrics. */
struct rtctl_stats {
	uint64_t applied_runtime, applied_plugin, applied_already;
	uint64_t retries, failures, evictions;
	uint64_t killed; /* tasks ended at teardown */
};
void rtctl_get_stats(const struct rtctl *rt, struct rtctl_stats *ret);
