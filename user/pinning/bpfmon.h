/* bpfmon: the kernel-side pinning check, run-queue latency and enforcement,
 * and the sole owner of their BPF skeletons.
 *
 *   state/nri ──set_owner/clear_owner/set_shared──> owners[], shared_cpus[] (BPF maps)
 *                                                        │ sched_switch
 *   loop <── ring buffer (violation events) <────────────┘ cpu_stats[], runq_hist[]
 *    │  log the offender once per interval, remediate if asked      │
 *    └──────────────────────────── metrics collector <─────────────┘ (per scrape)
 *
 * Loading never fails the daemon: bpfmon_new() returns an object even when
 * the kernel refuses the programs; bpfmon_error() then says why, every setter
 * still records state (so a later scrape or log is consistent) and the
 * dra_cpu_bpf_loaded gauge reads 0. Features the kernel lacks degrade one
 * piece at a time (contention histogram, events, deny mode) with a reason in
 * bpfmon_notes(). bpfmon_new() does not log the outcome: its caller does, once.
 *
 * Cgroups are named by id: the kernfs id of the v2 cgroup, or on cgroup v1
 * nodes of the cpuset hierarchy's cgroup (cgroup_id() of its directory,
 * host/cgroup.h). An owner accepts its descendants.
 *
 * Single-threaded: every call on the loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/cgroup.h"
#include "lib/cleanup.h"
#include "pinning.h"

struct bpfmon;
struct cpuset;
struct event_base;
struct metrics;

/* --pinning-enforcement */
enum bpfmon_enforcement {
	BPFMON_AUDIT = 0,     /* report only */
	BPFMON_REMEDIATE = 1, /* also move offending host tasks to the shared pool */
	BPFMON_DENY = 2,      /* also refuse affinity escapes (BPF LSM); else remediate */
};

/* Kernel features; bpfmon_opts.without pretends some are missing. */
enum {
	BPFMON_FEAT_TP_BTF = 1u << 0,	    /* tp_btf programs (5.5); else raw_tp twins */
	BPFMON_FEAT_RINGBUF = 1u << 1,	    /* BPF ring buffer (5.8) */
	BPFMON_FEAT_TASK_STORAGE = 1u << 2, /* task storage map (5.11; from tracing 5.13): deny */
	BPFMON_FEAT_BPF_LSM = 1u << 3,	    /* "bpf" among the active LSMs */
	BPFMON_FEAT_BTF = 1u << 4,	    /* vmlinux BTF (CONFIG_DEBUG_INFO_BTF) */
};

struct bpfmon_opts {
	bool contention;		 /* load the run-queue latency programs */
	enum cgroup_hier cgroup; /* whose ids owners are (CGROUP_V1: the cpuset one) */
	enum bpfmon_enforcement enforcement;
	unsigned event_rate;		 /* violation events/s per CPU; 0 = 100 */
	unsigned event_burst;		 /* 0 = 16 */
	unsigned log_interval_s;	 /* one offender line per (cpu, pid) per interval; 0 = 10 */
	bool self_stats;		 /* bpf_enable_stats(): per-program run time (~30 ns/run) */
	/* Remediate only tasks under this cgroup (staged roll-out, tests); 0 = any. */
	uint64_t remediate_scope;
	/* Mount point of the hierarchy (v2 or v1 cpuset); NULL = from
	 * /proc/self/mountinfo, which also says its root either way. */
	const char *cgroup_mount;
	const char *schedstat_path; /* NULL = /proc/schedstat */
	unsigned without;	    /* BPFMON_FEAT_* to treat as missing */
};

/* Monotonic counters of one CPU, or summed over all CPUs. */
struct bpfmon_counters {
	uint64_t switches;		       /* switch-ins while the CPU was exclusive */
	uint64_t owner_switches;	       /* ... onto an owner task */
	uint64_t violations[PINNING_KIND_MAX]; /* by enum pinning_kind */
	uint64_t foreign_ns[PINNING_KIND_MAX];
	uint64_t events_sent, events_ratelimited, events_dropped;
	uint64_t denials; /* deny mode: affinity changes refused */
};

