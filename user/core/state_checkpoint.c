/* The checkpoint's JSON: a claim as its entry (state_claim_json, which the
 * records keep ready to write) and the checkpoint file parsed back
 * (state_checkpoint_parse), one version of it (CHECKPOINT_VERSION). See
 * state.h for what the checkpoint is for.
 */
#include "core/state.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "core/state_priv.h"

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

int state_claim_json(const struct state_claim *c, struct json_object **ret)
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
	if (state_consumers_check(v, (int)n) < 0)
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
		    get_str(e, "ownerPod", CDI_UID_MAX, &c.owner_pod) < 0 ||
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
