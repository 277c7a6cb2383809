/* Claims, reservations and their durable record. See state.h.
 *
 * Claims live in a hash table keyed by uid (lib/hashtab.h), capped at
 * STATE_MAX_CLAIMS, so lookups stay O(1) at the cap. This file holds the
 * records and the changes; the checkpoint's JSON is state_checkpoint.c's,
 * the restart (state_load) state_load.c's, and what they share
 * state_priv.h's.
 */
#include "core/state.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define LOG_MOD "state"
#include "core/claim.h"
#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/hashtab.h"
#include "lib/jsonc.h"
#include "lib/log.h"
#include "core/state_priv.h"


void state_entry_free(struct entry *e)
{
	if (!e)
		return;
	free(e->data);
	free(e);
}

/* A consumer list we may record: pod uids and names as the API allows them
 * (they reach log lines and the checkpoint). */
int state_consumers_check(const struct state_consumer *v, int n)
{
	if (n < 0 || n > STATE_MAX_CONSUMERS)
		return -E2BIG;
	for (int i = 0; i < n; i++)
		if (cdi_uid_valid(v[i].uid) < 0 || !v[i].name || claim_name_check(v[i].name) < 0)
			return -EINVAL;
	return 0;
}

/* The strings of an input fit what the record may hold (they reach the
 * checkpoint, whose parser holds them to the same bounds). */
static bool claim_sizes_ok(const struct state_claim *c)
{
	if (strlen(str_or_empty(c->ns)) >= STATE_NS_MAX ||
	    strlen(str_or_empty(c->name)) >= STATE_NAME_MAX ||
	    strlen(str_or_empty(c->owner_container)) >= STATE_NAME_MAX ||
	    strlen(str_or_empty(c->owner_pod)) >= CDI_UID_MAX)
		return false;
	for (int i = 0; i < c->n_results; i++)
		if (strlen(str_or_empty(c->results[i].request)) >= STATE_REQUEST_MAX ||
		    strlen(str_or_empty(c->results[i].device)) >= STATE_DEVICE_MAX)
			return false;
	return true;
}

/* Fills a block (struct block, then what follows it) front to back. */
struct packer {
	char *p;
};

static const char *pack_str(struct packer *k, const char *s)
{
	size_t n = strlen(str_or_empty(s)) + 1;
	char *d = k->p;

	memcpy(d, str_or_empty(s), n);
	k->p += n;
	return d;
}

/* v without the zero words at either end (views made by cpuset_view() have
 * none; a caller's own may). */
static struct cpuset_view view_trim(const struct cpuset_view *v)
{
	struct cpuset_view t = *v;

	while (t.n > 0 && !t.w[0]) {
		t.w++;
		t.off++;
		t.n--;
	}
	while (t.n > 0 && !t.w[t.n - 1])
		t.n--;
	if (t.n == 0)
		t = (struct cpuset_view){ .w = NULL, .off = 0, .n = 0 };
	return t;
}

/* v is trimmed. */
static struct cpuset_view pack_set(struct packer *k, const struct cpuset_view *v)
{
	uint64_t *w = (uint64_t *)(void *)k->p;

	if (v->n == 0)
		return *v;
	memcpy(w, v->w, sizeof(*w) * (size_t)v->n);
	k->p += sizeof(*w) * (size_t)v->n;
	return (struct cpuset_view){ .w = w, .off = v->off, .n = v->n };
}

static struct entry *find(const struct state *s, const char *uid)
{
	return hashtab_get_str(&s->claims, uid);
}

static void recompute_prepared(struct state *s)
{
	struct entry *e;

	cpuset_zero(&s->prepared);
	HASHTAB_FOREACH(e, &s->claims)
		if (!e->c.rt)
			cpuset_or_view(&s->prepared, &e->c.cpus);
}

void state_notify(struct state *s, enum state_event ev, const struct state_claim *c)
{
	for (int i = 0; i < s->n_observers; i++)
		s->observers[i].fn(s->observers[i].ud, ev, c);
}

