/* The node picture: its document, parser and drawing. See nodemap.h. */
#include "core/nodemap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/state.h"
#include "host/topo.h"
#include "lib/errbuf.h"
#include "lib/jsonc.h"

#define NODEMAP_JSON_DEPTH 6

static const char *const use_names[] = {
	[NODEMAP_SHARED] = "shared",	 [NODEMAP_CLAIMED] = "claimed",
	[NODEMAP_REALTIME] = "realtime", [NODEMAP_RESERVED] = "reserved",
	[NODEMAP_OFFLINE] = "offline",	 [NODEMAP_ISOLATED] = "isolated",
};

const char *nodemap_use_name(enum nodemap_use u)
{
	return (unsigned)u < sizeof(use_names) / sizeof(use_names[0]) ? use_names[u] : "?";
}

/* ---- building ------------------------------------------------------------------------ */

struct build {
	const struct nodemap_input *in;
	struct json_object *claims;
	/* per CPU: the indexes of the claims on it, in claim order (a list per
	 * CPU, its cells in one array) */
	int *first, *last, *next_of, n;
	int *claim_of; /* claim index of each list cell */
	struct cpuset exclusive; /* CPUs of ordinary (not real-time) claims */
};

static int add_claim_cpu(struct build *b, int cpu, int claim)
{
	int *n = realloc(b->next_of, sizeof(int) * (size_t)(b->n + 1)), *c;

	if (!n)
		return -ENOMEM;
	b->next_of = n;
	c = realloc(b->claim_of, sizeof(int) * (size_t)(b->n + 1));
	if (!c)
		return -ENOMEM;
	b->claim_of = c;
	b->claim_of[b->n] = claim;
	b->next_of[b->n] = -1;
	if (b->last[cpu] >= 0)
		b->next_of[b->last[cpu]] = b->n;
	else
		b->first[cpu] = b->n;
	b->last[cpu] = b->n++;
	return 0;
}

static int build_claim(void *ud, const struct state_claim *c)
{
	struct build *b = ud;
	int idx = (int)json_object_array_length(b->claims), r = 0;
	_cleanup_json_ struct json_object *o = json_object_new_object(), *pods = NULL;
	char name[NODEMAP_STRING_MAX];
	struct cpuset cpus;

	if (!o)
		return -ENOMEM;
	if (c->ns && *c->ns)
		(void)snprintf(name, sizeof(name), "%s/%s", c->ns, c->name ? c->name : "");
	else
		(void)snprintf(name, sizeof(name), "%s", c->uid);
	pods = json_object_new_array();
	if (!pods)
		return -ENOMEM;
	for (int i = 0; i < c->n_consumers && r == 0; i++)
		r = jsonc_push(pods, json_object_new_string(c->consumers[i].name
								    ? c->consumers[i].name
								    : c->consumers[i].uid));
	r = r ?: jsonc_add(o, "name", json_object_new_string(name));
	r = r ?: jsonc_add(o, "uid", json_object_new_string(c->uid));
	r = r ?: jsonc_add(o, "realtime", json_object_new_boolean(c->rt));
	r = r ?: jsonc_add(o, "pods", TAKE_PTR(pods));
	if (r == 0 && c->owner_pod[0] && c->owner_container)
		r = jsonc_add(o, "container", json_object_new_string(c->owner_container));
	r = r ?: jsonc_push(b->claims, TAKE_PTR(o));
	if (r < 0)
		return r;
	CPUSET_FOREACH(cpu, cpuset_from_view(&c->cpus, &cpus))
	{
		if (cpu >= CPUSET_MAX)
			continue;
		if (!c->rt)
			cpuset_set(&b->exclusive, cpu);
		r = add_claim_cpu(b, cpu, idx);
		if (r < 0)
			return r;
	}
	return 0;
}

static enum nodemap_use use_of(const struct build *b, int cpu, bool online)
{
	const struct nodemap_input *in = b->in;

	if (cpuset_has(&b->exclusive, cpu))
		return NODEMAP_CLAIMED;
	if (!online)
		return NODEMAP_OFFLINE;
	if (in->rt_cpus && cpuset_has(in->rt_cpus, cpu))
		return NODEMAP_REALTIME;
	if (in->reserved && cpuset_has(in->reserved, cpu))
		return NODEMAP_RESERVED;
	if (in->state && cpuset_has(state_isolated(in->state), cpu))
		return NODEMAP_ISOLATED;
	return NODEMAP_SHARED;
}

