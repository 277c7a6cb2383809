/* Helpers of pinning.bpf.c and enforce.bpf.c: CO-RE shims for kernel fields
 * that moved between kernels, and the cgroup ownership test.
 *
 * Kernel pointers come in two kinds. tp_btf, lsm and fentry programs get
 * BTF-typed ones: a field is a plain load the verifier checks. raw_tp
 * programs (the twins for kernels before 5.5, which have no tp_btf) get bare
 * addresses: every field is a CO-RE probe read, about twice as dear
 * (reference/bpf-anchors.md section 3). Helpers that serve both take `btf`,
 * a constant at every call site once inlined, so each program keeps only its
 * own kind of read. The one variable-index ancestor read is a probe read in
 * both: the verifier does not allow it as a load.
 */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pinning.h"

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */

/* Field f of kernel object p: a load from a BTF pointer, a CO-RE probe read
 * from a bare address. */
#define KREAD(btf, p, f) ((btf) ? (p)->f : BPF_CORE_READ(p, f))

/* The cgroup that names a task: the v2 (default hierarchy) cgroup, or on
 * cgroup v1 nodes the cgroup of the cpuset hierarchy. mode is a rodata
 * constant at every call site, so the verifier prunes the other branch and a
 * kernel without cpuset only fails in v1 mode. NULL only if a probe read
 * failed (raw_tp). */
static __always_inline struct cgroup *task_pinning_cgroup(struct task_struct *t, __u32 mode,
							  bool btf)
{
	if (mode == PINNING_CGROUP_V1) {
		int id = bpf_core_enum_value(enum cgroup_subsys_id, cpuset_cgrp_id);
		struct cgroup_subsys_state *css = NULL;
		struct css_set *cgs;

		if (btf)
			return t->cgroups->subsys[id]->cgroup;
		cgs = BPF_CORE_READ(t, cgroups);
		if (bpf_core_read(&css, sizeof(css), &cgs->subsys[id]))
			return NULL;
		return BPF_CORE_READ(css, cgroup);
	}
	return btf ? t->cgroups->dfl_cgrp : BPF_CORE_READ(t, cgroups, dfl_cgrp);
}

/* The kernfs id of a cgroup, what userspace calls its cgroup id. */
static __always_inline __u64 cgroup_id_of(struct cgroup *cg, bool btf)
{
	return btf ? cg->kn->id : BPF_CORE_READ(cg, kn, id);
}

/* Before 6.1 a cgroup kept the ids of its ancestors, not pointers
 * (7f203bc89eb6 "cgroup: Replace cgroup->ancestor_ids[] with ->ancestors[]",
 * merged for v6.1-rc1). */
struct cgroup___pre61 {
	__u64 ancestor_ids[0];
} __attribute__((preserve_access_index));

/* cg is the owner cgroup or one of its descendants. O(1): the owner's level
 * indexes the ancestor array; no walk up the tree. */
static __always_inline bool cgroup_is_under(struct cgroup *cg, __u64 cgid,
					    const struct pinning_owner *o, bool btf)
{
	unsigned long base;
	__u32 lvl = o->level;
	__u64 anc_id = 0;

	if (cgid == o->cgroup_id)
		return true;
	if ((o->flags & PINNING_OWNER_EXACT) || KREAD(btf, cg, level) <= (int)lvl)
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
		       bpf_core_field_offset(((struct cgroup___pre61 *)cg)->ancestor_ids);
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
