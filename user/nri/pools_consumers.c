/* The NRI pinning policy's consumer checks: a container binds to a claim's
 * CPUs only when its pod is among the claim's consumers (status.reservedFor),
 * read again from the API server when the pod is missing from the list we
 * hold; refusals are counted and logged. See "Consumer checks" in pools.c
 * and in pools.h.
 *
 * Apart from pools.c because this is the one part of the policy that waits
 * on a peer: the reads in flight (struct reread) and the CreateContainers
 * and running containers that wait on them.
 */
#include "nri/pools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define LOG_MOD "pools"
#include "core/claim.h"
#include "core/claimsource.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "obs/metrics.h"
#include "nri/nri.h"
#include "nri/pools_priv.h"
#include "core/state.h"

enum refusal { REFUSE_NOT_CONSUMER, REFUSE_READ_FAILED, REFUSE_READ_TIMEOUT, REFUSE_BUSY,
	       REFUSE_SYNC };
static const char *const refusal_names[] = { "not_consumer", "read_failed", "read_timeout",
					     "busy", "synchronize" };

/* ---- consumers ---------------------------------------------------------------------- */

/* "ns/name" of a container's pod, for messages. */
static void pod_label(const struct nri_container *c, char *buf, size_t size)
{
	(void)snprintf(buf, size, "%s/%s", c->pod ? c->pod->namespace : "",
		       c->pod ? c->pod->name : "");
}

/* Counts a refused binding and logs it: at most REFUSAL_LOG_BURST lines per
 * window (a pod can be created in a loop), the lines held back counted in the
 * next one. Peer strings are quoted; claim names are ours (checked at
 * Prepare). */
static void report_refusal(struct pools *p, enum refusal why, const char *pod,
			   const char *pod_uid, const char *container,
			   const struct state_claim *cl, const char *detail)
{
	uint64_t held;

	metric_series_add(metric_with(p->refused, refusal_names[why]), 1);
	if (!ratelimit_pass(&p->refusal_rl, &held))
		return;
	log_warn("container_binding_refused",
		 "reason=%s pod=%s pod_uid=%s container=%s claim=%s/%s claim_uid=%s detail=%s "
		 "held_back=%llu",
		 refusal_names[why], log_quote(pod), log_quote(pod_uid), log_quote(container),
		 cl->ns[0] ? cl->ns : "?", cl->name[0] ? cl->name : "?", cl->uid, log_quote(detail),
		 (unsigned long long)held);
}