static int build_cpu(struct build *b, struct json_object *cpus, int cpu,
		     const struct topo_cpu *t)
{
	_cleanup_json_ struct json_object *o = json_object_new_object(), *cl = NULL;
	bool online = !b->in->online || cpuset_has(b->in->online, cpu);
	int r = 0;

	cl = json_object_new_array();
	if (!o || !cl)
		return -ENOMEM;
	for (int k = b->first[cpu]; k >= 0 && r == 0; k = b->next_of[k])
		r = jsonc_push(cl, json_object_new_int(b->claim_of[k]));
	r = r ?: jsonc_add(o, "cpu", json_object_new_int(cpu));
	r = r ?: jsonc_add(o, "socket", json_object_new_int(t ? t->socket : -1));
	r = r ?: jsonc_add(o, "numa", json_object_new_int(t ? t->numa : -1));
	r = r ?: jsonc_add(o, "l3", json_object_new_int(t ? t->l3 : -1));
	r = r ?: jsonc_add(o, "core", json_object_new_int(t ? t->core : -1));
	r = r ?: jsonc_add(o, "use", json_object_new_string(nodemap_use_name(use_of(b, cpu, online))));
	r = r ?: jsonc_add(o, "online", json_object_new_boolean(online));
	r = r ?: jsonc_add(o, "claims", TAKE_PTR(cl));
	return r ?: jsonc_push(cpus, TAKE_PTR(o));
}

static void build_done(struct build *b)
{
	if (b->claims)
		(void)json_object_put(b->claims);
	free(b->first);
	free(b->last);
	free(b->next_of);
	free(b->claim_of);
}

int nodemap_build(const struct nodemap_input *in, struct json_object **ret)
{
	_cleanup_json_ struct json_object *doc = json_object_new_object(), *cpus = NULL;
	_cleanup_(build_done) struct build b = { .in = in };
	struct cpuset all;
	int r = 0;

	b.claims = json_object_new_array();
	cpus = json_object_new_array();
	b.first = malloc(sizeof(int) * CPUSET_MAX);
	b.last = malloc(sizeof(int) * CPUSET_MAX);
	if (!doc || !b.claims || !cpus || !b.first || !b.last)
		return -ENOMEM;
	for (int i = 0; i < CPUSET_MAX; i++)
		b.first[i] = b.last[i] = -1;
	cpuset_zero(&b.exclusive);
	if (in->state)
		r = state_foreach_claim(in->state, build_claim, &b);
	/* Every CPU the topology knows, online at start or not. */
	cpuset_or(&all, &in->topo->online, &in->topo->offline);
	CPUSET_FOREACH(cpu, &all)
	{
		if (r < 0)
			break;
		r = build_cpu(&b, cpus, cpu, topo_cpu(in->topo, cpu));
	}
	r = r ?: jsonc_add(doc, "apiVersion", json_object_new_string("dra.cpu/v1alpha1"));
	r = r ?: jsonc_add(doc, "kind", json_object_new_string("NodeMap"));
	r = r ?: jsonc_add(doc, "node", json_object_new_string(in->node ? in->node : ""));
	r = r ?: jsonc_add(doc, "claims", TAKE_PTR(b.claims));
	r = r ?: jsonc_add(doc, "cpus", TAKE_PTR(cpus));
	if (r < 0)
		return r;
	*ret = TAKE_PTR(doc);
	return 0;
}

/* ---- parsing ------------------------------------------------------------------------- */

struct nodemap *nodemap_free(struct nodemap *m)
{
	if (!m)
		return NULL;
	for (int i = 0; i < m->n_claims; i++) {
		struct nodemap_claim *c = &m->claims[i];

		free(c->name);
		free(c->uid);
		free(c->container);
		for (int j = 0; j < c->n_pods; j++)
			free(c->pods[j]);
		free(c->pods);
	}
	free(m->claims);
	free(m->cpus);
	free(m->node);
	free(m);
	return NULL;
}

