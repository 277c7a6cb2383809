/* report: what bpf-verify found and what it concludes, apart from the I/O
 * that feeds it, so that fixtures can replace the machine.
 *
 *   bpfmon tap: foreign switch-ins ──add_event──> verify_report <──counters── bpfmon
 *   scan (/proc, scan.h): every thread ──add_thread──┘
 *                                             │
 *                         tally: verdict, exit code ──> report_text / report_json
 *
 * Dynamic check: a foreign task that ran on an exclusive CPU during the
 * window (what the BPF check counted and named) is a violation. Static
 * check, on the allowed CPUs of every task (Cpus_allowed_list):
 *   - none is a foreign exclusive CPU: fine;
 *   - all are (it can run nowhere else): "pinned", a violation;
 *   - some are: "unconfined", a count and the busiest offenders, not a
 *     violation (the scheduler may or may not put it there).
 * Kernel threads are listed apart and fail the verdict only with
 * strict_kthreads: per-CPU ones are routine, and unbound ones are a matter
 * of isolcpus / workqueue cpumask, not of a task's affinity. With a scope
 * (a cgroup such as kubepods.slice), user tasks outside it are counted apart
 * too: "do other pods intrude?" rather than "is the node isolated?".
 *
 * Invariants: cpus[] lists owners->exclusive in ascending order, once each;
 * seen[] holds at most one entry per (cpu, pid), found through seen_index;
 * pinned[] at most VERIFY_PINNED_MAX entries (the rest counted); top[] is
 * sorted by ticks, busiest first.
 * Ownership: the report owns every string it holds and borrows its owners:
 * free the report first. Single-threaded.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/procfs.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "lib/hashtab.h"
#include "pinning/bpfmon.h"
#include "pinning/owners.h"

#define VERIFY_SEEN_MAX 4096   /* (cpu, pid) pairs named per run; beyond: counted only */
#define VERIFY_PINNED_MAX 4096 /* pinned tasks listed; beyond: counted only */
#define VERIFY_TOP 10	       /* unconfined processes listed */

/* A foreign task the BPF check saw switch in on an exclusive CPU. */
struct verify_seen {
	int cpu;
	/* A user task seen only outside the scope (an unknown cgroup is
	 * inside; once inside, always inside). */
	bool outside;
	uint32_t pid, tgid, kind; /* enum pinning_kind */
	char comm[16];
	char *cgroup; /* hierarchy path (the latest inside the scope), NULL when unknown */
	uint64_t switches;
	uint64_t first_ns, last_ns; /* since the window opened */
};

/* A task whose allowed CPUs are all foreign exclusive CPUs. */
struct verify_pinned {
	int tid, pid;
	char comm[PROCFS_COMM_MAX];
	char *cgroup;
	struct cpuset allowed;
	bool kthread;
};

/* An unconfined process (threads of one tgid, first thread's view). */
struct verify_unconfined {
	int pid, threads;
	char comm[PROCFS_COMM_MAX];
	char *cgroup;
	char *allowed; /* cpulist */
	uint64_t ticks;
};

struct verify_cpu {
	int cpu, owner;		 /* owner: index in owners */
	struct bpfmon_counters c; /* during the window (see verify_report_set_counters) */
	bool counted;
	struct bpfmon_irq irq; /* interrupt work during the window */
	bool irq_counted;      /* ... known (the kernel has the irq programs) */
};

struct verify_report {
	const struct verify_owners *owners; /* borrowed */
	const char *source;		    /* where owners came from (borrowed), or NULL */
	bool strict_kthreads;
	bool watched;	   /* the dynamic check ran */
	bool events;	   /* ... and the kernel named offenders (ring buffer) */
	double duration_s; /* of the window */
	uint64_t t0_ns;	   /* window start, CLOCK_MONOTONIC (event timestamps) */
	uint64_t t1_ns;	   /* window end, 0 while open: later events are ignored */
	struct verify_cpu *cpus;
	int ncpus;
	int *owner_tasks; /* [owners->n]: threads found under each owner by the scan */

	struct verify_seen *seen;
	int nseen;
	uint64_t seen_untracked; /* switch-ins of (cpu, pid) pairs beyond VERIFY_SEEN_MAX */
	struct hashtab seen_index; /* (cpu << 32 | pid) -> its entry in seen[] */

