/* Data shared by bpf/pinning.bpf.c, bpf/enforce.bpf.c and user/pinning/bpfmon.c.
 *
 * Read by two compilers (clang -target bpf with vmlinux.h, gcc/clang with
 * <linux/types.h>): data only, fixed-width types, explicit padding, no
 * pointers, no bool. user/pinning/bpfmon.c pins every size with _Static_assert.
 *
 * Maps (all indexed by CPU id unless said otherwise):
 *   owners       ARRAY        struct pinning_owner, written by userspace only
 *   shared_cpus  ARRAY        __u32, 1 = CPU in the shared pool (contention)
 *   cpu_stats    PERCPU_ARRAY one struct pinning_cpu_stats per CPU (key 0)
 *   runq_hist    PERCPU_ARRAY one struct pinning_hist per CPU (key 0)
 *   irq_stats    PERCPU_ARRAY one struct pinning_irq_stats per CPU (key 0)
 *   events       RINGBUF      struct pinning_event
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* What switched in on an exclusive CPU, when it was not the owner or idle. */
enum pinning_kind {
	PINNING_KIND_USER = 0,	  /* a task outside the owner cgroup: violation */
	PINNING_KIND_KTHREAD = 1, /* per-CPU kernel thread: routine, counted apart */
	/* A kernel thread allowed on several CPUs (kworker/u*, unbound
	 * workqueues): a violation, but not one a task affinity change can fix. */
	PINNING_KIND_KTHREAD_UNBOUND = 2,
	/* enforce.bpf.c refused an affinity change (event only, never counted
	 * in violations[]). */
	PINNING_KIND_DENIED = 3,
	PINNING_KIND_MAX = 3, /* size of the per-kind counter arrays */
};

/* pinning_owner.flags */
enum {
	/* The owner's level in the hierarchy is unknown: match the exact
	 * cgroup id only, no descendants. */
	PINNING_OWNER_EXACT = 1u << 0,
};

/* Which cgroup names a task (rodata knob `cgroup_mode`, set before load). */
enum {
	PINNING_CGROUP_V2 = 0, /* task->cgroups->dfl_cgrp */
	PINNING_CGROUP_V1 = 1, /* task->cgroups->subsys[cpuset_cgrp_id]->cgroup */
};

/* owners[cpu]. cgroup_id 0 = the CPU is not exclusive. gen changes on every
 * userspace write so BPF can tell a stale per-CPU interval from a live one. */
struct pinning_owner {
	__u64 cgroup_id; /* kernfs id of the owner cgroup (v2, or v1 cpuset) */
	__u32 level;	 /* owner's depth: root = 0; ignored with OWNER_EXACT */
	__u32 flags;	 /* PINNING_OWNER_* */
	__u32 gen;
	__u32 pad;
};

/* cpu_stats, one per CPU. The first block is counters (monotonic, read by
 * userspace); the tail is private state of the BPF program on that CPU. */
struct pinning_cpu_stats {
	__u64 switches;			   /* switch-ins while the CPU was exclusive */
	__u64 owner_switches;		   /* ... of which onto an owner task */
	__u64 violations[PINNING_KIND_MAX]; /* ... onto a foreign task, by kind */
	__u64 foreign_ns[PINNING_KIND_MAX]; /* time foreign tasks ran, by kind */
	__u64 events_sent;		   /* violation events submitted */
	__u64 events_ratelimited;	   /* events not sent: token bucket empty */
	__u64 events_dropped;		   /* ring buffer full: reserve failed */
	__u64 denials;			   /* enforce.bpf.c: affinity changes refused */
	/* BPF-private from here. */
	__u64 foreign_since_ns; /* 0 = no foreign task running */
	__u32 foreign_kind;
	__u32 foreign_gen;
	__u64 tokens;
	__u64 refill_ns;
};

/* Log2 run-queue latency: slot i counts waits of [2^i, 2^(i+1)) µs, slot 0
 * also takes < 1 µs, the last slot everything above. */
#define PINNING_HIST_SLOTS 27

struct pinning_hist {
	__u64 slots[PINNING_HIST_SLOTS];
	__u64 sum_ns;
};

/* irq_stats, one per CPU: interrupt work the CPU did while it was exclusive
 * (irq and softirq tracepoints). Softirq time includes hard interrupts that
 * came in during it. */
struct pinning_irq_stats {
	__u64 hardirqs;	  /* hard interrupt handlers run */
	__u64 hardirq_ns; /* ... their time */
	__u64 softirqs;	  /* softirq actions run */
	__u64 softirq_ns; /* ... their time */
	/* BPF-private from here: when the one running began, 0 = none. */
	__u64 hard_since_ns;
	__u64 soft_since_ns;
};

/* Ring-buffer record naming an offender. */
struct pinning_event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 cgroup_id;	/* offender's cgroup in the configured hierarchy */
	__u64 owner_cgroup_id;	/* owner of the CPU (0 for DENIED: several) */
	__u32 cpu;		/* the exclusive CPU (DENIED: first one refused) */
	__u32 pid;		/* kernel tid */
	__u32 tgid;
	__u32 kind;		/* enum pinning_kind */
	__u32 task_flags;	/* task->flags (PF_KTHREAD ...) */
	__u32 pad;
	char comm[16];
};

/* enforce.bpf.c: the requested affinity, CPUs 0..PINNING_MASK_WORDS*64-1;
 * CPUs above that are never refused. */
#define PINNING_MASK_WORDS 16

struct pinning_mask {
	__u64 w[PINNING_MASK_WORDS];
};
