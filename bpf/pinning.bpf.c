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
 * handle_sched_switch_runq (optional: userspace turns its autoload off):
 * run-queue latency of the shared pool as a log2 histogram, read from the
 * scheduler's own bookkeeping instead of timestamping wakeups. With
 * CONFIG_SCHED_INFO the kernel stamps every enqueue in
 * task->sched_info.last_queued (rq clock) and, at switch-in, adds
 * rq->clock - last_queued to sched_info.run_delay. sched_switch fires just
 * before that (__schedule: trace_sched_switch, then context_switch ->
 * sched_info_switch), so the stamp of the task switched in is still there and
 * this CPU's rq->clock was updated for this very switch: their difference is
 * exactly the wait the kernel is about to account, from the wakeup (or
 * preemption, or migration here) to now. No wakeup hooks, no per-task
 * storage, one program per switch. Kernels before 5.14 (where c5895d3f06cb
 * "sched: Simplify sched_info_on()" made it IS_ENABLED(CONFIG_SCHED_INFO))
 * keep the stamps only while schedstats or delay accounting are on
 * (delayacct_on, on by default until e4042ad49235 "delayacct: Default
 * disabled", also 5.14); with neither the histogram stays empty.
 *
 * handle_irq_* / handle_softirq_* (tp_btf only; not loaded on kernels
 * without it): time spent in hard interrupt handlers and softirq actions on
 * exclusive CPUs, per CPU. The same one lookup as the pinning check decides;
 * a CPU nobody owns costs nothing more (budget: 15 ns per run over an empty
 * program, make bench).
 *
 * Each program has a raw_tp twin (*_raw) for kernels without tp_btf (< 5.5,
 * f1b9509c2fb0 "bpf: Replace prog_raw_tp+btf_id with prog_tracing"):
 * same code, CO-RE probe reads instead of BTF loads (pinning.bpf.h).
 * userspace loads one of each pair (bpf_program__set_autoload).
 *
 * Cost budget (bpf_stats, over bpf/baseline.bpf.c; make bench): pinning
 * check under 15 ns per run, run-queue latency under 60 ns per switch.
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
/* 0 on kernels without BPF ring buffers (< 5.8, 457f44363a88): userspace turns `events`
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
				       __u32 kind, __u32 task_flags, bool btf)
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
	e->pid = KREAD(btf, t, pid);
	e->tgid = KREAD(btf, t, tgid);
	e->kind = kind;
	e->task_flags = task_flags;
	e->pad = 0;
	bpf_probe_read_kernel(e->comm, sizeof(e->comm), t->comm);
	bpf_ringbuf_submit(e, 0);
	st->events_sent++;
}

/* This CPU is exclusive. Inlined: a call costs more than it saves here. */
static __always_inline int check_switch(const struct pinning_owner *o, __u32 cpu,
					struct task_struct *next, bool btf)
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

	if (!KREAD(btf, next, pid))
		return 0;
	cg = task_pinning_cgroup(next, cgroup_mode, btf);
	cgid = cgroup_id_of(cg, btf);
	if (cgroup_is_under(cg, cgid, o, btf)) {
		st->owner_switches++;
		return 0;
	}

	task_flags = KREAD(btf, next, flags);
	if (!(task_flags & PF_KTHREAD))
		kind = PINNING_KIND_USER;
	else if (KREAD(btf, next, nr_cpus_allowed) == 1)
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
		send_event(st, now, cpu, next, cgid, o->cgroup_id, kind, task_flags, btf);
	return 0;
}

static __always_inline int pinning_switch(struct task_struct *next, bool btf)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct pinning_owner *o = bpf_map_lookup_elem(&owners, &cpu);

	/* The common path: a CPU nobody owns costs this lookup and nothing else. */
	if (!o || !o->cgroup_id)
		return 0;
	return check_switch(o, cpu, next, btf);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return pinning_switch(next, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return pinning_switch(next, false);
}

