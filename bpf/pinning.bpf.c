// SPDX-License-Identifier: GPL-2.0
/* Exclusive-CPU pinning check and shared-pool run-queue latency.
 *
 * handle_sched_switch (always loaded): on every context switch, one array
 * lookup tells whether this CPU is exclusive (owners[cpu].cgroup_id != 0).
 * Only then: close the accounting interval of the task switched away from,
 * and classify the task switched in:
 *
 *   idle (pid 0)                          fine
 *   in the owner cgroup or below it       fine (owner_switches)
 *   per-CPU kernel thread                 kind=kthread, counted apart
 *   unbound kernel thread                 kind=kthread_unbound, violation
 *   anything else                         kind=user, violation
 *
 * A foreign task's run time is charged at the switch away from it. User and
 * unbound-kthread violations also send a ring-buffer event naming the task,
 * rate-limited per CPU by a token bucket; reserve failures are counted.
 *
 * handle_sched_wakeup{,_new} + handle_sched_switch_runq (optional: userspace
 * turns their autoload off): wait time from enqueue to run for tasks that run
 * on a shared-pool CPU, as a log2 histogram. The enqueue timestamp lives in
 * task-local storage (a pid-keyed hash costs twice as much,
 * reference/bpf-anchors.md section 3).
 *
 * Cost budget: about +30 ns per switch over bpf/baseline.bpf.c.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "pinning.h"
#include "pinning.bpf.h"
#include "pinning_maps.bpf.h"

/* Knobs, set by user/pinning/bpfmon.c between open and load; cgroup_mode is
 * in pinning_maps.bpf.h. Token bucket per CPU: one event per interval, up to
 * burst at once. */
const volatile __u64 event_interval_ns = 10 * 1000 * 1000;
const volatile __u32 event_burst = 16;
/* 0 on kernels without BPF ring buffers (< 5.8): userspace turns `events`
 * into a dummy array and the verifier prunes every use of it. */
const volatile __u32 events_enabled = 1;

/* max_entries of shared_cpus is set to the number of possible CPUs before
 * load, as for owners. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} shared_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pinning_hist);
} runq_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64); /* enqueue time, 0 = none pending */
} enqueued_at SEC(".maps");

static __always_inline bool take_token(struct pinning_cpu_stats *st, __u64 now)
{
	if (!st->tokens) {
		__u64 elapsed = now - st->refill_ns;
		__u64 add;

		if (elapsed < event_interval_ns)
			return false;
		add = elapsed / event_interval_ns;
		st->tokens = add < event_burst ? add : event_burst;
		st->refill_ns = now;
	}
	st->tokens--;
	return true;
}

static __always_inline void send_event(struct pinning_cpu_stats *st, __u64 now, __u32 cpu,
				       struct task_struct *t, __u64 cgid, __u64 owner,
				       __u32 kind, __u32 task_flags)
{
	struct pinning_event *e;

	if (!take_token(st, now)) {
		st->events_ratelimited++;
		return;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		st->events_dropped++;
		return;
	}
	e->ts_ns = now;
	e->cgroup_id = cgid;
	e->owner_cgroup_id = owner;
	e->cpu = cpu;
	e->pid = t->pid;
	e->tgid = t->tgid;
	e->kind = kind;
	e->task_flags = task_flags;
	e->pad = 0;
	bpf_probe_read_kernel(e->comm, sizeof(e->comm), t->comm);
	bpf_ringbuf_submit(e, 0);
	st->events_sent++;
}

/* This CPU is exclusive. Inlined: a call costs more than it saves here. */
static __always_inline int check_switch(const struct pinning_owner *o, __u32 cpu,
					struct task_struct *next)
{
	struct pinning_cpu_stats *st;
	struct cgroup *cg;
	__u32 zero = 0, kind, task_flags;
	__u64 now = 0, cgid;

	st = bpf_map_lookup_elem(&cpu_stats, &zero);
	if (!st)
		return 0;
	st->switches++;

