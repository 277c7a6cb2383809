/* The NRI pinning policy's CPUs: which CPUs a container gets (its claims'
 * union, or the shared pool), which memory nodes are local to them, the
 * updates that move the shared containers when the pool changes, and who
 * owns the exclusive CPUs (the owners file bpfmon reads, the shared pool
 * it is told). See pools.h.
 *
 * Apart from pools.c because these compute from the record and the state
 * and answer; pools.c decides when (the NRI handlers and state events).
 */
#include "nri/pools.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define LOG_MOD "pools"
#include "host/cgroup.h"
#include "pinning/bpfmon.h"
#include "core/claim.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "nri/nri.h"
#include "nri/pools_priv.h"
#include "core/state.h"
#include "host/topo.h"

void pools_claims_union(const struct pools *p, const struct ctr *c, struct cpuset *ret)
{
	cpuset_zero(ret);
	for (int i = 0; i < c->n_claims; i++) {
		const struct state_claim *cl = state_claim(p->state, ctr_uid(c, i));

		if (cl)
			cpuset_or_view(ret, &cl->cpus);
	}
}

/* The state flags of a container's claims, or-ed. */
unsigned pools_ctr_flags(const struct pools *p, const struct ctr *c)
{
	unsigned f = 0;

	for (int i = 0; i < c->n_claims; i++) {
		const struct state_claim *cl = state_claim(p->state, ctr_uid(c, i));

		if (cl)
			f |= cl->flags;
	}
	return f;
}

/* Every CPU of c is its own: it holds claims, none asks for the shared pool
 * beside them, none is real-time (those CPUs are shared by bandwidth). */
bool pools_is_all_exclusive(const struct pools *p, const struct ctr *c)
{
	if (!c->n_claims || (pools_ctr_flags(p, c) & STATE_CLAIM_SHARED_POOL))
		return false;
	for (int i = 0; i < c->n_claims; i++) {
		const struct state_claim *cl = state_claim(p->state, ctr_uid(c, i));

		if (!cl || cl->rt)
			return false;
	}
	return true;
}

/* The cpuset a container should have: the shared pool, or its claims'
 * CPUs, plus the pool when one of its claims asked for it (sharedPool). */
void pools_target_cpus(const struct pools *p, const struct ctr *c, struct cpuset *ret)
{
	struct cpuset pool;

	state_shared_pool(p->state, &pool);
	if (!c->n_claims) {
		*ret = pool;
		return;
	}
	pools_claims_union(p, c, ret);
	if (pools_ctr_flags(p, c) & STATE_CLAIM_SHARED_POOL)
		cpuset_or(ret, ret, &pool);
}

/* NUMA-local memory: the nodes (with memory) of the CPUs of the claims that
 * asked for it. False when none asked, or none of their CPUs is on a node
 * with memory (the runtime's default, every node, stays then). */
bool pools_local_mems(const struct pools *p, const struct ctr *c, struct cpuset *ret)
{
	cpuset_zero(ret);
	if (!p->o.topo)
		return false;
	for (int i = 0; i < c->n_claims; i++) {
		const struct state_claim *cl = state_claim(p->state, ctr_uid(c, i));
		struct cpuset cpus;

		if (!cl || !(cl->flags & STATE_CLAIM_MEMORY_LOCAL))
			continue;
		CPUSET_FOREACH(cpu, cpuset_from_view(&cl->cpus, &cpus))
		{
			const struct topo_cpu *tc = topo_cpu(p->o.topo, cpu);

			if (tc && tc->numa >= 0 &&
			    (!p->o.memory_nodes || cpuset_has(p->o.memory_nodes, tc->numa)))
				cpuset_set(ret, tc->numa);
		}
	}
	return !cpuset_is_empty(ret);
}

/* The CPUs the container holds alone: its claims' less the real-time ones,
 * which containers share by bandwidth. */
static void exclusive_union(const struct pools *p, const struct ctr *c, struct cpuset *ret)
{
	cpuset_zero(ret);
	for (int i = 0; i < c->n_claims; i++) {
		const struct state_claim *cl = state_claim(p->state, ctr_uid(c, i));

		if (cl && !cl->rt)
			cpuset_or_view(ret, &cl->cpus);
	}
}

/* Every shared container to the pool, into upd (an event's reply). */
/* Updates for every container that follows the shared pool: the shared
 * ones, and the exclusive ones whose claim asked for the pool too (sharedPool;
 * each its own list). skip: the container being created (its adjustment
 * already says it). */