/* A printable bounded string from o[key] into *ret (NULL when absent and
 * optional). Control characters never reach a terminal through us. */
static int take_str(struct json_object *v, const char *what, char **ret, struct errbuf *eb)
{
	const char *s;
	size_t n;

	if (!json_object_is_type(v, json_type_string))
		return errbuf_fail(eb, -EINVAL, "%s: not a string", what);
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n >= NODEMAP_STRING_MAX)
		return errbuf_fail(eb, -E2BIG, "%s: longer than %d bytes", what,
				   NODEMAP_STRING_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return errbuf_fail(eb, -EINVAL, "%s: control character at %zu", what, i);
	*ret = strndup(s, n);
	return *ret ? 0 : -ENOMEM;
}

static int member_str(struct json_object *o, const char *key, bool required, const char *what,
		      char **ret, struct errbuf *eb)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v)) {
		if (required)
			return errbuf_fail(eb, -EINVAL, "%s.%s: missing", what, key);
		*ret = NULL;
		return 0;
	}
	return take_str(v, what, ret, eb);
}

static int member_int(struct json_object *o, const char *key, int lo, int hi, const char *what,
		      int *ret, struct errbuf *eb)
{
	struct json_object *v;
	int64_t x;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return errbuf_fail(eb, -EINVAL, "%s.%s: missing or not an integer", what, key);
	x = json_object_get_int64(v);
	if (x < lo || x > hi)
		return errbuf_fail(eb, -EINVAL, "%s.%s: %lld out of range [%d, %d]", what, key,
				   (long long)x, lo, hi);
	*ret = (int)x;
	return 0;
}

static int member_bool(struct json_object *o, const char *key, const char *what, bool *ret,
		       struct errbuf *eb)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_boolean))
		return errbuf_fail(eb, -EINVAL, "%s.%s: missing or not a boolean", what, key);
	*ret = json_object_get_boolean(v);
	return 0;
}

static int member_array(struct json_object *o, const char *key, size_t max, const char *what,
			struct json_object **ret, struct errbuf *eb)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
		return errbuf_fail(eb, -EINVAL, "%s.%s: missing or not an array", what, key);
	if (json_object_array_length(v) > max)
		return errbuf_fail(eb, -E2BIG, "%s.%s: more than %zu entries", what, key, max);
	*ret = v;
	return 0;
}

static int parse_claim(struct json_object *o, struct nodemap_claim *c, struct errbuf *eb)
{
	struct json_object *pods;
	int r;

	if (!json_object_is_type(o, json_type_object))
		return errbuf_fail(eb, -EINVAL, "claim: not an object");
	r = member_str(o, "name", true, "claim", &c->name, eb);
	r = r ?: member_str(o, "uid", false, "claim", &c->uid, eb);
	r = r ?: member_str(o, "container", false, "claim", &c->container, eb);
	r = r ?: member_bool(o, "realtime", "claim", &c->realtime, eb);
	r = r ?: member_array(o, "pods", NODEMAP_MAX_PODS, "claim", &pods, eb);
	if (r < 0)
		return r;
	c->pods = calloc(json_object_array_length(pods) + 1, sizeof(char *));
	if (!c->pods)
		return -ENOMEM;
	for (size_t i = 0; i < json_object_array_length(pods); i++) {
		r = take_str(json_object_array_get_idx(pods, i), "claim.pods[]",
			     &c->pods[c->n_pods], eb);
		if (r < 0)
			return r;
		c->n_pods++;
	}
	return 0;
}

static int parse_use(struct json_object *o, enum nodemap_use *ret, struct errbuf *eb)
{
	const char *s = jsonc_str(o, "use");

	for (size_t i = 0; s && i < sizeof(use_names) / sizeof(use_names[0]); i++)
		if (!strcmp(s, use_names[i])) {
			*ret = (enum nodemap_use)i;
			return 0;
		}
	return errbuf_fail(eb, -EINVAL, "cpu.use: missing or not one of shared, claimed, "
					"realtime, reserved, offline, isolated");
}

static int parse_cpu(struct json_object *o, int n_claims, struct nodemap_cpu *c,
		     struct errbuf *eb)
{
	struct json_object *cl;
	int r;