/* A CreateContainer refused: the runtime's error says why, in eb. */
static int refuse(struct pools *p, enum refusal why, const struct nri_container *c,
		  const struct state_claim *cl, struct errbuf *eb, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static int refuse(struct pools *p, enum refusal why, const struct nri_container *c,
		  const struct state_claim *cl, struct errbuf *eb, const char *fmt, ...)
{
	char pod[STATE_NS_MAX + STATE_NAME_MAX + 2];
	struct errbuf msg;
	va_list ap;

	va_start(ap, fmt);
	errbuf_setv(&msg, fmt, ap);
	va_end(ap);
	errbuf_set(eb, "%s", msg.s);
	pod_label(c, pod, sizeof(pod));
	report_refusal(p, why, pod, c->pod ? c->pod->uid : "", c->name, cl, msg.s);
	if (why == REFUSE_NOT_CONSUMER && c->pod && p->o.on_not_consumer)
		p->o.on_not_consumer(p->o.report_ud, c->pod, c->name, cl, msg.s);
	return -EACCES;
}

void pools_reread_free(struct reread *rr)
{
	if (!rr)
		return;
	free(rr->waiters);
	free(rr);
}

static void on_reread(void *ud, struct json_object *claim, const char *err);

/* Starts the read of cl; -EBUSY at POOLS_MAX_READS, or the start's error. */
int pools_reread_start(struct pools *p, const struct state_claim *cl, int64_t timeout_ms,
		       struct reread **ret)
{
	struct reread *rr;
	int r;

	if (hashtab_count(&p->rereads) >= POOLS_MAX_READS)
		return -EBUSY;
	rr = calloc(1, sizeof(*rr));
	if (!rr)
		return -ENOMEM;
	rr->p = p;
	(void)snprintf(rr->uid, sizeof(rr->uid), "%s", cl->uid);
	(void)snprintf(rr->ns, sizeof(rr->ns), "%s", cl->ns);
	(void)snprintf(rr->name, sizeof(rr->name), "%s", cl->name);
	r = hashtab_put_str(&p->rereads, rr->uid, rr, NULL);
	if (r < 0) {
		pools_reread_free(rr);
		return r;
	}
	r = claimsource_start(p->claims, rr->ns, rr->name, timeout_ms > 1 ? timeout_ms : 1,
			      on_reread, rr, &rr->fetch);
	if (r < 0) {
		(void)hashtab_del_str(&p->rereads, rr->uid);
		pools_reread_free(rr);
		return r;
	}
	log_info("claim_reread", "claim=%s/%s claim_uid=%s reason=\"a pod not among its "
				 "recorded consumers\"",
		 rr->ns, rr->name, rr->uid);
	*ret = rr;
	return 0;
}

/* The CreateContainer of adj waits for rr's answer. */
static int reread_join(struct reread *rr, struct nri_adjust *adj)
{
	struct nri_resume w, *v;
	int r = nri_adjust_defer(adj, &w);

	if (r < 0)
		return r;
	for (int i = 0; i < rr->n_waiters; i++)
		if (rr->waiters[i].token == w.token)
			return 0;
	v = realloc(rr->waiters, sizeof(*v) * (size_t)(rr->n_waiters + 1));
	if (!v)
		return -ENOMEM;
	rr->waiters = v;
	v[rr->n_waiters++] = w;
	return 0;
}

/* The container's pod is not among the consumers of cl, as read just now or
 * as recorded when no read can tell more. */
int pools_not_consumer(struct pools *p, const struct nri_container *c,
		       const struct state_claim *cl, struct errbuf *eb)
{
	const struct nri_pod *pod = c->pod;

	if (!cl->ns[0])
		return refuse(p, REFUSE_NOT_CONSUMER, c, cl, eb,
			      "claim %s was restored from its CDI spec alone: its consumers are "
			      "read at its next NodePrepareResources, until then no container "
			      "binds to it",
			      cl->uid);
	return refuse(p, REFUSE_NOT_CONSUMER, c, cl, eb,
		      "pod %.63s/%.63s (uid %.40s) is not a consumer of claim %.63s/%.63s "
		      "(status.reservedFor): its %s%s names another pod's CPUs",
		      pod->namespace, pod->name, pod->uid, cl->ns, cl->name, CDI_ENV_PREFIX,
		      cl->uid);
}

/* Each claim the container names must list its pod among its consumers. A
 * pod missing from the recorded list waits (-EINPROGRESS) for one read of the
 * claim, started on the CreateContainer's first run; a read already under way
 * for another container serves too. Refusals are -EACCES with err. */
int pools_verify_consumers(struct pools *p, const struct nri_container *c,
			   char uids[][CDI_UID_MAX], int n, struct nri_adjust *adj,
			   struct errbuf *eb)
{
	const struct nri_pod *pod = c->pod;
	bool wait = false;
	int r;

	for (int i = 0; i < n; i++) {
		const struct state_claim *cl = state_claim(p->state, uids[i]);
		struct reread *rr;

		if (pod && pod->uid[0] &&
		    state_claim_has_consumer(cl, pod->uid, pod->namespace, pod->name))
			continue;
		if (!pod || !pod->uid[0])
			return refuse(p, REFUSE_NOT_CONSUMER, c, cl, eb,
				      "the runtime did not say which pod container %.64s belongs to: "
				      "claim %s binds only to its consumers",
				      c->name, cl->uid);
		rr = hashtab_get_str(&p->rereads, cl->uid);
		if (rr && rr->answered && rr->failed)
			return refuse(
				p, REFUSE_READ_FAILED, c, cl, eb,
				"pod %.63s/%.63s is not among the recorded consumers of claim "
				"%.63s/%.63s and reading the claim again failed: %s",
				pod->namespace, pod->name, cl->ns, cl->name, rr->why.s);
		if (rr && rr->answered)
			return pools_not_consumer(p, c, cl, eb); /* read again just now */
		if (nri_adjust_is_final(adj))
			return refuse(p, REFUSE_READ_TIMEOUT, c, cl, eb,
				      "pod %.63s/%.63s is not among the recorded consumers of claim "
				      "%.63s/%.63s, which could not be read again in time",
				      pod->namespace, pod->name, cl->ns, cl->name);
		if (!rr && (nri_adjust_attempt(adj) > 0 || !p->claims || !cl->ns[0]))
			return pools_not_consumer(p, c, cl, eb); /* no read to wait for */
		if (!rr) {
			r = pools_reread_start(p, cl, nri_adjust_wait_left_ms(adj), &rr);
			if (r == -EBUSY)
				return refuse(p, REFUSE_BUSY, c, cl, eb,
					      "pod %.63s/%.63s is not among the recorded consumers of "
					      "claim %.63s/%.63s, and %d claim reads are already under "
					      "way: try again",
					      pod->namespace, pod->name, cl->ns, cl->name,
					      POOLS_MAX_READS);
			if (r < 0)
				return refuse(p, REFUSE_READ_FAILED, c, cl, eb,
					      "pod %.63s/%.63s is not among the recorded consumers of "
					      "claim %.63s/%.63s, which cannot be read again: %s",
					      pod->namespace, pod->name, cl->ns, cl->name,
					      strerror(-r));
		}
		r = reread_join(rr, adj);
		if (r < 0)
			return refuse(p, REFUSE_BUSY, c, cl, eb,
				      "pod %.63s/%.63s is not among the recorded consumers of claim "
				      "%.63s/%.63s, and too many container creations wait: try again",
				      pod->namespace, pod->name, cl->ns, cl->name);
		wait = true;
	}
	return wait ? -EINPROGRESS : 0;
}

/* A container Synchronize left in the shared pool for want of consumers:
 * still waiting for a read, trusted now, or confined for good. */
void pools_verify_running(struct pools *p, struct ctr *x)
{
	const struct state_claim *cl = NULL;
	_cleanup_free_ char *list = NULL;
	char pod[STATE_NS_MAX + STATE_NAME_MAX + 2];
	const char *why = NULL;
	struct cpuset cpus;
	bool pending = false;
	int i;

	for (i = 0; i < x->n_want && !why; i++) {
		const struct reread *rr;

		cl = state_claim(p->state, ctr_uid(x, i));
		if (!cl) {
			why = "the claim is no longer prepared";
			break;
		}
		if (state_claim_has_consumer(cl, ctr_pod_uid(x), ctr_pod_ns(x), ctr_pod_name(x)))
			continue;
		rr = hashtab_get_str(&p->rereads, cl->uid);
		if (rr && !rr->answered)
			pending = true;
		else if (rr && rr->failed)
			why = rr->why.s;
		else
			why = "its pod is not among the claim's consumers (status.reservedFor)";
	}
	if (!why && pending)
		return;
	for (i = 0; !why && i < x->n_want; i++)
		if (state_claim_bind(p->state, ctr_uid(x, i), ctr_pod_uid(x), ctr_name(x)) < 0) {
			cl = state_claim(p->state, ctr_uid(x, i));
			why = "the claim is bound to another container";
		}
	(void)snprintf(pod, sizeof(pod), "%s/%s", ctr_pod_ns(x), ctr_pod_name(x));
	if (why) {
		if (cl)
			report_refusal(p, REFUSE_SYNC, pod, ctr_pod_uid(x), ctr_name(x), cl, why);
		else
			log_warn("container_confined", "pod=%s container=%s reason=%s",
				 log_quote(pod), log_quote(ctr_name(x)), log_quote(why));
		x->n_want = 0;
		return;
	}
	/* Trusted: it holds its claims from now on (the slots it wanted). */
	p->n_shared--;
	x->n_claims = x->n_want;
	x->n_want = 0;
	pools_claims_union(p, x, &cpus);
	list = cpuset_to_string(&cpus);
	pools_own_cpus(p, x);
	pools_write_owners(p);
	pools_update_gauges(p);
	if (p->rt) { /* what Synchronize does for a trusted real-time holder */
		char path[PATH_MAX];
		struct nri_pod pv = { .id = "", .uid = ctr_pod_uid(x), .name = ctr_pod_name(x),
				      .namespace = ctr_pod_ns(x), .cgroup_parent = "" };
		/* a path over PATH_MAX: rtctl could not resolve it either */
		struct nri_container cv = {
			.id = ctr_id(x), .name = ctr_name(x), .pid = x->pid, .pod = &pv,
			.cgroups_path = pools_ctr_cgroups_path(x, path, sizeof(path)) == 0 ? path : ""
		};

		pools_rt_started(p, &cv, x);
	}
	if (list && p->nri && p->o.push_updates &&
	    nri_push_updates(p->nri, &(struct nri_update){ ctr_id(x), list }, 1) == 0)
		log_info("container_verified", "pod=%s container=%s cpus=%s action=pushed",
			 log_quote(pod), log_quote(ctr_name(x)), list);
	else
		log_warn("container_verified", "pod=%s container=%s cpus=%s "
					       "action=shared_until_restarted",
			 log_quote(pod), log_quote(ctr_name(x)), list ? list : "?");
}

/* The read's answer: the claim's consumers are what it says, every
 * container waiting on it decides, and the read is gone. */
void pools_reread_done(struct pools *p, struct reread *rr)
{
	struct ctr *x;

	rr->answered = true;
	for (int i = 0; i < rr->n_waiters; i++)
		(void)nri_resume_run(&rr->waiters[i]);
	HASHTAB_FOREACH(x, &p->ctrs)
	{
		for (int k = 0; k < x->n_want; k++)
			if (strcmp(ctr_uid(x, k), rr->uid) == 0) {
				pools_verify_running(p, x);
				break;
			}
	}
	(void)hashtab_del_str(&p->rereads, rr->uid);
	pools_reread_free(rr);
}

static void on_reread(void *ud, struct json_object *claim, const char *err)
{
	struct reread *rr = ud;
	struct pools *p = rr->p;
	_cleanup_free_ struct claim_consumer *v = NULL;
	_cleanup_free_ struct state_consumer *sv = NULL;
	struct errbuf cerr = { "" };
	int n = 0, r;

	rr->fetch = NULL;
	if (!claim) {
		rr->failed = true;
		errbuf_set(&rr->why, "%s", err && *err ? err : "unknown error");
	} else {
		n = claim_consumers_parse(claim, rr->uid, &v, &cerr);
		if (n > 0 && !(sv = calloc((size_t)n, sizeof(*sv))))
			n = -ENOMEM;
		for (int i = 0; i < n; i++) {
			(void)snprintf(sv[i].uid, sizeof(sv[i].uid), "%s", v[i].uid);
			sv[i].name = v[i].name;
		}
		r = n < 0 ? n : state_claim_set_consumers(p->state, rr->uid, rr->ns, rr->name, sv, n);
		/* A failed checkpoint write keeps the new consumers in memory. */
		if (r == -ENOENT || r == -EINVAL || r == -E2BIG || r == -ENOMEM) {
			rr->failed = true;
			errbuf_set(&rr->why, "%s",
				   cerr.s[0]	  ? cerr.s
				   : r == -ENOENT ? "the claim is no longer prepared"
						  : strerror(-r));
		} else if (r < 0) {
			log_warn_errno(r, "claim_consumers_not_recorded",
				       "claim=%s/%s action=kept_in_memory", rr->ns, rr->name);
		}
	}
	metric_series_add(metric_with(p->reads, rr->failed ? "error" : "ok"), 1);
	if (rr->failed)
		log_warn("claim_reread_failed", "claim=%s/%s claim_uid=%s err=%s", rr->ns, rr->name,
			 rr->uid, log_quote(rr->why.s));
	pools_reread_done(p, rr);
}
