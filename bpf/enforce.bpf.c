// SPDX-License-Identifier: GPL-2.0
/* Deny mode: refuse sched_setaffinity() onto an exclusive CPU owned by a
 * cgroup the target task is not under.
 *
 * security_task_setscheduler() is the LSM hook sched_setaffinity() calls, but
 * it carries no mask, so the mask comes through a side channel:
 *
 *   fentry/sched_setaffinity   copy the *kernel* copy of the mask into the
 *                              caller's task storage (a user-memory read at
 *                              sys_enter could be raced, bpf-anchors.md §4)
 *   lsm/task_setscheduler      mask & exclusive CPUs & target's cpuset
 *                              effective CPUs: any CPU whose owner is not an
 *                              ancestor of the target -> -EPERM, count, event
 *   fexit/sched_setaffinity    close the window, so sched_setscheduler() and
 *                              friends (same hook) are never judged
 *
 * Maps owners, cpu_stats and events (pinning_maps.bpf.h) are the ones of
 * pinning.bpf.c: userspace reuses their fds. exclusive_mask is this
 * program's own.
 *
 * Needs BPF LSM ("bpf" in the active LSMs) and trampolines; user/pinning/bpfmon.c
 * falls back to remediation when this object does not load. It has NOT run
 * on the development VM (lsm/fentry load fails there with EPERM); it is
 * verified only where the kernel allows it.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "pinning.h"
#include "pinning.bpf.h"
#include "pinning_maps.bpf.h"

#define EPERM 1

/* Bit per exclusive CPU, key 0. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pinning_mask);
} exclusive_mask SEC(".maps");

struct pending_mask {
	struct pinning_mask m;
	__u64 valid;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending_mask);
} pending SEC(".maps");

/* With CONFIG_CPUMASK_OFFSTACK cpumask_var_t is a pointer, else an array of
 * one; CO-RE field matching tells them apart (kinds must agree). */
struct cpuset___offstack {
	struct cpumask *effective_cpus;
} __attribute__((preserve_access_index));

#define MASK_BYTES(field) \
	(bpf_core_field_size(field) < sizeof(struct pinning_mask) ? bpf_core_field_size(field) : \
								     sizeof(struct pinning_mask))

SEC("fentry/sched_setaffinity")
int BPF_PROG(capture_affinity, pid_t pid, const struct cpumask *in_mask)
{
	struct pending_mask *pm;

	pm = bpf_task_storage_get(&pending, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!pm)
		return 0;
	__builtin_memset(&pm->m, 0, sizeof(pm->m));
	if (bpf_probe_read_kernel(&pm->m, MASK_BYTES(in_mask->bits), in_mask->bits))
		return 0;
	pm->valid = 1;
	return 0;
}

SEC("fexit/sched_setaffinity")
int BPF_PROG(release_affinity, pid_t pid, const struct cpumask *in_mask, long ret)
{
	struct pending_mask *pm = bpf_task_storage_get(&pending, bpf_get_current_task_btf(), 0, 0);

	if (pm)
		pm->valid = 0;
	return 0;
}

/* CPUs p's cpuset lets it use; the kernel intersects the request with them
 * after this hook, so a CPU outside them is no escape. All ones if unread. */
static __always_inline void cpuset_effective(struct task_struct *p, struct pinning_mask *ret)
{
	int id = bpf_core_enum_value(enum cgroup_subsys_id, cpuset_cgrp_id);
	struct cgroup_subsys_state *css = p->cgroups->subsys[id];
	struct cpuset *cs = (void *)css - bpf_core_field_offset(struct cpuset, css);

	if (bpf_core_field_exists(((struct cpuset___offstack *)cs)->effective_cpus)) {
		struct cpumask *m = BPF_CORE_READ((struct cpuset___offstack *)cs, effective_cpus);

		if (!bpf_probe_read_kernel(ret, MASK_BYTES(m->bits), m->bits))
			return;
	} else {
		if (!bpf_probe_read_kernel(ret, MASK_BYTES(cs->effective_cpus[0].bits),
					   &cs->effective_cpus[0].bits))
			return;
	}
	__builtin_memset(ret, 0xff, sizeof(*ret));
}

/* Scratch for the effective mask: too big for the 512-byte stack with the
 * rest. Per-CPU, and LSM programs do not nest on one CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pinning_mask);
} scratch SEC(".maps");

static __always_inline int deny(struct task_struct *p, struct cgroup *cg, __u64 cgid, __u32 cpu,
				__u64 owner)
{
	struct pinning_cpu_stats *st;
	struct pinning_event *e;
	__u32 zero = 0;

	st = bpf_map_lookup_elem(&cpu_stats, &zero);
	if (st)
		st->denials++;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		if (st)
			st->events_dropped++;
		return -EPERM;
	}
	e->ts_ns = bpf_ktime_get_ns();
	e->cgroup_id = cgid;
	e->owner_cgroup_id = owner;
	e->cpu = cpu;
	e->pid = p->pid;
	e->tgid = p->tgid;
	e->kind = PINNING_KIND_DENIED;
	e->task_flags = p->flags;
	e->pad = 0;
	bpf_probe_read_kernel(e->comm, sizeof(e->comm), p->comm);
	bpf_ringbuf_submit(e, 0);
	return -EPERM;
}

SEC("lsm/task_setscheduler")
int BPF_PROG(deny_affinity, struct task_struct *p, int ret)
{
	struct pinning_mask *excl, *eff;
	struct pending_mask *pm;
	struct cgroup *cg;
	__u32 zero = 0;
	__u64 cgid;

	if (ret)
		return ret;
	pm = bpf_task_storage_get(&pending, bpf_get_current_task_btf(), 0, 0);
	if (!pm || !pm->valid)
		return 0;
	excl = bpf_map_lookup_elem(&exclusive_mask, &zero);
	eff = bpf_map_lookup_elem(&scratch, &zero);
	if (!excl || !eff)
		return 0;
	cpuset_effective(p, eff);
	cg = task_pinning_cgroup(p, cgroup_mode, true);
	cgid = cgroup_id_of(cg, true);

	for (__u32 w = 0; w < PINNING_MASK_WORDS; w++) {
		__u64 bits = pm->m.w[w] & excl->w[w] & eff->w[w];

		/* One iteration per requested exclusive CPU, at most 64. */
		for (__u32 i = 0; i < 64 && bits; i++) {
			__u64 low = bits & -bits;
			__u32 cpu = w * 64 + log2_u64(low);
			struct pinning_owner *o;

			bits &= bits - 1;
			o = bpf_map_lookup_elem(&owners, &cpu);
			if (o && o->cgroup_id && !cgroup_is_under(cg, cgid, o, true))
				return deny(p, cg, cgid, cpu, o->cgroup_id);
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