	bool scanned;
	int threads, unreadable;
	struct verify_pinned *pinned;
	int npinned, pinned_cap;
	int pinned_untracked[2]; /* beyond VERIFY_PINNED_MAX: [0] user, [1] kernel threads */
	int unconfined_threads, unconfined_procs, unconfined_kthreads;
	int outside_pinned, outside_unconfined; /* user threads outside the scope */
	struct verify_unconfined top[VERIFY_TOP]; /* busiest first */
	int ntop;
	struct verify_unconfined proc; /* the process add_thread() is in: its unconfined threads */
	char notes[1024];	       /* "; "-separated */
};

/* A report for the exclusive CPUs of o (borrowed, resolved). -ENOMEM. */
int verify_report_new(const struct verify_owners *o, bool strict_kthreads,
		      struct verify_report **ret);
struct verify_report *verify_report_free(struct verify_report *r);
DEFINE_FREEP(verify_report, verify_report_free)

void verify_report_note(struct verify_report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A bpfmon tap record (cgroup may be NULL). Events outside [t0_ns, t1_ns],
 * on CPUs that are not exclusive, and of per-CPU kthreads (never sent) are
 * ignored.
 * -ENOMEM. */
int verify_report_add_event(struct verify_report *r, const struct pinning_event *e,
			    const char *cgroup);
/* The window's counters of one exclusive CPU: after - before. */
/* Interrupt work on cpu during the window: after - before. */
void verify_report_set_irq(struct verify_report *r, int cpu, const struct bpfmon_irq *before,
			   const struct bpfmon_irq *after);
void verify_report_set_counters(struct verify_report *r, int cpu,
				const struct bpfmon_counters *before,
				const struct bpfmon_counters *after);

/* One thread as the static check reads it (scan.h). */
struct verify_task {
	int pid, tid;
	char comm[PROCFS_COMM_MAX];
	char cgroup[PATH_MAX]; /* hierarchy path */
	struct cpuset allowed;
	unsigned flags; /* PF_* */
	uint64_t ticks; /* utime + stime */
};

/* The static check of one thread: counted under its owner, classified,
 * listed when pinned, added to its process's unconfined total. The threads
 * of a process come one after another, then verify_report_end_process().
 * -ENOMEM. */
int verify_report_add_thread(struct verify_report *r, const struct verify_task *t);
/* Ends the process add_thread() was in: its unconfined threads, summed,
 * go into the busiest-first top. -ENOMEM. */
int verify_report_end_process(struct verify_report *r);

struct verify_tally {
	/* User switch-ins on foreign exclusive CPUs: the kernel's count, or
	 * with a scope the named ones in it plus any the events could not
	 * place (dropped, unknown cgroup): those count against the verdict. */
	uint64_t running;
	/* Foreign switch-ins no event named: rate-limited, dropped, beyond
	 * VERIFY_SEEN_MAX, or every one without a ring buffer. */
	uint64_t unattributed;
	uint64_t outside_switches;  /* user switch-ins outside the scope, not counted */
	int outside_tasks, outside_pinned;
	int running_tasks;	   /* distinct (cpu, pid) user tasks named */
	int pinned;		   /* user tasks pinned to foreign exclusive CPUs */
	uint64_t kthread_switches; /* per-CPU + unbound kernel threads */
	int kthreads_pinned;
	int kthreads_named;	   /* unbound kthreads named by events */
	bool violation;
	bool incomplete; /* a scope, and switch-ins no event placed */
	int exit_code;	 /* 0 clean, 1 violation, 2 incomplete */
};

void verify_report_tally(const struct verify_report *r, struct verify_tally *ret);
/* The verdict as one line, without "verdict: " and the newline, into buf. */
void verify_report_verdict(const struct verify_report *r, const struct verify_tally *t, char *buf,
			   size_t size);

/* Which seen[] entries: user tasks inside the scope (or no scope), user tasks
 * outside it, unbound kernel threads. */
enum verify_sel { VERIFY_SEL_USER, VERIFY_SEL_OUTSIDE, VERIFY_SEL_KTHREAD, VERIFY_SEL_MAX };

/* The seen[] entries of cpu that sel selects, busiest first, in a new array
 * (*ret, caller frees; NULL only when out of memory). Returns their count. */
int verify_report_seen(const struct verify_report *r, int cpu, enum verify_sel sel,
		       const struct verify_seen ***ret);

/* Clock ticks (stat's utime + stime) in seconds. */
double verify_ticks_s(uint64_t ticks);