/* Userspace side of enforcement and the event stream (totals). */
struct bpfmon_actions {
	uint64_t events;	     /* ring-buffer records handled */
	uint64_t audited;	     /* audit mode: host offenders remediation would move */
	uint64_t remediated;	     /* moved to the shared pool */
	uint64_t remediate_failed;   /* sched_setaffinity failed (not ESRCH) */
	uint64_t read_errors;	     /* ring_buffer__consume() < 0 */
};

/* Probes the kernel, loads and attaches what it can, registers the ring
 * buffer on base (NULL: no loop; call bpfmon_drain()). Returns 0 and a new
 * object in *ret even when nothing could load (see bpfmon_error()); -EINVAL
 * for bad options, -ENOMEM. Caller frees with bpfmon_free(). */
int bpfmon_new(struct event_base *base, const struct bpfmon_opts *o, struct bpfmon **ret);
/* Detaches everything. NULL-safe; returns NULL. */
struct bpfmon *bpfmon_free(struct bpfmon *m);
DEFINE_FREEP(bpfmon, bpfmon_free)

/* The pinning check is attached. */
bool bpfmon_is_loaded(const struct bpfmon *m);
/* Why the pinning check is not loaded; NULL when it is. Borrowed. */
const char *bpfmon_error(const struct bpfmon *m);
/* What runs degraded and why ("" when everything asked for runs). Borrowed. */
const char *bpfmon_notes(const struct bpfmon *m);
/* BPFMON_FEAT_* the kernel has (after opts.without). */
unsigned bpfmon_features(const struct bpfmon *m);
bool bpfmon_has_contention(const struct bpfmon *m);
/* The mode in force: deny falls back to remediate without BPF LSM. */
enum bpfmon_enforcement bpfmon_enforcement(const struct bpfmon *m);
const char *bpfmon_enforcement_name(enum bpfmon_enforcement e);

/* Marks cpu exclusive to cgroup_id (and its descendants). -EINVAL for a cpu
 * out of range or id 0. Resolves the cgroup's path (level for the descendant
 * check, log lines, remediation); if it cannot, matches the exact id only and
 * logs a warning. */
int bpfmon_set_owner(struct bpfmon *m, int cpu, uint64_t cgroup_id);
int bpfmon_clear_owner(struct bpfmon *m, int cpu);
/* The shared pool: run-queue latency is measured there and remediation moves
 * offenders onto it. CPUs beyond the possible ones are ignored. */
int bpfmon_set_shared(struct bpfmon *m, const struct cpuset *shared);

/* cpu = -1 sums all CPUs. -EINVAL for a bad cpu, -ENODEV when not loaded. */
int bpfmon_read_counters(struct bpfmon *m, int cpu, struct bpfmon_counters *ret);
/* Run-queue latency of the shared pool, summed over CPUs: slot i counts waits
 * of [2^i, 2^(i+1)) µs (slot 0 from 0, the last slot has no upper bound).
 * -ENODEV when the contention programs are not loaded. */
int bpfmon_read_runq(struct bpfmon *m, uint64_t slots[PINNING_HIST_SLOTS], uint64_t *ret_sum_ns);
void bpfmon_read_actions(const struct bpfmon *m, struct bpfmon_actions *ret);
/* Interrupt work a CPU did while it was exclusive (bpf/pinning.bpf.c's irq
 * programs), or summed over all CPUs (cpu -1). */
struct bpfmon_irq {
	uint64_t hardirqs, hardirq_ns; /* hard interrupt handlers */
	uint64_t softirqs, softirq_ns; /* softirq actions */
};
/* -EINVAL for a bad cpu, -ENODEV when not loaded or without tp_btf. */
int bpfmon_read_irq(struct bpfmon *m, int cpu, struct bpfmon_irq *ret);
/* Self-cost of a loaded program by name (handle_sched_switch, ...): runs and
 * ns spent, non-zero only while BPF stats are on (opts.self_stats or
 * kernel.bpf_stats_enabled). -ENOENT when no such program is loaded. */
