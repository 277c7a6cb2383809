/* Claims, reservations and their durable record. See state.h.
 *
 * Claims live in a hash table keyed by uid (lib/hashtab.h), capped at
 * STATE_MAX_CLAIMS, so lookups stay O(1) at the cap.
 */
#include "core/state.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#define LOG_MOD "state"
#include "core/claim.h"
#include "lib/buf.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "lib/hashtab.h"
#include "lib/jsonc.h"
#include "lib/log.h"

#define CHECKPOINT_NAME "checkpoint.json"
#define CHECKPOINT_VERSION 1
#define CHECKPOINT_MAX (64 * 1024 * 1024)

/* A claim and its checkpoint record, serialized once per change so that
 * writing the checkpoint is a concatenation, not a re-encoding.
 *
 *   struct entry   c: the claim handed out ---------------+
 *                  data ---> struct block                  | points into
 *                            results[n_results]  <---------+
 *                            consumers[n_consumers]
 *                            CPU words of each result (and of the union
 *                              when it has several results, or none)
 *                            strings, NUL-terminated
 *                            record text (no NUL)
 *
 * Two allocations per claim: the entry, because it stays where it is while
 * the claim is prepared (callers may hold c across a change and read the new
 * values), and one block for everything c points to, replaced as a whole by
 * a change (entry_update). */
struct block {
	uint32_t record_off; /* from the start of the block */
	uint32_t record_len; /* one JSON object, no comma; 0: none (load) */
};

struct entry {
	struct state_claim c;
	struct block *data;
};

struct observer {
	state_observer_fn fn;
	void *ud;
};

struct state {
	char *cdi_dir, *state_dir, *checkpoint;
	struct cpuset allocatable;
	struct cpuset offline; /* by CPU hotplug since start (state_set_offline) */
	struct cpuset rt_cpus;	  /* where real-time claims live */
	struct cpuset isolated;	  /* allocatable, never shared */
	struct cpuset prepared;	  /* union of claims (real-time ones aside) */
	struct cpuset quarantine; /* CPUs of specs we could not honour */
	struct hashtab claims;	  /* uid -> struct entry, keyed by its c.uid */
	struct observer observers[8];
	int n_observers;
	state_guard_fn guard;
	void *guard_ud;
	bool dirty; /* the record holds changes the checkpoint file does not */
};

static int write_checkpoint(struct state *s);

static void entry_free(struct entry *e)
{
	if (!e)
		return;
	free(e->data);
	free(e);
}

/* A consumer list we may record: pod uids and names as the API allows them
 * (they reach log lines and the checkpoint). */
static int consumers_check(const struct state_consumer *v, int n)
{
	if (n < 0 || n > STATE_MAX_CONSUMERS)
		return -E2BIG;
	for (int i = 0; i < n; i++)
		if (cdi_uid_valid(v[i].uid) < 0 || !v[i].name || claim_name_check(v[i].name) < 0)
			return -EINVAL;
	return 0;
}

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

/* The strings of an input fit what the record may hold (they reach the
 * checkpoint, whose parser holds them to the same bounds). */
