/* Helpers of pinning.bpf.c and enforce.bpf.c: CO-RE shims for task_struct
 * fields that moved between kernels, and the cgroup ownership test.
 *
 * Everything here is a direct BTF read (tp_btf/lsm/fentry arguments are BTF
 * pointers): a plain load, no bpf_probe_read_kernel, except the one
 * variable-index ancestor read the verifier does not allow as a load.
 */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pinning.h"

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */
#define TASK_RUNNING 0

/* Kernels before 5.14 call it `state` (2f064a59a11f "sched: Change
 * task_struct::state"). */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return (unsigned int)((struct task_struct___pre514 *)t)->state;
}

/* The CPU a task is queued on. Before 5.16 it lived in task_struct
 * (bcf9033e5449 "sched: move CPU field back into thread_info if
 * THREAD_INFO_IN_TASK=y"). */
struct task_struct___pre516 {
	unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_cpu(struct task_struct *t)
{
	if (bpf_core_field_exists(t->thread_info.cpu))
		return t->thread_info.cpu;
	return ((struct task_struct___pre516 *)t)->cpu;
}

/* The cgroup that names a task: the v2 (default hierarchy) cgroup, or on
 * cgroup v1 nodes the cgroup of the cpuset hierarchy. mode is a rodata
 * constant at every call site, so the verifier prunes the other branch and a
 * kernel without cpuset only fails in v1 mode. */
static __always_inline struct cgroup *task_pinning_cgroup(struct task_struct *t, __u32 mode)
{
	if (mode == PINNING_CGROUP_V1) {
		int id = bpf_core_enum_value(enum cgroup_subsys_id, cpuset_cgrp_id);

		return t->cgroups->subsys[id]->cgroup;
	}
	return t->cgroups->dfl_cgrp;
}

/* Before 6.0 a cgroup kept the ids of its ancestors, not pointers
 * (7f203bc89eb6 "cgroup: Replace cgroup->ancestor_ids[] with ->ancestors[]"). */
struct cgroup___pre60 {
	__u64 ancestor_ids[0];
} __attribute__((preserve_access_index));

/* cg is the owner cgroup or one of its descendants. O(1): the owner's level
 * indexes the ancestor array; no walk up the tree. */
static __always_inline bool cgroup_is_under(struct cgroup *cg, __u64 cgid,
					    const struct pinning_owner *o)
{
	unsigned long base;
	__u32 lvl = o->level;
	__u64 anc_id = 0;

	if (cgid == o->cgroup_id)
		return true;
	if ((o->flags & PINNING_OWNER_EXACT) || cg->level <= (int)lvl)
		return false;
	/* ancestors[lvl] with lvl < cg->level: in bounds. A variable offset
	 * into a BTF object is not a legal load, hence the probe read. */
	if (bpf_core_field_exists(cg->ancestors)) {
		struct cgroup *anc = NULL;

		base = (unsigned long)cg + bpf_core_field_offset(cg->ancestors);
		if (bpf_probe_read_kernel(&anc, sizeof(anc), (void *)(base + lvl * sizeof(anc))))
			return false;
		anc_id = BPF_CORE_READ(anc, kn, id);
	} else {
		base = (unsigned long)cg +
		       bpf_core_field_offset(((struct cgroup___pre60 *)cg)->ancestor_ids);
		if (bpf_probe_read_kernel(&anc_id, sizeof(anc_id),
					  (void *)(base + lvl * sizeof(anc_id))))
			return false;
	}
	return anc_id == o->cgroup_id;
}

/* floor(log2(v)), 0 for v = 0, branch-free: BPF has no clz/ctz and the
 * verifier likes straight lines. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r, s;

	r = (v > 0xffffffffULL) << 5;
	v >>= r;
	s = (v > 0xffff) << 4;
	v >>= s;
	r |= s;
	s = (v > 0xff) << 3;
	v >>= s;
	r |= s;
	s = (v > 0xf) << 2;
	v >>= s;
	r |= s;
	s = (v > 0x3) << 1;
	v >>= s;
	r |= s;
	return r | (__u32)(v >> 1);
}
