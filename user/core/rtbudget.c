/* The real-time budget value type. See rtbudget.h. */
#include "core/rtbudget.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "lib/errbuf.h"
#include "lib/quantity.h"

/* Every refusal here is bad input: -EINVAL with the reason. */
#define fail(eb, ...) errbuf_fail(eb, -EINVAL, __VA_ARGS__)

const char *rt_policy_name(enum rt_policy p)
{
	switch (p) {
	case RT_POLICY_DEADLINE:
		return "deadline";
	case RT_POLICY_FIFO:
		return "fifo";
	case RT_POLICY_RR:
		return "rr";
	default:
		return "none";
	}
}

const char *rt_on_failure_name(enum rt_on_failure f)
{
	return f == RT_ON_FAILURE_WARN ? "warn" : "evict";
}

/* A non-negative JSON integer. json-c keeps integers above INT64_MAX as
 * uint64; anything that large is out of every range below anyway. */
static int get_u64(struct json_object *v, const char *key, uint64_t *ret, struct errbuf *err)
{
	if (!json_object_is_type(v, json_type_int))
		return fail(err, "CPUConfig.realtime: %s must be an integer (nanoseconds)", key);
	if (json_object_get_int64(v) < 0)
		return fail(err, "CPUConfig.realtime: %s must not be negative", key);
	*ret = json_object_get_uint64(v);
	return 0;
}

int rt_budget_parse(struct json_object *o, struct rt_budget *ret, struct errbuf *err)
{
	struct rt_budget b = { .policy = RT_POLICY_NONE };
	bool has_runtime = false, has_deadline = false, has_period = false, has_prio = false;
	int r;

	if (!json_object_is_type(o, json_type_object))
		return fail(err, "CPUConfig.realtime must be an object");
	json_object_object_foreach(o, key, val)
	{
		if (!strcmp(key, "policy")) {
			const char *p = json_object_is_type(val, json_type_string)
						? json_object_get_string(val)
						: "";

			if (!strcmp(p, "deadline"))
				b.policy = RT_POLICY_DEADLINE;
			else if (!strcmp(p, "fifo"))
				b.policy = RT_POLICY_FIFO;
			else if (!strcmp(p, "rr"))
				b.policy = RT_POLICY_RR;
			else
				return fail(err, "CPUConfig.realtime: policy must be deadline, fifo or "
						 "rr");
		} else if (!strcmp(key, "runtimeNs")) {
			r = get_u64(val, key, &b.runtime_ns, err);
			if (r < 0)
				return r;
			has_runtime = true;
		} else if (!strcmp(key, "deadlineNs")) {
			r = get_u64(val, key, &b.deadline_ns, err);
			if (r < 0)
				return r;
			has_deadline = true;
		} else if (!strcmp(key, "periodNs")) {
			r = get_u64(val, key, &b.period_ns, err);
			if (r < 0)
				return r;
			has_period = true;
		} else if (!strcmp(key, "priority")) {
			if (!json_object_is_type(val, json_type_int) ||
			    json_object_get_int64(val) < 1 ||
			    json_object_get_int64(val) > RT_PRIORITY_MAX)
				return fail(err, "CPUConfig.realtime: priority must be an integer in "
						 "1..%d",
					    RT_PRIORITY_MAX);
			b.priority = (int)json_object_get_int64(val);
			has_prio = true;
		} else if (!strcmp(key, "onFailure")) {
			const char *f = json_object_is_type(val, json_type_string)
						? json_object_get_string(val)
						: "";

			if (!strcmp(f, "evict"))
				b.on_failure = RT_ON_FAILURE_EVICT;
			else if (!strcmp(f, "warn"))
				b.on_failure = RT_ON_FAILURE_WARN;
			else
				return fail(err, "CPUConfig.realtime: onFailure must be evict or warn");
		} else {
			return fail(err, "CPUConfig.realtime: unknown field \"%.60s\"", key);
		}
	}
	switch (b.policy) {
	case RT_POLICY_NONE:
		return fail(err, "CPUConfig.realtime: policy is required (deadline, fifo or rr)");
	case RT_POLICY_DEADLINE:
		if (has_prio)
			return fail(err, "CPUConfig.realtime: priority is for fifo and rr; deadline "
					 "takes runtimeNs, deadlineNs and periodNs");
		if (!has_runtime || !has_period)
			return fail(err, "CPUConfig.realtime: deadline needs runtimeNs and periodNs");
		if (!has_deadline)
			b.deadline_ns = b.period_ns; /* the kernel's default too */
		if (b.runtime_ns < RT_MIN_RUNTIME_NS)
			return fail(err, "CPUConfig.realtime: runtimeNs %" PRIu64 " is below the "
					 "kernel's minimum of %llu ns",
				    b.runtime_ns, RT_MIN_RUNTIME_NS);
		if (b.runtime_ns > b.deadline_ns || b.deadline_ns > b.period_ns)
			return fail(err, "CPUConfig.realtime: need runtimeNs <= deadlineNs <= periodNs "
					 "(got %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
				    b.runtime_ns, b.deadline_ns, b.period_ns);
		break;
	case RT_POLICY_FIFO:
	case RT_POLICY_RR:
		if (!has_prio)
			return fail(err, "CPUConfig.realtime: %s needs priority (1..%d)",
				    rt_policy_name(b.policy), RT_PRIORITY_MAX);
		if (has_runtime || has_deadline || has_period)
			return fail(err, "CPUConfig.realtime: runtimeNs, deadlineNs and periodNs are "
					 "for deadline, not %s",
				    rt_policy_name(b.policy));
		break;
	}
	*ret = b;
	return 0;
}

