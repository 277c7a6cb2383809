/* rtreport: what the real-time monitor saw, judged and rendered, and the
 * file that tells bpf-verify who owns the real-time CPUs.
 *
 * <state-dir>/rt-owners.json, rewritten by the daemon whenever a real-time
 * container starts or stops (the one writer and reader are here):
 *
 *   {"cpus":"3","owners":[{"cpu":3,"cgroupId":123,"cgroup":"/sys/fs/...",
 *     "claim":"ns/name","container":"loop","runtimeNs":2000000,
 *     "periodNs":10000000}]}
 *
 * Verdict of a window: a violation when a deadline task of a claim ran past
 * its budget (its remaining runtime went negative: the kernel enforces at
 * tick granularity) or past its absolute deadline, when a deadline task no
 * claim of that CPU owns runs there, or when a task no claim owns ran on a
 * real-time CPU it is pinned to (allowed there alone: someone put it there).
 * Foreign tasks allowed elsewhere too (host tasks the scheduler woke there:
 * "unconfined") and per-CPU kernel threads are reported, not violations.
 * Throttling alone is the kernel doing its job, not a violation.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "pinning/rtmon.h"

struct errbuf;
struct json_object;

#define RTREPORT_OWNERS_FILE "rt-owners.json"
#define RTREPORT_OWNERS_MAX 4096
#define RTREPORT_STR_MAX 320

struct rt_owner {
	int cpu;
	uint64_t cgroup_id;
	char cgroup[4096];
	char claim[RTREPORT_STR_MAX]; /* "ns/name" */
	char container[RTREPORT_STR_MAX];
	uint64_t runtime_ns, period_ns; /* 0 for FIFO/RR */
};

struct rt_owners {
	struct cpuset cpus; /* the real-time CPUs in use */
	int n;
	struct rt_owner *v;
};

void rt_owners_done(struct rt_owners *o);
/* Adds an owner (copied). -E2BIG past RTREPORT_OWNERS_MAX. */
int rt_owners_add(struct rt_owners *o, const struct rt_owner *w);
/* The file's text (caller frees) and its strict parser (-EPROTO with eb on
 * anything but the format above; *ret filled only on success). */
int rt_owners_json(const struct rt_owners *o, char **ret);
int rt_owners_parse(const char *buf, size_t len, struct rt_owners *ret, struct errbuf *eb);
/* The owner of cgroup_id on cpu, or NULL. */
const struct rt_owner *rt_owners_find(const struct rt_owners *o, uint64_t cgroup_id, int cpu);

/* ---- a window's report ------------------------------------------------------------- */

struct rtreport_task {
	struct rtmon_task t;
	const struct rt_owner *owner; /* NULL: no claim owns it (foreign) */
	uint64_t p50_ns, p99_ns;
	bool violation;
};

struct rtreport_cpu {
	int cpu;
	struct rt_cpu c;
};

/* A task allowed on real-time CPUs alone that no claim of them owns. */
struct rtreport_pinned {
	int pid, tid;
	char comm[64];
	char cpus[64]; /* its allowed CPUs (cut) */
};

struct rtreport {
	double duration_s;
	int n_tasks, n_cpus, n_pinned;
	struct rtreport_task *tasks;
	struct rtreport_cpu *cpus;
	struct rtreport_pinned *pinned;
	int violations; /* tasks and CPUs with one */
};

/* Judges a snapshot (tasks and the watched CPUs' counters) against owners.
 * Takes nothing; copies what it keeps (owners stay borrowed). */
int rtreport_build(const struct rt_owners *owners, const struct rtmon_task *tasks, int n_tasks,
		   const struct rtreport_cpu *cpus, int n_cpus, double duration_s,
		   struct rtreport *ret);
void rtreport_done(struct rtreport *r);

struct cgroup_mount;
/* Walks proc_root (/proc) for user tasks allowed on real-time CPUs alone
 * whose cgroup (in hierarchy h, mounted at mount) owns no claim there: each
 * is a violation, named. Kernel threads are skipped. Returns how many. */
int rtreport_scan_pinned(struct rtreport *r, const struct rt_owners *o, const char *proc_root,
			 int h, const struct cgroup_mount *mount);

/* 0 clean, 1 violation: the exit code of bpf-verify --realtime. */
int rtreport_exit_code(const struct rtreport *r);
void rtreport_print(const struct rtreport *r, FILE *f);
int rtreport_to_json(const struct rtreport *r, struct json_object **ret);
