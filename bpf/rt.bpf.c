// SPDX-License-Identifier: GPL-2.0
/* Real-time CPUs: what deadline tasks do with their budget, and who else
 * runs there.
 *
 * handle_rt_switch, on every context switch: one array lookup tells whether
 * this CPU is a watched real-time CPU; everything else leaves there. On a
 * real-time CPU:
 *
 *   prev a deadline task   its run time goes to the current period (CBS
 *                          instance, named by its absolute deadline); the
 *                          period counts an overrun when the remaining
 *                          runtime went negative, a throttle when the kernel
 *                          throttled it, a miss when it still ran after the
 *                          absolute deadline (each at most once per period)
 *   next a deadline task   a new absolute deadline closes the previous
 *                          period: periods, max, histogram of CPU time per
 *                          period in eighths of the budget
 *   next foreign           a user task whose cgroup owns no claim on this
 *                          CPU: counted with its run time, the last one named,
 *                          and apart when it may run on this CPU alone (it
 *                          was put there, not merely woken there); per-CPU
 *                          kernel threads are counted apart
 *
 * A miss compares the absolute deadline with the run queue's clock, the
 * clock the kernel sets deadlines in (rq_clock, from sched_clock), never
 * with bpf_ktime_get_ns(): CLOCK_MONOTONIC and sched_clock have different
 * origins (16 s apart on the development VM), so that comparison saw every
 * period of every task as missed. Durations (CPU time per period) may use
 * either clock. The rq is reached through the task's cfs_rq, as in the
 * pinning program's run-queue latency (needs CONFIG_FAIR_GROUP_SCHED; without
 * it misses are not counted rather than counted wrong).
 *
 * The budget is enforced by the kernel at tick granularity without
 * HRTICK_DL: a busy loop overruns by up to a tick every period, which is
 * exactly what the overrun counter shows. Bitfields (dl_throttled) need the
 * probed CO-RE read: the plain one is refused by the verifier here.
 *
 * Cost budget (bpf_stats; make bench): the early exit as cheap as the
 * pinning check's.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "rt.h"
#include "pinning.h"
#include "pinning.bpf.h"

#define SCHED_DEADLINE 6

/* Which cgroup names a task (PINNING_CGROUP_*), set before load. */
const volatile __u32 cgroup_mode = PINNING_CGROUP_V2;

/* max_entries is set to the number of possible CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rt_cpu);
} rt_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, RT_TASKS_MAX);
	__type(key, struct rt_owner_key);
	__type(value, __u32);
} rt_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RT_TASKS_MAX);
	__type(key, __u32);
	__type(value, struct rt_task);
} rt_tasks SEC(".maps");

static __always_inline void close_period(struct rt_task *st)
{
	__u64 used = st->cur_used, slot = RT_HIST_SLOTS - 1;

	if (!st->cur_deadline)
		return;
	st->periods++;
	if (used > st->max_ns)
		st->max_ns = used;
	if (st->dl_runtime) {
		__u64 s = used * RT_HIST_PER_BUDGET / st->dl_runtime;

		if (s < RT_HIST_SLOTS - 1)
			slot = s;
	}
	st->hist[slot & (RT_HIST_SLOTS - 1)]++;
	st->cur_used = 0;
	st->flags = 0;
}

/* Starts counting the period of absolute deadline dl when it is a new one. */
static __always_inline void enter_period(struct rt_task *st, __u64 dl)
{
	if (dl == st->cur_deadline)
		return;
	close_period(st);
	st->cur_deadline = dl;
}

static __always_inline bool owns(struct task_struct *t, __u32 cpu)
{
	struct rt_owner_key k = { .cpu = cpu };
	struct cgroup *cg = task_pinning_cgroup(t, cgroup_mode, true);

	k.cgroup_id = cgroup_id_of(cg, true);
	return bpf_map_lookup_elem(&rt_owners, &k) != NULL;
}

/* This CPU's rq_clock() as the scheduler last updated it (__schedule()
 * does before picking next), 0 when the kernel has no per-task cfs_rq. prev
 * ran here last, so its cfs_rq is this CPU's (set_task_rq() runs on every
 * migration whatever the task's class). */
