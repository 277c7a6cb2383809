/* pools_priv: what the files of the NRI pinning policy share and nothing
 * outside it sees: struct pools, the container record (struct ctr) and its
 * accessors, a claim read again (struct reread), and the steps one file does
 * for another. The policy is one module in several files (pools.c the
 * containers and the NRI handlers, pools_cpus.c which CPUs a container gets
 * and who owns them, pools_consumers.c the consumer checks, pools_state.c
 * the state's callbacks); outside it struct pools stays opaque (pools.h).
 * Not a public header: only user/nri/pools*.c include it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lib/errbuf.h"
#include "lib/hashtab.h"
#include "lib/ratelimit.h"
#include "core/cdi.h"
#include "core/state.h"
#include "host/cgroup.h"
#include "nri/pools.h"

struct bpfmon;
struct cpuset;
struct claimsource;
struct errbuf;
struct metric;
struct nri_adjust;
struct nri_container;
struct nri;
struct nri_resume;
struct nri_updates;
struct quota;
struct rtctl;

/* A live container, in one block freed with one free():
 *
 *   struct ctr | uid slots | id | pod uid | pod ns | pod name | name | path head | path tail
 *
 * n_slots claim uids of uid_size bytes each (the longest uid it named, with
 * its NUL), then NUL-terminated strings. The first n_claims slots are the
 * claims it holds; or (n_claims 0) the first n_want, those Synchronize found
 * it running with while their consumers did not list its pod: it is shared
 * while they are read again. Claims only ever leave (unprepared) or come
 * from its want list, so a record never grows and nothing that changes it
 * after creation allocates.
 *
 * A container without slots is shared for good: only its id is read again
 * (updates, stop), so the strings after it are empty. The cgroups path is
 * kept for the others, the owners' cgroups; the runtime's path names the
 * container ("/kubepods/pod<uid>/<id>", "...slice:cri-containerd:<id>"), so
 * the first copy of the id in it is not stored twice: path_has_id says the
 * id goes between head and tail.
 */
struct ctr {
	uint64_t cgroup_id; /* 0: not resolved yet */
	uint32_t pid;	    /* as the runtime last told it (Synchronize, events) */
	uint8_t n_claims;   /* 0: shared */
	uint8_t n_want;
	uint8_t n_slots, uid_size;
	bool path_has_id;
	char s[];
};

/* One read of a claim for the pods missing from its consumers. */
struct reread {
	struct pools *p;
	char uid[CDI_UID_MAX], ns[STATE_NS_MAX], name[STATE_NAME_MAX];
	void *fetch;	/* in flight; NULL once answered */
	bool answered;	/* its waiters are deciding */
	bool failed;	/* ... on a read that failed: why says what */
	struct errbuf why;
	struct nri_resume *waiters; /* CreateContainers */
	int n_waiters;
};

struct pools {
	struct state *state;
	struct bpfmon *bpf;
	struct nri *nri;
	struct rtctl *rt; /* real-time claims, NULL when none */
	struct quota *quota;
	struct pools_opts o;
	struct cgroup_mount cgroups; /* the hierarchy bpfmon watches; point NULL: unknown */
	char *state_dir;
	struct hashtab ctrs; /* id (in the record) -> struct ctr, live containers */
	int n_shared;
	struct metric *g_exclusive, *g_shared, *g_pool, *rejects, *pushes, *g_excl_cpus, *owner_info;
	struct metric *refused, *reads;
	bool owners_dirty; /* owner_info needs rebuilding at the next scrape */
	const struct claimsource *claims; /* NULL: no claim reads */
	struct hashtab rereads; /* claim uid -> struct reread */
	struct ratelimit refusal_rl; /* refusal lines */
};

/* Slot i of c: a claim it holds (i < n_claims) or wants (i < n_want). */
static inline const char *ctr_uid(const struct ctr *c, int i)
{
	return c->s + (size_t)i * c->uid_size;
}

static inline char *ctr_slot(struct ctr *c, int i)
{
	return c->s + (size_t)i * c->uid_size;
}

static inline const char *str_next(const char *s)
{
	return s + strlen(s) + 1;
}

static inline const char *ctr_id(const struct ctr *c)
{
	return ctr_uid(c, c->n_slots);
}

/* Its pod and name ("" for a container without slots: see struct ctr). */
static inline const char *ctr_pod_uid(const struct ctr *c)
{
	return str_next(ctr_id(c));
}

static inline const char *ctr_pod_ns(const struct ctr *c)
{
	return str_next(ctr_pod_uid(c));
}

static inline const char *ctr_pod_name(const struct ctr *c)
{
	return str_next(ctr_pod_ns(c));
}

static inline const char *ctr_name(const struct ctr *c)
{
	return str_next(ctr_pod_name(c));
}

/* pools.c: the runtime's cgroups path of c into buf ("" for a container
 * without slots); -ENAMETOOLONG if it does not fit. Tells rtctl a
 * real-time container started; the container gauges. */
int pools_ctr_cgroups_path(const struct ctr *c, char *buf, size_t size);
void pools_rt_started(struct pools *p, const struct nri_container *c, const struct ctr *x);
void pools_update_gauges(struct pools *p);

/* pools_cpus.c: which CPUs a container gets and who owns them. */
void pools_claims_union(const struct pools *p, const struct ctr *c, struct cpuset *ret);
unsigned pools_ctr_flags(const struct pools *p, const struct ctr *c);
bool pools_is_all_exclusive(const struct pools *p, const struct ctr *c);
void pools_target_cpus(const struct pools *p, const struct ctr *c, struct cpuset *ret);
bool pools_local_mems(const struct pools *p, const struct ctr *c, struct cpuset *ret);
int pools_shared_updates(struct pools *p, struct nri_updates *upd, const char *skip);
void pools_own_cpus(struct pools *p, struct ctr *c);
void pools_write_owners(struct pools *p);
void pools_disown_cpus(struct pools *p, const struct cpuset *cpus);
void pools_set_bpf_shared(struct pools *p);

/* pools_consumers.c: the consumer checks. */
void pools_reread_free(struct reread *rr);
int pools_reread_start(struct pools *p, const struct state_claim *cl, int64_t timeout_ms,
		       struct reread **ret);
int pools_not_consumer(struct pools *p, const struct nri_container *c,
		       const struct state_claim *cl, struct errbuf *eb);
int pools_verify_consumers(struct pools *p, const struct nri_container *c,
			   char uids[][CDI_UID_MAX], int n, struct nri_adjust *adj,
			   struct errbuf *eb);
void pools_verify_running(struct pools *p, struct ctr *x);
void pools_reread_done(struct pools *p, struct reread *rr);

/* pools_state.c: the state's callbacks (state_set_guard(),
 * state_add_observer()), and the push of a widened shared pool. */
int pools_guard(void *ud, const struct cpuset *after, struct errbuf *eb);
void pools_push_pool(struct pools *p);
void pools_on_state(void *ud, enum state_event ev, const struct state_claim *c);