int state_new(const struct state_opts *o, struct state **ret)
{
	_cleanup_(state_freep) struct state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->cdi_dir = strdup(o->cdi_dir);
	s->state_dir = strdup(o->state_dir);
	if (!s->cdi_dir || !s->state_dir ||
	    asprintf(&s->checkpoint, "%s/%s", o->state_dir, CHECKPOINT_NAME) < 0) {
		s->checkpoint = NULL;
		return -ENOMEM;
	}
	s->allocatable = o->allocatable;
	s->rt_cpus = o->rt_cpus;
	s->isolated = o->isolated;
	/* keyed by the uid inside each entry: no copy of it */
	hashtab_init_borrowing(&s->claims, STATE_MAX_CLAIMS);
	*ret = TAKE_PTR(s);
	return 0;
}

struct state *state_free(struct state *s)
{
	struct entry *e;

	if (!s)
		return NULL;
	/* A clean stop writes what is pending (bindings). */
	if (s->dirty && state_write_checkpoint(s) < 0)
		log_warn("checkpoint_flush_failed", "path=%s", s->checkpoint);
	HASHTAB_FOREACH(e, &s->claims)
		state_entry_free(e);
	hashtab_done(&s->claims);
	free(s->cdi_dir);
	free(s->state_dir);
	free(s->checkpoint);
	free(s);
	return NULL;
}

int state_add_observer(struct state *s, state_observer_fn fn, void *ud)
{
	if (s->n_observers == (int)ARRAY_SIZE(s->observers))
		return -E2BIG;
	s->observers[s->n_observers++] = (struct observer){ fn, ud };
	return 0;
}

void state_set_guard(struct state *s, state_guard_fn fn, void *ud)
{
	s->guard = fn;
	s->guard_ud = ud;
}

const struct state_claim *state_claim(const struct state *s, const char *uid)
{
	struct entry *e = find(s, uid);

	return e ? &e->c : NULL;
}

void state_unclaimed(const struct state *s, struct cpuset *ret)
{
	cpuset_andnot(ret, &s->allocatable, &s->prepared);
	cpuset_andnot(ret, ret, &s->quarantine);
	cpuset_andnot(ret, ret, &s->offline);
}

bool state_set_offline(struct state *s, const struct cpuset *offline)
{
	struct cpuset before, after;

	state_shared_pool(s, &before);
	s->offline = *offline;
	state_shared_pool(s, &after);
	return !cpuset_equal(&before, &after);
}

bool state_set_isolated(struct state *s, const struct cpuset *isolated)
{
	struct cpuset before, after;

	state_shared_pool(s, &before);
	s->isolated = *isolated;
	state_shared_pool(s, &after);
	return !cpuset_equal(&before, &after);
}

void state_shared_pool(const struct state *s, struct cpuset *ret)
{
	state_unclaimed(s, ret);
	cpuset_andnot(ret, ret, &s->isolated);
}

void state_prepared(const struct state *s, struct cpuset *ret)
{
	*ret = s->prepared;
}

int state_claim_count(const struct state *s)
{
	return (int)hashtab_count(&s->claims);
}

const struct cpuset *state_allocatable(const struct state *s)
{
	return &s->allocatable;
}

const struct cpuset *state_rt_cpus(const struct state *s)
{
	return &s->rt_cpus;
}

const struct cpuset *state_isolated(const struct state *s)
{
	return &s->isolated;
}

int state_foreach_claim(const struct state *s, int (*fn)(void *ud, const struct state_claim *c),
			void *ud)
{
	struct entry *e;

	HASHTAB_FOREACH(e, &s->claims)
	{
		int r = fn(ud, &e->c);

		if (r < 0)
			return r;
	}
	return 0;
}

/* The result sets of c, trimmed, into sets, and the set of the record into
 * *ret_u: the union of the results (built in *all) when c has several, the
 * one result's set when it has one, c->cpus when none. Returns the CPU words
 * the block holds for them. */
static size_t claim_sets(const struct state_claim *c, struct cpuset_view *sets, struct cpuset *all,
			 struct cpuset_view *ret_u)
{
	size_t words = 0;

	for (int i = 0; i < c->n_results; i++) {
		sets[i] = view_trim(&c->results[i].cpus);
		words += (size_t)sets[i].n;
	}
	if (c->n_results > 1) {
		cpuset_zero(all);
		for (int i = 0; i < c->n_results; i++)
			cpuset_or_view(all, &sets[i]);
		*ret_u = cpuset_view(all);
		words += (size_t)ret_u->n;
	} else if (c->n_results == 1) {
		*ret_u = sets[0]; /* shared with the result */
	} else {
		*ret_u = view_trim(&c->cpus);
		words += (size_t)ret_u->n;
	}
	return words;
}