int bpfmon_prog_stats(const struct bpfmon *m, const char *name, uint64_t *ret_runs,
		      uint64_t *ret_ns);
/* Handles what the ring buffer holds now (tests, CLIs without a loop).
 * Returns the number of records or -errno. */
int bpfmon_drain(struct bpfmon *m);

/* Called for each offender handled (after the once-per-interval filter) with
 * its cgroup path (NULL if unknown) and the action taken ("none",
 * "audit_only", "remediated", ...). For CLIs and tests; fn NULL removes it. */
typedef void (*bpfmon_event_fn)(const struct pinning_event *e, const char *cgroup,
				const char *action, void *userdata);
void bpfmon_set_event_fn(struct bpfmon *m, bpfmon_event_fn fn, void *userdata);
/* Called for every record the ring buffer delivers, before the
 * once-per-interval filter, the log line and any action, with the offender's
 * cgroup path (NULL if unknown, borrowed for the call). For CLIs that count
 * every switch-in (bpf-verify); fn NULL removes it. */
typedef void (*bpfmon_tap_fn)(const struct pinning_event *e, const char *cgroup, void *userdata);
void bpfmon_set_tap_fn(struct bpfmon *m, bpfmon_tap_fn fn, void *userdata);

/* Registers (once) the dra_cpu_bpf_*, dra_cpu_pinning_*, dra_cpu_affinity_*,
 * dra_cpu_exclusive_interrupt*,
 * dra_cpu_runqueue_* and dra_cpu_schedstat_* families and a collector that
 * refreshes them before each render. The collector borrows m: free reg
 * before m, or never render after bpfmon_free(). */
int bpfmon_metrics_register(struct bpfmon *m, struct metrics *reg);

/* ---- probe: every BPF object of the project against the running kernel -------------- */

enum bpfmon_obj {
	BPFMON_OBJ_PINNING = 0,	 /* bpf/pinning.bpf.c: the pinning check */
	BPFMON_OBJ_ENFORCE = 1,	 /* bpf/enforce.bpf.c (deny mode) */
	BPFMON_OBJ_BASELINE = 2, /* bpf/baseline.bpf.c (the benchmark yardstick) */
	BPFMON_OBJ_RUNQUEUE = 3, /* bpf/pinning.bpf.c with the run-queue programs */
	BPFMON_OBJ_RT = 4,	 /* bpf/rt.bpf.c (the real-time monitor) */
	BPFMON_OBJ_MAX = 5,
};

struct bpfmon_probe_obj {
	const char *name; /* "pinning", "enforce", "baseline", "runqueue", "rt" */
	int load;	  /* 0 loaded, else -errno */
	int attach;	  /* 0 attached (and detached again), -errno, 1 not tried */
	char *log;	  /* what libbpf said meanwhile (the verifier log on failure), never NULL */
};

struct bpfmon_probe {
	unsigned features; /* BPFMON_FEAT_* */
	enum cgroup_hier cgroup;
	struct bpfmon_probe_obj obj[BPFMON_OBJ_MAX];
};

/* Loads and attaches every object in turn, each with its own maps (owners
 * all empty: nothing is checked or refused), and detaches it again at once.
 * libbpf's warnings (the verifier log of a failed load) are captured per
 * object instead of printed. Returns 0 and a new result in *ret whatever
 * loaded, -ENOMEM. Caller frees with bpfmon_probe_free(). */
int bpfmon_probe_new(enum cgroup_hier cgroup, struct bpfmon_probe **ret);
struct bpfmon_probe *bpfmon_probe_free(struct bpfmon_probe *p);
DEFINE_FREEP(bpfmon_probe, bpfmon_probe_free)