static int add(struct json_object *o, const char *k, struct json_object *v)
{
	if (!v || json_object_object_add(o, k, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

int rt_budget_to_json(const struct rt_budget *b, struct json_object **ret)
{
	struct json_object *o = json_object_new_object();
	int r;

	if (!o)
		return -ENOMEM;
	r = add(o, "policy", json_object_new_string(rt_policy_name(b->policy)));
	if (!r && b->policy == RT_POLICY_DEADLINE) {
		r = add(o, "runtimeNs", json_object_new_uint64(b->runtime_ns));
		r = r ?: add(o, "deadlineNs", json_object_new_uint64(b->deadline_ns));
		r = r ?: add(o, "periodNs", json_object_new_uint64(b->period_ns));
	} else if (!r) {
		r = add(o, "priority", json_object_new_int(b->priority));
	}
	r = r ?: add(o, "onFailure", json_object_new_string(rt_on_failure_name(b->on_failure)));
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	*ret = o;
	return 0;
}

int rt_budget_check(const struct rt_budget *b, const struct rt_limits *l, struct errbuf *err)
{
	if (b->policy != RT_POLICY_DEADLINE)
		return 0;
	if (b->period_ns < l->period_min_ns || b->period_ns > l->period_max_ns)
		return fail(err, "CPUConfig.realtime: periodNs %" PRIu64 " is outside this node's "
				 "sched_deadline_period range %" PRIu64 "..%" PRIu64 " ns",
			    b->period_ns, l->period_min_ns, l->period_max_ns);
	return 0;
}

int64_t rt_budget_milli(const struct rt_budget *b)
{
	if (b->policy != RT_POLICY_DEADLINE || !b->period_ns)
		return 0;
	/* runtime <= period <= 2^63: the product can overflow 64 bits. */
	return (int64_t)(((unsigned __int128)b->runtime_ns * 1000 + b->period_ns - 1) /
			 b->period_ns);
}

int rt_budget_fits(const struct rt_budget *b, int64_t consumed_milli, const struct rt_limits *l,
		   const char *device, struct errbuf *err)
{
	char have[32], cap[32];

	rt_milli_format(consumed_milli, have, sizeof(have));
	rt_milli_format(l->capacity_milli, cap, sizeof(cap));
	if (b->policy == RT_POLICY_FIFO || b->policy == RT_POLICY_RR) {
		if (consumed_milli != l->capacity_milli)
			return fail(err, "device %s: a %s claim must consume the CPU's whole "
					 "%s (%s), not %s",
				    device, rt_policy_name(b->policy), RT_CAPACITY_KEY, cap, have);
		return 0;
	}
	/* runtime / period <= consumed / 1000, exactly. */
	if ((unsigned __int128)b->runtime_ns * 1000 >
	    (unsigned __int128)consumed_milli * b->period_ns) {
		char need[32];

		rt_milli_format(rt_budget_milli(b), need, sizeof(need));
		return fail(err, "device %s: runtime %" PRIu64 " ns every %" PRIu64 " ns needs "
				 "%s of %s, the claim consumes only %s",
			    device, b->runtime_ns, b->period_ns, need, RT_CAPACITY_KEY, have);
	}
	return 0;
}

bool rt_budget_equal(const struct rt_budget *a, const struct rt_budget *b)
{
	return a->policy == b->policy && a->priority == b->priority &&
	       a->runtime_ns == b->runtime_ns && a->deadline_ns == b->deadline_ns &&
	       a->period_ns == b->period_ns && a->on_failure == b->on_failure;
}

void rt_milli_format(int64_t milli, char *buf, size_t size)
{
	if (milli % 1000 == 0)
		quantity_format_int(milli / 1000, buf, size);
	else
		(void)snprintf(buf, size, "%" PRId64 "m", milli);
}

int rt_milli_parse(const char *s, int64_t *ret, struct errbuf *why)
{
	int64_t m;
	bool exact;

	if (!s || quantity_parse_milli(s, &m, &exact) < 0)
		return fail(why, "\"%.32s\" is not a quantity", s ? s : "");
	if (!exact)
		return fail(why, "\"%.32s\" is finer than 1m", s);
	if (m <= 0)
		return fail(why, "\"%.32s\" must be more than 0", s);
	*ret = m;
	return 0;
}
