/* The NRI policy: which cpuset every container gets, and keeping it so.
 *
 *   container env DRA_CPUSET_<uid>=<cpus>  ──> exclusive: the union of its
 *                                              claims' CPUs (each must equal
 *                                              what was prepared for that uid)
 *   no DRA_CPUSET_ env                     ──> shared pool = online - reserved
 *                                              - every prepared claim
 *                                              (online now: CPU hotplug)
 *
 * The variable says which claim a container means, never who may have it: a
 * container binds to a claim only when its pod (uid, namespace and name, as
 * the runtime reports them) is one of the claim's consumers, the pods of its
 * status.reservedFor. A pod missing from the copy recorded at Prepare makes
 * the CreateContainer wait for one fresh read of the claim (a shared claim
 * gains consumers after it was prepared), at most the wait nri allows; then,
 * or at once if the read is impossible, the container is refused with the
 * reason, a rate-limited log line and dra_cpu_nri_binding_refused_total.
 *
 * A claim belongs to one container (pod uid + container name); a restart of
 * that container keeps it. When a claim is first bound, every shared
 * container shrinks (updates returned from CreateContainer); when a claim is
 * unprepared they widen again (UpdateContainers, unless push is off). The
 * pool is never handed out empty (the runtime reads "" as "no limit"): a
 * shared container cannot be created then, and state's guard refuses a claim
 * that would empty it while shared containers run.
 *
 * A claim may also ask (state flags, from its CPUConfig) that its container
 * get the current shared pool beside its CPUs (sharedPool: kept up to date
 * with the shared containers' updates), and that its memory stay on the
 * NUMA nodes of its CPUs (memory: local, cpuset.mems set at creation;
 * shared containers keep every node).
 *
 * Synchronize rebuilds the container table from the runtime's view, trusting
 * env claims only when they match what state prepared and the pod is among
 * their consumers, and re-pins everything. A running container whose pod is
 * not (an impostor, or a claim restored without its consumers) runs in the
 * shared pool while its claims are read once more: if the read vouches for
 * it, it is bound and its cpuset pushed (with --nri-push-updates); if not, it
 * is reported and stays confined.
 * A container whose CPUs are all exclusive (claims without sharedPool, none
 * real-time) runs without CFS quota, and so does its pod (nri/quota.h).
 * Exclusive containers' cgroups are resolved to cgroup ids once the runtime
 * created them, and become the owners the BPF check enforces.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/cleanup.h"

struct json_object;
struct state;
struct topo;
struct cpuset;
struct bpfmon;
struct metrics;
struct claimsource;
struct nri;
struct nri_pod;
struct state_claim;
struct nri_handlers;
struct pools;
struct rtctl;

#define POOLS_MAX_READS 16 /* claim reads in flight for bindings; more: refused */

struct pools_opts {
	/* Mount point of the hierarchy bpfmon watches; NULL: the one that
	 * confines CPUs, from /proc/self/mountinfo (host/cgroup.h). */
	const char *cgroup_root;
	bool push_updates;	 /* --nri-push-updates */
	/* Where owners.json goes (NULL: nowhere): the exclusive CPUs, their
	 * cgroup and claim, for bpf-verify. See POOLS_OWNERS_FILE. */
	const char *state_dir;
	/* NUMA-local memory (a claim with STATE_CLAIM_MEMORY_LOCAL): the node
	 * of each CPU, and the nodes that have memory (NULL: every node). Both
	 * borrowed; topo NULL: memory is never restricted. */
	const struct topo *topo;
	const struct cpuset *memory_nodes;
	/* Claim reads (NULL: none; a pod missing from the recorded consumers is
	 * refused at once). Borrowed; must outlive the pools. */
	const struct claimsource *claims;
	/* CFS quota of containers on exclusive CPUs (nri/quota.h): keep them
	 * (--cpu-quota=keep), and where pod cgroups are (NULL: mountinfo). */
	bool keep_cpu_quota;
	const char *cpu_cgroup_root;
	/* A container was refused a claim its pod is not a consumer of (NULL:
	 * nobody is told); strings borrowed for the call, which must not
	 * block. The pod's namespace is the claim's. */
	void (*on_not_consumer)(void *ud, const struct nri_pod *pod, const char *container,
				const struct state_claim *claim, const char *why);
	void *report_ud;
};

/* <state-dir>/owners.json, rewritten atomically whenever an owner changes:
 * {"owners":[{"cpus":"4-7","cgroup":"/sys/fs/cgroup/...","cgroupId":123,
 *   "claim":"ns/name","claimUID":"...","pod":"ns/name","container":"app"}]}
 * Only containers whose cgroup is resolved are listed. */
#define POOLS_OWNERS_FILE "owners.json"

/* state, bpfmon (may be NULL) and metrics are borrowed. Installs the state
 * guard and an observer. pools_free() cancels the claim reads in flight:
 * free the pools before the API client. */
int pools_new(struct state *state, struct bpfmon *bpf, const struct pools_opts *o,
		struct metrics *m, struct pools **ret);
struct pools *pools_free(struct pools *p);
DEFINE_FREEP(pools, pools_free)

/* The handler table to give nri_new() with the pools as userdata. */
const struct nri_handlers *pools_nri_handlers(void);
/* The connection pushes go through (NULL: none). */
void pools_set_nri(struct pools *p, struct nri *n);
/* The shared pool changed outside a claim's life (CPU hotplug: see
 * state_set_offline()): new shared containers get the new one at once;
 * running ones get it pushed as after an Unprepare (push_updates). */
void pools_shared_changed(struct pools *p);
/* Real-time claims (--rt-cpus): containers holding one are handed to rt
 * (borrowed; NULL: none) at create, start, stop and Synchronize. Their CPUs
 * are shared by bandwidth, so they are no BPF owners and not in owners.json. */
void pools_set_rt(struct pools *p, struct rtctl *rt);