int pools_shared_updates(struct pools *p, struct nri_updates *upd, const char *skip)
{
	_cleanup_free_ char *list = NULL;
	const struct ctr *c;
	struct cpuset pool;
	int r;

	state_shared_pool(p->state, &pool);
	if (cpuset_is_empty(&pool))
		return p->n_shared ? -ENOSPC : 0;
	list = cpuset_to_string(&pool);
	if (!list)
		return -ENOMEM;
	HASHTAB_FOREACH(c, &p->ctrs)
	{
		if (c->n_claims || (skip && !strcmp(ctr_id(c), skip)))
			continue;
		r = nri_updates_add(upd, ctr_id(c), list);
		if (r < 0)
			return r;
	}
	HASHTAB_FOREACH(c, &p->ctrs)
	{
		_cleanup_free_ char *own = NULL;
		struct cpuset cpus;

		if (!c->n_claims || !(pools_ctr_flags(p, c) & STATE_CLAIM_SHARED_POOL) ||
		    (skip && !strcmp(ctr_id(c), skip)))
			continue;
		pools_target_cpus(p, c, &cpus);
		own = cpuset_to_string(&cpus);
		if (!own)
			return -ENOMEM;
		r = nri_updates_add(upd, ctr_id(c), own);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The directory of c's cgroup in the hierarchy bpfmon watches, from the
 * runtime's cgroupsPath. -ENOENT while unknown. A cgroupsPath that does not
 * fit PATH_MAX fails here as it would in cgroup_runtime_path(). */
static int ctr_cgroup_dir(const struct pools *p, const struct ctr *c, char *buf, size_t size)
{
	char given[PATH_MAX], path[PATH_MAX];
	int r = pools_ctr_cgroups_path(c, given, sizeof(given));

	if (r == 0)
		r = cgroup_runtime_path(given, path, sizeof(path));
	if (r < 0)
		return r;
	return cgroup_mount_dir(&p->cgroups, path, buf, size);
}

/* Resolves the cgroup id of an exclusive container and makes it the owner of
 * its CPUs in the BPF check. Quiet when the cgroup does not exist yet. */
void pools_own_cpus(struct pools *p, struct ctr *c)
{
	char dir[PATH_MAX];
	struct cpuset cpus;
	uint64_t id;

	if (!c->n_claims)
		return;
	if (!c->cgroup_id) {
		if (ctr_cgroup_dir(p, c, dir, sizeof(dir)) < 0 || cgroup_id(dir, &id) < 0)
			return;
		c->cgroup_id = id;
		log_info("container_cgroup", "container=%s pod=%s cgroup=%s id=%llu", ctr_name(c),
			 ctr_pod_uid(c), dir, (unsigned long long)id);
		pools_write_owners(p);
	}
	if (!p->bpf)
		return;
	exclusive_union(p, c, &cpus);
	CPUSET_FOREACH(cpu, &cpus)
	(void)bpfmon_set_owner(p->bpf, cpu, c->cgroup_id);
}

/* Rewrites owners.json from the table (see pools.h). Failures are logged:
 * the file is for bpf-verify, pinning does not depend on it. */
void pools_write_owners(struct pools *p)
{
	struct json_object *root, *arr;
	const struct ctr *c;
	const char *text;
	int r;

	if (!p->state_dir)
		return;
	root = json_object_new_object();
	arr = json_object_new_array();
	if (!root || !arr) {
		json_object_put(root);
		json_object_put(arr);
		return;
	}
	json_object_object_add(root, "owners", arr);
	HASHTAB_FOREACH(c, &p->ctrs)
	{
		char dir[PATH_MAX], pod[512];

		if (!c->n_claims || !c->cgroup_id || ctr_cgroup_dir(p, c, dir, sizeof(dir)) < 0)
			continue;
		(void)snprintf(pod, sizeof(pod), "%s/%s", ctr_pod_ns(c), ctr_pod_name(c));
		for (int j = 0; j < c->n_claims; j++) {
			const struct state_claim *cl = state_claim(p->state, ctr_uid(c, j));
			struct cpuset cpus;
			struct json_object *o = json_object_new_object();
			_cleanup_free_ char *list =
				cl ? cpuset_to_string(cpuset_from_view(&cl->cpus, &cpus)) : NULL;
			char claim[STATE_NS_MAX + STATE_NAME_MAX + 2];

			if (cl && cl->rt) { /* shared by bandwidth: no owner */
				json_object_put(o);
				continue;
			}
			if (!o || !list) {
				json_object_put(o);
				continue;
			}
			(void)snprintf(claim, sizeof(claim), "%s/%s", cl->ns, cl->name);
			json_object_object_add(o, "cpus", json_object_new_string(list));
			json_object_object_add(o, "cgroup", json_object_new_string(dir));
			json_object_object_add(o, "cgroupId", json_object_new_uint64(c->cgroup_id));
			json_object_object_add(o, "claim", json_object_new_string(claim));
			json_object_object_add(o, "claimUID", json_object_new_string(cl->uid));
			json_object_object_add(o, "pod", json_object_new_string(pod));
			json_object_object_add(o, "container", json_object_new_string(ctr_name(c)));
			json_object_array_add(arr, o);
		}
	}
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
							JSON_C_TO_STRING_NOSLASHESCAPE);
	r = fileio_write_atomic(p->state_dir, POOLS_OWNERS_FILE, text, strlen(text), 0600);
	if (r < 0)
		log_warn_errno(r, "owners_write_failed", "dir=%s", p->state_dir);
	json_object_put(root);
}

void pools_disown_cpus(struct pools *p, const struct cpuset *cpus)
{
	if (!p->bpf)
		return;
	CPUSET_FOREACH(cpu, cpus)
	(void)bpfmon_clear_owner(p->bpf, cpu);
}

void pools_set_bpf_shared(struct pools *p)
{
	struct cpuset pool;

	if (!p->bpf)
		return;
	state_shared_pool(p->state, &pool);
	(void)bpfmon_set_shared(p->bpf, &pool);
}
