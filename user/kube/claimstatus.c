/* claimstatus: the claim's status.devices, written by server-side apply on
 * the status subresource. See claimstatus.h. */
#include "kube/claimstatus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/claim.h"
#include "core/rt.h"
#include "core/state.h"
#include "host/topo.h"
#include "kube/kube.h"
#include "kube/writer.h"
#include "lib/cpuset.h"
#include "lib/jsonc.h"
#include "lib/log.h"
#include "obs/metrics.h"

#define APPLY_TYPE "application/apply-patch+yaml"

struct claimstatus {
	struct claimstatus_opts o;
	char *driver, *pool;
	struct writer *w;
	struct metric *m;
};

static void count(struct claimstatus *cs, const char *result)
{
	if (cs->m)
		metric_series_add(metric_with(cs->m, result), 1);
}

static void rfc3339_now(char buf[static 32])
{
	time_t s = time(NULL);
	struct tm tm;

	(void)gmtime_r(&s, &tm);
	(void)strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The CPUs of result i: the state result of the same request and device. */
static const struct cpuset *result_cpus(const struct state_claim *c, const char *request,
					const char *device, struct cpuset *buf)
{
	for (int j = 0; j < c->n_results; j++)
		if (!strcmp(c->results[j].request, request) && !strcmp(c->results[j].device, device))
			return cpuset_from_view(&c->results[j].cpus, buf);
	return cpuset_from_view(&c->cpus, buf);
}

static int data_json(const struct claimstatus_opts *o, const struct claim_result *cr,
		     const struct state_claim *c, struct json_object **ret)
{
	_cleanup_json_ struct json_object *d = json_object_new_object();
	struct cpuset buf, numa, sock;
	const struct cpuset *cpus = result_cpus(c, cr->request, cr->device, &buf);
	char list[3][4096];
	int e;

	cpuset_zero(&numa);
	cpuset_zero(&sock);
	CPUSET_FOREACH(cpu, cpus) {
		const struct topo_cpu *t = o->topo ? topo_cpu(o->topo, cpu) : NULL;

		if (t && t->numa >= 0)
			cpuset_set(&numa, t->numa);
		if (t && t->socket >= 0)
			cpuset_set(&sock, t->socket);
	}
	e = cpuset_format(cpus, list[0], sizeof(list[0]));
	e = e < 0 ? e : cpuset_format(&numa, list[1], sizeof(list[1]));
	e = e < 0 ? e : cpuset_format(&sock, list[2], sizeof(list[2]));
	if (e < 0)
		return e;
	e = jsonc_add(d, "request", json_object_new_string(cr->request));
	e = e ?: jsonc_add(d, "cpus", json_object_new_string(list[0]));
	e = e ?: jsonc_add(d, "numaNodes", json_object_new_string(list[1]));
	e = e ?: jsonc_add(d, "sockets", json_object_new_string(list[2]));
	if (!e && c->rt) {
		struct json_object *b = NULL;

		e = jsonc_add(d, "policy", json_object_new_string(rt_policy_name(c->budget.policy)));
		e = e ?: rt_budget_to_json(&c->budget, &b);
		e = e ?: jsonc_add(d, "realtime", b);
	} else if (!e) {
		e = jsonc_add(d, "policy",
			      json_object_new_string(cr->cpuset[0] ? "cpuset"
						     : claim_policy_name(cr->config.policy)));
	}
	if (e)
		return e;
	if (strlen(json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN)) >
	    CLAIMSTATUS_DATA_MAX)
		return -E2BIG;
	*ret = TAKE_PTR(d);
	return 0;
}

