/* NRI pinning policy. See pools.h.
 *
 * This file holds the container records, the NRI handlers and the life of
 * struct pools. The rest of the module: pools_cpus.c which CPUs a container
 * gets and who owns them, pools_consumers.c the consumer checks,
 * pools_state.c the state's callbacks; pools_priv.h what they share.
 *
 * The containers live in a hash table by container id (lib/hashtab.h):
 * events find their container in O(1), a Synchronize of n containers
 * rebuilds the table in O(n), not O(n^2), and every shared-pool change walks
 * the table. n_shared counts the containers without a claim as they come, go
 * and lose claims, so the gauges and the guard need no walk.
 *
 * Consumer checks (see pools.h): a claim read again for a missing pod is a
 * struct reread in rereads (by claim uid), one per claim however many
 * containers wait on it: the CreateContainers (nri resume handles) and the
 * containers Synchronize left in the shared pool (their want list names it).
 * Its answer updates the claim's consumers in state, wakes them all, and
 * goes; the next pod missing from the list causes the next read. Reads start
 * only on a CreateContainer's first run, so each waits for at most one read
 * per claim it names.
 */
#include "nri/pools.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#define LOG_MOD "pools"
#include "host/cgroup.h"
#include "pinning/bpfmon.h"
#include "core/cdi.h"
#include "core/claim.h"
#include "core/claimsource.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/hashtab.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "obs/metrics.h"
#include "nri/nri.h"
#include "nri/pools_priv.h"
#include "nri/quota.h"
#include "pinning/rtctl.h"
#include "core/state.h"
#include "host/topo.h"

#define MAX_CLAIMS_PER_CONTAINER 32
#define SYNC_READ_TIMEOUT_MS 10000 /* a read for a running container: nobody waits on it */
#define REFUSAL_LOG_BURST 10	   /* refusal lines per window; the rest are counted */
#define REFUSAL_LOG_WINDOW_MS 10000

static void ctr_free(struct ctr *c)
{
	free(c);
}

/* The runtime's cgroups path of c into buf ("" for a container without
 * slots); -ENAMETOOLONG if it does not fit. */
