/* quota: no CFS quota on exclusive CPUs (docs/cpu-quota.md).
 *
 * A CPU limit becomes a CFS quota; on CPUs nobody else may use it only
 * throttles the owner at period edges. As the kubelet does for containers
 * with exclusive CPUs (DisableCPUQuotaWithExclusiveCPUs, Kubernetes 1.33):
 *
 *   container whose CPUs are all exclusive ──> CreateContainer adjustment
 *   (pools decides: a claim holder without     LinuxCPU.quota = -1 (no quota)
 *   sharedPool, no real-time claim)
 *   its pod's cgroup (linux.cgroup_parent) ──> cpu.max "max" / cpu.cfs_quota_us
 *                                              -1, written here: NRI has no
 *                                              pod-level adjustment
 *
 * The pod-level quota goes as the kubelet's does: for a pod with at least
 * one such container (its other containers keep their own quotas, which
 * bound them; the pod's quota is only their sum and would cap the exclusive
 * one). It is not put back: the kubelet sets it at pod creation and
 * resizes. With keep set nothing changes.
 *
 * Metric: dra_cpu_cpu_quota_dropped_total{level="container"|"pod"}, and
 * dra_cpu_cpu_quota_errors_total for pod cgroups that could not be written.
 */
#pragma once

#include <stdbool.h>

#include "lib/cleanup.h"

struct metrics;
struct nri_adjust;
struct nri_container;
struct nri_pod;
struct quota;

struct quota_opts {
	bool keep; /* --cpu-quota=keep: leave every quota as the runtime set it */
	/* Mount point of the hierarchy with the cpu controller (hierarchy root
	 * "/"); NULL: v1 "cpu" or else v2, from /proc/self/mountinfo. */
	const char *cgroup_root;
};

/* o copied (cgroup_root too); m borrowed, must outlive the quota. */
int quota_new(const struct quota_opts *o, struct metrics *m, struct quota **ret);
struct quota *quota_free(struct quota *q);
DEFINE_FREEP(quota, quota_free)

/* Container c of pod is being created on exclusive CPUs only: its quota and
 * its pod's go (unless keep). Returns 0, or -errno of the adjustment; a pod
 * cgroup that cannot be written is logged and counted, not an error (the
 * container still runs, throttled as before). */
int quota_drop_exclusive(struct quota *q, const struct nri_pod *pod, const struct nri_container *c,
			 struct nri_adjust *adj);