/* The bytes of c's strings in a block, each NUL-terminated. */
static size_t claim_strings_size(const struct state_claim *c)
{
	size_t strs = strlen(str_or_empty(c->ns)) + strlen(str_or_empty(c->name)) +
		      strlen(str_or_empty(c->owner_pod)) + strlen(str_or_empty(c->owner_container)) + 4;

	for (int i = 0; i < c->n_results; i++)
		strs += strlen(str_or_empty(c->results[i].request)) +
			strlen(str_or_empty(c->results[i].device)) + 2;
	for (int i = 0; i < c->n_consumers; i++)
		strs += strlen(str_or_empty(c->consumers[i].name)) + 1;
	return strs;
}

/* Fills block b, size bytes up to its record, with a copy of c (sets and u
 * from claim_sets()), and *n with the claim pointing into it. */
static void claim_fill(struct block *b, size_t size, const struct state_claim *c,
		       const struct cpuset_view *sets, const struct cpuset_view *u,
		       struct state_claim *n)
{
	struct state_result *res = (struct state_result *)(b + 1);
	struct state_consumer *con = (struct state_consumer *)(res + c->n_results);
	struct packer k = { .p = (char *)(con + c->n_consumers) };

	*n = *c;
	n->results = c->n_results ? res : NULL;
	n->consumers = c->n_consumers ? con : NULL;
	for (int i = 0; i < c->n_results; i++) {
		res[i] = c->results[i];
		res[i].cpus = pack_set(&k, &sets[i]);
	}
	n->cpus = c->n_results == 1 ? res[0].cpus : pack_set(&k, u);
	n->ns = pack_str(&k, c->ns);
	n->name = pack_str(&k, c->name);
	n->owner_pod = pack_str(&k, c->owner_pod);
	n->owner_container = pack_str(&k, c->owner_container);
	for (int i = 0; i < c->n_results; i++) {
		res[i].request = pack_str(&k, c->results[i].request);
		res[i].device = pack_str(&k, c->results[i].device);
	}
	for (int i = 0; i < c->n_consumers; i++) {
		con[i] = c->consumers[i];
		con[i].name = pack_str(&k, c->consumers[i].name);
	}
	assert(k.p == (char *)b + size);
	b->record_off = (uint32_t)size;
}

/* A record of c into *n, pointing into one new block returned in *ret for
 * the caller to free; with its checkpoint record when encode. n->cpus is
 * the union of the results when c has any (c->cpus otherwise); the block
 * holds its words only when that is not the one result's set. c may point
 * into the block of n's old record: that one is freed only after. 0 or
 * -ENOMEM (nothing allocated then). */
static int claim_pack(const struct state_claim *c, bool encode, struct state_claim *n,
		      struct block **ret)
{
	_cleanup_json_ struct json_object *o = NULL;
	struct cpuset all;
	struct cpuset_view u, sets[STATE_MAX_RESULTS];
	struct state_claim t;
	struct block *b;
	const char *rec = NULL;
	size_t size, words, rec_len = 0;
	int r;

	assert(c->n_results >= 0 && c->n_results <= STATE_MAX_RESULTS);
	words = claim_sets(c, sets, &all, &u);
	if (encode) {
		t = *c;
		t.cpus = u;
		r = state_claim_json(&t, &o);
		if (r < 0)
			return r;
		rec = json_object_to_json_string_length(
			o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &rec_len);
		if (!rec)
			return -ENOMEM;
	}
	size = sizeof(*b) + sizeof(struct state_result) * (size_t)c->n_results +
	       sizeof(struct state_consumer) * (size_t)c->n_consumers +
	       sizeof(uint64_t) * words + claim_strings_size(c);
	if (size + rec_len > UINT32_MAX)
		return -E2BIG; /* unreachable under the caps on results and names */
	b = malloc(size + rec_len);
	if (!b)
		return -ENOMEM;
	claim_fill(b, size, c, sets, &u, n);
	b->record_len = (uint32_t)rec_len;
	if (rec_len)
		memcpy((char *)b + size, rec, rec_len);
	*ret = b;
	return 0;
}