static bool claim_sizes_ok(const struct state_claim *c)
{
	if (strlen(str_or_empty(c->ns)) >= STATE_NS_MAX ||
	    strlen(str_or_empty(c->name)) >= STATE_NAME_MAX ||
	    strlen(str_or_empty(c->owner_container)) >= STATE_NAME_MAX ||
	    strnlen(c->owner_pod, sizeof(c->owner_pod)) >= sizeof(c->owner_pod))
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

static void notify(struct state *s, enum state_event ev, const struct state_claim *c)
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
	if (s->dirty && write_checkpoint(s) < 0)
		log_warn("checkpoint_flush_failed", "path=%s", s->checkpoint);
	HASHTAB_FOREACH(e, &s->claims)
		entry_free(e);
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

/* ---- checkpoint ---------------------------------------------------------------------- */

/* v NULL: "" (a claim handed to state_claim_add() may leave strings NULL). */
static int add_str(struct json_object *o, const char *k, const char *v)
{
	struct json_object *s = json_object_new_string(str_or_empty(v));

	if (!s || json_object_object_add(o, k, s) < 0) {
		json_object_put(s);
		return -ENOMEM;
	}
	return 0;
}

static int add_cpus(struct json_object *o, const char *k, const struct cpuset_view *v)
{
	struct cpuset c;
	_cleanup_free_ char *list = cpuset_to_string(cpuset_from_view(v, &c));

	return list ? add_str(o, k, list) : -ENOMEM;
}

/* Real-time claims: "realtime" holds the budget (absent when unknown) and
 * "rt": true marks them; each result says what it consumes ("rtMilli"). */
static int add_rt(struct json_object *o, const struct state_claim *c)
{
	struct json_object *b, *t = json_object_new_boolean(true);
	int r;

	if (!t || json_object_object_add(o, "rt", t) < 0) {
		json_object_put(t);
		return -ENOMEM;
	}
	if (c->budget.policy == RT_POLICY_NONE)
		return 0;
	r = rt_budget_to_json(&c->budget, &b);
	if (r < 0)
		return r;
	if (json_object_object_add(o, "realtime", b) < 0) {
		json_object_put(b);
		return -ENOMEM;
	}
	return 0;
}

static int add_rt_milli(struct json_object *o, int64_t milli)
{
	struct json_object *v = json_object_new_int64(milli);

	if (!v || json_object_object_add(o, "rtMilli", v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

/* The optional real-time part of checkpoint entry e into c: 0, or -EPROTO. */
static int get_rt(struct json_object *e, struct state_claim *c)
{
	struct json_object *v;

	if (!json_object_object_get_ex(e, "rt", &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return -EPROTO;
	c->rt = json_object_get_boolean(v);
	if (c->rt && json_object_object_get_ex(e, "realtime", &v) &&
	    rt_budget_parse(v, &c->budget, NULL) < 0)
		return -EPROTO;
	return 0;
}

static int get_rt_milli(struct json_object *re, bool rt, struct state_result *res)
{
	struct json_object *v;

	res->rt_milli = 0;
	if (!rt)
		return 0;
	if (!json_object_object_get_ex(re, "rtMilli", &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 1 || json_object_get_int64(v) > 1000000)
		return -EPROTO;
	res->rt_milli = json_object_get_int64(v);
	return 0;
}

static int claim_json(const struct state_claim *c, struct json_object **ret)
{
	struct json_object *o = json_object_new_object(), *results = json_object_new_array();
	int r;

	if (!o || !results || json_object_object_add(o, "results", results) < 0) {
		json_object_put(o);
		json_object_put(results);
		return -ENOMEM;
	}
	r = add_str(o, "uid", c->uid);
	r = r ?: add_str(o, "namespace", c->ns);
	r = r ?: add_str(o, "name", c->name);
	r = r ?: add_cpus(o, "cpus", &c->cpus);
	r = r ?: add_str(o, "ownerPod", c->owner_pod);
	r = r ?: add_str(o, "ownerContainer", c->owner_container);
	/* only when set: checkpoints without them stay what they were */
	if (!r && (c->flags & STATE_CLAIM_MEMORY_LOCAL))
		r = json_object_object_add(o, "memoryLocal", json_object_new_boolean(1)) < 0
			    ? -ENOMEM
			    : 0;
	if (!r && (c->flags & STATE_CLAIM_SHARED_POOL))
		r = json_object_object_add(o, "sharedPool", json_object_new_boolean(1)) < 0
			    ? -ENOMEM
			    : 0;
	/* Absent when unknown: a checkpoint of an older version reads the same. */
	if (!r && c->consumers_known) {
		struct json_object *pods = json_object_new_array();

		if (!pods || json_object_object_add(o, "consumers", pods) < 0) {
			json_object_put(pods);
			r = -ENOMEM;
		}
		for (int i = 0; !r && i < c->n_consumers; i++) {
			struct json_object *e = json_object_new_object();

			if (!e || json_object_array_add(pods, e) < 0) {
				json_object_put(e);
				r = -ENOMEM;
				break;
			}
			r = add_str(e, "uid", c->consumers[i].uid);
			r = r ?: add_str(e, "name", c->consumers[i].name);
		}
	}
	for (int i = 0; !r && i < c->n_results; i++) {
		struct json_object *e = json_object_new_object();

		if (!e || json_object_array_add(results, e) < 0) {
			json_object_put(e);
			r = -ENOMEM;
			break;
		}
		r = add_str(e, "request", c->results[i].request);
		r = r ?: add_str(e, "device", c->results[i].device);
		r = r ?: add_cpus(e, "cpus", &c->results[i].cpus);
		if (!r && c->rt)
			r = add_rt_milli(e, c->results[i].rt_milli);
	}
	if (!r && c->rt)
		r = add_rt(o, c);
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	*ret = o;
	return 0;
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
	struct state_result *res;
	struct state_consumer *con;
	struct state_claim t;
	struct block *b;
	struct packer k;
	const char *rec = NULL;
	size_t size, words = 0, strs, rec_len = 0;
	int r;

	assert(c->n_results >= 0 && c->n_results <= STATE_MAX_RESULTS);
	for (int i = 0; i < c->n_results; i++) {
		sets[i] = view_trim(&c->results[i].cpus);
		words += (size_t)sets[i].n;
	}
	if (c->n_results > 1) {
		cpuset_zero(&all);
		for (int i = 0; i < c->n_results; i++)
			cpuset_or_view(&all, &sets[i]);
		u = cpuset_view(&all);
		words += (size_t)u.n;
	} else if (c->n_results == 1) {
		u = sets[0]; /* shared with the result */
	} else {
		u = view_trim(&c->cpus);
		words += (size_t)u.n;
	}
	if (encode) {
		t = *c;
		t.cpus = u;
		r = claim_json(&t, &o);
		if (r < 0)
			return r;
		rec = json_object_to_json_string_length(
			o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &rec_len);
		if (!rec)
			return -ENOMEM;
	}
	strs = strlen(str_or_empty(c->ns)) + strlen(str_or_empty(c->name)) +
	       strlen(str_or_empty(c->owner_container)) + 3;
	for (int i = 0; i < c->n_results; i++)
		strs += strlen(str_or_empty(c->results[i].request)) +
			strlen(str_or_empty(c->results[i].device)) + 2;
	for (int i = 0; i < c->n_consumers; i++)
		strs += strlen(str_or_empty(c->consumers[i].name)) + 1;
	size = sizeof(*b) + sizeof(*res) * (size_t)c->n_results +
	       sizeof(*con) * (size_t)c->n_consumers + sizeof(uint64_t) * words + strs;
	if (size + rec_len > UINT32_MAX)
		return -E2BIG; /* unreachable under the caps on results and names */
	b = malloc(size + rec_len);
	if (!b)
		return -ENOMEM;
	*n = *c;
	res = (struct state_result *)(b + 1);
	con = (struct state_consumer *)(res + c->n_results);
	k.p = (char *)(con + c->n_consumers);
	n->results = c->n_results ? res : NULL;
	n->consumers = c->n_consumers ? con : NULL;
	for (int i = 0; i < c->n_results; i++) {
		res[i] = c->results[i];
		res[i].cpus = pack_set(&k, &sets[i]);
	}
	n->cpus = c->n_results == 1 ? res[0].cpus : pack_set(&k, &u);
	n->ns = pack_str(&k, c->ns);
	n->name = pack_str(&k, c->name);
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
	b->record_len = (uint32_t)rec_len;
	if (rec_len)
		memcpy(k.p, rec, rec_len);
	*ret = b;
	return 0;
}

static const char *record_of(const struct entry *e)
{
	return (const char *)e->data + e->data->record_off;
}

/* A new entry holding a record of c (claim_pack); with its checkpoint
 * record when encode. */
static int entry_new(const struct state_claim *c, bool encode, struct entry **ret)
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

/* String member k of o (borrowed from o) into *ret; -EPROTO when absent,
 * not a string, or size bytes or longer. */
static int get_str(struct json_object *o, const char *k, size_t size, const char **ret)
{
	struct json_object *v;
	const char *s;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return -EPROTO;
	s = json_object_get_string(v);
	if (strlen(s) >= size)
		return -EPROTO;
	*ret = s;
	return 0;
}

/* Same into a fixed array of size bytes. */
static int get_str_into(struct json_object *o, const char *k, char *buf, size_t size)
{
	const char *s;

	if (get_str(o, k, size, &s) < 0)
		return -EPROTO;
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

/* CPU list member k of o parsed into *set, with *ret a view of it. */
static int get_cpus(struct json_object *o, const char *k, struct cpuset *set,
		    struct cpuset_view *ret)
{
	const char *list;

	if (get_str(o, k, CPUSET_MAX * 5, &list) < 0 || cpuset_parse(list, set, NULL) < 0)
		return -EPROTO;
	*ret = cpuset_view(set);
	return 0;
}

/* The optional "consumers" list of a checkpoint entry into c (v: room for
 * STATE_MAX_CONSUMERS). Absent: unknown (entries written before consumers
 * were recorded). */
static int get_consumers(struct json_object *e, struct state_claim *c, struct state_consumer *v)
{
	struct json_object *list;
	size_t n;

	if (!json_object_object_get_ex(e, "consumers", &list))
		return 0;
	if (!json_object_is_type(list, json_type_array))
		return -EPROTO;
	n = json_object_array_length(list);
	if (n > STATE_MAX_CONSUMERS)
		return -EPROTO;
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(list, i);

		if (!json_object_is_type(o, json_type_object) ||
		    get_str_into(o, "uid", v[i].uid, sizeof(v[i].uid)) < 0 ||
		    get_str(o, "name", STATE_NAME_MAX, &v[i].name) < 0)
			return -EPROTO;
	}
	if (consumers_check(v, (int)n) < 0)
		return -EPROTO;
	c->consumers_known = true;
	c->n_consumers = (int)n;
	c->consumers = n ? v : NULL;
	return 0;
}

int state_checkpoint_parse(const char *buf, size_t len,
			   int (*fn)(void *ud, const struct state_claim *c), void *ud,
			   struct errbuf *eb)
{
	struct json_tokener *tok = json_tokener_new_ex(8);
	struct json_object *root = NULL, *claims, *v;
	struct state_result results[STATE_MAX_RESULTS];
	_cleanup_free_ struct cpuset *sets = NULL; /* the results', then the claim's */
	_cleanup_free_ struct state_consumer *pods = NULL;
	int r = 0;

	if (!tok)
		return -ENOMEM;
	pods = malloc(sizeof(*pods) * STATE_MAX_CONSUMERS);
	sets = malloc(sizeof(*sets) * (STATE_MAX_RESULTS + 1));
	if (!pods || !sets) {
		r = -ENOMEM;
		goto out;
	}
	if (len > CHECKPOINT_MAX)
		len = 0; /* parsed as empty: rejected below */
	root = json_tokener_parse_ex(tok, buf, (int)len);
	if (json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_is_type(root, json_type_object)) {
		r = errbuf_fail(eb, -EPROTO, "not a JSON object");
		goto out;
	}
	if (!json_object_object_get_ex(root, "version", &v) ||
	    !json_object_is_type(v, json_type_int) || json_object_get_int(v) != CHECKPOINT_VERSION) {
		r = errbuf_fail(eb, -EPROTO, "version is not %d", CHECKPOINT_VERSION);
		goto out;
	}
	if (!json_object_object_get_ex(root, "claims", &claims) ||
	    !json_object_is_type(claims, json_type_array)) {
		r = errbuf_fail(eb, -EPROTO, "no claims array");
		goto out;
	}
	for (size_t i = 0; i < json_object_array_length(claims); i++) {
		struct json_object *e = json_object_array_get_idx(claims, i), *rs;
		struct state_claim c;

		memset(&c, 0, sizeof(c));
		if (!json_object_is_type(e, json_type_object) ||
		    get_str_into(e, "uid", c.uid, sizeof(c.uid)) < 0 || cdi_uid_valid(c.uid) < 0 ||
		    get_str(e, "namespace", STATE_NS_MAX, &c.ns) < 0 ||
		    get_str(e, "name", STATE_NAME_MAX, &c.name) < 0 ||
		    get_cpus(e, "cpus", &sets[STATE_MAX_RESULTS], &c.cpus) < 0 ||
		    get_str_into(e, "ownerPod", c.owner_pod, sizeof(c.owner_pod)) < 0 ||
		    get_str(e, "ownerContainer", STATE_NAME_MAX, &c.owner_container) < 0 ||
		    get_rt(e, &c) < 0 || !json_object_object_get_ex(e, "results", &rs) ||
		    !json_object_is_type(rs, json_type_array) ||
		    json_object_array_length(rs) > STATE_MAX_RESULTS) {
			r = errbuf_fail(eb, -EPROTO, "claim entry %zu is malformed", i);
			goto out;
		}
		if (json_object_object_get_ex(e, "memoryLocal", &v) &&
		    json_object_get_boolean(v))
			c.flags |= STATE_CLAIM_MEMORY_LOCAL;
		if (json_object_object_get_ex(e, "sharedPool", &v) && json_object_get_boolean(v))
			c.flags |= STATE_CLAIM_SHARED_POOL;
		if (get_consumers(e, &c, pods) < 0) {
			r = errbuf_fail(eb, -EPROTO, "claim entry %zu: consumers are malformed", i);
			goto out;
		}
		c.n_results = (int)json_object_array_length(rs);
		c.results = results;
		for (int k = 0; k < c.n_results; k++) {
			struct json_object *re = json_object_array_get_idx(rs, (size_t)k);

			if (!json_object_is_type(re, json_type_object) ||
			    get_str(re, "request", STATE_REQUEST_MAX, &results[k].request) < 0 ||
			    get_str(re, "device", STATE_DEVICE_MAX, &results[k].device) < 0 ||
			    get_cpus(re, "cpus", &sets[k], &results[k].cpus) < 0 ||
			    get_rt_milli(re, c.rt, &results[k]) < 0) {
				r = errbuf_fail(eb, -EPROTO,
						"claim entry %zu result %d is malformed", i, k);
				goto out;
			}
		}
		r = fn(ud, &c);
		if (r < 0)
			goto out;
	}
out:
	json_tokener_free(tok);
	json_object_put(root);
	return r;
}

static int write_checkpoint(struct state *s)
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

int state_claim_add(struct state *s, const struct state_claim *c, struct errbuf *eb)
{
	const struct state_claim *n;
	struct entry *e;
	struct cpuset busy, cpus;
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
	r = consumers_check(c->consumers, c->n_consumers);
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
	r = entry_new(c, true, &e);
	if (r < 0)
		return r;
	n = &e->c;
	(void)cpuset_from_view(&n->cpus, &cpus);
	if (n->rt) {
		/* Shared with other real-time claims: the ledger (core/rt.h) has
		 * checked the bandwidth; here only where they may live. */
		if (cpuset_is_empty(&cpus) || !cpuset_is_subset(&cpus, &s->rt_cpus)) {
			entry_free(e);
			return errbuf_fail(eb, -EINVAL, "claim %s: CPUs outside the real-time CPUs",
					   c->uid);
		}
	} else if (!cpuset_is_subset(&cpus, &s->allocatable)) {
		entry_free(e);
		return errbuf_fail(eb, -EINVAL, "claim %s: CPUs outside the allocatable set",
				   c->uid);
	}
	cpuset_or(&busy, &s->prepared, &s->quarantine);
	if (!n->rt && cpuset_intersects(&cpus, &busy)) {
		char list[128];
		struct cpuset both;

		cpuset_and(&both, &cpus, &busy);
		(void)cpuset_format(&both, list, sizeof(list));
		entry_free(e);
		return errbuf_fail(eb, -EBUSY, "claim %s: CPUs %s already belong to another claim",
				   c->uid, list);
	}

	if (s->guard && !n->rt) {
		struct cpuset after;

		state_shared_pool(s, &after);
		cpuset_andnot(&after, &after, &cpus);
		r = s->guard(s->guard_ud, &after, eb);
		if (r < 0) {
			entry_free(e);
			return r;
		}
	}

	/* Reserve, then commit: CDI spec, then checkpoint. */
	r = hashtab_put_str(&s->claims, n->uid, e, NULL);
	if (r < 0) {
		entry_free(e);
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
	r = write_checkpoint(s);
	if (r < 0) {
		(void)errbuf_fail(eb, r, "writing the checkpoint %s: %s", s->checkpoint,
				  strerror(-r));
		if (cdi_spec_remove(s->cdi_dir, n->uid) < 0)
			/* The spec stays and will be re-reserved on restart: safe. */
			log_warn("cdi_rollback_failed", "claim=%s", n->uid);
		goto undo;
	}
	notify(s, STATE_CLAIM_ADDED, n);
	return 0;
undo:
	(void)hashtab_del_str(&s->claims, n->uid);
	entry_free(e);
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
	r = write_checkpoint(s);
	if (r < 0)
		/* The spec is gone, so a restart will not resurrect the claim. */
		log_warn_errno(r, "checkpoint_write_failed", "path=%s action=continuing",
			       s->checkpoint);
	notify(s, STATE_CLAIM_REMOVED, &e->c);
	entry_free(e);
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
	if (strlen(pod_uid) >= sizeof(c.owner_pod) || strlen(container) >= STATE_NAME_MAX)
		return -EINVAL;
	c = e->c;
	memcpy(c.owner_pod, pod_uid, strlen(pod_uid) + 1);
	c.owner_container = container;
	/* The binding goes into the record now and reaches the disk with the
	 * next commit, not with a rewrite of its own: after a crash the NRI
	 * Synchronize rebuilds every binding from the containers' env anyway,
	 * and a claim holder's CreateContainer is on the pod's start path. */
	r = entry_update(e, &c);
	if (r < 0)
		return r;
	s->dirty = true;
	notify(s, STATE_CLAIM_BOUND, &e->c);
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
	c.owner_pod[0] = 0;
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
	r = consumers_check(v, n);
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
	r = write_checkpoint(s);
	if (r < 0)
		s->dirty = true;
	return r;
}

/* ---- load ---------------------------------------------------------------------------- */

struct loader {
	struct state *s;
	struct hashtab ckpt; /* checkpoint entries (struct entry, no record) not yet
			      * matched to a spec, by uid */
	/* The specs are read twice: first those a checkpoint entry names, then
	 * the others, so that a spec planted (or left) without one never takes
	 * CPUs from a claim the checkpoint records: the checkpoint wins. */
	int pass;
	struct hashtab first; /* uids the first pass saw (value: 1) */
	int restored, quarantined, bad_specs;
};

static int collect_ckpt(void *ud, const struct state_claim *c)
{
	struct loader *l = ud;
	struct entry *n, *old = NULL;
	int r;

	r = entry_new(c, false, &n);
	if (r < 0)
		return r;
	r = hashtab_put_str(&l->ckpt, n->c.uid, n, (void **)&old);
	if (r < 0)
		entry_free(n);
	entry_free(old); /* a uid listed twice: the later entry wins */
	return r < 0 ? r : 0;
}

static void on_bad_spec(void *ud, const char *path, const char *why)
{
	struct loader *l = ud;

	l->bad_specs++;
	log_warn("cdi_spec_ignored", "path=%s reason=%s action=left_alone", path, log_quote(why));
}

static int restore_spec(struct loader *l, const char *uid, const struct cpuset *cpus);

static int on_spec(void *ud, const char *uid, const struct cpuset *cpus)
{
	struct loader *l = ud;

	if (l->pass == 1) {
		if (!hashtab_get_str(&l->ckpt, uid))
			return 0;
		if (hashtab_put_str(&l->first, uid, (void *)1, NULL) < 0)
			return -ENOMEM;
		return restore_spec(l, uid, cpus);
	}
	if (hashtab_get_str(&l->first, uid))
		return 0;
	return restore_spec(l, uid, cpus);
}

static int restore_spec(struct loader *l, const char *uid, const struct cpuset *cpus)
{
	struct state *s = l->s;
	struct entry *old, *e;
	struct state_claim c;
	struct cpuset busy, had;
	char list[128];
	int r;

	old = hashtab_del_str(&l->ckpt, uid);
	if (old) {
		c = old->c;
	} else {
		c = (struct state_claim){ 0 };
		memcpy(c.uid, uid, strlen(uid) + 1);
	}
	if (old && !cpuset_equal(cpuset_from_view(&old->c.cpus, &had), cpus)) {
		/* Nothing of the entry is trusted then: a binding waits for a read. */
		log_warn("checkpoint_disagrees", "claim=%s action=using_cdi_spec", uid);
		c.results = NULL;
		c.n_results = 0;
		c.consumers = NULL;
		c.n_consumers = 0;
		c.consumers_known = false;
	}
	c.cpus = cpuset_view(cpus);
	/* All real-time CPUs: a real-time claim, whatever the checkpoint says
	 * (without its record it holds the whole bandwidth of its CPUs). */
	if (!cpuset_is_empty(cpus) && cpuset_is_subset(cpus, &s->rt_cpus)) {
		if (!c.rt) {
			c.budget = (struct rt_budget){ .policy = RT_POLICY_NONE };
			c.results = NULL;
			c.n_results = 0;
		}
		c.rt = true;
	} else {
		c.rt = false;
	}
	cpuset_or(&busy, &s->prepared, &s->quarantine);
	if ((!c.rt && (!cpuset_is_subset(cpus, &s->allocatable) || cpuset_intersects(cpus, &busy))) ||
	    hashtab_count(&s->claims) >= STATE_MAX_CLAIMS) {
		(void)cpuset_format(cpus, list, sizeof(list));
		log_error("claim_quarantined", "claim=%s cpus=%s checkpointed=%s reason=%s", uid,
			  list, old ? "true" : "false",
			  !cpuset_is_subset(cpus, &s->allocatable)
				  ? "\"CPUs not allocatable (reserved or offline)\""
				  : "\"overlaps another prepared claim\"");
		cpuset_and(&busy, cpus, &s->allocatable);
		cpuset_or(&s->quarantine, &s->quarantine, &busy);
		l->quarantined++;
		entry_free(old);
		return 0;
	}
	/* The union of the results is the spec's CPUs (checked above), so the
	 * record's cpus come out the same either way. */
	r = entry_new(&c, true, &e);
	entry_free(old);
	if (r < 0)
		return r;
	if (hashtab_put_str(&s->claims, e->c.uid, e, NULL) < 0) {
		entry_free(e);
		return -ENOMEM;
	}
	if (!e->c.rt)
		cpuset_or(&s->prepared, &s->prepared, cpus);
	l->restored++;
	(void)cpuset_format(cpus, list, sizeof(list));
	log_info("claim_restored", "claim=%s ns=%s name=%s cpus=%s", uid,
		 e->c.ns[0] ? e->c.ns : "?", e->c.name[0] ? e->c.name : "?", list);
	return 0;
}

/* What a crash between create and rename left: ours alone (fileio.h). The
 * state dir holds only our files; in the CDI dir, only our names. */
static void remove_stale_temps(struct state *s)
{
	int n = fileio_remove_stale_temps(s->state_dir, "");
	int k = cdi_remove_stale_temps(s->cdi_dir);

	if (n > 0 || k > 0)
		log_info("stale_temps_removed", "state_dir=%d cdi_dir=%d", n > 0 ? n : 0,
			 k > 0 ? k : 0);
	if (n < 0 || k < 0)
		log_warn_errno(n < 0 ? n : k, "stale_temps_unreadable", "dir=%s action=continuing",
			       n < 0 ? s->state_dir : s->cdi_dir);
}

/* A directory where the checkpoint belongs (a hostPath mount of type
 * DirectoryOrCreate does that): an empty one is removed, nothing is lost;
 * anything else is the operator's, and every commit would fail, so the
 * start fails with a message saying what to do rather than serving claims
 * it cannot record. */
static int checkpoint_is_a_directory(struct state *s)
{
	if (rmdir(s->checkpoint) == 0) {
		log_warn("checkpoint_not_a_file", "path=%s kind=directory action=removed_empty_directory",
			 s->checkpoint);
		return 0;
	}
	return log_error_errno(-EISDIR, "checkpoint_not_a_file",
			       "path=%s kind=directory reason=%s hint=%s", s->checkpoint,
			       log_quote(strerror(errno)),
			       log_quote("the checkpoint must be a regular file: remove or move this "
					 "directory (or the mount that puts it there)"));
}

int state_load(struct state *s)
{
	struct loader l = { .s = s,
			    .ckpt = HASHTAB_INIT(STATE_MAX_CLAIMS),
			    .first = HASHTAB_INIT(STATE_MAX_CLAIMS) };
	_cleanup_free_ char *buf = NULL;
	struct errbuf why = { "" };
	struct entry *c, *e;
	struct stat st;
	size_t len = 0;
	int r;

	r = fileio_mkdir_p(s->state_dir, 0700);
	if (r < 0)
		return log_error_errno(r, "state_dir_failed", "path=%s", s->state_dir);
	if (stat(s->state_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return log_error_errno(-ENOTDIR, "state_dir_failed", "path=%s", s->state_dir);
	if ((st.st_mode & 0777) != 0700 && chmod(s->state_dir, 0700) < 0)
		return log_error_errno(-errno, "state_dir_failed", "path=%s", s->state_dir);

	remove_stale_temps(s);
	r = fileio_read(s->checkpoint, CHECKPOINT_MAX, &buf, &len, &why);
	if (r == 0) {
		r = state_checkpoint_parse(buf, len, collect_ckpt, &l, &why);
		if (r == -ENOMEM)
			goto out;
		if (r < 0)
			log_warn("checkpoint_ignored", "path=%s reason=%s action=using_cdi_specs",
				 s->checkpoint, log_quote(errbuf_text(&why, r)));
	} else if (r == -EISDIR) {
		r = checkpoint_is_a_directory(s);
		if (r < 0)
			goto out;
	} else if (r != -ENOENT) {
		/* A FIFO, socket, device node or symlink: never read, replaced
		 * by the write below (rename does not follow a link). */
		log_warn("checkpoint_unreadable", "path=%s reason=%s action=using_cdi_specs_replacing",
			 s->checkpoint, log_quote(errbuf_text(&why, r)));
	}

	l.pass = 1;
	r = cdi_scan(s->cdi_dir, on_spec, NULL, &l);
	if (r >= 0) {
		l.pass = 2;
		r = cdi_scan(s->cdi_dir, on_spec, on_bad_spec, &l);
	}
	if (r < 0) {
		log_error_errno(r, "cdi_scan_failed", "dir=%s", s->cdi_dir);
		goto out;
	}
	HASHTAB_FOREACH(c, &l.ckpt)
		log_info("checkpoint_entry_dropped", "claim=%s reason=\"no CDI spec\"", c->c.uid);
	r = write_checkpoint(s);
	if (r < 0)
		log_error_errno(r, "checkpoint_write_failed", "path=%s", s->checkpoint);
	log_info("state_loaded", "claims=%d quarantined=%d ignored_specs=%d", l.restored,
		 l.quarantined, l.bad_specs);
	HASHTAB_FOREACH(e, &s->claims)
		notify(s, STATE_CLAIM_ADDED, &e->c);
out:
	HASHTAB_FOREACH(c, &l.ckpt)
		entry_free(c);
	hashtab_done(&l.ckpt);
	hashtab_done(&l.first);
	return r;
}
