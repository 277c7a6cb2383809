/* The NRI pinning policy following the state: the guard that refuses a claim
 * which would leave no CPU to the containers of the shared pool, and what a
 * claim's coming and going does to the containers (a removed claim's
 * containers lose it, the shared pool widens and is pushed to the runtime).
 * See pools.h.
 *
 * Apart from pools.c because these are the state's callbacks into the
 * policy; pools.c answers the runtime's.
 */
#include "nri/pools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MOD "pools"
#include "core/claimsource.h"
#include "lib/errbuf.h"
#include "lib/hashtab.h"
#include "lib/log.h"
#include "nri/nri.h"
#include "nri/pools_priv.h"
#include "core/state.h"

/* ---- state events ------------------------------------------------------------------ */

int pools_guard(void *ud, const struct cpuset *after, struct errbuf *eb)
{
	struct pools *p = ud;
	int sh = p->n_shared;

	if (!cpuset_is_empty(after) || sh == 0)
		return 0;
	return errbuf_fail(eb, -ENOSPC,
			   "the claim would leave no CPU for the %d container(s) running in the "
			   "shared pool",
			   sh);
}

/* A push of the widened pool after Unprepare (runtimes with NRI >= 0.12.1). */
void pools_push_pool(struct pools *p)
{
	_cleanup_free_ char *list = NULL;
	_cleanup_free_ struct nri_update *u = NULL;
	_cleanup_free_ char **own = NULL;
	const struct ctr *c;
	struct cpuset pool;
	size_t k = 0, n_own = 0, n = hashtab_count(&p->ctrs);

	if (!p->nri || !p->o.push_updates)
		return;
	state_shared_pool(p->state, &pool);
	list = cpuset_to_string(&pool);
	u = calloc(n + 1, sizeof(*u));
	own = calloc(n + 1, sizeof(*own));
	if (!list || !u || !own || cpuset_is_empty(&pool))
		return;
	HASHTAB_FOREACH(c, &p->ctrs)
	{
		struct cpuset cpus;

		if (!c->n_claims) {
			u[k++] = (struct nri_update){ ctr_id(c), list };
			continue;
		}
		/* a claim's container that takes the pool too widens with it */
		if (!(pools_ctr_flags(p, c) & STATE_CLAIM_SHARED_POOL))
			continue;
		pools_target_cpus(p, c, &cpus);
		own[n_own] = cpuset_to_string(&cpus);
		if (!own[n_own])
			break;
		u[k++] = (struct nri_update){ ctr_id(c), own[n_own++] };
	}
	if (k && nri_push_updates(p->nri, u, k) == 0)
		log_info("shared_pool_widened", "containers=%zu cpus=%s", k, list);
	for (size_t i = 0; i < n_own; i++)
		free(own[i]);
}

void pools_on_state(void *ud, enum state_event ev, const struct state_claim *c)
{
	struct pools *p = ud;
	struct ctr *x;

	if (ev == STATE_CLAIM_REMOVED) {
		struct reread *rr = hashtab_get_str(&p->rereads, c->uid);
		struct cpuset cpus;

		/* A read of it is moot: who waits on it is refused now. */
		if (rr && !rr->answered) {
			claimsource_cancel(p->claims, rr->fetch);
			rr->fetch = NULL;
			rr->failed = true;
			errbuf_set(&rr->why, "the claim was unprepared");
			pools_reread_done(p, rr);
		}
		pools_disown_cpus(p, cpuset_from_view(&c->cpus, &cpus));
		/* Containers still listing the claim lose it (they are gone or
		 * about to be: Unprepare comes after the pod stopped). */
		HASHTAB_FOREACH(x, &p->ctrs)
		{
			bool had = x->n_claims > 0;

			for (int j = 0; j < x->n_claims; j++)
				if (!strcmp(ctr_uid(x, j), c->uid)) {
					memmove(ctr_slot(x, j), ctr_uid(x, j + 1),
						(size_t)x->uid_size *
							(size_t)(x->n_claims - j - 1));
					x->n_claims--;
					j--;
				}
			p->n_shared += had && !x->n_claims;
		}
		pools_push_pool(p);
		pools_write_owners(p);
	}
	if (ev != STATE_CLAIM_BOUND) {
		pools_set_bpf_shared(p);
		pools_update_gauges(p);
	}
}
