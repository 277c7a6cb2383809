/* Which CPU belongs to whom: prepared claims, their per-request split, the
 * container each claim is bound to, and the shared pool that is left.
 *
 *   allocatable = online - reserved            (fixed at start)
 *   prepared    = union of every claim's CPUs  (claims are pairwise disjoint)
 *   shared pool = allocatable - prepared - isolated (never reserved CPUs)
 *
 * Isolated CPUs (state_opts.isolated: the kernel's isolcpus/nohz_full CPUs
 * unless the node lets them share) are allocatable to claims that ask for
 * them but never in the shared pool: the kernel does not balance load onto
 * them, so a shared task placed there would stay there.
 *
 * Durability (DESIGN.md section 4): the CDI spec of a claim is its commit
 * record. Prepare = reserve in memory, write the CDI spec, then the
 * checkpoint (namespace/name, per-request split, consumers, owner); Unprepare = remove
 * the CDI spec first (on failure the reservation stays), then forget, then the
 * checkpoint. On start, state_load() re-reserves every claim that has a CDI
 * spec, taking what else it knows from the checkpoint; checkpoint entries
 * without a spec are dropped (their Prepare never committed, or their
 * Unprepare did). Nothing is ever allocated twice: a spec whose CPUs overlap
 * another's, or fall outside the allocatable CPUs, is reported and its CPUs
 * are kept out of the shared pool and of new claims until it goes away.
 *
 * Real-time claims follow the same commit rules but share their CPUs: their
 * CPUs must be real-time CPUs (state_opts.rt_cpus), they may overlap other
 * real-time claims (the bandwidth ledger in core/rt.h decides how many fit)
 * and never enter the prepared set. A spec whose CPUs are all real-time CPUs
 * is restored as a real-time claim, with its budget from the checkpoint.
 *
 * Observers are told after every committed change (metrics, BPF owner maps,
 * NRI shared-pool updates).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cdi.h"
#include "core/rtbudget.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"

#define STATE_NAME_MAX 254   /* Kubernetes object and container names: 253 */
#define STATE_NS_MAX 64	     /* namespaces: DNS labels, 63 */
#define STATE_REQUEST_MAX 128 /* "request" or "request/subrequest" */
#define STATE_DEVICE_MAX 64
#define STATE_MAX_CLAIMS 4096 /* per node; more is refused with -E2BIG */
#define STATE_MAX_RESULTS 32   /* AllocationResultsMaxSize */
#define STATE_MAX_CONSUMERS 256 /* status.reservedFor: ResourceClaimReservedForMaxSize */

/* Records are kept compact (a node holds thousands of them, each mostly a
 * few CPUs and short names): strings are pointers and CPU sets views
 * (lib/cpuset.h) of the words that hold their CPUs. In a claim handed to
 * state_claim_add() they point at the caller's memory, which is copied; in a
 * record they point into the record, borrowed like it until the next change
 * (a claim's union may share the words of its one result). NULL strings in
 * an input read as "". Expand a set with cpuset_from_view(). */
struct state_result {
	const char *request; /* < STATE_REQUEST_MAX bytes */
	const char *device;  /* < STATE_DEVICE_MAX bytes */
	struct cpuset_view cpus;
	int64_t rt_milli; /* real-time claims: dra.cpu/rtBandwidth consumed on its CPU */
};

/* A pod the claim is reserved for; its namespace is the claim's. */
struct state_consumer {
	char uid[CDI_UID_MAX];
	const char *name; /* < STATE_NAME_MAX bytes */
};

/* Fields are ordered to leave no padding on LP64: a node holds thousands. */
struct state_claim {
	char uid[CDI_UID_MAX];
	const char *ns;	  /* "" when restored from CDI alone; < STATE_NS_MAX bytes */
	const char *name; /* < STATE_NAME_MAX bytes */
	/* The union of the results; in an input, read only when it has none. */
	struct cpuset_view cpus;
	int n_results;
	/* What the claim's CPUConfig asked of its container (enum
	 * state_claim_flag); kept in the checkpoint, 0 when restored from the
	 * CDI spec alone. */
	unsigned flags;
	const struct state_result *results;
	/* The container holding the claim (NRI): "" and "" when unbound. */
	const char *owner_pod;	     /* its pod's uid, < CDI_UID_MAX bytes */
	const char *owner_container; /* < STATE_NAME_MAX bytes */
	/* The pods the claim is reserved for (status.reservedFor), as last read
	 * from the API server: only their containers may hold the claim.
	 * consumers_known is false when no read is on record (a claim restored
	 * from its CDI spec alone, or from a checkpoint written before consumers
	 * were recorded): then no pod is a consumer until the claim is read. */
	bool consumers_known;
	/* A real-time claim (core/rt.h): its CPUs are real-time CPUs, shared with
	 * other real-time claims within each CPU's bandwidth, never in the
	 * prepared set or the shared pool. budget.policy is NONE when it was
	 * restored from its CDI spec alone (it then holds the whole capacity). */
	bool rt;
	int n_consumers;
	const struct state_consumer *consumers;
	struct rt_budget budget; /* of a real-time claim */
};

enum state_claim_flag {
	STATE_CLAIM_MEMORY_LOCAL = 1 << 0, /* cpuset.mems = the nodes of its CPUs */
	STATE_CLAIM_SHARED_POOL = 1 << 1,  /* its container also gets the shared pool */
	/* CPUConfig irq: isolate / keep (core/irqiso.h; its own record keeps it) */
	STATE_CLAIM_IRQ_ISOLATE = 1 << 2,
	STATE_CLAIM_IRQ_KEEP = 1 << 3,
};

struct errbuf;
struct state;