static __always_inline __u64 rq_clock_of(struct task_struct *prev)
{
	if (!bpf_core_field_exists(prev->se.cfs_rq))
		return 0;
	return BPF_CORE_READ(prev, se.cfs_rq, rq, clock);
}

static __always_inline void switch_out(struct task_struct *prev, __u64 now)
{
	__u32 pid = prev->pid;
	struct rt_task *st = bpf_map_lookup_elem(&rt_tasks, &pid);
	__u64 dl, rq_now;
	__s64 left;

	if (!st || !st->in_ns)
		return;
	dl = prev->dl.deadline;
	enter_period(st, dl);
	st->cur_used += now - st->in_ns;
	st->used_ns += now - st->in_ns;
	st->in_ns = 0;
	st->last_seen_ns = now;
	left = prev->dl.runtime;
	if (left < 0 && !(st->flags & RT_SEEN_OVERRUN)) {
		st->overruns++;
		st->flags |= RT_SEEN_OVERRUN;
	}
	if (BPF_CORE_READ_BITFIELD_PROBED(&prev->dl, dl_throttled) &&
	    !(st->flags & RT_SEEN_THROTTLE)) {
		st->throttles++;
		st->flags |= RT_SEEN_THROTTLE;
	}
	rq_now = rq_clock_of(prev);
	if (rq_now > dl && !(st->flags & RT_SEEN_MISS)) {
		st->misses++;
		st->flags |= RT_SEEN_MISS;
	}
}

static __always_inline void switch_in(struct task_struct *next, __u32 cpu, bool owned, __u64 now)
{
	__u32 pid = next->pid;
	struct rt_task *st = bpf_map_lookup_elem(&rt_tasks, &pid);

	if (!st) {
		struct rt_task fresh = {};

		fresh.dl_runtime = next->dl.dl_runtime;
		fresh.dl_deadline = next->dl.dl_deadline;
		fresh.dl_period = next->dl.dl_period;
		fresh.tgid = next->tgid;
		fresh.cgroup_id = cgroup_id_of(task_pinning_cgroup(next, cgroup_mode, true), true);
		bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), next->comm);
		bpf_map_update_elem(&rt_tasks, &pid, &fresh, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&rt_tasks, &pid);
		if (!st)
			return;
	}
	/* The parameters may change (sched_setattr again): the latest count. */
	st->dl_runtime = next->dl.dl_runtime;
	st->dl_period = next->dl.dl_period;
	st->dl_deadline = next->dl.dl_deadline;
	st->cpu = cpu;
	st->owned = owned;
	enter_period(st, next->dl.deadline);
	st->in_ns = now;
	st->last_seen_ns = now;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_rt_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct rt_cpu *c = bpf_map_lookup_elem(&rt_cpus, &cpu);
	__u64 now;
	bool owned;

	/* Everything but a real-time CPU leaves here. */
	if (!c || !c->watched)
		return 0;
	now = bpf_ktime_get_ns();
	c->switches++;
	if (c->foreign_since) {
		c->foreign_ns += now - c->foreign_since;
		c->foreign_since = 0;
	}
	if (prev->policy == SCHED_DEADLINE)
		switch_out(prev, now);
	if (!next->pid)
		return 0; /* idle */
	owned = owns(next, cpu);
	if (next->policy == SCHED_DEADLINE)
		switch_in(next, cpu, owned, now);
	if (owned)
		return 0;
	if ((next->flags & PF_KTHREAD) && next->nr_cpus_allowed == 1) {
		c->kthreads++;
		return 0;
	}
	c->foreign++;
	c->foreign_since = now;
	if (next->nr_cpus_allowed == 1) {
		c->foreign_pinned++;
		c->last_pinned_pid = next->pid;
		bpf_probe_read_kernel_str(c->last_pinned_comm, sizeof(c->last_pinned_comm),
					  next->comm);
	}
	c->last_foreign_pid = next->pid;
	c->last_foreign_cgroup = cgroup_id_of(task_pinning_cgroup(next, cgroup_mode, true), true);
	bpf_probe_read_kernel_str(c->last_foreign_comm, sizeof(c->last_foreign_comm), next->comm);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