int pools_ctr_cgroups_path(const struct ctr *c, char *buf, size_t size)
{
	const char *head = str_next(ctr_name(c)), *tail = str_next(head);
	int n = snprintf(buf, size, "%s%s%s", head, c->path_has_id ? ctr_id(c) : "", tail);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* What rtctl knows of an NRI container (borrowed from c). */
static struct rtctl_container rt_view(const struct nri_container *c)
{
	return (struct rtctl_container){ .id = c->id,
					 .name = c->name,
					 .pod = c->pod ? c->pod->name : "",
					 .pod_uid = c->pod ? c->pod->uid : NULL,
					 .cgroups_path = c->cgroups_path,
					 .pid = c->pid };
}

/* rtctl's evictions go out as NRI UpdateContainers evictions. */
static int rt_evict(void *ud, const char *container_id, const char *why)
{
	struct pools *p = ud;

	return p->nri ? nri_push_evict(p->nri, container_id, why) : -ENOTCONN;
}

/* The claim's policy as NRI's LinuxScheduler adjustment (OCI
 * process.scheduler, times in nanoseconds), reset on fork. */
static int rt_adjust(struct nri_adjust *adj, const struct rt_budget *b)
{
	struct nri_scheduler s = { .flags = 1u << NRI_SCHED_FLAG_RESET_ON_FORK };

	switch (b->policy) {
	case RT_POLICY_DEADLINE:
		s.policy = NRI_SCHED_DEADLINE;
		s.runtime = b->runtime_ns;
		s.deadline = b->deadline_ns;
		s.period = b->period_ns;
		break;
	default:
		s.policy = b->policy == RT_POLICY_FIFO ? NRI_SCHED_FIFO : NRI_SCHED_RR;
		s.priority = b->priority;
		break;
	}
	return nri_adjust_set_scheduler(adj, &s);
}

/* rtctl_started() for c, whose record is x: rtctl takes the claims as an
 * array of CDI_UID_MAX each. */
void pools_rt_started(struct pools *p, const struct nri_container *c, const struct ctr *x)
{
	char uids[MAX_CLAIMS_PER_CONTAINER][CDI_UID_MAX];
	struct rtctl_container v = rt_view(c);

	for (int i = 0; i < x->n_claims; i++)
		(void)snprintf(uids[i], CDI_UID_MAX, "%s", ctr_uid(x, i));
	rtctl_started(p->rt, &v, (const char(*)[CDI_UID_MAX])uids, x->n_claims);
}

static struct ctr *find(const struct pools *p, const char *id)
{
	return hashtab_get_str(&p->ctrs, id);
}

static int count(const struct pools *p)
{
	return (int)hashtab_count(&p->ctrs);
}

/* Forgets c (safe while walking the table). */
static void drop(struct pools *p, struct ctr *c)
{
	(void)hashtab_del_str(&p->ctrs, ctr_id(c));
	p->n_shared -= !c->n_claims;
	ctr_free(c);
}

void pools_update_gauges(struct pools *p)
{
	struct cpuset pool;
	int sh = p->n_shared;

	state_shared_pool(p->state, &pool);
	metric_set(p->g_shared, sh);
	metric_set(p->g_exclusive, count(p) - sh);
	metric_set(p->g_pool, cpuset_count(&pool));
	state_prepared(p->state, &pool);
	metric_set(p->g_excl_cpus, cpuset_count(&pool));
	p->owners_dirty = true;
}

/* dra_cpu_cpu_owner_info: one series per CPU held by a running container.
 * Rebuilt per scrape (a few hundred series at most), never per switch. */
static void collect_owners(struct metrics *m, void *ud)
{
	struct pools *p = ud;
	const struct ctr *c;

	if (!p->owners_dirty)
		return;
	p->owners_dirty = false;
	metric_reset(p->owner_info);
	HASHTAB_FOREACH(c, &p->ctrs)
	{
		for (int j = 0; j < c->n_claims; j++) {
			const struct state_claim *cl = state_claim(p->state, ctr_uid(c, j));
			char claim[STATE_NS_MAX + STATE_NAME_MAX + 2], cpu[16];
			struct cpuset cpus;

			if (!cl)
				continue;
			(void)snprintf(claim, sizeof(claim), "%s/%s", cl->ns, cl->name);
			CPUSET_FOREACH(k, cpuset_from_view(&cl->cpus, &cpus))
			{
				(void)snprintf(cpu, sizeof(cpu), "%d", k);
				metric_series_set(metric_with(p->owner_info, cpu, ctr_pod_ns(c),
							      ctr_pod_name(c), ctr_name(c), claim),
						  1);
			}
		}
	}
}

/* Records (or replaces) a container; takes c. */
static int put(struct pools *p, struct ctr *c)
{
	struct ctr *old = NULL;
	int r = hashtab_put_str(&p->ctrs, ctr_id(c), c, (void **)&old);

	if (r < 0) {
		ctr_free(c);
		return r;
	}
	if (old) {
		p->n_shared -= !old->n_claims;
		ctr_free(old);
	}
	p->n_shared += !c->n_claims;
	return 0;
}

static char *append(char *d, const char *s, size_t len)
{
	memcpy(d, s, len);
	d[len] = 0;
	return d + len + 1;
}

/* A record of c (see struct ctr) with the n uids in its slots, neither held
 * nor wanted yet: the caller says which (n_claims or n_want). NULL: -ENOMEM. */
static struct ctr *ctr_new(const struct nri_container *c, char uids[][CDI_UID_MAX], int n)
{
	const struct nri_pod *pod = n ? c->pod : NULL;
	const char *str[] = { pod ? pod->uid : "", pod ? pod->namespace : "",
			      pod ? pod->name : "", n ? c->name : "" };
	const char *path = n ? c->cgroups_path : "";
	const char *at = c->id[0] ? strstr(path, c->id) : NULL;
	size_t id_len = strlen(c->id), head = at ? (size_t)(at - path) : strlen(path);
	const char *tail = at ? at + id_len : path + head;
	size_t uid_size = 1, size;
	struct ctr *x;
	char *d;

	for (int i = 0; i < n; i++) /* each < CDI_UID_MAX bytes: parse_env() */
		if (strlen(uids[i]) >= uid_size)
			uid_size = strlen(uids[i]) + 1;
	size = offsetof(struct ctr, s) + (size_t)n * uid_size + id_len + 1 + head + 1 +
	       strlen(tail) + 1;
	for (size_t i = 0; i < ARRAY_SIZE(str); i++)
		size += strlen(str[i]) + 1;
	x = calloc(1, size);
	if (!x)
		return NULL;
	x->pid = c->pid;
	x->n_slots = (uint8_t)n;
	x->uid_size = (uint8_t)uid_size;
	x->path_has_id = at != NULL;
	for (int i = 0; i < n; i++)
		memcpy(ctr_slot(x, i), uids[i], strlen(uids[i]) + 1);
	d = append(ctr_slot(x, n), c->id, id_len);
	for (size_t i = 0; i < ARRAY_SIZE(str); i++)
		d = append(d, str[i], strlen(str[i]));
	d = append(d, path, head);
	(void)append(d, tail, strlen(tail));
	return x;
}

/* The DRA_CPUSET_<uid>=<cpus> entries of a container's env. Keys that only
 * start with DRA_CPUSET (no underscore) are not ours; a bad uid or value is
 * an error (fail closed: never run a container on CPUs we cannot read). */
static int parse_env(const struct nri_container *c, char uids[][CDI_UID_MAX], struct cpuset *cpus,
		     int *ret_n, struct errbuf *eb)
{
	static const char prefix[] = CDI_ENV_PREFIX;
	int n = 0;

	for (size_t i = 0; i < c->n_env; i++) {
		const char *e = c->env[i], *eq = strchr(e, '=');
		size_t ulen;

		if (strncmp(e, prefix, sizeof(prefix) - 1) != 0)
			continue;
		if (!eq)
			return errbuf_fail(eb, -EINVAL, "env %.80s has no value", e);
		ulen = (size_t)(eq - e) - (sizeof(prefix) - 1);
		if (ulen == 0 || ulen >= CDI_UID_MAX)
			return errbuf_fail(eb, -EINVAL, "env %.80s: bad claim uid", e);
		if (n == MAX_CLAIMS_PER_CONTAINER)
			return errbuf_fail(eb, -E2BIG, "more than %d DRA_CPUSET_ claims",
					   MAX_CLAIMS_PER_CONTAINER);
		memcpy(uids[n], e + sizeof(prefix) - 1, ulen);
		uids[n][ulen] = 0;
		if (cdi_uid_valid(uids[n]) < 0)
			return errbuf_fail(eb, -EINVAL, "env %.80s: bad claim uid", e);
		if (cpuset_parse(eq + 1, &cpus[n], eb) < 0)
			return errbuf_wrap(eb, -EINVAL, "env %s%s: malformed CPU list", prefix,
					   uids[n]);
		for (int k = 0; k < n; k++)
			if (!strcmp(uids[k], uids[n]))
				return errbuf_fail(eb, -EINVAL, "claim %s appears twice in env",
						   uids[n]);
		n++;
	}
	*ret_n = n;
	return 0;
}

/* Is the claim's container of a pod among its consumers? A binding made
 * before consumers were checked (by an older driver) may not be. */
static bool owner_is_consumer(const struct state_claim *cl)
{
	if (!cl->consumers_known)
		return true; /* unknown: nothing says otherwise yet */
	for (int i = 0; i < cl->n_consumers; i++)
		if (strcmp(cl->consumers[i].uid, cl->owner_pod) == 0)
			return true;
	return false;
}

/* Checks env claims against state: prepared, with the same CPUs. */
static int check_claims(struct pools *p, char uids[][CDI_UID_MAX], const struct cpuset *cpus,
			int n, struct errbuf *eb)
{
	for (int i = 0; i < n; i++) {
		const struct state_claim *cl = state_claim(p->state, uids[i]);
		struct cpuset held;

		if (!cl)
			return errbuf_fail(eb, -ENOENT, "claim %s is not prepared on this node",
					   uids[i]);
		if (!cpuset_equal(cpuset_from_view(&cl->cpus, &held), &cpus[i]))
			return errbuf_fail(eb, -EPERM,
					   "%s%s does not match the CPUs prepared for the claim "
					   "(forged or stale)",
					   CDI_ENV_PREFIX, uids[i]);
	}
	return 0;
}

/* Checks that the (prepared) claims are free or the container's already. A
 * binding to a pod the claim's recorded consumers do not list is forgotten
 * here, so that a consumer's container is not locked out by it. Comes after
 * the consumer check: who holds a claim is none of another pod's business. */
static int check_owners(struct pools *p, const struct nri_container *c, char uids[][CDI_UID_MAX],
			int n, struct errbuf *eb)
{
	const char *pod = c->pod ? c->pod->uid : "";

	for (int i = 0; i < n; i++) {
		const struct state_claim *cl = state_claim(p->state, uids[i]);

		if (cl->owner_pod[0] && !owner_is_consumer(cl)) {
			log_warn("claim_binding_dropped",
				 "claim=%s/%s claim_uid=%s pod_uid=%s container=%s "
				 "reason=\"pod not among the claim's consumers\"",
				 cl->ns, cl->name, cl->uid, log_quote(cl->owner_pod),
				 log_quote(cl->owner_container));
			(void)state_claim_unbind(p->state, uids[i]);
		}
		if (cl->owner_pod[0] &&
		    (strcmp(cl->owner_pod, pod) || strcmp(cl->owner_container, c->name)))
			return errbuf_fail(eb, -EBUSY,
					   "claim %s belongs to container %.64s of pod %s: a claim "
					   "serves one container",
					   uids[i], cl->owner_container, cl->owner_pod);
	}
	return 0;
}

/* ---- NRI handlers ------------------------------------------------------------------- */

/* The checks a CreateContainer passes before it gets CPUs: its claims (the
 * DRA_CPUSET_* environment), their consumers and owners, and rtctl for a
 * real-time claim. Returns 0 and the number of claims (in uids) in *ret_k,
 * or -errno, counted in rejects; -EINPROGRESS while a claim is read again. */
static int create_admit(struct pools *p, const struct nri_container *c,
			char uids[][CDI_UID_MAX], int *ret_k, struct nri_adjust *adj,
			struct errbuf *eb)
{
	struct cpuset env_cpus[MAX_CLAIMS_PER_CONTAINER];
	int k, r;

	r = parse_env(c, uids, env_cpus, &k, eb);
	if (r == 0 && k > 0)
		r = check_claims(p, uids, env_cpus, k, eb);
	if (r == 0 && k > 0)
		r = pools_verify_consumers(p, c, uids, k, adj, eb);
	if (r == -EINPROGRESS) /* a claim is being read again: nri runs us again */
		return r;
	if (r == 0 && k > 0)
		r = check_owners(p, c, uids, k, eb);
	if (r < 0) {
		metric_series_add(metric_with(p->rejects, r == -EACCES ? "binding" : "claim"), 1);
		return r;
	}
	if (k > 0 && p->rt) {
		struct rtctl_container v = rt_view(c);
		struct rt_budget sched;

		r = rtctl_create(p->rt, &v, (const char(*)[CDI_UID_MAX])uids, k,
				 adj ? &sched : NULL, eb);
		if (r > 0)
			r = rt_adjust(adj, &sched);
		if (r < 0) {
			metric_series_add(metric_with(p->rejects, "realtime"), 1);
			return r;
		}
	}
	*ret_k = k;
	return 0;
}

/* The CPUs of the new record n with k claims: the shared pool (none may be
 * empty), or its claims', which it binds to. *newly: a claim had no owner. */
static int create_bind(struct pools *p, const struct nri_container *c, struct ctr *n,
		       char uids[][CDI_UID_MAX], int k, struct cpuset *ret_cpus, bool *newly,
		       struct errbuf *eb)
{
	int r;

	if (k <= 0) { /* parse_env() never gives fewer than none */
		state_shared_pool(p->state, ret_cpus);
		if (cpuset_is_empty(ret_cpus)) {
			metric_series_add(metric_with(p->rejects, "pool_empty"), 1);
			return errbuf_fail(eb, -ENOSPC,
					   "the shared CPU pool is empty: every allocatable CPU is "
					   "held by a claim");
		}
		return 0;
	}
	for (int i = 0; i < k; i++) {
		const struct state_claim *cl = state_claim(p->state, uids[i]);

		*newly |= !cl->owner_pod[0];
		r = state_claim_bind(p->state, uids[i], c->pod ? c->pod->uid : "", c->name);
		if (r < 0)
			return errbuf_wrap(eb, r, "binding claim %.63s", uids[i]);
	}
	n->n_claims = k; /* its slots */
	pools_target_cpus(p, n, ret_cpus);
	return 0;
}

/* The adjustment: the cpus in list, and for a container with claims no
 * quota when all its CPUs are exclusive, and its local memory nodes. */
static int create_adjust(struct pools *p, const struct nri_pod *pod,
			 const struct nri_container *c, const struct ctr *n, int k,
			 const char *list, struct nri_adjust *adj)
{
	int r;

	r = nri_adjust_set_cpus(adj, list);
	if (!r && k && pools_is_all_exclusive(p, n))
		r = quota_drop_exclusive(p->quota, pod, c, adj);
	if (!r && k) {
		struct cpuset nodes;

		if (pools_local_mems(p, n, &nodes)) {
			_cleanup_free_ char *mems = cpuset_to_string(&nodes);

			r = mems ? nri_adjust_set_mems(adj, mems) : -ENOMEM;
			if (!r)
				log_info("container_memory_local", "container=%s id=%.12s mems=%s",
					 c->name, c->id, mems);
		}
	}
	return r;
}

static int on_create(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		     struct nri_adjust *adj, struct nri_updates *upd, struct errbuf *eb)
{
	struct pools *p = ud;
	char uids[MAX_CLAIMS_PER_CONTAINER][CDI_UID_MAX];
	_cleanup_free_ char *list = NULL;
	struct cpuset cpus;
	bool newly = false;
	struct ctr *n;
	int k, r;

	r = create_admit(p, c, uids, &k, adj, eb);
	if (r < 0)
		return r;
	n = ctr_new(c, uids, k);
	if (!n)
		return -ENOMEM;
	r = create_bind(p, c, n, uids, k, &cpus, &newly, eb);
	if (r < 0) {
		ctr_free(n);
		return r;
	}
	list = cpuset_to_string(&cpus);
	if (!list) {
		ctr_free(n);
		return -ENOMEM;
	}
	r = create_adjust(p, pod, c, n, k, list, adj);
	if (r < 0) {
		ctr_free(n);
		return r;
	}
	r = put(p, n);
	if (r < 0)
		return r;
	log_info("container_pinned", "pod=%s/%s container=%s id=%.12s kind=%s cpus=%s",
		 pod ? pod->namespace : "", pod ? pod->name : "", c->name, c->id,
		 k ? "exclusive" : "shared", list);
	/* First start of a claim's container: shrink every shared container (it
	 * is not one of them: it has a claim). */
	if (newly) {
		r = pools_shared_updates(p, upd, c->id);
		if (r < 0 && r != -ENOSPC)
			return r;
	}
	pools_update_gauges(p);
	return 0;
}

static int on_update(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		     const char *cpus, struct nri_updates *upd, struct errbuf *eb)
{
	struct pools *p = ud;
	const struct ctr *x = find(p, c->id);
	_cleanup_free_ char *list = NULL;
	struct cpuset want, got;

	if (!x || !cpus[0])
		return 0;
	pools_target_cpus(p, x, &want);
	if (cpuset_is_empty(&want) ||
	    (cpuset_parse(cpus, &got, NULL) == 0 && cpuset_equal(&got, &want)))
		return 0;
	/* Someone (the kubelet's CPU manager, an operator) moved it: move it back. */
	list = cpuset_to_string(&want);
	if (!list)
		return -ENOMEM;
	log_warn("container_repinned", "container=%s id=%.12s asked=%s cpus=%s", c->name, c->id,
		 cpus, list);
	return nri_updates_add(upd, c->id, list);
}

static int on_stop(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		   struct nri_updates *upd, struct errbuf *eb)
{
	struct pools *p = ud;
	struct ctr *x = find(p, c->id);
	struct cpuset cpus;

	/* The claim stays reserved and bound: a restart gets the same CPUs. */
	if (!x)
		return 0;
	if (p->rt && x->n_claims)
		rtctl_stopped(p->rt, ctr_id(x));
	if (x->n_claims) {
		pools_claims_union(p, x, &cpus);
		pools_disown_cpus(p, &cpus);
		drop(p, x);
		pools_write_owners(p);
	} else {
		drop(p, x);
	}
	pools_update_gauges(p);
	return 0;
}

static int on_remove(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	struct nri_updates *none = NULL;

	return on_stop(ud, pod, c, none, NULL);
}

static int on_started(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	struct pools *p = ud;
	struct ctr *x = find(p, c->id);

	if (x)
		pools_own_cpus(p, x);
	if (x && p->rt && x->n_claims)
		pools_rt_started(p, c, x);
	return 0;
}

/* Which of the k claims the environment of c names (uids, env_cpus) its new
 * record n holds after a Synchronize: each one state prepared with those
 * CPUs and no other container owns goes to n's want list; all of them, when
 * c's pod is among the consumers of each and binds to them, become its
 * claims. */
static void sync_trust(struct pools *p, const struct nri_container *c, struct ctr *n,
		       char uids[][CDI_UID_MAX], const struct cpuset *env_cpus, int k)
{
	struct errbuf why = { "" };
	bool trusted = true;

	for (int j = 0; j < k; j++) {
		const struct state_claim *cl;

		/* Trust an env claim only if state prepared exactly that... */
		if (check_claims(p, &uids[j], &env_cpus[j], 1, &why) < 0 ||
		    check_owners(p, c, &uids[j], 1, &why) < 0) {
			log_warn("sync_claim_ignored", "container=%s claim=%s reason=%s",
				 log_quote(c->name), uids[j], log_quote(why.s));
			continue;
		}
		/* ... for a pod among its consumers. */
		cl = state_claim(p->state, uids[j]);
		trusted &= c->pod && c->pod->uid[0] &&
			   state_claim_has_consumer(cl, c->pod->uid, c->pod->namespace,
						    c->pod->name);
		/* slot n_want <= j: the uids trusted so far come first */
		memcpy(ctr_slot(n, n->n_want++), uids[j], strlen(uids[j]) + 1);
	}
	for (int j = 0; trusted && j < n->n_want; j++)
		trusted = state_claim_bind(p->state, ctr_uid(n, j), ctr_pod_uid(n),
					   ctr_name(n)) == 0;
	if (trusted) {
		n->n_claims = n->n_want;
		n->n_want = 0;
	}
}

/* The untrusted run in the shared pool while their claims are read: starts
 * the reads and checks them. Returns how many there are. */
static int sync_verify_untrusted(struct pools *p)
{
	struct ctr *x;
	int unverified = 0;

	HASHTAB_FOREACH(x, &p->ctrs)
	{
		if (!x->n_want)
			continue;
		unverified++;
		for (int j = 0; p->claims && j < x->n_want; j++) {
			const struct state_claim *cl = state_claim(p->state, ctr_uid(x, j));
			struct reread *rr;

			if (cl->ns[0] &&
			    !state_claim_has_consumer(cl, ctr_pod_uid(x), ctr_pod_ns(x),
						      ctr_pod_name(x)) &&
			    !hashtab_get_str(&p->rereads, cl->uid))
				(void)pools_reread_start(p, cl, SYNC_READ_TIMEOUT_MS, &rr);
		}
		pools_verify_running(p, x);
	}
	return unverified;
}

/* Every container's cpus into upd: its claims' (which it owns), or the
 * shared pool (pool, as pool_list) when there is one. */
static int sync_updates(struct pools *p, struct nri_updates *upd, const struct cpuset *pool,
			const char *pool_list)
{
	struct ctr *x;

	HASHTAB_FOREACH(x, &p->ctrs)
	{
		_cleanup_free_ char *list = NULL;
		struct cpuset cpus;

		if (x->n_claims) {
			pools_target_cpus(p, x, &cpus);
			list = cpuset_to_string(&cpus);
			if (!list)
				return -ENOMEM;
			(void)nri_updates_add(upd, ctr_id(x), list);
			pools_own_cpus(p, x);
		} else if (!cpuset_is_empty(pool)) {
			(void)nri_updates_add(upd, ctr_id(x), pool_list);
		}
	}
	return 0;
}

static int on_sync(void *ud, const struct nri_pod *pods, size_t n_pods,
		   const struct nri_container *ctrs, size_t n_ctrs, struct nri_updates *upd,
		   struct errbuf *eb)
{
	struct pools *p = ud;
	_cleanup_free_ char *pool_list = NULL;
	struct cpuset pool;
	struct ctr *x;
	int rebuilt = 0, bad = 0, unverified;

	HASHTAB_FOREACH(x, &p->ctrs)
		drop(p, x);
	for (size_t i = 0; i < n_ctrs; i++) {
		const struct nri_container *c = &ctrs[i];
		char uids[MAX_CLAIMS_PER_CONTAINER][CDI_UID_MAX];
		struct errbuf why = { "" };
		struct cpuset env_cpus[MAX_CLAIMS_PER_CONTAINER];
		struct ctr *n;
		int k = 0;

		if (c->state == NRI_CONTAINER_STOPPED)
			continue;
		if (parse_env(c, uids, env_cpus, &k, &why) < 0) {
			log_warn("sync_container_skipped", "container=%s id=%.12s reason=%s",
				 c->name, c->id, log_quote(why.s));
			bad++;
			continue;
		}
		n = ctr_new(c, uids, k);
		if (!n)
			return -ENOMEM;
		sync_trust(p, c, n, uids, env_cpus, k);
		if (put(p, n) < 0)
			return -ENOMEM;
		if (p->rt && n->n_claims && c->state == NRI_CONTAINER_RUNNING)
			pools_rt_started(p, c, n);
		rebuilt++;
	}
	unverified = sync_verify_untrusted(p);
	state_shared_pool(p->state, &pool);
	pool_list = cpuset_to_string(&pool);
	if (!pool_list)
		return -ENOMEM;
	if (sync_updates(p, upd, &pool, pool_list) < 0)
		return -ENOMEM;
	pools_set_bpf_shared(p);
	pools_update_gauges(p);
	pools_write_owners(p);
	log_info("nri_synchronized",
		 "containers=%d exclusive=%d shared_pool=%s skipped=%d unverified=%d", rebuilt,
		 count(p) - p->n_shared, pool_list, bad, unverified);
	return 0;
}

static void on_connected(void *ud)
{
	log_info("nri_connected", "");
}

static void on_configured(void *ud, const char *name, const char *version,
			  const char *nri_version)
{
	struct pools *p = ud;

	if (p->rt)
		rtctl_configured(p->rt, name, version, nri_version);
}

static void on_disconnected(void *ud, int r)
{
	log_warn("nri_disconnected", "reason=%s action=reconnecting", log_quote(strerror(r < 0 ? -r : r)));
}

static void on_push_done(void *ud, int r, const char *const *failed, size_t n_failed)
{
	struct pools *p = ud;

	if (r < 0)
		log_warn("nri_push_failed", "err=%s action=next_synchronize_repairs",
			 log_quote(strerror(-r)));
	for (size_t i = 0; i < n_failed; i++)
		log_warn("nri_update_failed", "container=%.12s", failed[i]);
	metric_series_add(metric_with(p->pushes, r < 0 ? "error" : "ok"), 1);
}

static const struct nri_handlers handlers = {
	.connected = on_connected,
	.configured = on_configured,
	.disconnected = on_disconnected,
	.synchronize = on_sync,
	.create_container = on_create,
	.update_container = on_update,
	.stop_container = on_stop,
	.post_create_container = on_started,
	.start_container = on_started,
	.remove_container = on_remove,
	.push_done = on_push_done,
};

const struct nri_handlers *pools_nri_handlers(void)
{
	return &handlers;
}

/* ---- cgroups ------------------------------------------------------------------------ */

/* The mount of the hierarchy that confines CPUs (the one the daemon tells
 * bpfmon to watch), or root as given with "/" as its root. */
static int find_cgroups(struct pools *p, const char *root)
{
	struct cgroup_mounts m;
	enum cgroup_hier h;
	int r;

	if (root) {
		p->cgroups.point = strdup(root);
		p->cgroups.root = strdup("/");
		return p->cgroups.point && p->cgroups.root ? 0 : -ENOMEM;
	}
	r = cgroup_mounts_read(&m);
	if (r < 0)
		return r;
	r = cgroup_mounts_pinning(&m, &h);
	if (r == 0) {
		p->cgroups = m.h[h];
		m.h[h] = (struct cgroup_mount){ NULL, NULL };
	}
	cgroup_mounts_done(&m);
	return r;
}

/* ---- lifecycle ---------------------------------------------------------------------- */

int pools_new(struct state *state, struct bpfmon *bpf, const struct pools_opts *o,
		struct metrics *m, struct pools **ret)
{
	_cleanup_(pools_freep) struct pools *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	hashtab_init_borrowing(&p->ctrs, 0); /* the ids are in the records */
	hashtab_init(&p->rereads, POOLS_MAX_READS);
	ratelimit_init(&p->refusal_rl, REFUSAL_LOG_WINDOW_MS, REFUSAL_LOG_BURST);
	p->state = state;
	p->bpf = bpf;
	p->o = *o;
	r = quota_new(&(struct quota_opts){ .keep = o->keep_cpu_quota,
					    .cgroup_root = o->cpu_cgroup_root },
		      m, &p->quota);
	if (r < 0)
		return r;
	r = find_cgroups(p, o->cgroup_root);
	if (r == -ENOMEM)
		return r;
	if (r < 0) /* owners stay unresolved: pinning through NRI goes on */
		log_warn_errno(r, "cgroup_mount_unknown", "action=no_bpf_owners");
	if (o->state_dir && !(p->state_dir = strdup(o->state_dir)))
		return -ENOMEM;
	p->g_exclusive = metrics_family(m, MF_NRI_CONTAINERS_EXCLUSIVE);
	p->g_shared = metrics_family(m, MF_NRI_CONTAINERS_SHARED);
	p->g_pool = metrics_family(m, MF_SHARED_POOL_CPUS);
	p->rejects = metrics_family(m, MF_NRI_REJECTED_CONTAINERS_TOTAL);
	p->pushes = metrics_family(m, MF_NRI_UPDATE_PUSHES_TOTAL);
	p->g_excl_cpus = metrics_family(m, MF_EXCLUSIVE_CPUS);
	p->owner_info = metrics_family(m, MF_CPU_OWNER_INFO);
	p->refused = metrics_family(m, MF_NRI_BINDING_REFUSED_TOTAL);
	p->reads = metrics_family(m, MF_NRI_CLAIM_READS_TOTAL);
	p->claims = claimsource_is_valid(o->claims) ? o->claims : NULL;
	r = metrics_add_collector(m, collect_owners, p);
	if (r < 0)
		return r;
	r = state_add_observer(state, pools_on_state, p);
	if (r < 0)
		return r;
	state_set_guard(state, pools_guard, p);
	pools_set_bpf_shared(p);
	pools_update_gauges(p);
	*ret = TAKE_PTR(p);
	return 0;
}

struct pools *pools_free(struct pools *p)
{
	struct reread *rr;
	struct ctr *c;

	if (!p)
		return NULL;
	/* Their answers must never come: nobody is left to take them. */
	HASHTAB_FOREACH(rr, &p->rereads)
	{
		if (rr->fetch)
			claimsource_cancel(p->claims, rr->fetch);
		pools_reread_free(rr);
	}
	hashtab_done(&p->rereads);
	HASHTAB_FOREACH(c, &p->ctrs)
		ctr_free(c);
	hashtab_done(&p->ctrs);
	free(p->cgroups.point);
	free(p->cgroups.root);
	free(p->state_dir);
	quota_free(p->quota);
	if (p->state)
		state_set_guard(p->state, NULL, NULL);
	free(p);
	return NULL;
}

void pools_set_nri(struct pools *p, struct nri *n)
{
	p->nri = n;
}

void pools_shared_changed(struct pools *p)
{
	pools_push_pool(p);
	pools_set_bpf_shared(p);
	pools_update_gauges(p);
}

void pools_set_rt(struct pools *p, struct rtctl *rt)
{
	p->rt = rt;
	if (rt)
		rtctl_set_evict(rt, rt_evict, p);
}
