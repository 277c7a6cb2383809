/* ResourceClaim status.allocation reading. See claim.h. */
#include "core/claim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/cdi.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"

_Static_assert(CLAIM_UID_MAX == CDI_UID_MAX, "a pod uid is checked as a claim uid");

#define CONFIG_API_VERSION "dra.cpu/v1alpha1"
#define CONFIG_KIND "CPUConfig"
#define CAPACITY_KEY "dra.cpu/cpu"

static struct json_object *member(struct json_object *o, const char *k)
{
	struct json_object *v = NULL;

	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

/* Walks a dotted path of object members. */
static struct json_object *path(struct json_object *o, const char *p)
{
	char key[64];

	while (o && *p) {
		size_t n = strcspn(p, ".");

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, p, n);
		key[n] = 0;
		o = member(o, key);
		p += n + (p[n] == '.');
	}
	return o;
}

static const char *str(struct json_object *o, const char *k)
{
	struct json_object *v = member(o, k);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

const char *claim_policy_name(enum claim_policy p)
{
	switch (p) {
	case CLAIM_POLICY_SPREAD_CORES:
		return "spread-cores";
	case CLAIM_POLICY_DISTRIBUTED:
		return "distributed";
	default:
		return "packed";
	}
}

int claim_config_parse(struct json_object *params, struct claim_config *cfg, struct errbuf *eb)
{
	struct claim_config c = *cfg;
	const char *s;
	int r;

	if (!json_object_is_type(params, json_type_object))
		return errbuf_fail(eb, -EINVAL,
				   "opaque config for dra.cpu: parameters must be an object");
	s = str(params, "apiVersion");
	if (!s || strcmp(s, CONFIG_API_VERSION) != 0)
		return errbuf_fail(eb, -EINVAL,
				   "opaque config for dra.cpu: apiVersion must be \"%s\"",
				   CONFIG_API_VERSION);
	s = str(params, "kind");
	if (!s || strcmp(s, CONFIG_KIND) != 0)
		return errbuf_fail(eb, -EINVAL,
				   "opaque config for dra.cpu: kind must be \"%s\", got \"%.40s\"",
				   CONFIG_KIND, s ? s : "");
	json_object_object_foreach(params, key, val)
	{
		if (!strcmp(key, "apiVersion") || !strcmp(key, "kind"))
			continue;
		if (!strcmp(key, "policy")) {
			const char *p = json_object_is_type(val, json_type_string)
						? json_object_get_string(val)
						: NULL;

			if (p && !strcmp(p, "packed"))
				c.policy = CLAIM_POLICY_PACKED;
			else if (p && !strcmp(p, "spread-cores"))
				c.policy = CLAIM_POLICY_SPREAD_CORES;
			else if (p && !strcmp(p, "distributed"))
				c.policy = CLAIM_POLICY_DISTRIBUTED;
			else
				return errbuf_fail(
					eb, -EINVAL,
					"CPUConfig: policy must be packed, spread-cores or "
					"distributed");
		} else if (!strcmp(key, "memory")) {
			const char *m = json_object_is_type(val, json_type_string)
						? json_object_get_string(val)
						: NULL;

			if (m && !strcmp(m, "local"))
				c.memory = CLAIM_MEMORY_LOCAL;
			else if (m && !strcmp(m, "all"))
				c.memory = CLAIM_MEMORY_ALL;
			else
				return errbuf_fail(eb, -EINVAL,
						   "CPUConfig: memory must be local or all");
		} else if (!strcmp(key, "irq")) {
			const char *v = json_object_is_type(val, json_type_string)
						? json_object_get_string(val)
						: "";

			if (strcmp(v, "isolate") && strcmp(v, "keep"))
				return errbuf_fail(eb, -EINVAL, "CPUConfig: irq must be isolate or keep");
			c.irq = !strcmp(v, "isolate") ? CLAIM_IRQ_ISOLATE : CLAIM_IRQ_KEEP;
		} else if (!strcmp(key, "sharedPool")) {
			if (!json_object_is_type(val, json_type_boolean))
				return errbuf_fail(eb, -EINVAL,
						   "CPUConfig: sharedPool must be true or false");
			c.shared_pool = json_object_get_boolean(val);
		} else if (!strcmp(key, "isolated")) {
			const char *m = json_object_is_type(val, json_type_string)
						? json_object_get_string(val)
						: NULL;

			if (m && !strcmp(m, "require"))
				c.isolated = CLAIM_ISOLATED_REQUIRE;
			else if (m && !strcmp(m, "prefer"))
				c.isolated = CLAIM_ISOLATED_PREFER;
			else if (m && !strcmp(m, "avoid"))
				c.isolated = CLAIM_ISOLATED_AVOID;
			else
				return errbuf_fail(eb, -EINVAL,
						   "CPUConfig: isolated must be require, prefer or "
						   "avoid");
		} else if (!strcmp(key, "realtime")) {
			r = rt_budget_parse(val, &c.rt, eb);
			if (r < 0)
				return r;
			c.rt_set = true;
		} else if (!strcmp(key, "fullCores") || !strcmp(key, "alignL3")) {
			if (!json_object_is_type(val, json_type_boolean))
				return errbuf_fail(eb, -EINVAL,
						   "CPUConfig: %s must be true or false", key);
			*(!strcmp(key, "fullCores") ? &c.full_cores : &c.align_l3) =
				json_object_get_boolean(val);
			c.align_l3_set |= !strcmp(key, "alignL3");
		} else {
			return errbuf_fail(eb, -EINVAL, "CPUConfig: unknown field \"%.60s\"", key);
		}
	}
	*cfg = c;
	return 0;
}

int claim_isolation_check(const struct claim_result *r, bool device_isolated, struct errbuf *eb)
{
	if (device_isolated && r->config.isolated == CLAIM_ISOLATED_AVOID)
		return errbuf_fail(eb, -EINVAL,
				   "request %s: device %s is isolated CPUs (isolcpus/nohz_full) and "
				   "the claim did not ask for them: use the DeviceClass "
				   "dra.cpu.isolated or CPUConfig isolated: require|prefer",
				   r->request, r->device);
	if (!device_isolated && r->config.isolated == CLAIM_ISOLATED_REQUIRE)
		return errbuf_fail(eb, -EINVAL,
				   "request %s: CPUConfig isolated: require, but device %s is not "
				   "isolated CPUs: select devices with dra.cpu/isolated (the "
				   "DeviceClass dra.cpu.isolated)",
				   r->request, r->device);
	return 0;
}

/* Does a config entry's requests list apply to this result's request
 * ("req" or "req/sub")? An empty or absent list applies to all. */
static bool config_applies(struct json_object *entry, const char *request)
{
	struct json_object *reqs = member(entry, "requests");
	size_t parent = strcspn(request, "/");

	if (!reqs || !json_object_is_type(reqs, json_type_array) ||
	    json_object_array_length(reqs) == 0)
		return true;
	for (size_t i = 0; i < json_object_array_length(reqs); i++) {
		struct json_object *r = json_object_array_get_idx(reqs, i);
		const char *s = json_object_is_type(r, json_type_string) ? json_object_get_string(r)
									   : "";

		if (!strcmp(s, request) || (strlen(s) == parent && !strncmp(s, request, parent)))
			return true;
	}
	return false;
}

/* The reference driver's cpuset override for one result: parameters with
 * apiVersion v1alpha1. Unknown fields are ignored, as the reference decodes
 * them (a plain unmarshal); the cpuset must be there and a CPU list. */
static int override_parse(struct json_object *entry, struct json_object *params,
			  struct claim_result *out, struct errbuf *eb)
{
	const char *src = str(entry, "source"), *set = str(member(params, "cpuConfig"), "cpuset");
	struct errbuf why = { "" };
	struct cpuset cpus;

	if (src && !strcmp(src, "FromClass"))
		return errbuf_fail(eb, -EINVAL,
				   "request %s: configuration from DeviceClass is not supported: a "
				   "cpuset (cpuConfig.cpuset) must come from the claim",
				   out->request);
	if (!set || !*set)
		return errbuf_fail(eb, -EINVAL,
				   "request %s: opaque config apiVersion %s needs cpuConfig.cpuset, "
				   "a CPU list",
				   out->request, CLAIM_OVERRIDE_API_VERSION);
	if (strlen(set) >= sizeof(out->cpuset))
		return errbuf_fail(eb, -EINVAL, "request %s: cpuConfig.cpuset is longer than %d bytes",
				   out->request, CLAIM_CPUSET_MAX - 1);
	if (cpuset_parse(set, &cpus, &why) < 0)
		return errbuf_fail(eb, -EINVAL, "request %s: cpuConfig.cpuset \"%.64s\": %s",
				   out->request, set, why.s);
	memcpy(out->cpuset, set, strlen(set) + 1);
	return 0;
}

static int copy(char *dst, size_t size, const char *src, const char *what, struct errbuf *eb)
{
	if (!src)
		return errbuf_fail(eb, -EINVAL, "allocation result without %s", what);
	if (strlen(src) >= size)
		return errbuf_fail(eb, -EINVAL, "allocation result %s is too long", what);
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/* consumedCapacity[key] as text into buf ("" when absent). */
static int consumed(struct json_object *cap, const char *key, char *buf, size_t size,
		    struct errbuf *eb)
{
	struct json_object *q = member(cap, key);

	if (q && json_object_is_type(q, json_type_string))
		return copy(buf, size, json_object_get_string(q), "consumedCapacity", eb);
	if (q && json_object_is_type(q, json_type_int)) {
		(void)snprintf(buf, size, "%lld", (long long)json_object_get_int64(q));
		return 0;
	}
	if (q)
		return errbuf_fail(eb, -EINVAL, "consumedCapacity[\"%s\"] is not a quantity", key);
	return 0;
}

int claim_parse(struct json_object *claim, const char *uid, const char *driver, const char *pool,
		struct claim_alloc *ret, struct errbuf *eb)
{
	struct json_object *results, *configs, *cap;
	const char *got_uid = str(path(claim, "metadata"), "uid");
	int r;

	ret->n = 0;
	if (!json_object_is_type(claim, json_type_object))
		return errbuf_fail(eb, -EINVAL,
				   "the API server returned something that is not a ResourceClaim");
	if (!got_uid || strcmp(got_uid, uid) != 0)
		return errbuf_fail(eb, -EINVAL,
				   "claim uid is %s, not %s: the claim was deleted and recreated",
				   got_uid ? got_uid : "missing", uid);
	if (!path(claim, "status.allocation"))
		return errbuf_fail(eb, -EINVAL, "claim is not allocated (no status.allocation)");
	{
		const char *pcn = str(path(claim, "metadata.annotations"),
				      "resource.kubernetes.io/pod-claim-name");

		ret->pod_claim_name[0] = 0;
		if (pcn && copy(ret->pod_claim_name, sizeof(ret->pod_claim_name), pcn,
				"pod-claim-name annotation", eb) < 0)
			return -EINVAL;
	}
	results = path(claim, "status.allocation.devices.results");
	configs = path(claim, "status.allocation.devices.config");
	if (results && !json_object_is_type(results, json_type_array))
		return errbuf_fail(eb, -EINVAL, "status.allocation.devices.results is not a list");
	if (configs && !json_object_is_type(configs, json_type_array))
		return errbuf_fail(eb, -EINVAL, "status.allocation.devices.config is not a list");

	for (size_t i = 0; results && i < json_object_array_length(results); i++) {
		struct json_object *res = json_object_array_get_idx(results, i);
		const char *d = str(res, "driver"), *p = str(res, "pool"), *share;
		struct claim_result *out;

		if (!d || strcmp(d, driver) != 0)
			continue; /* another driver's device */
		if (!p || strcmp(p, pool) != 0)
			return errbuf_fail(
				eb, -EINVAL,
				"result %zu is in pool \"%.63s\", not this node's pool \"%s\"", i,
				p ? p : "", pool);
		if (ret->n == CLAIM_MAX_RESULTS)
			return errbuf_fail(eb, -EINVAL, "more than %d results for %s",
					   CLAIM_MAX_RESULTS, driver);
		out = &ret->results[ret->n];
		memset(out, 0, sizeof(*out));
		out->config.align_l3 = true;
		r = copy(out->request, sizeof(out->request), str(res, "request"), "request", eb);
		r = r ?: copy(out->device, sizeof(out->device), str(res, "device"), "device", eb);
		if (r < 0)
			return r;
		share = str(res, "shareID");
		if (share && copy(out->share_id, sizeof(out->share_id), share, "shareID", eb) < 0)
			return -EINVAL;
		cap = path(res, "consumedCapacity");
		if (cap) {
			r = consumed(cap, CAPACITY_KEY, out->consumed, sizeof(out->consumed), eb);
			r = r ?: consumed(cap, RT_CAPACITY_KEY, out->rt_consumed,
					  sizeof(out->rt_consumed), eb);
			if (r < 0)
				return r;
		}
		/* Configs apply in order: class configs first, then the claim's. */
		int overrides = 0;

		for (size_t k = 0; configs && k < json_object_array_length(configs); k++) {
			struct json_object *entry = json_object_array_get_idx(configs, k);
			struct json_object *opaque = member(entry, "opaque");
			struct json_object *params = member(opaque, "parameters");
			const char *od = str(opaque, "driver"), *av = str(params, "apiVersion");

			if (!od || strcmp(od, driver) != 0 || !config_applies(entry, out->request))
				continue;
			/* The reference's schema has no kind: a kind says CPUConfig. */
			if (av && !strcmp(av, CLAIM_OVERRIDE_API_VERSION) && !member(params, "kind")) {
				overrides++;
				r = override_parse(entry, params, out, eb);
			} else {
				r = claim_config_parse(params, &out->config, eb);
			}
			if (r < 0)
				return r;
		}
		if (overrides > 1)
			return errbuf_fail(eb, -EINVAL,
					   "request %s is targeted by %d cpuset configurations: at "
					   "most one may name its CPUs",
					   out->request, overrides);
		ret->n++;
	}
	if (ret->n == 0)
		return errbuf_fail(eb, -EINVAL,
				   "the allocation has no results for driver %s: nothing to prepare",
			    driver);
	return 0;
}

int claim_consumers_parse(struct json_object *claim, const char *uid,
			  struct claim_consumer **ret, struct errbuf *eb)
{
	struct json_object *list = path(claim, "status.reservedFor");
	const char *got_uid = str(path(claim, "metadata"), "uid");
	struct claim_consumer *v;
	size_t n;
	int k = 0;

	*ret = NULL;
	if (uid && (!got_uid || strcmp(got_uid, uid) != 0))
		return errbuf_fail(eb, -EINVAL,
				   "claim uid is %.64s, not %s: the claim was deleted and recreated",
				   got_uid ? got_uid : "missing", uid);
	if (!list)
		return 0;
	if (!json_object_is_type(list, json_type_array))
		return errbuf_fail(eb, -EINVAL, "status.reservedFor is not a list");
	n = json_object_array_length(list);
	if (n > CLAIM_MAX_CONSUMERS)
		return errbuf_fail(eb, -EINVAL,
				   "status.reservedFor has %zu entries, more than the %d allowed", n,
				   CLAIM_MAX_CONSUMERS);
	if (n == 0)
		return 0;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(list, i);
		const char *res = str(e, "resource"), *group = str(e, "apiGroup");
		const char *pod = str(e, "uid"), *name = str(e, "name");

		if (!json_object_is_type(e, json_type_object) || !res || !pod || !name ||
		    (member(e, "apiGroup") && !group)) {
			free(v);
			return errbuf_fail(eb, -EINVAL,
					   "status.reservedFor[%zu] is not {apiGroup, resource, name, uid}",
					   i);
		}
		/* Only core pods run containers we pin. */
		if (strcmp(res, "pods") != 0 || (group && *group))
			continue;
		if (cdi_uid_valid(pod) < 0 || claim_name_check(name) < 0) {
			free(v);
			return errbuf_fail(eb, -EINVAL,
					   "status.reservedFor[%zu] is not a pod's uid and name", i);
		}
		memcpy(v[k].uid, pod, strlen(pod) + 1);
		memcpy(v[k].name, name, strlen(name) + 1);
		k++;
	}
	if (k == 0)
		free(v);
	else
		*ret = v;
	return k;
}

static bool is_alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One DNS-1123 label of exactly n bytes at s. */
static bool label_ok(const char *s, size_t n)
{
	if (n == 0 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

int claim_namespace_check(const char *ns)
{
	size_t n = strnlen(ns, CLAIM_NAMESPACE_MAX + 1);

	return n <= CLAIM_NAMESPACE_MAX && label_ok(ns, n) ? 0 : -EINVAL;
}

int claim_name_check(const char *name)
{
	size_t n = strnlen(name, CLAIM_NAME_MAX + 1);
	const char *p = name, *end = name + n;

	if (n == 0 || n > CLAIM_NAME_MAX)
		return -EINVAL;
	while (p <= end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t len = dot ? (size_t)(dot - p) : (size_t)(end - p);

		if (!label_ok(p, len))
			return -EINVAL;
		p += len + 1;
	}
	return 0;
}