/* ---- run-queue latency of the shared pool ---------------------------------------------- */

/* The wait of next that ends now, 0 if it did not wait (idle, or a task
 * already accounted). The clock is this CPU's rq->clock, reached through
 * next: its cfs_rq is this CPU's (set_task_rq() runs on every migration,
 * whatever the task's class) and points back at the rq. That needs
 * CONFIG_FAIR_GROUP_SCHED, which Kubernetes nodes have (CPU quotas need it);
 * without it the CO-RE relocation fails, the program does not load and
 * userspace runs without the histogram. A typed ksym (this_cpu_ptr of
 * runqueues) would need CONFIG_KALLSYMS_ALL, which many kernels lack. */
static __always_inline __u64 runq_wait(struct task_struct *next, bool btf)
{
	__u64 queued, now;

	if (btf) {
		queued = next->sched_info.last_queued;
		if (!queued)
			return 0;
		now = next->se.cfs_rq->rq->clock;
	} else {
		queued = BPF_CORE_READ(next, sched_info.last_queued);
		if (!queued)
			return 0;
		now = BPF_CORE_READ(next, se.cfs_rq, rq, clock);
	}
	return now > queued ? now - queued : 0;
}

static __always_inline int runq_switch(struct task_struct *next, bool btf)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0;
	__u32 *shared = bpf_map_lookup_elem(&shared_cpus, &cpu);
	struct pinning_hist *h;
	__u64 delta, slot;

	if (!shared || !*shared)
		return 0;
	delta = runq_wait(next, btf);
	if (!delta)
		return 0;
	h = bpf_map_lookup_elem(&runq_hist, &zero);
	if (!h)
		return 0;
	/* 64 bits and the barrier: the index checked is the register used. As
	 * a __u32, clang tested one zero-extended copy of it and indexed with
	 * another, which the 6.1 verifier (Debian 12) cannot tie together:
	 * "unbounded memory access", and no histogram. */
	slot = log2_u64(delta / 1000);
	if (slot >= PINNING_HIST_SLOTS)
		slot = PINNING_HIST_SLOTS - 1;
	barrier_var(slot);
	h->slots[slot]++;
	h->sum_ns += delta;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch_runq, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return runq_switch(next, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_runq_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return runq_switch(next, false);
}

/* ---- interrupt time on exclusive CPUs ------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pinning_irq_stats);
} irq_stats SEC(".maps");

/* This CPU's interrupt counters when it is exclusive, else NULL. */
static __always_inline struct pinning_irq_stats *irq_cpu(void)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0;
	struct pinning_owner *o = bpf_map_lookup_elem(&owners, &cpu);

	if (!o || !o->cgroup_id)
		return NULL;
	return bpf_map_lookup_elem(&irq_stats, &zero);
}

static __always_inline void irq_end(__u64 *since, __u64 *count, __u64 *ns)
{
	__u64 t = *since;

	if (!t) /* began before the CPU became exclusive, or before we attached */
		return;
	*since = 0;
	(*count)++;
	*ns += bpf_ktime_get_ns() - t;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(handle_irq_entry, int irq, struct irqaction *action)
{
	struct pinning_irq_stats *s = irq_cpu();

	if (s)
		s->hard_since_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(handle_irq_exit, int irq, struct irqaction *action, int ret)
{
	struct pinning_irq_stats *s = irq_cpu();

	if (s)
		irq_end(&s->hard_since_ns, &s->hardirqs, &s->hardirq_ns);
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(handle_softirq_entry, unsigned int vec)
{
	struct pinning_irq_stats *s = irq_cpu();

	if (s)
		s->soft_since_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(handle_softirq_exit, unsigned int vec)
{
	struct pinning_irq_stats *s = irq_cpu();

	if (s)
		irq_end(&s->soft_since_ns, &s->softirqs, &s->softirq_ns);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