static int entry_json(const struct claimstatus_opts *o, const struct claim_result *cr,
		      const struct state_claim *c, struct json_object **ret)
{
	_cleanup_json_ struct json_object *e = json_object_new_object();
	struct json_object *conds = json_object_new_array(), *cond = json_object_new_object();
	struct json_object *data = NULL;
	char now[32];
	int r;

	rfc3339_now(now);
	r = jsonc_add(e, "conditions", conds);
	r = r ?: jsonc_push(conds, cond);
	r = r ?: jsonc_add(e, "driver", json_object_new_string(o->driver));
	r = r ?: jsonc_add(e, "pool", json_object_new_string(o->pool));
	r = r ?: jsonc_add(e, "device", json_object_new_string(cr->device));
	if (!r && cr->share_id[0])
		r = jsonc_add(e, "shareID", json_object_new_string(cr->share_id));
	r = r ?: data_json(o, cr, c, &data);
	r = r ?: jsonc_add(e, "data", data);
	r = r ?: jsonc_add(cond, "type", json_object_new_string("Ready"));
	r = r ?: jsonc_add(cond, "status", json_object_new_string("True"));
	r = r ?: jsonc_add(cond, "reason", json_object_new_string("Prepared"));
	r = r ?: jsonc_add(cond, "message",
			   json_object_new_string("the CPUs are set aside for the claim's container"));
	r = r ?: jsonc_add(cond, "lastTransitionTime", json_object_new_string(now));
	if (r)
		return r;
	*ret = TAKE_PTR(e);
	return 0;
}

int claimstatus_entries(const struct claimstatus_opts *o, const struct claim_alloc *alloc,
			const struct state_claim *c, struct json_object **ret)
{
	_cleanup_json_ struct json_object *arr = json_object_new_array();
	int r = arr ? 0 : -ENOMEM;

	for (int i = 0; i < alloc->n && !r; i++) {
		struct json_object *e = NULL;

		r = entry_json(o, &alloc->results[i], c, &e);
		r = r ?: jsonc_push(arr, e);
	}
	if (r)
		return r;
	*ret = TAKE_PTR(arr);
	return 0;
}

static const char *str_or_empty(struct json_object *o, const char *key)
{
	const char *s = jsonc_str(o, key);

	return s ? s : "";
}

static bool same_key(struct json_object *a, struct json_object *b)
{
	static const char *const keys[] = { "driver", "pool", "device", "shareID" };

	for (size_t i = 0; i < 4; i++)
		if (strcmp(str_or_empty(a, keys[i]), str_or_empty(b, keys[i])))
			return false;
	return true;
}