static const char *record_of(const struct entry *e)
{
	return (const char *)e->data + e->data->record_off;
}

/* A new entry holding a record of c (claim_pack); with its checkpoint
 * record when encode. */
int state_entry_new(const struct state_claim *c, bool encode, struct entry **ret)
{
	struct entry *e = malloc(sizeof(*e));
	int r;

	if (!e)
		return -ENOMEM;
	r = claim_pack(c, encode, &e->c, &e->data);
	if (r < 0) {
		free(e);
		return r;
	}
	*ret = e;
	return 0;
}

/* e now records c (which may point into e's old record): 0, or -ENOMEM with
 * e unchanged. */
static int entry_update(struct entry *e, const struct state_claim *c)
{
	struct state_claim n;
	struct block *b;
	int r;

	r = claim_pack(c, true, &n, &b);
	if (r < 0)
		return r;
	free(e->data);
	e->c = n;
	e->data = b;
	return 0;
}

char *state_checkpoint_serialize(const struct state *s)
{
	_cleanup_(buf_done) struct buf b = BUF_INIT(CHECKPOINT_MAX);
	const char *sep = "";
	struct entry *e;
	int r;

	r = buf_add_str(&b, "{\"version\":1,\"claims\":[");
	HASHTAB_FOREACH(e, &s->claims)
	{
		r = r ?: buf_add_str(&b, sep);
		r = r ?: buf_add(&b, record_of(e), e->data->record_len);
		sep = ",";
	}
	r = r ?: buf_add_str(&b, "]}\n");
	return r < 0 ? NULL : buf_take(&b, NULL);
}

int state_write_checkpoint(struct state *s)
{
	_cleanup_free_ char *text = state_checkpoint_serialize(s);
	int r;

	if (!text)
		return -ENOMEM;
	r = fileio_write_atomic(s->state_dir, CHECKPOINT_NAME, text, strlen(text), 0600);
	if (r == 0)
		s->dirty = false;
	return r;
}

/* ---- changes ------------------------------------------------------------------------- */

/* The input of state_claim_add() before anything is recorded: a valid uid
 * not prepared yet, room for it, and results and consumers the record may
 * hold, the results pairwise disjoint. */
static int claim_check_input(const struct state *s, const struct state_claim *c,
			     struct errbuf *eb)
{
	int r;

	if (cdi_uid_valid(c->uid) < 0)
		return errbuf_fail(eb, -EINVAL, "claim uid '%.64s' is not valid", c->uid);
	if (find(s, c->uid))
		return errbuf_fail(eb, -EEXIST, "claim %s is already prepared", c->uid);
	if (hashtab_count(&s->claims) >= STATE_MAX_CLAIMS)
		return errbuf_fail(eb, -E2BIG, "node holds the maximum of %d claims",
				   STATE_MAX_CLAIMS);
	if (c->n_results < 0 || c->n_results > STATE_MAX_RESULTS)
		return errbuf_fail(eb, -EINVAL, "claim %s has %d results (max %d)", c->uid,
				   c->n_results, STATE_MAX_RESULTS);
	if (!claim_sizes_ok(c))
		return errbuf_fail(eb, -EINVAL, "claim %s: a name, request or device is too long",
				   c->uid);
	r = state_consumers_check(c->consumers, c->n_consumers);
	if (r < 0)
		return errbuf_fail(eb, r,
				   "claim %s: %d consumers, or one that is not a pod uid and name",
				   c->uid, c->n_consumers);
	for (int i = 0; i < c->n_results; i++) {
		struct cpuset a, b;

		(void)cpuset_from_view(&c->results[i].cpus, &a);
		for (int k = 0; k < i; k++)
			if (cpuset_intersects(&a, cpuset_from_view(&c->results[k].cpus, &b)))
				return errbuf_fail(eb, -EINVAL,
						   "claim %s: results %d and %d overlap", c->uid, k,
						   i);
	}
	return 0;
}

/* Where claim n may live: real-time claims on real-time CPUs (the ledger,
 * core/rt.h, has checked the bandwidth), the others on allocatable CPUs no
 * other claim or quarantine holds, and only when the guard lets the shared
 * pool shrink by them. */
