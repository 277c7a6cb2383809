/* rtdomain: each real-time CPU in use as its own root domain, so that the
 * kernel admits deadline bandwidth per CPU and a deadline task pinned to one
 * CPU has an affinity that covers its root domain (sched_setattr refuses it
 * with EPERM otherwise). Root domains come from cpusets; what this changes
 * on a node is written down in docs/realtime.md.
 *
 * cgroup v1 (the cpuset hierarchy): the kernel cuts the CPUs into scheduling
 * domains from the sched_load_balance flags: below a cpuset with the flag
 * off it looks at the children; a cpuset with the flag on and CPUs becomes
 * (part of) one domain, merged with every other such cpuset it overlaps.
 * Each real-time CPU in use is isolated by:
 *
 *   <mount>/cpuset.sched_load_balance = 0        (was 1: recorded, restored)
 *   <mount>/dra-cpu-rt/          cpus = online, load balance off
 *   <mount>/dra-cpu-rt/balanced  cpus = online - real-time CPUs in use, on:
 *                                every other CPU stays one balanced domain
 *   <mount>/dra-cpu-rt/cpuN      cpus = N, on: CPU N alone
 *
 * and by turning load balancing off in every other cpuset that would merge
 * CPU N with other CPUs (a load-balanced cpuset spanning N and another CPU:
 * kubepods, a pod, system.slice). Those cpusets lose nothing but the right
 * to ask for a domain: their CPUs other than N stay balanced through
 * `balanced`. Each change is recorded (in memory and in <state-dir>/
 * rt-domains.json) and undone when the last real-time CPU leaves, also
 * after a restart. New cpusets appear all the time (a pod's cgroup copies
 * its parent's CPUs), so rtdomain_refresh() walks the hierarchy again; the
 * caller runs it periodically and before every admission. The containers'
 * own cpusets need nothing: theirs is {N}, which is N's domain.
 *
 * cpuset.cpu_exclusive is not used: v1 allows it only under exclusive
 * parents up to the root, and the root's other children hold every CPU.
 *
 * cgroup v2: a CPU in a partition is taken out of every other cgroup's
 * effective CPUs, so the deadline tasks of CPU N must live in the partition
 * that holds N. The container's own cgroup becomes a remote partition:
 * cpuset.cpus.exclusive gains N on every ancestor below the root and on the
 * container's cgroup, then cpuset.cpus.partition = root; undone in reverse.
 * Consequence: on cgroup v2 one container at a time uses a real-time CPU.
 * Each partition is in the record (<state-dir>/rt-domains.json) before its
 * files are written, and out of it once undone: after a kill -9 the next
 * run finds what it may have left (rtdomain_leftovers, rtdomain_settle).
 *
 * Single-threaded; paths are parameters so tests use a fake cgroupfs.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"

struct errbuf;
struct rtdomain;

#define RTDOMAIN_DIR "dra-cpu-rt"
#define RTDOMAIN_RECORD "rt-domains.json"

struct rtdomain_opts {
	int version;	  /* 1 or 2; 0: probe /sys/fs/cgroup */
	const char *root; /* v1: the cpuset mount; v2: the cgroup2 mount; NULL: probed */
	const char *state_dir; /* where the record of the changes lives; NULL: memory only */
};

/* Reads a record a crashed run left and keeps it to be undone later. */
int rtdomain_new(const struct rtdomain_opts *o, struct rtdomain **ret);
/* Undoes nothing (claims outlive the daemon); NULL-safe. */
struct rtdomain *rtdomain_free(struct rtdomain *d);
DEFINE_FREEP(rtdomain, rtdomain_free)

int rtdomain_version(const struct rtdomain *d);
const char *rtdomain_root(const struct rtdomain *d);

/* v1: isolates cpu (idempotent; counted). -errno with eb. */
int rtdomain_v1_acquire(struct rtdomain *d, int cpu, struct errbuf *eb);
/* v1: one user of cpu less; the last one removes cpuN, and the last CPU
 * undoes every recorded change. */
int rtdomain_v1_release(struct rtdomain *d, int cpu);
/* What a previous run left and nothing holds is put back. held: the CPUs
 * prepared claims still sit on (NULL: none). v1, with no CPU in use here:
 * the recorded flags and the tree, unless held meets the CPUs the tree
 * isolates. v2: every partition of the previous run's record whose CPUs
 * held does not meet (made a member again, its CPUs out of
 * cpuset.cpus.exclusive up the path); the others wait for their container
 * (rtdomain_v2_acquire takes its cgroup over) or for a later call. */
void rtdomain_settle(struct rtdomain *d, const struct cpuset *held);
/* Did a previous run leave changes on the node? v1: a record, or its tree
 * (the CPUs its cpuN cpusets isolate in *cpus); v2: partitions its record
 * names and that are not undone or taken over yet (their CPUs in *cpus). */
bool rtdomain_leftovers(const struct rtdomain *d, struct cpuset *cpus);
/* v1: turns load balancing off in cpusets that merge an isolated CPU with
 * others (those created since the last walk). Returns how many it changed. */
int rtdomain_refresh(struct rtdomain *d, struct errbuf *eb);
/* v1: the CPUs in use that the hierarchy does not isolate right now
 * (simulating the kernel's domain generation), and the first cpuset that
 * merges one of them, relative to the root (NULL-able, size 256). */
int rtdomain_v1_unisolated(const struct rtdomain *d, struct cpuset *ret, char *who, size_t size);
/* The CPUs currently isolated (v1) or partitioned (v2). */
const struct cpuset *rtdomain_active(const struct rtdomain *d);

/* v2: makes the cgroup at dir (absolute, under the root) the partition of
 * cpus. -EBUSY when another cgroup holds one of them (also one a previous
 * run left, while that cgroup exists); -errno with eb when the kernel
 * refuses (the partition is left invalid: undone). */
int rtdomain_v2_acquire(struct rtdomain *d, const char *dir, const struct cpuset *cpus,
			struct errbuf *eb);
/* v2: undoes rtdomain_v2_acquire (the cgroup may be gone already). */
int rtdomain_v2_release(struct rtdomain *d, const char *dir);
