/* ResourceSlice publication. See publisher.h for the rules.
 *
 *   phase NODE ─ok─> LIST ─ok─> WATCHING ──events──> (sync after resync_delay)
 *     ^  └─err─┐      └─err─┐     │  └─end: normal ─> WATCH again from the last rv
 *     └─backoff┘  backoff ──┘     │                   (after a backoff if it brought
 *                                 │                    nothing: a proxy that ends every
 *                                 │                    stream at once is no hot loop)
 *                                 └─end: 410 / error ─> backoff ─> LIST
 *
 * At most one request is in flight (p->call): a sync is a queue of writes run
 * one at a time; any failure drops the rest, waits out a backoff and
 * re-lists, so conflicts resolve from fresh state. A re-list replaces a
 * write still in flight (cancelled) rather than running beside it.
 */
#include "kube/publisher.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <json-c/json.h>

#define LOG_MOD "publisher"
#include "lib/backoff.h"
#include "core/devices.h"
#include "lib/clock.h"
#include "lib/hash.h"
#include "lib/hashtab.h"
#include "kube/kube.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "kube/slices.h"

#define SLICES_PATH "/apis/resource.k8s.io/v1/resourceslices"
/* A slice watch that went silent is noticed within WATCH_BUDGET_S: the server
 * is asked for WATCH_TIMEOUT_S, which with the client's slack for the
 * server's own close (kube_watch_deadline_ms: 27 + 1 s) ends a dead stream
 * by 298 s. */
#define WATCH_BUDGET_S 300
#define WATCH_TIMEOUT_S 270
/* A watch still open this long proves the server works: the backoff starts
 * small again (as client-go's reflector resets its backoff after a while
 * without failure). A LIST and a sync that writes nothing prove nothing. */
#define WATCH_HEALTHY_MS 10000

enum phase { PH_NODE, PH_LIST, PH_WATCHING };
enum op_kind { OP_DELETE, OP_UPDATE, OP_CREATE };

/* What is kept of a slice on the server: enough to match, compare, update
 * and delete it. Whole objects are never held: a 1024-CPU node's slices are
 * ~340 KB of JSON but ~7 MB as json-c trees, and a few copies of those were
 * most of the daemon's memory. */
struct seen {
	char *name, *uid, *rv;
	int64_t gen, count;
	bool pool_ok;	  /* pool name and nodeName are ours, no other node selection */
	uint64_t devices; /* canonical hash of spec.devices (0: none) */
};

struct op {
	enum op_kind kind;
	int index;	 /* desired slice index (update, create) */
	struct seen old; /* delete, update: the slice on the server (owned strings) */
	uint64_t sent;	 /* create, update: hash of the devices sent */
};

struct publisher {
	struct event_base *base;
	struct kube *kube;
	struct publisher_opts o;
	char *node, *node_uid;
	enum phase phase;
	struct kube_call *call;
	struct kube_watch *watch;
	char *rv; /* last resourceVersion seen (list or watch) */
	struct event *retry_timer, *sync_timer;
	struct event *healthy_timer; /* armed while a watch is open: WATCH_HEALTHY_MS */
	struct event *repair_timer; /* armed while known out of sync after a publication */
	struct backoff bo;
	/* desired: slices are built on demand from the devices; kept are the
	 * hashes of their devices, and of what the server kept of them when it
	 * dropped fields (adopted, 0 = none) */
	int n_desired;
	uint64_t *want, *adopted;
	int watch_events; /* events (bookmarks included) the current watch brought */
	/* existing slices of ours */
	struct seen *seen;
	int n_seen, cap_seen;
	/* current sync */
	struct op *ops;
	int n_ops, next_op;
	/* Names the watch spoke of while the current write was in flight. The
	 * server sends a write's answer and the watch's events in no set order:
	 * for these names the watch's word may be newer than the answer, which
	 * is then not recorded (a sync after puts right whatever is left). */
	struct hashtab raced; /* name -> the publisher itself (a set) */
	int64_t sync_gen; /* pool generation the current sync writes */
	bool syncing, dirty, in_sync;
	bool ready, published_once;
	char *last_error; /* of the latest failed request, for the unready log line */
	bool has_online;	 /* publisher_set_online() was called */
	bool desired_stale;	 /* online changed during a sync: recompute before the next */
	struct cpuset online;	 /* then: the CPUs online now */
	unsigned dropped_logged; /* enum slices_feature bits already logged */
	/* metrics */
	struct metric *writes, *errors, *published, *dropped, *in_sync_g, *syncs;
};

