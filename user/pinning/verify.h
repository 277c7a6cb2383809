/* verify: what bpf-verify (user/bpf_verify.c) decides, apart from its I/O so
 * that fixtures can replace the machine.
 *
 *   owners.json / --exclusive ──add──> verify_owners ──resolve(mountinfo)──> paths, ids
 *                                            │ (borrowed)
 *   bpfmon tap: foreign switch-ins ──event──> verify_report <──counters── bpfmon, per CPU
 *   /proc/<pid>/task/<tid>/{status,stat,cgroup} ──scan──┘
 *                                            │
 *                        tally: verdict, exit code ──> text tables / one JSON object
 *
 * An owner is a cgroup directory (v2, or v1 cpuset) and the CPUs exclusive to
 * it; its descendants count as the owner. A task is foreign to an exclusive
 * CPU when it is not under that CPU's owner. Dynamic check: a foreign task
 * that ran on an exclusive CPU during the window (what the BPF check counted
 * and named) is a violation. Static check, on the allowed CPUs of every
 * task (Cpus_allowed_list):
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
 * Ownership: both objects own every string they hold. A report borrows its
 * owners: free the report first. Single-threaded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "host/cgroup.h"
#include "host/procfs.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "pinning/bpfmon.h"

struct json_object;

#define VERIFY_ERR_MAX 512	     /* room for a why/reason line */
#define VERIFY_OWNERS_MAX 1024	     /* owners.json entries and --exclusive flags */
#define VERIFY_STATE_MAX (1u << 20) /* owners.json bytes */
#define VERIFY_JSON_DEPTH 8
#define VERIFY_LABEL_MAX 256 /* claim, pod, container */
#define VERIFY_SEEN_MAX 4096 /* (cpu, pid) pairs named per run; beyond: counted only */
#define VERIFY_TOP 10	     /* unconfined processes listed */

struct verify_owner {
	struct cpuset cpus;
	char *cgroup;	    /* absolute directory as given, extra slashes dropped */
	char *path;	    /* hierarchy path as /proc/<pid>/cgroup names it; after resolve */
	uint64_t cgroup_id; /* given by owners.json (0: absent); after resolve: the real one */
	char *claim;	    /* owners.json labels, NULL when absent; claims joined by ',' */
	char *pod, *container;
};

struct verify_owners {
	struct verify_owner *v;
	int n;
	struct cpuset exclusive;  /* the union of every owner's CPUs */
	enum cgroup_hier mode;	  /* after resolve */
	char *mount;		  /* that hierarchy's mount point, after resolve */
	/* --scope: only tasks under this cgroup can be violations; NULL = all. */
	char *scope;	  /* absolute directory as given */
	char *scope_path; /* its hierarchy path, after resolve */
};

/* Caller frees with verify_owners_free(). -ENOMEM. */
int verify_owners_new(struct verify_owners **ret);
struct verify_owners *verify_owners_free(struct verify_owners *o);
DEFINE_FREEP(verify_owners, verify_owners_free)

/* Adds one --exclusive CPUS=CGROUP_PATH. -EINVAL with why (VERIFY_ERR_MAX
 * bytes) for bad syntax, an empty CPU list, a relative path, or CPUs already
 * exclusive to another cgroup; -E2BIG over VERIFY_OWNERS_MAX. The same
 * cgroup given twice gets the union of its CPUs. o is unchanged on error. */
int verify_owners_add_flag(struct verify_owners *o, const char *arg, char *why);
/* Restricts the check to tasks under the cgroup directory path (absolute):
 * the others are counted apart, like kernel threads. -EINVAL with why. */
int verify_owners_set_scope(struct verify_owners *o, const char *path, char *why);
/* Adds the owners of an owners.json document (user/pools.h,
 * POOLS_OWNERS_FILE), len bytes, not necessarily NUL-terminated: one entry
 * per claim, so one cgroup may appear several times. Unknown keys are
 * ignored. -EPROTO with why for malformed JSON or a field of the wrong
 * type, -EINVAL/-E2BIG as verify_owners_add_flag(); entries before the bad
 * one may have been added. */
int verify_owners_add_json(struct verify_owners *o, const char *buf, size_t len, char *why);
/* Places every owner (and the scope) in its hierarchy, from the node's
 * cgroup mounts and the real directories (cgroup_place()): sets path,
 * cgroup_id, mode, mount and scope_path. -ENOENT: a cgroup does not exist;
 * -ENOTDIR; -EINVAL: not under the cgroup2 or cpuset v1 mount, owners in
 * both, one cgroup named twice; -ESTALE: owners.json's cgroupId is not the
 * directory's (recreated). */
int verify_owners_resolve(struct verify_owners *o, const struct cgroup_mounts *mounts, char *why);
/* Every exclusive CPU is in possible (-EINVAL with why otherwise). */
int verify_owners_check_cpus(const struct verify_owners *o, const struct cpuset *possible,
			     char *why);
/* Index of the owner of cpu, or -1. */
int verify_owner_of(const struct verify_owners *o, int cpu);

enum verify_class {
	VERIFY_FINE = 0,       /* no foreign exclusive CPU allowed */
	VERIFY_UNCONFINED = 1, /* some allowed CPUs are foreign exclusive ones */
	VERIFY_PINNED = 2,     /* all of them are: a violation */
};

/* Where a task in cgroup path (a hierarchy path) allowed on allowed may run.
 * ret_foreign (may be NULL) gets the foreign exclusive CPUs it may run on. */
enum verify_class verify_classify(const struct verify_owners *o, const char *path,
				  const struct cpuset *allowed, struct cpuset *ret_foreign);

/* ---- the report ----------------------------------------------------------------------- */

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
	int *seen_slots;	 /* hash (cpu, pid) -> index + 1 */

	bool scanned;
	int threads, unreadable;
	struct verify_pinned *pinned;
	int npinned, pinned_cap;
	int unconfined_threads, unconfined_procs, unconfined_kthreads;
	int outside_pinned, outside_unconfined; /* user threads outside the scope */
	struct verify_unconfined top[VERIFY_TOP]; /* busiest first */
	int ntop;
	char notes[1024]; /* "; "-separated */
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
void verify_report_set_counters(struct verify_report *r, int cpu,
				const struct bpfmon_counters *before,
				const struct bpfmon_counters *after);
/* The static check over proc_root (/proc, or a fixture tree): every
 * <pid>/task/<tid>. Tasks that vanish meanwhile are skipped; others that
 * cannot be read are counted in unreadable. Returns the number of threads
 * scanned, -errno when proc_root cannot be listed. */
int verify_report_scan(struct verify_report *r, const char *proc_root);

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
/* The whole report: tables per exclusive CPU, the unconfined summary, and
 * the verdict as the last line. */
void verify_report_print(const struct verify_report *r, FILE *f);
/* The same as one JSON object (caller puts it). -ENOMEM. */
int verify_report_json(const struct verify_report *r, struct json_object **ret);