	if (!json_object_is_type(o, json_type_object))
		return errbuf_fail(eb, -EINVAL, "cpu: not an object");
	r = member_int(o, "cpu", 0, CPUSET_MAX - 1, "cpu", &c->cpu, eb);
	r = r ?: member_int(o, "socket", -1, INT32_MAX, "cpu", &c->socket, eb);
	r = r ?: member_int(o, "numa", -1, INT32_MAX, "cpu", &c->numa, eb);
	r = r ?: member_int(o, "l3", -1, INT32_MAX, "cpu", &c->l3, eb);
	r = r ?: member_int(o, "core", -1, INT32_MAX, "cpu", &c->core, eb);
	r = r ?: member_bool(o, "online", "cpu", &c->online, eb);
	r = r ?: parse_use(o, &c->use, eb);
	r = r ?: member_array(o, "claims", NODEMAP_MAX_CLAIMS, "cpu", &cl, eb);
	if (r < 0)
		return r;
	for (size_t i = 0; i < json_object_array_length(cl); i++) {
		struct json_object *v = json_object_array_get_idx(cl, i);
		int64_t k = json_object_get_int64(v);

		if (!json_object_is_type(v, json_type_int) || k < 0 || k >= n_claims)
			return errbuf_fail(eb, -EINVAL, "cpu %d: claims[%zu] names no claim",
					   c->cpu, i);
		if (c->n_claims < NODEMAP_CPU_CLAIMS)
			c->claims[c->n_claims] = (int)k;
		c->n_claims++;
	}
	return 0;
}

static int parse_doc(struct json_object *top, struct nodemap *m, struct errbuf *eb)
{
	struct json_object *claims, *cpus;
	struct cpuset seen;
	const char *kind;
	int r;

	if (!json_object_is_type(top, json_type_object))
		return errbuf_fail(eb, -EINVAL, "not a JSON object");
	kind = jsonc_str(top, "kind");
	if (!kind || strcmp(kind, "NodeMap") != 0)
		return errbuf_fail(eb, -EINVAL, "kind: not NodeMap");
	r = member_str(top, "node", true, "nodemap", &m->node, eb);
	r = r ?: member_array(top, "claims", NODEMAP_MAX_CLAIMS, "nodemap", &claims, eb);
	r = r ?: member_array(top, "cpus", CPUSET_MAX, "nodemap", &cpus, eb);
	if (r < 0)
		return r;
	m->claims = calloc(json_object_array_length(claims) + 1, sizeof(*m->claims));
	m->cpus = calloc(json_object_array_length(cpus) + 1, sizeof(*m->cpus));
	if (!m->claims || !m->cpus)
		return -ENOMEM;
	for (size_t i = 0; i < json_object_array_length(claims); i++) {
		r = parse_claim(json_object_array_get_idx(claims, i), &m->claims[m->n_claims], eb);
		m->n_claims++; /* freed with m even when half filled */
		if (r < 0)
			return errbuf_wrap(eb, r, "claims[%zu]", i);
	}
	cpuset_zero(&seen);
	for (size_t i = 0; i < json_object_array_length(cpus); i++) {
		struct nodemap_cpu *c = &m->cpus[m->n_cpus];

		r = parse_cpu(json_object_array_get_idx(cpus, i), m->n_claims, c, eb);
		if (r < 0)
			return errbuf_wrap(eb, r, "cpus[%zu]", i);
		if (cpuset_has(&seen, c->cpu))
			return errbuf_fail(eb, -EINVAL, "cpus[%zu]: CPU %d listed twice", i, c->cpu);
		cpuset_set(&seen, c->cpu);
		m->n_cpus++;
	}
	return 0;
}

int nodemap_parse(const char *buf, size_t len, struct nodemap **ret, struct errbuf *eb)
{
	_cleanup_(nodemap_freep) struct nodemap *m = NULL;
	_cleanup_json_ struct json_object *top = NULL;
	int r;

	if (len > NODEMAP_MAX_BYTES)
		return errbuf_fail(eb, -E2BIG, "node map of %zu bytes, more than %u", len,
				   NODEMAP_MAX_BYTES);
	r = jsonc_parse(buf, len, NODEMAP_JSON_DEPTH, &top, eb);
	if (r < 0)
		return r;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	r = parse_doc(top, m, eb);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(m);
	return 0;
}