	/* prev is the task that switched in at foreign_since_ns: the switches
	 * of one CPU are sequential. A different gen means the owner changed
	 * meanwhile (or the CPU was not exclusive for a while): drop it. */
	if (st->foreign_since_ns) {
		/* The clock is read only here and for a violation: owner and
		 * idle switches, the bulk on an exclusive CPU, go without it. */
		now = bpf_ktime_get_ns();
		kind = st->foreign_kind;
		if (st->foreign_gen == o->gen && kind < PINNING_KIND_MAX)
			st->foreign_ns[kind] += now - st->foreign_since_ns;
		st->foreign_since_ns = 0;
	}

	if (!next->pid)
		return 0;
	cg = task_pinning_cgroup(next, cgroup_mode);
	cgid = cg->kn->id;
	if (cgroup_is_under(cg, cgid, o)) {
		st->owner_switches++;
		return 0;
	}

	task_flags = next->flags;
	if (!(task_flags & PF_KTHREAD))
		kind = PINNING_KIND_USER;
	else if (next->nr_cpus_allowed == 1)
		kind = PINNING_KIND_KTHREAD;
	else
		kind = PINNING_KIND_KTHREAD_UNBOUND;
	st->violations[kind]++;
	if (!now)
		now = bpf_ktime_get_ns();
	st->foreign_since_ns = now;
	st->foreign_kind = kind;
	st->foreign_gen = o->gen;
	if (kind != PINNING_KIND_KTHREAD && events_enabled)
		send_event(st, now, cpu, next, cgid, o->cgroup_id, kind, task_flags);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct pinning_owner *o = bpf_map_lookup_elem(&owners, &cpu);

	/* The common path: a CPU nobody owns costs this lookup and nothing else. */
	if (!o || !o->cgroup_id)
		return 0;
	return check_switch(o, cpu, next);
}

/* ---- run-queue latency of the shared pool ---------------------------------------------- */

static __always_inline bool cpu_is_shared(__u32 cpu)
{
	__u32 *v = bpf_map_lookup_elem(&shared_cpus, &cpu);

	return v && *v;
}

/* t was queued at now on a CPU that is (or is not) shared. Off the shared
 * pool, forget an older stamp (without creating storage) so a later
 * migration to a shared CPU cannot turn it into a bogus wait. */
static __always_inline void mark_enqueued(struct task_struct *t, bool shared, __u64 now)
{
	__u64 *ts;

	if (shared) {
		ts = bpf_task_storage_get(&enqueued_at, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (ts)
			*ts = now;
		return;
	}
	ts = bpf_task_storage_get(&enqueued_at, t, 0, 0);
	if (ts)
		*ts = 0;
}

static __always_inline void mark_woken(struct task_struct *p)
{
	__u32 cpu = task_cpu(p);
	bool shared = cpu_is_shared(cpu);

	/* No clock read off the shared pool: it is the dearest part here. */
	mark_enqueued(p, shared, shared ? bpf_ktime_get_ns() : 0);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(handle_sched_wakeup, struct task_struct *p)
{
	mark_woken(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new, struct task_struct *p)
{
	mark_woken(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch_runq, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	bool shared = cpu_is_shared(bpf_get_smp_processor_id());
	__u64 now = shared ? bpf_ktime_get_ns() : 0, *ts, delta;
	struct pinning_hist *h;
	__u32 zero = 0, slot;

	/* A preempted task goes straight back on this run queue. */
	if (prev->pid && task_state(prev) == TASK_RUNNING)
		mark_enqueued(prev, shared, now);
	if (!shared || !next->pid)
		return 0;
	ts = bpf_task_storage_get(&enqueued_at, next, 0, 0);
	if (!ts || !*ts)
		return 0;
	delta = now - *ts;
	*ts = 0;
	h = bpf_map_lookup_elem(&runq_hist, &zero);
	if (!h)
		return 0;
	slot = log2_u64(delta / 1000);
	if (slot >= PINNING_HIST_SLOTS)
		slot = PINNING_HIST_SLOTS - 1;
	h->slots[slot]++;
	h->sum_ns += delta;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