static bool is_ready(struct json_object *entry)
{
	struct json_object *conds;

	if (!json_object_object_get_ex(entry, "conditions", &conds) ||
	    !json_object_is_type(conds, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(conds); i++) {
		struct json_object *c = json_object_array_get_idx(conds, i);

		if (!json_object_is_type(c, json_type_object))
			continue;
		if (!strcmp(str_or_empty(c, "type"), "Ready"))
			return !strcmp(str_or_empty(c, "status"), "True") &&
			       !strcmp(str_or_empty(c, "reason"), "Prepared");
	}
	return false;
}

bool claimstatus_is_current(const char *driver, struct json_object *claim,
			    struct json_object *want)
{
	struct json_object *status, *have;
	size_t ours = 0;

	if (!json_object_is_type(claim, json_type_object) ||
	    !json_object_is_type(want, json_type_array) ||
	    !json_object_object_get_ex(claim, "status", &status) ||
	    !json_object_is_type(status, json_type_object) ||
	    !json_object_object_get_ex(status, "devices", &have) ||
	    !json_object_is_type(have, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(have); i++) {
		struct json_object *h = json_object_array_get_idx(have, i), *hd, *wd;
		bool found = false;

		if (!json_object_is_type(h, json_type_object) ||
		    strcmp(str_or_empty(h, "driver"), driver))
			continue;
		ours++;
		for (size_t j = 0; j < json_object_array_length(want) && !found; j++) {
			struct json_object *w = json_object_array_get_idx(want, j);

			if (!json_object_is_type(w, json_type_object) || !same_key(h, w))
				continue;
			found = json_object_object_get_ex(h, "data", &hd) &&
				json_object_object_get_ex(w, "data", &wd) &&
				json_object_equal(hd, wd) && is_ready(h);
		}
		if (!found)
			return false;
	}
	return ours == json_object_array_length(want);
}

static void on_written(void *ud, const char *key, const struct kube_result *r)
{
	struct claimstatus *cs = ud;

	if (!r->error || r->error == -ENOENT) {
		count(cs, r->error ? "gone" : "written");
		log_debug("claim_status_written", "uid=%s", key);
		return;
	}
	count(cs, "failed");
	log_warn("claim_status_write_failed", "uid=%s attempts=%u error=%s action=left_as_is", key,
		 r->attempts, log_quote(r->error_text));
}

static int apply(struct claimstatus *cs, const char *ns, const char *name, const char *uid,
		 struct json_object *devices)
{
	_cleanup_json_ struct json_object *o = json_object_new_object();
	struct json_object *meta = json_object_new_object(), *status = json_object_new_object();
	char path[1024];
	int r;

	r = jsonc_add(o, "apiVersion", json_object_new_string("resource.k8s.io/v1"));
	r = r ?: jsonc_add(o, "kind", json_object_new_string("ResourceClaim"));
	r = r ?: jsonc_add(o, "metadata", meta);
	r = r ?: jsonc_add(meta, "name", json_object_new_string(name));
	r = r ?: jsonc_add(meta, "namespace", json_object_new_string(ns));
	r = r ?: jsonc_add(meta, "uid", json_object_new_string(uid));
	r = r ?: jsonc_add(o, "status", status);
	if (!r && devices)
		r = jsonc_add(status, "devices", json_object_get(devices));
	if (r)
		return r;
	if (snprintf(path, sizeof(path),
		     "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s/status"
		     "?fieldManager=%s&force=true",
		     ns, name, CLAIMSTATUS_FIELD_MANAGER) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return writer_put(cs->w, uid, KUBE_PATCH, path, APPLY_TYPE,
			  json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), on_written, cs);
}

static int failed(struct claimstatus *cs, int r, const char *uid)
{
	count(cs, r == -EAGAIN ? "dropped" : "failed");
	log_warn("claim_status_write_failed", "uid=%s error=%s action=%s", uid,
		 r == -EAGAIN ? "\"queue full\"" : log_quote(strerror(-r)), "left_as_is");
	return r;
}

int claimstatus_prepared(struct claimstatus *cs, struct json_object *claim,
			 const struct claim_alloc *alloc, const struct state_claim *c)
{
	_cleanup_json_ struct json_object *want = NULL;
	int r;

	if (!cs || !c || !c->ns || !c->ns[0] || !c->name || !c->name[0])
		return 0;
	r = claimstatus_entries(&cs->o, alloc, c, &want);
	if (r < 0)
		return failed(cs, r, c->uid);
	if (claimstatus_is_current(cs->driver, claim, want)) {
		count(cs, "unchanged");
		return 0;
	}
	r = apply(cs, c->ns, c->name, c->uid, want);
	if (r < 0)
		return failed(cs, r, c->uid);
	return 1;
}

int claimstatus_unprepared(struct claimstatus *cs, const char *ns, const char *name,
			   const char *uid)
{
	int r;

	if (!cs || !ns || !*ns || !name || !*name)
		return 0;
	r = apply(cs, ns, name, uid, NULL);
	if (r < 0)
		return failed(cs, r, uid);
	return 1;
}

int claimstatus_new(struct event_base *base, struct kube *k, const struct claimstatus_opts *o,
		    struct metrics *m, struct claimstatus **ret)
{
	_cleanup_(claimstatus_freep) struct claimstatus *cs = calloc(1, sizeof(*cs));
	struct writer_opts wo = { .max_jobs = o->max_queued > 0 ? o->max_queued : 64,
				  .timeout_ms = o->timeout_ms,
				  .max_attempts = o->max_attempts > 0 ? o->max_attempts : 5,
				  .backoff_initial_ms = 500,
				  .backoff_max_ms = 16000 };
	int r;

	if (!cs)
		return -ENOMEM;
	cs->o = *o;
	cs->driver = strdup(o->driver);
	cs->pool = strdup(o->pool);
	if (!cs->driver || !cs->pool)
		return -ENOMEM;
	cs->o.driver = cs->driver;
	cs->o.pool = cs->pool;
	r = writer_new(base, k, &wo, &cs->w);
	if (r < 0)
		return r;
	if (m)
		cs->m = metrics_family(m, MF_CLAIM_STATUS_WRITES_TOTAL);
	*ret = TAKE_PTR(cs);
	return 0;
}

struct claimstatus *claimstatus_free(struct claimstatus *cs)
{
	if (!cs)
		return NULL;
	writer_free(cs->w);
	free(cs->driver);
	free(cs->pool);
	free(cs);
	return NULL;
}