enum state_event { STATE_CLAIM_ADDED, STATE_CLAIM_REMOVED, STATE_CLAIM_BOUND };
typedef void (*state_observer_fn)(void *ud, enum state_event ev, const struct state_claim *c);

struct state_opts {
	const char *cdi_dir;
	const char *state_dir; /* the checkpoint lives here; created 0700 */
	struct cpuset allocatable;
	struct cpuset rt_cpus; /* --rt-cpus: where real-time claims live (disjoint) */
	struct cpuset isolated; /* allocatable CPUs kept out of the shared pool */
};

int state_new(const struct state_opts *o, struct state **ret);
struct state *state_free(struct state *s);
DEFINE_FREEP(state, state_free)

/* Rebuilds from the CDI specs and the checkpoint (see above). Problems are
 * logged and counted; only I/O errors on the state dir itself fail. */
int state_load(struct state *s);

int state_add_observer(struct state *s, state_observer_fn fn, void *ud);

/* Asked before a claim is committed, with the shared pool that would remain;
 * returning < 0 with eb filled refuses the claim. One guard (the NRI
 * policy: the pool must not empty under running shared containers). */
typedef int (*state_guard_fn)(void *ud, const struct cpuset *pool_after, struct errbuf *eb);
void state_set_guard(struct state *s, state_guard_fn fn, void *ud);

/* The claim of that uid, or NULL. Borrowed until the next change. */
const struct state_claim *state_claim(const struct state *s, const char *uid);

/* Commits a new claim (results and consumers copied, cpus computed as the
 * union of the results). Errors, with eb: -EEXIST (uid already prepared:
 * compare with state_claim() first), -EBUSY (overlaps another claim or a
 * quarantined CPU), -EINVAL (CPUs not allocatable, bad uid or consumer, empty
 * result list is fine), -E2BIG (too many claims or consumers), or the -errno
 * of the CDI/checkpoint write (nothing is kept then). */
int state_claim_add(struct state *s, const struct state_claim *c, struct errbuf *eb);

/* Unprepare: removes the CDI spec, then the claim. Unknown uid: 0. A failed
 * spec removal returns its -errno and keeps everything. */
int state_claim_remove(struct state *s, const char *uid);

/* Binds the claim to a container; -ENOENT unknown claim, -EBUSY bound to
 * another (pod, container). Binding the same owner again is a no-op. The
 * binding is written with the next commit (NRI Synchronize rebuilds
 * bindings after a crash, so it needs no write of its own). */
int state_claim_bind(struct state *s, const char *uid, const char *pod_uid,
		     const char *container);

/* Forgets the claim's container: a binding made without checking the pod
 * against the consumers (by an older driver) is not kept once it fails that
 * check. 0, or -ENOENT for an unknown claim. Like a binding, it reaches the
 * disk with the next commit; no observer is told (nothing else changes). */
int state_claim_unbind(struct state *s, const char *uid);

/* Is the pod (uid, namespace, name) one the claim is reserved for? */
bool state_claim_has_consumer(const struct state_claim *c, const char *pod_uid, const char *ns,
			      const char *name);

/* A newer read of the claim: its consumers replace the recorded ones (n of v,
 * copied; consumers_known becomes true) and, when the record has no namespace
 * and name (restored from its CDI spec alone), ns and name fill them. The
 * checkpoint is written at once when anything changed, so that a restart
 * trusts exactly what was verified. Errors: -ENOENT unknown claim, -EINVAL a
 * bad uid or name in v, or ns/name not the claim's, -E2BIG over
 * STATE_MAX_CONSUMERS, -ENOMEM (nothing changed then), or the checkpoint
 * write's -errno (the new consumers stay in memory and go out with the next
 * commit). */
int state_claim_set_consumers(struct state *s, const char *uid, const char *ns, const char *name,
			      const struct state_consumer *v, int n);

/* CPUs neither reserved nor held by any claim (nor quarantined), nor
 * isolated, nor offline now: the runtime hands this set to containers as
 * their cpuset, and the kernel refuses offline CPUs there (cgroup v1: runc
 * fails the container with "unable to apply cgroup configuration"). */
void state_shared_pool(const struct state *s, struct cpuset *ret);
/* CPUs a new claim may take: the shared pool and the free isolated CPUs. */
void state_unclaimed(const struct state *s, struct cpuset *ret);
/* The CPUs CPU hotplug took offline since start (allocatable was read then):
 * they leave the shared pool until they are back. True when the shared
 * pool changed. */
bool state_set_offline(struct state *s, const struct cpuset *offline);
/* The isolated CPUs kept out of the shared pool from now on (the kernel's
 * list changed at run time; state_opts.isolated at start). True when the
 * shared pool changed. */
bool state_set_isolated(struct state *s, const struct cpuset *isolated);
/* CPUs held by claims. */
void state_prepared(const struct state *s, struct cpuset *ret);
int state_claim_count(const struct state *s);
const struct cpuset *state_allocatable(const struct state *s);
const struct cpuset *state_rt_cpus(const struct state *s);
/* The isolated CPUs kept out of the shared pool (state_opts.isolated). */
const struct cpuset *state_isolated(const struct state *s);

/* Iterates claims in no particular order; fn returning < 0 stops. */
int state_foreach_claim(const struct state *s, int (*fn)(void *ud, const struct state_claim *c),
			void *ud);

/* Checkpoint text of the current state (JSON, caller frees) and its parser,
 * exposed for tests and the fuzzer. Parse calls fn per claim entry. */
char *state_checkpoint_serialize(const struct state *s);
int state_checkpoint_parse(const char *buf, size_t len,
			   int (*fn)(void *ud, const struct state_claim *c), void *ud,
			   struct errbuf *eb);
