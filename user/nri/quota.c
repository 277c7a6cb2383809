/* quota: drops the CFS quota of containers on exclusive CPUs and of their
 * pods (see quota.h). */
#include "nri/quota.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MOD "quota"
#include "host/cgroup.h"
#include "lib/log.h"
#include "nri/nri.h"
#include "obs/metrics.h"

struct quota {
	bool keep;
	struct cgroup_mounts mounts; /* cpu_v1 or h[CGROUP_V2]: where pod cgroups are */
	struct metric *dropped, *errors;
};

struct quota *quota_free(struct quota *q)
{
	if (!q)
		return NULL;
	cgroup_mounts_done(&q->mounts);
	free(q);
	return NULL;
}

int quota_new(const struct quota_opts *o, struct metrics *m, struct quota **ret)
{
	_cleanup_(quota_freep) struct quota *q = calloc(1, sizeof(*q));
	int r;

	if (!q)
		return -ENOMEM;
	q->keep = o->keep;
	if (o->cgroup_root) {
		q->mounts.cpu_v1.point = strdup(o->cgroup_root);
		q->mounts.cpu_v1.root = strdup("/");
		if (!q->mounts.cpu_v1.point || !q->mounts.cpu_v1.root)
			return -ENOMEM;
	} else if (!q->keep) {
		r = cgroup_mounts_read(&q->mounts);
		if (r == -ENOMEM)
			return r;
		if (r < 0) /* containers still lose theirs through NRI */
			log_warn_errno(r, "cgroup_mount_unknown", "action=pod_quota_kept");
	}
	q->dropped = metrics_family(m, MF_CPU_QUOTA_DROPPED_TOTAL);
	q->errors = metrics_family(m, MF_CPU_QUOTA_ERRORS_TOTAL);
	*ret = TAKE_PTR(q);
	return 0;
}

/* The pod's cgroup: 1 when its quota went, 0 when it had none, -errno. */
static int drop_pod(struct quota *q, const struct nri_pod *pod)
{
	char path[PATH_MAX], dir[PATH_MAX];
	int r;

	r = cgroup_parent_path(pod->cgroup_parent, path, sizeof(path));
	if (r < 0)
		return r;
	r = cgroup_cpu_dir(&q->mounts, path, dir, sizeof(dir));
	if (r < 0)
		return r;
	return cgroup_cpu_quota_drop(dir);
}

int quota_drop_exclusive(struct quota *q, const struct nri_pod *pod, const struct nri_container *c,
			 struct nri_adjust *adj)
{
	int r;

	if (q->keep)
		return 0;
	r = nri_adjust_set_cpu_quota(adj, -1);
	if (r < 0)
		return r;
	metric_series_add(metric_with(q->dropped, "container"), 1);
	if (!pod || !pod->cgroup_parent[0])
		return 0;
	r = drop_pod(q, pod);
	if (r > 0) {
		metric_series_add(metric_with(q->dropped, "pod"), 1);
		log_info("pod_cpu_quota_dropped", "pod=%s/%s cgroup=%s", pod->namespace, pod->name,
			 log_quote(pod->cgroup_parent));
	} else if (r < 0) {
		metric_series_add(metric_with(q->errors), 1);
		log_warn_errno(r, "pod_cpu_quota_kept", "pod=%s/%s cgroup=%s container=%s",
			       pod->namespace, pod->name, log_quote(pod->cgroup_parent), c->name);
	}
	return 0;
}