static int claim_check_cpus(struct state *s, const struct state_claim *n,
			    const struct cpuset *cpus, struct errbuf *eb)
{
	struct cpuset busy;

	if (n->rt) {
		/* Shared with other real-time claims: only where they may live. */
		if (cpuset_is_empty(cpus) || !cpuset_is_subset(cpus, &s->rt_cpus))
			return errbuf_fail(eb, -EINVAL, "claim %s: CPUs outside the real-time CPUs",
					   n->uid);
		return 0;
	}
	if (!cpuset_is_subset(cpus, &s->allocatable))
		return errbuf_fail(eb, -EINVAL, "claim %s: CPUs outside the allocatable set",
				   n->uid);
	cpuset_or(&busy, &s->prepared, &s->quarantine);
	if (cpuset_intersects(cpus, &busy)) {
		char list[128];
		struct cpuset both;

		cpuset_and(&both, cpus, &busy);
		(void)cpuset_format(&both, list, sizeof(list));
		return errbuf_fail(eb, -EBUSY, "claim %s: CPUs %s already belong to another claim",
				   n->uid, list);
	}
	if (s->guard) {
		struct cpuset after;

		state_shared_pool(s, &after);
		cpuset_andnot(&after, &after, cpus);
		return s->guard(s->guard_ud, &after, eb);
	}
	return 0;
}

int state_claim_add(struct state *s, const struct state_claim *c, struct errbuf *eb)
{
	const struct state_claim *n;
	struct entry *e;
	struct cpuset cpus;
	int r;

	r = claim_check_input(s, c, eb);
	if (r < 0)
		return r;
	r = state_entry_new(c, true, &e);
	if (r < 0)
		return r;
	n = &e->c;
	(void)cpuset_from_view(&n->cpus, &cpus);
	r = claim_check_cpus(s, n, &cpus, eb);
	if (r < 0) {
		state_entry_free(e);
		return r;
	}

	/* Reserve, then commit: CDI spec, then checkpoint. */
	r = hashtab_put_str(&s->claims, n->uid, e, NULL);
	if (r < 0) {
		state_entry_free(e);
		return r;
	}
	if (!n->rt)
		cpuset_or(&s->prepared, &s->prepared, &cpus);
	r = cdi_spec_write(s->cdi_dir, n->uid, &cpus);
	if (r < 0) {
		(void)errbuf_fail(eb, r, "writing the CDI spec of claim %s in %s: %s", n->uid,
				  s->cdi_dir, strerror(-r));
		goto undo;
	}
	r = state_write_checkpoint(s);
	if (r < 0) {
		(void)errbuf_fail(eb, r, "writing the checkpoint %s: %s", s->checkpoint,
				  strerror(-r));
		if (cdi_spec_remove(s->cdi_dir, n->uid) < 0)
			/* The spec stays and will be re-reserved on restart: safe. */
			log_warn("cdi_rollback_failed", "claim=%s", n->uid);
		goto undo;
	}
	state_notify(s, STATE_CLAIM_ADDED, n);
	return 0;
undo:
	(void)hashtab_del_str(&s->claims, n->uid);
	state_entry_free(e);
	recompute_prepared(s);
	return r;
}

int state_claim_remove(struct state *s, const char *uid)
{
	struct entry *e;
	int r;

	if (cdi_uid_valid(uid) < 0)
		return 0; /* cannot have been prepared */
	e = find(s, uid);
	if (!e) {
		/* Not ours in memory; a quarantined or stray spec may still exist. */
		r = cdi_spec_remove(s->cdi_dir, uid);
		return r == -EISDIR ? 0 : r;
	}
	r = cdi_spec_remove(s->cdi_dir, uid);
	if (r == -EISDIR)
		/* Not a spec: a restart would not restore the claim from it
		 * either, so the claim is released as if the spec were gone. */
		log_warn("cdi_spec_not_a_file", "claim=%s dir=%s kind=directory action=left_alone",
			 uid, s->cdi_dir);
	else if (r < 0)
		return r;
	(void)hashtab_del_str(&s->claims, uid);
	recompute_prepared(s);
	r = state_write_checkpoint(s);
	if (r < 0)
		/* The spec is gone, so a restart will not resurrect the claim. */
		log_warn_errno(r, "checkpoint_write_failed", "path=%s action=continuing",
			       s->checkpoint);
	state_notify(s, STATE_CLAIM_REMOVED, &e->c);
	state_entry_free(e);
	return 0;
}

