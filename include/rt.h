/* Data shared by bpf/rt.bpf.c and user/pinning/rtmon.c: the real-time
 * monitor's maps.
 *
 * Read by two compilers (clang -target bpf with vmlinux.h, gcc/clang with
 * <linux/types.h>): data only, fixed-width types, explicit padding, no
 * pointers, no bool. user/pinning/rtmon.c pins every size with _Static_assert.
 *
 * Maps:
 *   rt_cpus    ARRAY    struct rt_cpu per CPU id: watched (userspace) and the
 *                       CPU's own counters (BPF, that CPU only)
 *   rt_owners  HASH     struct rt_owner_key -> __u32 1: a cgroup whose tasks
 *                       belong on that real-time CPU (userspace)
 *   rt_tasks   LRU_HASH task id -> struct rt_task: every deadline task seen
 *                       on a watched CPU (BPF; userspace reads and prunes)
 */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define RT_TASKS_MAX 4096
/* CPU time per period, histogram: slot i counts periods in which the task
 * used [i, i + 1) eighths of its budget (dl_runtime); the last slot
 * everything from 31/8 up. */
#define RT_HIST_SLOTS 32
#define RT_HIST_PER_BUDGET 8

struct rt_cpu {
	__u32 watched;	     /* 1: a real-time CPU (userspace writes) */
	__u32 last_foreign_pid;
	__u64 switches;	     /* switch-ins while watched */
	__u64 foreign;	     /* ... of a user task no claim of this CPU owns */
	__u64 foreign_ns;    /* time such tasks ran */
	__u64 foreign_pinned; /* ... of which allowed on this CPU alone: put there */
	__u64 kthreads;	     /* ... of a per-CPU kernel thread: routine, apart */
	__u64 foreign_since; /* BPF-private: when the running foreign task came in */
	__u64 last_foreign_cgroup;
	char last_foreign_comm[16];
	__u32 last_pinned_pid;
	__u32 pad;
	char last_pinned_comm[16];
};

struct rt_owner_key {
	__u64 cgroup_id; /* v2 cgroup, or the v1 cpuset cgroup */
	__u32 cpu;
	__u32 pad;
};

/* rt_task.flags: what the current period already counted. */
enum { RT_SEEN_OVERRUN = 1, RT_SEEN_THROTTLE = 2, RT_SEEN_MISS = 4 };

struct rt_task {
	__u64 cgroup_id;
	__u64 dl_runtime, dl_deadline, dl_period; /* its parameters, ns */
	__u64 periods;	   /* CBS instances (periods) completed */
	__u64 used_ns;	   /* CPU time in all of them */
	__u64 max_ns;	   /* most CPU time in one period */
	__u64 throttles;   /* periods in which the kernel throttled it */
	__u64 overruns;    /* periods it ran past its budget (remaining runtime < 0) */
	__u64 misses;	   /* periods it still ran after its absolute deadline */
	__u64 hist[RT_HIST_SLOTS];
	__u64 last_seen_ns;
	/* BPF-private from here. */
	__u64 cur_deadline; /* absolute deadline of the period being counted */
	__u64 cur_used;
	__u64 in_ns;	    /* switch-in time; 0 while not running */
	__u32 cpu;
	__u32 flags;	    /* RT_SEEN_* of the current period */
	__u32 tgid;
	__u32 owned;	    /* 1: its cgroup owns the CPU (a claim's task) */
	char comm[16];
};