static void schedule_sync(struct publisher *p, int delay_ms);

/* What every slice of this publisher is built with. */
static struct slices_opts slice_opts(const struct publisher *p)
{
	return (struct slices_opts){ .node = p->node,
				     .node_uid = p->node_uid,
				     .max_devices = p->o.max_devices,
				     .node_allocatable = p->o.node_allocatable,
				     .pcie = p->o.pcie,
				     .smt_layout = p->o.smt_layout,
				     .online = p->has_online ? &p->online : NULL };
}
static void start_list(struct publisher *p);
static void start_watch(struct publisher *p);
static void run_sync(struct publisher *p);
static void get_node(struct publisher *p);

static void set_ready(struct publisher *p, bool v)
{
	if (p->ready == v)
		return;
	p->ready = v;
	if (p->o.on_state)
		p->o.on_state(p->o.ud, v);
}

/* The gauge follows what is known at once; readiness waits out the repair
 * timeout (see publisher.h). */
static void set_in_sync(struct publisher *p, bool v)
{
	if (p->in_sync == v)
		return;
	p->in_sync = v;
	metric_set(p->in_sync_g, v);
	if (v) {
		(void)event_del(p->repair_timer);
		free(p->last_error);
		p->last_error = NULL;
		if (p->published_once && !p->ready)
			log_info("slices_repaired", "slices=%d action=ready", p->n_desired);
		p->published_once = true;
		set_ready(p, true);
	} else if (p->published_once) {
		struct timeval tv = clock_tv_ms(p->o.repair_timeout_ms);

		(void)event_add(p->repair_timer, &tv);
	}
}

static void on_repair_timeout(evutil_socket_t fd, short what, void *ud)
{
	struct publisher *p = ud;

	if (p->in_sync)
		return;
	log_warn("slices_unrepaired", "seconds=%d last_error=%s action=not_ready",
		 p->o.repair_timeout_ms / 1000,
		 log_quote(p->last_error ? p->last_error : "none (a repair is still running)"));
	set_ready(p, false);
}

