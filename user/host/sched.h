/* sched: the kernel's real-time scheduling interface, as the driver needs it.
 *
 *  - limits: what deadline tasks may use per CPU (sched_rt_runtime_us /
 *    sched_rt_period_us, less the fair server's reservation on kernels that
 *    have one) and the deadline period range (sched_deadline_period_*_us);
 *  - sched_setattr(2) / sched_getattr(2) on one task, the conversion of
 *    their -1/errno convention to -errno, and the policies' numbers;
 *  - what /proc says of a task: the CPU it last ran on (the one the kernel
 *    admits a deadline task against while it sleeps) and its threads.
 *
 * Deadline servers: the kernel reserves deadline bandwidth on every CPU for
 * its own servers out of the same budget deadline tasks are admitted
 * against: the fair server (6.12, commit "sched/fair: Fair server
 * interface") and, on kernels with sched_ext, the ext server. Each is
 * /sys/kernel/debug/sched/<name>_server/cpuN/{runtime,period} (ns), and an
 * admin or a BPF scheduler may change them at run time, so the limits are
 * read per CPU, summed over every server the tree lists (whatever its name),
 * and read again while the daemon runs (host/schedwatch.h). Where debugfs
 * is not mounted or not readable, the kernel's defaults are assumed and
 * sched_limits.servers_note says why: 50 ms every second for the fair
 * server on 6.12 and later, and as much again for the ext server when the
 * kernel has sched_ext (/sys/kernel/sched_ext): the published capacity may
 * then be lower than the kernel admits, never higher.
 *
 * Roots are parameters so tests read fixtures: "" is this machine.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cpuset;
struct errbuf;

/* Policies (uapi/linux/sched.h). */
#define SCHED_POLICY_OTHER 0
#define SCHED_POLICY_FIFO 1
#define SCHED_POLICY_RR 2
#define SCHED_POLICY_DEADLINE 6
/* sched_attr.sched_flags */
#define SCHED_FLAG_RESET_ON_FORK_ 0x01ull
#define SCHED_FLAG_DL_OVERRUN_ 0x04ull

struct sched_limits {
	int64_t capacity_milli; /* per CPU, for deadline tasks: share - servers - headroom */
	uint64_t period_min_ns, period_max_ns;
	int64_t rt_runtime_us, rt_period_us; /* runtime -1: unlimited */
	int64_t fair_milli;		     /* the fair server's share (worst CPU), 0 when none */
	int64_t ext_milli;		     /* the sched_ext server's share (worst CPU), 0 when none */
	int64_t servers_milli;		     /* every server of the worst CPU, summed */
	int64_t headroom_milli;		     /* what the caller asked to keep back */
	int n_servers;			     /* servers debugfs lists (0 with defaults) */
	const char *fair_source;	     /* "debugfs", "default", "none" (static text) */
	/* Not empty: why the servers are the kernel's defaults, not read. */
	char servers_note[160];
};

struct sched_limits_opts {
	const struct cpuset *cpus; /* CPUs whose servers count; NULL = every CPU listed */
	int64_t headroom_milli;	   /* per CPU, kept back beyond the servers (>= 0) */
};

/* Reads the limits under root ("" = this machine). release: the kernel
 * release ("6.18.4-..."), NULL = uname(). o may be NULL (every CPU, no
 * headroom). -errno with eb on a missing or malformed sysctl, or when
 * nothing is left for deadline tasks (-ENOSPC). */
int sched_limits_read(const char *root, const char *release, struct sched_limits *ret,
		      struct errbuf *eb);
int sched_limits_read_opts(const char *root, const char *release,
			   const struct sched_limits_opts *o, struct sched_limits *ret,
			   struct errbuf *eb);

/* Do a and b publish the same thing (capacity and periods)? */
bool sched_limits_same(const struct sched_limits *a, const struct sched_limits *b);

/* True when release is major.minor or later. */
bool sched_release_at_least(const char *release, int major, int minor);

/* One task's policy and parameters (struct sched_attr, what we use of it). */
struct sched_params {
	uint32_t policy;
	uint64_t flags;
	uint32_t priority;
	uint64_t runtime_ns, deadline_ns, period_ns;
};

/* sched_setattr(tid): 0 or -errno (EBUSY: no bandwidth in the root domain;
 * EPERM: affinity narrower than the root domain, or no privilege). */
int sched_set(pid_t tid, const struct sched_params *p);
/* sched_getattr(tid): 0 or -errno (ESRCH: gone). */
int sched_get(pid_t tid, struct sched_params *ret);
/* sched_setaffinity(tid, cpus): 0 or -errno. */
int sched_set_affinity(pid_t tid, const struct cpuset *cpus);

/* sched_getaffinity(tid) into *ret: 0 or -errno (ESRCH: gone). */
int sched_get_affinity(pid_t tid, struct cpuset *ret);

/* Calls fn(ud, pid, tid) for every task of every process under
 * <proc_root>/proc (the threads of /proc/<pid>/task), kernel threads
 * left out; fn returning non-zero stops the walk with that value. Tasks
 * come and go while it runs: a process gone meanwhile is skipped. */
int sched_foreach_task(const char *proc_root, int (*fn)(void *ud, pid_t pid, pid_t tid),
		       void *ud);

/* The CPU tid last ran on (/proc/<tid>/stat field 39), or -errno. */
int sched_task_cpu(const char *proc_root, pid_t tid);

/* When tid started (/proc/<tid>/stat field 22, clock ticks since boot): with
 * the pid, names one task across pid reuse. -ESRCH when gone. */
int sched_task_start(const char *proc_root, pid_t tid, uint64_t *ret);

/* Is the task's current policy and parameters those of p (flags aside)? */
bool sched_params_match(const struct sched_params *have, const struct sched_params *want);

const char *sched_policy_name(uint32_t policy);