int state_claim_bind(struct state *s, const char *uid, const char *pod_uid,
		     const char *container)
{
	struct entry *e = find(s, uid);
	struct state_claim c;
	int r;

	if (!e)
		return -ENOENT;
	if (e->c.owner_pod[0]) {
		if (strcmp(e->c.owner_pod, pod_uid) == 0 &&
		    strcmp(e->c.owner_container, container) == 0)
			return 0;
		return -EBUSY;
	}
	if (strlen(pod_uid) >= CDI_UID_MAX || strlen(container) >= STATE_NAME_MAX)
		return -EINVAL;
	c = e->c;
	c.owner_pod = pod_uid;
	c.owner_container = container;
	/* The binding goes into the record now and reaches the disk with the
	 * next commit, not with a rewrite of its own: after a crash the NRI
	 * Synchronize rebuilds every binding from the containers' env anyway,
	 * and a claim holder's CreateContainer is on the pod's start path. */
	r = entry_update(e, &c);
	if (r < 0)
		return r;
	s->dirty = true;
	state_notify(s, STATE_CLAIM_BOUND, &e->c);
	return 0;
}

int state_claim_unbind(struct state *s, const char *uid)
{
	struct entry *e = cdi_uid_valid(uid) < 0 ? NULL : find(s, uid);
	struct state_claim c;
	int r;

	if (!e)
		return -ENOENT;
	if (!e->c.owner_pod[0])
		return 0;
	c = e->c;
	c.owner_pod = "";
	c.owner_container = "";
	r = entry_update(e, &c);
	if (r < 0)
		return r;
	s->dirty = true;
	return 0;
}

bool state_claim_has_consumer(const struct state_claim *c, const char *pod_uid, const char *ns,
			      const char *name)
{
	if (!c->consumers_known || !c->ns[0] || strcmp(c->ns, ns) != 0)
		return false;
	for (int i = 0; i < c->n_consumers; i++)
		if (strcmp(c->consumers[i].uid, pod_uid) == 0 &&
		    strcmp(c->consumers[i].name, name) == 0)
			return true;
	return false;
}

static bool consumers_equal(const struct state_claim *c, const struct state_consumer *v, int n)
{
	if (!c->consumers_known || c->n_consumers != n)
		return false;
	for (int i = 0; i < n; i++)
		if (strcmp(c->consumers[i].uid, v[i].uid) != 0 ||
		    strcmp(c->consumers[i].name, v[i].name) != 0)
			return false;
	return true;
}

int state_claim_set_consumers(struct state *s, const char *uid, const char *ns, const char *name,
			      const struct state_consumer *v, int n)
{
	struct entry *e = cdi_uid_valid(uid) < 0 ? NULL : find(s, uid);
	struct state_claim c;
	bool named;
	int r;

	if (!e)
		return -ENOENT;
	r = state_consumers_check(v, n);
	if (r < 0)
		return r;
	named = !e->c.ns[0] && !e->c.name[0];
	if (named) {
		if (claim_namespace_check(ns) < 0 || claim_name_check(name) < 0 ||
		    strlen(ns) >= STATE_NS_MAX || strlen(name) >= STATE_NAME_MAX)
			return -EINVAL;
	} else if (strcmp(e->c.ns, ns) != 0 || strcmp(e->c.name, name) != 0) {
		return -EINVAL;
	}
	if (!named && consumers_equal(&e->c, v, n))
		return 0;
	c = e->c;
	c.consumers = v;
	c.n_consumers = n;
	c.consumers_known = true;
	if (named) {
		c.ns = ns;
		c.name = name;
	}
	r = entry_update(e, &c);
	if (r < 0) /* the record cannot say it: keep the old one */
		return r;
	/* Written now, not with the next commit: what a restart finds here
	 * decides whether a running container is trusted. */
	r = state_write_checkpoint(s);
	if (r < 0)
		s->dirty = true;
	return r;
}