static void note_error(struct publisher *p, const char *text)
{
	char *n = strdup(text ? text : "");

	if (!n)
		return;
	free(p->last_error);
	p->last_error = n;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A hash of a JSON value that does not depend on key order (the server
 * returns objects with its own field order): FNV-1a over a canonical walk. */
static uint64_t json_hash(struct json_object *o, uint64_t h)
{
	char tag = (char)json_object_get_type(o);

	h = hash_bytes(h, &tag, 1);
	switch (json_object_get_type(o)) {
	case json_type_object: {
		int n = json_object_object_length(o), k = 0;
		const char **keys = malloc(sizeof(*keys) * (size_t)(n ? n : 1));

		if (!keys)
			return 0;
		json_object_object_foreach(o, key, val)
		{
			(void)val;
			keys[k++] = key;
		}
		qsort(keys, (size_t)n, sizeof(*keys), cmp_str);
		for (k = 0; k < n; k++) {
			struct json_object *v = NULL;

			h = hash_bytes(h, keys[k], strlen(keys[k]) + 1);
			(void)json_object_object_get_ex(o, keys[k], &v);
			h = json_hash(v, h);
		}
		free(keys);
		return h;
	}
	case json_type_array:
		for (size_t i = 0; i < json_object_array_length(o); i++)
			h = json_hash(json_object_array_get_idx(o, i), h);
		return hash_bytes(h, "]", 1);
	case json_type_null:
		return h;
	default: {
		const char *t = json_object_get_string(o);

		return hash_bytes(h, t, strlen(t) + 1);
	}
	}
}

static uint64_t devices_hash(struct json_object *devices)
{
	uint64_t h = devices ? json_hash(devices, HASH_INIT) : 0;

	return h ? h : 1; /* 0 means "none" */
}

static void seen_done(struct seen *s)
{
	free(s->name);
	free(s->uid);
	free(s->rv);
	memset(s, 0, sizeof(*s));
}

static const char *meta_str(struct json_object *o, const char *k)
{
	struct json_object *m, *v;

	if (!json_object_object_get_ex(o, "metadata", &m) || !json_object_object_get_ex(m, k, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static struct json_object *get_path(struct json_object *o, const char *a, const char *b,
				    const char *c)
{
	if (a && !json_object_object_get_ex(o, a, &o))
		return NULL;
	if (b && !json_object_object_get_ex(o, b, &o))
		return NULL;
	if (c && !json_object_object_get_ex(o, c, &o))
		return NULL;
	return o;
}

static void set_rv(struct publisher *p, const char *rv)
{
	char *n;

	if (!rv || !*rv || (p->rv && !strcmp(p->rv, rv)))
		return;
	n = strdup(rv);
	if (!n)
		return;
	free(p->rv);
	p->rv = n;
}

static void raced_clear(struct publisher *p)
{
	hashtab_done(&p->raced);
	hashtab_init(&p->raced, 0);
}

static bool raced_has(const struct publisher *p, const char *name)
{
	return name && hashtab_get_str(&p->raced, name);
}

static void ops_clear(struct publisher *p)
{
	for (int i = 0; i < p->n_ops; i++)
		seen_done(&p->ops[i].old);
	free(p->ops);
	p->ops = NULL;
	p->n_ops = p->next_op = 0;
	raced_clear(p);
}

/* Backoff, then do `what` (re-list, usually). */
static void retry_later(struct publisher *p, int floor_s)
{
	struct timeval tv;
	uint32_t ms = floor_s > 0 ? backoff_next_at_least(&p->bo, (uint32_t)floor_s * 1000)
				  : backoff_next(&p->bo);

	tv = clock_tv_ms(ms);
	(void)event_add(p->retry_timer, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *ud)
{
	struct publisher *p = ud;

	if (p->phase == PH_NODE)
		get_node(p);
	else if (p->phase == PH_WATCHING && !p->watch)
		start_watch(p); /* the list is still good: resume from its rv */
	else
		start_list(p);
}

/* ---- node ---------------------------------------------------------------------------- */

/* The desired slices, as hashes of their devices: from the devices and,
 * after CPU hotplug, the CPUs online now. What the server dropped before
 * (adopted) is forgotten: the next write finds out again. */
static int compute_desired(struct publisher *p)
{
	struct slices_opts so = slice_opts(p);
	struct json_object *arr = NULL;
	int n = slices_count(p->o.devices, &so), rc;
	uint64_t *want = calloc((size_t)n, sizeof(*want));
	uint64_t *adopted = calloc((size_t)n, sizeof(*adopted));

	if (!want || !adopted) {
		free(want);
		free(adopted);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		rc = slices_build_devices(p->o.devices, &so, i, &arr);
		if (rc < 0) {
			free(want);
			free(adopted);
			return log_error_errno(rc, "slices_build_failed", "");
		}
		want[i] = devices_hash(arr);
		json_object_put(arr);
		arr = NULL;
	}
	free(p->want);
	free(p->adopted);
	p->want = want;
	p->adopted = adopted;
	p->n_desired = n;
	return 0;
}

static void on_node(void *ud, const struct kube_result *r)
{
	struct publisher *p = ud;
	const char *uid;

	p->call = NULL;
	uid = r->error ? NULL : meta_str(r->body, "uid");
	if (!uid) {
		log_warn("node_get_failed", "node=%s error=%s action=retrying", p->node,
			 log_quote(r->error ? r->error_text : "no metadata.uid"));
		metric_add(p->errors, 1);
		retry_later(p, r->retry_after_s);
		return;
	}
	free(p->node_uid);
	p->node_uid = strdup(uid);
	if (!p->node_uid) {
		retry_later(p, 0);
		return;
	}
	if (compute_desired(p) < 0) {
		retry_later(p, 0);
		return;
	}
	log_info("node_found", "node=%s uid=%s slices=%d devices=%d", p->node, p->node_uid,
		 p->n_desired, p->o.devices->n);
	p->phase = PH_LIST;
	start_list(p);
}

static void get_node(struct publisher *p)
{
	char path[512];
	int r;

	(void)snprintf(path, sizeof(path), "/api/v1/nodes/%s", p->node);
	r = kube_request(p->kube, KUBE_GET, path, NULL, NULL, on_node, p, &p->call);
	if (r < 0)
		retry_later(p, 0);
}

/* ---- list and watch ---------------------------------------------------------------- */

static char *selector_path(struct publisher *p, bool watch)
{
	char *path = strdup(SLICES_PATH), sel[400];

	(void)snprintf(sel, sizeof(sel), "spec.driver=%s,spec.nodeName=%s", SLICES_DRIVER, p->node);
	if (!path || kube_query_add(&path, "fieldSelector", sel) < 0)
		goto fail;
	if (watch) {
		char to[16];

		(void)snprintf(to, sizeof(to), "%d", WATCH_TIMEOUT_S);
		if (kube_query_add(&path, "watch", "1") < 0 ||
		    kube_query_add(&path, "allowWatchBookmarks", "true") < 0 ||
		    kube_query_add(&path, "timeoutSeconds", to) < 0 ||
		    (p->rv && kube_query_add(&path, "resourceVersion", p->rv) < 0))
			goto fail;
	}
	return path;
fail:
	free(path);
	return NULL;
}

/* Records (or refreshes) what we know of a slice from the server's object. */
static void seen_put(struct publisher *p, struct json_object *slice)
{
	const char *name = meta_str(slice, "name"), *uid = meta_str(slice, "uid");
	const char *rv = meta_str(slice, "resourceVersion");
	struct json_object *spec = get_path(slice, "spec", NULL, NULL), *v;
	struct seen n = { 0 };
	int i;

	if (!name || !uid || !rv)
		return;
	n.name = strdup(name);
	n.uid = strdup(uid);
	n.rv = strdup(rv);
	if (!n.name || !n.uid || !n.rv) {
		seen_done(&n);
		return;
	}
	v = get_path(spec, "pool", "generation", NULL);
	n.gen = v ? json_object_get_int64(v) : -1;
	v = get_path(spec, "pool", "resourceSliceCount", NULL);
	n.count = v ? json_object_get_int64(v) : -1;
	v = get_path(spec, "pool", "name", NULL);
	n.pool_ok = v && !strcmp(json_object_get_string(v), p->node);
	v = get_path(spec, "nodeName", NULL, NULL);
	n.pool_ok = n.pool_ok && v && !strcmp(json_object_get_string(v), p->node) &&
		    !get_path(spec, "nodeSelector", NULL, NULL) &&
		    !get_path(spec, "allNodes", NULL, NULL);
	n.devices = devices_hash(get_path(spec, "devices", NULL, NULL));
	for (i = 0; i < p->n_seen; i++)
		if (!strcmp(p->seen[i].name, name))
			break;
	if (i == p->n_seen) {
		if (p->n_seen == p->cap_seen) {
			int cap = p->cap_seen ? 2 * p->cap_seen : 16;
			struct seen *ns = realloc(p->seen, sizeof(*ns) * (size_t)cap);

			if (!ns) {
				seen_done(&n);
				return;
			}
			p->seen = ns;
			p->cap_seen = cap;
		}
		p->n_seen++;
	} else {
		seen_done(&p->seen[i]);
	}
	p->seen[i] = n;
}

static void seen_del(struct publisher *p, const char *name)
{
	for (int i = 0; i < p->n_seen; i++)
		if (!strcmp(p->seen[i].name, name)) {
			seen_done(&p->seen[i]);
			p->seen[i] = p->seen[--p->n_seen];
			return;
		}
}

static void seen_clear(struct publisher *p)
{
	for (int i = 0; i < p->n_seen; i++)
		seen_done(&p->seen[i]);
	p->n_seen = 0;
}

static void on_list(void *ud, const struct kube_result *r)
{
	struct publisher *p = ud;
	struct json_object *items;

	p->call = NULL;
	if (r->error) {
		log_warn("slice_list_failed", "error=%s action=retrying", log_quote(r->error_text));
		metric_add(p->errors, 1);
		note_error(p, r->error_text);
		retry_later(p, r->retry_after_s);
		return;
	}
	seen_clear(p);
	items = get_path(r->body, "items", NULL, NULL);
	for (size_t i = 0; items && i < json_object_array_length(items); i++)
		seen_put(p, json_object_array_get_idx(items, i));
	free(p->rv);
	p->rv = NULL;
	set_rv(p, meta_str(r->body, "resourceVersion"));
	p->phase = PH_WATCHING;
	start_watch(p);
	schedule_sync(p, 0);
}

static void start_list(struct publisher *p)
{
	_cleanup_free_ char *path = selector_path(p, false);

	kube_watch_stop(p->watch);
	p->watch = NULL;
	(void)event_del(p->healthy_timer);
	/* A write still in flight was planned from state this list replaces. */
	kube_call_cancel(p->call);
	p->call = NULL;
	ops_clear(p);
	p->syncing = false;
	p->phase = PH_LIST;
	if (!path || kube_request(p->kube, KUBE_GET, path, NULL, NULL, on_list, p, &p->call) < 0)
		retry_later(p, 0);
}

static void on_event(void *ud, const struct kube_watch_event *ev)
{
	struct publisher *p = ud;
	const char *name;

	p->watch_events++;
	set_rv(p, ev->resource_version);
	if (ev->type == KUBE_EVENT_BOOKMARK)
		return;
	name = meta_str(ev->object, "name");
	if (!name)
		return;
	if (ev->type == KUBE_EVENT_DELETED)
		seen_del(p, name);
	else
		seen_put(p, ev->object);
	/* without memory the name is not kept: the answer is recorded, and
	 * the next event or resync repairs */
	if (p->syncing && p->call)
		(void)hashtab_put_str(&p->raced, name, p, NULL);
	log_debug("slice_event", "type=%d name=%s", (int)ev->type, name);
	/* Our own writes come back here too; a sync that finds nothing to do
	 * writes nothing, so there is no need to tell them apart. */
	schedule_sync(p, p->o.resync_delay_ms);
}

static void on_watch_healthy(evutil_socket_t fd, short what, void *ud)
{
	struct publisher *p = ud;

	backoff_reset(&p->bo);
}

static void on_watch_end(void *ud, const struct kube_result *r)
{
	struct publisher *p = ud;

	p->watch = NULL;
	(void)event_del(p->healthy_timer);
	if (r->error == 0) {
		/* The server ended the stream: resume, at once if it was a real
		 * one (bookmarks come every minute or so), else after a backoff. */
		if (p->watch_events > 0) {
			start_watch(p);
			return;
		}
		log_warn("slice_watch_empty", "action=rewatching_after_backoff");
		retry_later(p, r->retry_after_s);
		return;
	}
	p->phase = PH_LIST;
	if (kube_is_expired(r)) {
		log_info("slice_watch_expired", "action=relisting");
	} else {
		log_warn("slice_watch_failed", "error=%s action=relisting",
			 log_quote(r->error_text));
		note_error(p, r->error_text);
	}
	retry_later(p, r->retry_after_s);
}

static void start_watch(struct publisher *p)
{
	_cleanup_free_ char *path = selector_path(p, true);

	p->watch_events = 0;
	if (!path ||
	    kube_watch(p->kube, path, NULL, on_event, on_watch_end, p, &p->watch) < 0) {
		p->watch = NULL;
		retry_later(p, 0);
		return;
	}
	{
		struct timeval tv = { WATCH_HEALTHY_MS / 1000, (WATCH_HEALTHY_MS % 1000) * 1000 };

		(void)event_add(p->healthy_timer, &tv);
	}
}

/* ---- sync --------------------------------------------------------------------------- */

/* The index encoded in a slice name "<hex, width>-dra.cpu-<node>-xxxxx", or -1. */
static int name_index(const struct publisher *p, const char *name)
{
	int width = 5, idx = 0;
	char tail[320];

	for (int n = p->n_desired - 1; n >= (1 << 20); n >>= 4)
		width++;
	for (int i = 0; i < width; i++) {
		char c = name[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (v < 0)
			return -1;
		idx = idx * 16 + v;
	}
	(void)snprintf(tail, sizeof(tail), "-%s-%s-", SLICES_DRIVER, p->node);
	if (strncmp(name + width, tail, strlen(tail)) != 0)
		return -1;
	return idx;
}

/* Does the slice on the server differ from desired index i at generation gen? */
static bool slice_changed(struct publisher *p, const struct seen *have, int i, int64_t gen)
{
	uint64_t want = p->adopted[i] ? p->adopted[i] : p->want[i];

	return have->gen != gen || have->count != p->n_desired || !have->pool_ok ||
	       have->devices != want;
}

static int op_add(struct publisher *p, enum op_kind kind, int index, const struct seen *old)
{
	struct op *n = realloc(p->ops, sizeof(*n) * (size_t)(p->n_ops + 1));
	struct op op = { .kind = kind, .index = index };

	if (!n)
		return -ENOMEM;
	p->ops = n;
	if (old) {
		op.old.name = strdup(old->name);
		op.old.uid = strdup(old->uid);
		op.old.rv = strdup(old->rv);
		if (!op.old.name || !op.old.uid || !op.old.rv) {
			seen_done(&op.old);
			return -ENOMEM;
		}
	}
	p->ops[p->n_ops++] = op;
	return 0;
}

/* The write body of desired slice i at gen; for an update, the identity of
 * the slice it replaces. Built when sent and freed right after. */
static struct json_object *body_for(struct publisher *p, const struct op *op, int64_t gen)
{
	struct slices_opts so = slice_opts(p);
	struct json_object *body = NULL, *meta;

	so.generation = gen;
	if (slices_build_one(p->o.devices, &so, op->index, &body) < 0)
		return NULL;
	if (op->kind == OP_UPDATE && json_object_object_get_ex(body, "metadata", &meta)) {
		json_object_object_add(meta, "name", json_object_new_string(op->old.name));
		json_object_object_add(meta, "uid", json_object_new_string(op->old.uid));
		json_object_object_add(meta, "resourceVersion",
				       json_object_new_string(op->old.rv));
	}
	return body;
}

static void plan(struct publisher *p)
{
	const struct seen **match = calloc((size_t)p->n_desired + 1, sizeof(*match));
	int64_t g = 0, gen;
	int creates = 0, changes = 0;

	if (!match)
		return;
	for (int k = 0; k < p->n_seen; k++)
		if (p->seen[k].gen > g)
			g = p->seen[k].gen;
	/* Match by index; everything else is obsolete. */
	for (int k = 0; k < p->n_seen; k++) {
		const struct seen *s = &p->seen[k];
		int i = s->gen < g ? -1 : name_index(p, s->name);

		if (i >= 0 && i < p->n_desired && !match[i]) {
			match[i] = s;
			continue;
		}
		(void)op_add(p, OP_DELETE, -1, s);
	}
	for (int i = 0; i < p->n_desired; i++) {
		if (!match[i])
			creates++;
		else if (slice_changed(p, match[i], i, g))
			changes++;
	}
	gen = (creates == 0 && changes <= 1 && g > 0) ? g : g + 1;
	p->sync_gen = gen;
	for (int i = 0; i < p->n_desired; i++) {
		if (!match[i])
			(void)op_add(p, OP_CREATE, i, NULL);
		else if (gen != g || slice_changed(p, match[i], i, gen))
			(void)op_add(p, OP_UPDATE, i, match[i]);
	}
	free(match);
}

/* After a write: did the server keep what we sent? If not, say once per
 * feature what was lost, and adopt what it kept so the publisher does not
 * fight the server with endless rewrites. */
static void check_dropped(struct publisher *p, const struct op *op, struct json_object *got)
{
	struct json_object *got_devs = get_path(got, "spec", "devices", NULL), *sent = NULL;
	uint64_t h = devices_hash(got_devs);
	struct slices_opts so = slice_opts(p);
	unsigned feats = SLICES_FEAT_OTHER;

	if (h == p->want[op->index]) {
		p->adopted[op->index] = 0;
		return;
	}
	if (slices_build_devices(p->o.devices, &so, op->index, &sent) == 0) {
		feats = slices_dropped_features(sent, got_devs);
		json_object_put(sent);
		if (!feats)
			feats = SLICES_FEAT_OTHER;
	}
	for (unsigned f = 1; f <= SLICES_FEAT_OTHER; f <<= 1) {
		if (!(feats & f) || (p->dropped_logged & f))
			continue;
		log_warn("slice_fields_dropped", "slice=%s feature=%s hint=%s action=adopting",
			 meta_str(got, "name") ? meta_str(got, "name") : "?",
			 slices_feature_gate((enum slices_feature)f),
			 log_quote(slices_feature_loss((enum slices_feature)f)));
		p->dropped_logged |= f;
	}
	metric_set(p->dropped, 1);
	p->adopted[op->index] = h;
}

static void next_op(struct publisher *p);

static void on_op_done(void *ud, const struct kube_result *r)
{
	struct publisher *p = ud;
	struct op *op = &p->ops[p->next_op];
	static const char *const verbs[] = { "delete", "update", "create" };

	p->call = NULL;
	if (r->error && !(op->kind == OP_DELETE && r->error == -ENOENT)) {
		log_warn("slice_write_failed", "verb=%s slice=%s error=%s action=relisting",
			 verbs[op->kind], op->old.name ? op->old.name : "(new)",
			 log_quote(r->error_text));
		metric_add(p->errors, 1);
		note_error(p, r->error_text);
		ops_clear(p);
		p->syncing = false;
		set_in_sync(p, false);
		kube_watch_stop(p->watch);
		p->watch = NULL;
		p->phase = PH_LIST;
		retry_later(p, r->retry_after_s);
		return;
	}
	metric_series_add(metric_with(p->writes, verbs[op->kind]), 1);
	if (op->kind == OP_DELETE) {
		if (!raced_has(p, op->old.name))
			seen_del(p, op->old.name);
	} else if (r->body) {
		check_dropped(p, op, r->body);
		if (!raced_has(p, meta_str(r->body, "name")))
			seen_put(p, r->body);
	}
	p->next_op++;
	next_op(p);
}

static void next_op(struct publisher *p)
{
	struct kube_req_opts ro = { 0 };
	_cleanup_free_ char *body = NULL;
	char path[600];
	struct op *op;
	int r;

	if (p->next_op == p->n_ops) {
		int n = p->n_ops;

		ops_clear(p);
		p->syncing = false;
		/* Only writes that went through (or a watch that held,
		 * WATCH_HEALTHY_MS) prove the server works: a sync with nothing
		 * to write follows every LIST, and resetting there let a watch
		 * that fails at once relist several times a second. */
		if (n) {
			backoff_reset(&p->bo);
			log_info("slices_synced", "writes=%d slices=%d", n, p->n_desired);
			/* The write bodies and responses were large and short-lived:
			 * give their pages back (glibc keeps freed heap otherwise). */
			(void)malloc_trim(0);
		}
		metric_set(p->published, p->n_desired);
		set_in_sync(p, true);
		if (p->dirty)
			schedule_sync(p, 0);
		return;
	}
	op = &p->ops[p->next_op];
	raced_clear(p); /* what the watch said before this write is older than its answer */
	if (op->kind == OP_DELETE) {
		(void)snprintf(path, sizeof(path), "%s/%s", SLICES_PATH, op->old.name);
		ro.precondition_uid = op->old.uid;
		ro.precondition_rv = op->old.rv;
		r = kube_request(p->kube, KUBE_DELETE, path, NULL, &ro, on_op_done, p, &p->call);
	} else {
		struct json_object *b = body_for(p, op, p->sync_gen);

		if (b)
			body = strdup(json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN));
		json_object_put(b);
		if (op->kind == OP_UPDATE)
			(void)snprintf(path, sizeof(path), "%s/%s", SLICES_PATH, op->old.name);
		else
			(void)snprintf(path, sizeof(path), "%s", SLICES_PATH);
		r = !body ? -ENOMEM
			  : kube_request(p->kube, op->kind == OP_UPDATE ? KUBE_UPDATE : KUBE_CREATE,
					 path, body, NULL, on_op_done, p, &p->call);
	}
	if (r < 0) {
		log_error_errno(r, "slice_write_failed", "action=retrying");
		ops_clear(p);
		p->syncing = false;
		p->phase = PH_LIST;
		retry_later(p, 0);
	}
}

static void run_sync(struct publisher *p)
{
	if (p->phase != PH_WATCHING || p->syncing || p->call)
		return;
	if (p->desired_stale) {
		if (compute_desired(p) < 0) {
			retry_later(p, 0);
			return;
		}
		p->desired_stale = false;
	}
	p->dirty = false;
	p->syncing = true;
	plan(p);
	metric_add(p->syncs, 1);
	if (p->n_ops)
		set_in_sync(p, false);
	next_op(p);
}

static void on_sync_timer(evutil_socket_t fd, short what, void *ud)
{
	run_sync(ud);
}

static void schedule_sync(struct publisher *p, int delay_ms)
{
	struct timeval tv = clock_tv_ms(delay_ms);

	if (p->syncing) {
		p->dirty = true;
		return;
	}
	if (!evtimer_pending(p->sync_timer, NULL) || delay_ms == 0)
		(void)event_add(p->sync_timer, &tv);
}

/* ---- lifecycle -------------------------------------------------------------------- */

int publisher_new(struct event_base *base, struct kube *k, const struct publisher_opts *o,
		  struct metrics *m, struct publisher **ret)
{
	_cleanup_(publisher_freep) struct publisher *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->base = base;
	p->kube = k;
	p->o = *o;
	if (!p->o.resync_delay_ms)
		p->o.resync_delay_ms = 1000;
	p->node = strdup(o->node);
	if (!p->o.repair_timeout_ms)
		p->o.repair_timeout_ms = 30000;
	p->retry_timer = evtimer_new(base, on_retry, p);
	p->healthy_timer = evtimer_new(base, on_watch_healthy, p);
	p->sync_timer = evtimer_new(base, on_sync_timer, p);
	p->repair_timer = evtimer_new(base, on_repair_timeout, p);
	if (!p->node || !p->retry_timer || !p->sync_timer || !p->repair_timer ||
	    !p->healthy_timer)
		return -ENOMEM;
	backoff_init(&p->bo, 200, 30000);
	p->writes = metrics_family(m, MF_SLICE_WRITES_TOTAL);
	p->errors = metrics_family(m, MF_SLICE_ERRORS_TOTAL);
	p->published = metrics_family(m, MF_SLICES_PUBLISHED);
	p->dropped = metrics_family(m, MF_SLICE_FIELDS_DROPPED);
	p->in_sync_g = metrics_family(m, MF_SLICES_IN_SYNC);
	p->syncs = metrics_family(m, MF_SLICE_SYNCS_TOTAL);
	p->phase = PH_NODE;
	get_node(p);
	*ret = TAKE_PTR(p);
	return 0;
}

struct publisher *publisher_free(struct publisher *p)
{
	if (!p)
		return NULL;
	kube_call_cancel(p->call);
	kube_watch_stop(p->watch);
	if (p->retry_timer)
		event_free(p->retry_timer);
	if (p->healthy_timer)
		event_free(p->healthy_timer);
	if (p->sync_timer)
		event_free(p->sync_timer);
	if (p->repair_timer)
		event_free(p->repair_timer);
	ops_clear(p);
	free(p->want);
	free(p->adopted);
	seen_clear(p);
	free(p->seen);
	hashtab_done(&p->raced);
	free(p->node);
	free(p->node_uid);
	free(p->rv);
	free(p->last_error);
	free(p);
	return NULL;
}

void publisher_set_online(struct publisher *p, const struct cpuset *online)
{
	if (p->has_online && cpuset_equal(&p->online, online))
		return;
	p->online = *online;
	p->has_online = true;
	publisher_devices_changed(p, "cpu_hotplug");
}

void publisher_devices_changed(struct publisher *p, const char *reason)
{
	/* Before the node is known nothing is desired yet: on_node computes it.
	 * During a sync its operations index the desired slices: the next sync
	 * recomputes them first. */
	if (!p->node_uid)
		return;
	if (p->syncing) {
		p->desired_stale = true;
		schedule_sync(p, 0);
		return;
	}
	if (compute_desired(p) < 0) {
		retry_later(p, 0);
		return;
	}
	log_info("slices_changed", "slices=%d devices=%d reason=%s", p->n_desired,
		 slices_published(p->o.devices, &(struct slices_opts){
							  .online = p->has_online ? &p->online : NULL }),
		 reason);
	schedule_sync(p, 0);
}
