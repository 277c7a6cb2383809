/* wrap: kube_request kube_call_cancel kube_watch kube_watch_stop event_add event_del event_pending event_free */
/* publisher: the ResourceSlice state machine against an API server played in
 * the test, without sockets.
 *
 * kube_request/kube_watch are wrapped: every request waits until the test
 * answers it, either through a small in-memory server (serve(): a slice
 * store with resourceVersions, generateName, preconditions and 409s, which
 * echoes writes on the watch like the real one) or by hand (errors,
 * Retry-After, watch events and ends). Timers run on virtual time
 * (faketimer.h), so minutes of failures take no time.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "core/devices.h"
#include "faketimer.h"
#include "kube/kube.h"
#include "kube/publisher.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "testutil.h"

#define NODE_UID "0c1d2e3f-0000-4000-8000-00000000aaaa"
#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define MAX_SLICES 32

/* ---- the fake client: requests and watches wait for the test ------------------------------- */

struct kube_call {
	bool live, cancelled;
	int64_t at; /* virtual time it was made */
	enum kube_verb verb;
	char path[1024];
	char *body;
	char pre_uid[64], pre_rv[32];
	kube_done_fn cb;
	void *ud;
};

struct kube_watch {
	bool live, stopped;
	int64_t at;
	char path[1024];
	kube_event_fn on_event;
	kube_watch_end_fn on_end;
	void *ud;
};

static struct kube_call kcalls[2048];
static int n_kcalls;
static struct kube_watch kwatches[512];
static int n_kwatches;
static int overlapping; /* requests made while another was in flight */

static struct kube_call *pending(void)
{
	for (int i = 0; i < n_kcalls; i++)
		if (kcalls[i].live)
			return &kcalls[i];
	return NULL;
}

static struct kube_watch *watching(void)
{
	for (int i = 0; i < n_kwatches; i++)
		if (kwatches[i].live)
			return &kwatches[i];
	return NULL;
}

int __wrap_kube_request(struct kube *k, enum kube_verb verb, const char *path,
			const char *body_json, const struct kube_req_opts *o, kube_done_fn cb,
			void *userdata, struct kube_call **ret_call)
{
	struct kube_call *c;

	assert_true(n_kcalls < (int)ARRAY_SIZE(kcalls));
	if (pending())
		overlapping++;
	c = &kcalls[n_kcalls++];
	memset(c, 0, sizeof(*c));
	c->live = true;
	c->at = faketimer_now();
	c->verb = verb;
	snprintf(c->path, sizeof(c->path), "%s", path);
	c->body = body_json ? strdup(body_json) : NULL;
	if (o && o->precondition_uid)
		snprintf(c->pre_uid, sizeof(c->pre_uid), "%s", o->precondition_uid);
	if (o && o->precondition_rv)
		snprintf(c->pre_rv, sizeof(c->pre_rv), "%s", o->precondition_rv);
	c->cb = cb;
	c->ud = userdata;
	if (ret_call)
		*ret_call = c;
	return 0;
}

void __wrap_kube_call_cancel(struct kube_call *c)
{
	if (!c)
		return;
	assert_true(c->live); /* never a call whose callback ran */
	c->live = false;
	c->cancelled = true;
}

int __wrap_kube_watch(struct kube *k, const char *path_with_query,
		      const struct kube_watch_opts *o, kube_event_fn on_event,
		      kube_watch_end_fn on_end, void *userdata, struct kube_watch **ret)
{
	struct kube_watch *w;

	assert_true(n_kwatches < (int)ARRAY_SIZE(kwatches));
	assert_null(watching()); /* one watch at a time */
	w = &kwatches[n_kwatches++];
	memset(w, 0, sizeof(*w));
	w->live = true;
	w->at = faketimer_now();
	snprintf(w->path, sizeof(w->path), "%s", path_with_query);
	w->on_event = on_event;
	w->on_end = on_end;
	w->ud = userdata;
	if (ret)
		*ret = w;
	return 0;
}

void __wrap_kube_watch_stop(struct kube_watch *w)
{
	if (!w)
		return;
	assert_true(w->live);
	w->live = false;
	w->stopped = true;
}

static int count_calls(enum kube_verb verb, int from)
{
	int n = 0;

	for (int i = from; i < n_kcalls; i++)
		n += kcalls[i].verb == verb;
	return n;
}

static int count_writes(int from)
{
	return count_calls(KUBE_CREATE, from) + count_calls(KUBE_UPDATE, from) +
	       count_calls(KUBE_DELETE, from);
}

/* ---- answering -------------------------------------------------------------------------------- */

static const char *reason_of(long http)
{
	switch (http) {
	case 404:
		return "NotFound";
	case 409:
		return "Conflict";
	case 410:
		return "Expired";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 503:
		return "ServiceUnavailable";
	default:
		return http >= 500 ? "InternalError" : NULL;
	}
}

/* Answers c: an HTTP status, a body (owned, may be NULL), a Retry-After. */
static void respond(struct kube_call *c, long http, struct json_object *body, int retry_after_s)
{
	char text[1200];
	struct kube_result r = { .http_status = http, .body = body, .retry_after_s = retry_after_s };

	assert_true(c->live);
	c->live = false;
	r.error = kube_errno_from_http(http, reason_of(http));
	if (r.error) {
		snprintf(text, sizeof(text), "%s: %ld %s", c->path, http,
			 reason_of(http) ? reason_of(http) : "");
		r.error_text = text;
		r.status.code = (int)http;
		r.status.reason = reason_of(http);
		r.status.retry_after_s = -1;
	} else {
		r.error_text = "";
	}
	r.attempts = 1;
	c->cb(c->ud, &r);
	json_object_put(body);
}

static void fail_call(struct kube_call *c, long http, int retry_after_s)
{
	respond(c, http, NULL, retry_after_s);
}

static void watch_event(struct kube_watch *w, enum kube_event_type type, struct json_object *obj,
			const char *rv)
{
	struct kube_watch_event ev = { .type = type, .object = obj, .resource_version = rv };

	assert_true(w->live);
	w->on_event(w->ud, &ev);
}

static void watch_end(struct kube_watch *w, long http, int error)
{
	struct kube_result r = { .error = error, .http_status = http, .retry_after_s = -1,
				 .error_text = error ? "watch failed" : "" };

	assert_true(w->live);
	w->live = false;
	r.status.code = error == -ESTALE ? 410 : 0;
	r.status.reason = error == -ESTALE ? "Expired" : NULL;
	w->on_end(w->ud, &r);
}

/* ---- the in-memory API server ------------------------------------------------------------ */

static struct {
	struct json_object *slices[MAX_SLICES]; /* NULL: free */
	int64_t rv;
	int suffix;
	bool echo; /* writes come back on the watch */
	/* run between storing an update or a delete and answering it, with the
	 * watch's event already sent: someone acts before our answer is read */
	void (*race)(const char *name);
	/* drop this attribute from every device the server stores (a gate off) */
	const char *drop_attr;
} srv;

static const char *meta(struct json_object *o, const char *key)
{
	struct json_object *m, *v;

	if (!json_object_object_get_ex(o, "metadata", &m) || !json_object_object_get_ex(m, key, &v))
		return NULL;
	return json_object_get_string(v);
}

static void set_meta(struct json_object *o, const char *key, const char *val)
{
	struct json_object *m;

	assert_true(json_object_object_get_ex(o, "metadata", &m));
	json_object_object_add(m, key, json_object_new_string(val));
}

static int64_t slice_gen(struct json_object *o)
{
	struct json_object *spec, *pool, *g;

	assert_true(json_object_object_get_ex(o, "spec", &spec));
	assert_true(json_object_object_get_ex(spec, "pool", &pool));
	assert_true(json_object_object_get_ex(pool, "generation", &g));
	return json_object_get_int64(g);
}

static int64_t slice_count_field(struct json_object *o)
{
	struct json_object *spec, *pool, *g;

	assert_true(json_object_object_get_ex(o, "spec", &spec));
	assert_true(json_object_object_get_ex(spec, "pool", &pool));
	assert_true(json_object_object_get_ex(pool, "resourceSliceCount", &g));
	return json_object_get_int64(g);
}

static int find_slice(const char *name)
{
	for (int i = 0; i < MAX_SLICES; i++)
		if (srv.slices[i] && !strcmp(meta(srv.slices[i], "name"), name))
			return i;
	return -1;
}

static int n_slices(void)
{
	int n = 0;

	for (int i = 0; i < MAX_SLICES; i++)
		n += srv.slices[i] != NULL;
	return n;
}

static char *next_rv(void)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "%lld", (long long)++srv.rv);
	return buf;
}

static struct json_object *copy(struct json_object *o)
{
	struct json_object *c = NULL;

	assert_int_equal(json_object_deep_copy(o, &c, NULL), 0);
	return c;
}

static void drop_fields(struct json_object *o)
{
	struct json_object *spec, *devs;

	if (!srv.drop_attr || !json_object_object_get_ex(o, "spec", &spec) ||
	    !json_object_object_get_ex(spec, "devices", &devs))
		return;
	for (size_t i = 0; i < json_object_array_length(devs); i++) {
		struct json_object *attrs;

		if (json_object_object_get_ex(json_object_array_get_idx(devs, i), "attributes",
					      &attrs))
			json_object_object_del(attrs, srv.drop_attr);
	}
}

static void echo(enum kube_event_type type, struct json_object *o)
{
	struct kube_watch *w = watching();

	if (srv.echo && w)
		watch_event(w, type, o, meta(o, "resourceVersion"));
}

/* Stores a slice as someone else would (no request, but a watch event). */
static struct json_object *server_put(struct json_object *o, bool event)
{
	int i = find_slice(meta(o, "name"));

	if (i < 0)
		for (i = 0; srv.slices[i]; i++)
			assert_true(i + 1 < MAX_SLICES);
	set_meta(o, "resourceVersion", next_rv());
	json_object_put(srv.slices[i]);
	srv.slices[i] = o;
	if (event && watching())
		watch_event(watching(), KUBE_EVENT_MODIFIED, o, meta(o, "resourceVersion"));
	return o;
}

static void server_delete(const char *name, bool event)
{
	int i = find_slice(name);
	struct json_object *o;

	assert_true(i >= 0);
	o = srv.slices[i];
	srv.slices[i] = NULL;
	if (event && watching())
		watch_event(watching(), KUBE_EVENT_DELETED, o, next_rv());
	json_object_put(o);
}

/* Answers the request in flight the way the API server would. */
static void serve_one(struct kube_call *c)
{
	const char *slash = strrchr(c->path, '/');
	char name[256] = "";

	if (!strncmp(c->path, SLICES "/", strlen(SLICES "/")))
		snprintf(name, sizeof(name), "%s", slash + 1);
	if (c->verb == KUBE_GET && !strcmp(c->path, "/api/v1/nodes/node-1")) {
		respond(c, 200,
			json_tokener_parse("{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-1\","
					   "\"uid\":\"" NODE_UID "\"}}"),
			-1);
	} else if (c->verb == KUBE_GET && !strncmp(c->path, SLICES "?", strlen(SLICES "?"))) {
		struct json_object *list = json_object_new_object(), *items = json_object_new_array();
		struct json_object *m = json_object_new_object();

		assert_non_null(strstr(c->path, "fieldSelector=spec.driver%3Ddra.cpu%2Cspec.nodeName%3Dnode-1"));
		for (int i = 0; i < MAX_SLICES; i++)
			if (srv.slices[i])
				json_object_array_add(items, copy(srv.slices[i]));
		json_object_object_add(m, "resourceVersion", json_object_new_string(next_rv()));
		json_object_object_add(list, "metadata", m);
		json_object_object_add(list, "items", items);
		respond(c, 200, list, -1);
	} else if (c->verb == KUBE_CREATE && !strcmp(c->path, SLICES)) {
		struct json_object *o = json_tokener_parse(c->body);
		char n[160], uid[64];

		assert_non_null(o);
		snprintf(n, sizeof(n), "%sx%04d", meta(o, "generateName"), srv.suffix);
		snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012d", srv.suffix++);
		set_meta(o, "name", n);
		set_meta(o, "uid", uid);
		drop_fields(o);
		server_put(o, false);
		respond(c, 201, copy(o), -1);
		echo(KUBE_EVENT_ADDED, o);
	} else if (c->verb == KUBE_UPDATE && name[0]) {
		struct json_object *o = json_tokener_parse(c->body);
		int i = find_slice(name);

		assert_non_null(o);
		if (i < 0) {
			json_object_put(o);
			fail_call(c, 404, -1);
		} else if (strcmp(meta(o, "resourceVersion"), meta(srv.slices[i], "resourceVersion")) ||
			   strcmp(meta(o, "uid"), meta(srv.slices[i], "uid"))) {
			json_object_put(o);
			fail_call(c, 409, -1);
		} else if (srv.race) {
			struct json_object *answer;
			void (*race)(const char *) = srv.race;

			drop_fields(o);
			server_put(o, false);
			answer = copy(o);
			echo(KUBE_EVENT_MODIFIED, o);
			srv.race = NULL;
			race(name);
			respond(c, 200, answer, -1);
		} else {
			drop_fields(o);
			server_put(o, false);
			respond(c, 200, copy(o), -1);
			echo(KUBE_EVENT_MODIFIED, o);
		}
	} else if (c->verb == KUBE_DELETE && name[0]) {
		int i = find_slice(name);

		if (i < 0) {
			fail_call(c, 404, -1);
		} else if ((c->pre_uid[0] && strcmp(c->pre_uid, meta(srv.slices[i], "uid"))) ||
			   (c->pre_rv[0] && strcmp(c->pre_rv, meta(srv.slices[i], "resourceVersion")))) {
			fail_call(c, 409, -1);
		} else {
			struct json_object *o = copy(srv.slices[i]);
			void (*race)(const char *) = srv.race;

			server_delete(name, false);
			if (race) { /* the watch first, then the answer */
				echo(KUBE_EVENT_DELETED, o);
				srv.race = NULL;
				race(name);
				respond(c, 200, copy(o), -1);
			} else {
				respond(c, 200, copy(o), -1);
				echo(KUBE_EVENT_DELETED, o);
			}
			json_object_put(o);
		}
	} else {
		fail_msg("unexpected request %d %s", (int)c->verb, c->path);
	}
}

/* Serves requests and runs timers until nothing is left to do within ms of
 * virtual time (the watch stays open). */
static void settle(int64_t ms)
{
	int64_t end = faketimer_now() + ms, at = 0;
	int rounds = 0;

	for (;;) {
		struct kube_call *c = pending();

		assert_true(++rounds < 10000);
		if (c) {
			serve_one(c);
			continue;
		}
		if (faketimer_next(&at) && at <= end) {
			faketimer_advance(at - faketimer_now());
			continue;
		}
		break;
	}
	if (end > faketimer_now())
		faketimer_advance(end - faketimer_now());
}

/* ---- fixture ------------------------------------------------------------------------------- */

static struct {
	struct event_base *base;
	struct topo *topo;
	struct devices *devices;
	struct metrics *metrics;
	struct publisher *pub;
	int in_sync, state_changes;
} fx;

static void on_state(void *ud, bool in_sync)
{
	fx.in_sync = in_sync;
	fx.state_changes++;
}

/* 16 devices, 4 per slice: 4 slices. */
static void start_publisher(void)
{
	struct publisher_opts o = { .node = "node-1", .devices = fx.devices, .max_devices = 4,
				    .on_state = on_state };

	assert_int_equal(publisher_new(fx.base, (struct kube *)&fx, &o, fx.metrics, &fx.pub), 0);
}

static int setup(void **st)
{
	memset(&fx, 0, sizeof(fx));
	memset(&srv, 0, sizeof(srv));
	srv.rv = 1000;
	srv.echo = true;
	for (int i = 0; i < n_kcalls; i++)
		free(kcalls[i].body);
	n_kcalls = n_kwatches = overlapping = 0;
	faketimer_reset();
	log_set_level(LOG_ERROR);
	fx.base = event_base_new();
	fx.topo = testutil_topo(1, 2, 4, 2);
	if (!fx.base || metrics_new(&fx.metrics) < 0 ||
	    devices_build(fx.topo, NULL, DEVICES_INDIVIDUAL, 0, &fx.devices) < 0)
		return -1;
	return 0;
}

static int teardown(void **st)
{
	publisher_free(fx.pub);
	for (int i = 0; i < MAX_SLICES; i++)
		json_object_put(srv.slices[i]);
	devices_free(fx.devices);
	metrics_free(fx.metrics);
	topo_free(fx.topo);
	event_base_free(fx.base);
	if (overlapping) { /* one request at a time, always */
		fprintf(stderr, "%d requests were made while another was in flight\n",
			overlapping);
		return -1;
	}
	return 0;
}

/* dra_cpu_slices_in_sync as /metrics shows it (-1: absent). */
static double in_sync_gauge(void)
{
	static const char name[] = "dra_cpu_slices_in_sync";
	struct evbuffer *out = evbuffer_new();
	const char *text, *line;
	double v = -1;

	assert_non_null(out);
	assert_int_equal(metrics_render(fx.metrics, out), 0);
	assert_int_equal(evbuffer_add(out, "", 1), 0);
	text = (const char *)evbuffer_pullup(out, -1);
	for (line = text; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, name, sizeof(name) - 1) == 0 && line[sizeof(name) - 1] == ' ')
			v = strtod(line + sizeof(name), NULL);
	evbuffer_free(out);
	return v;
}

/* Publishes once and returns with everything in sync. */
static void published(void)
{
	start_publisher();
	settle(0);
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
}

static struct json_object *slice_at(int index)
{
	char prefix[8];

	snprintf(prefix, sizeof(prefix), "%05x-", index);
	for (int i = 0; i < MAX_SLICES; i++)
		if (srv.slices[i] && !strncmp(meta(srv.slices[i], "name"), prefix, 6))
			return srv.slices[i];
	fail_msg("no slice %d", index);
	return NULL;
}

static void assert_pool(int64_t gen)
{
	for (int i = 0; i < MAX_SLICES; i++)
		if (srv.slices[i]) {
			assert_int_equal(slice_gen(srv.slices[i]), gen);
			assert_int_equal(slice_count_field(srv.slices[i]), n_slices());
		}
}

/* ---- start, list, watch, sync ---------------------------------------------------------------- */

static void test_first_start_gets_node_lists_watches_then_creates(void **st)
{
	struct kube_watch *w;

	start_publisher();
	assert_string_equal(pending()->path, "/api/v1/nodes/node-1");
	serve_one(pending());
	assert_int_equal(pending()->verb, KUBE_GET);
	assert_non_null(strstr(pending()->path, SLICES "?fieldSelector="));
	serve_one(pending());
	w = watching();
	assert_non_null(w);
	assert_non_null(strstr(w->path, "watch=1"));
	assert_non_null(strstr(w->path, "allowWatchBookmarks=true"));
	assert_non_null(strstr(w->path, "resourceVersion=1001")); /* the list's */
	/* A watch that goes silent is ended within the 300 s the driver allows
	 * it: what it asks the server for, plus the client's slack, fits. */
	{
		const char *to = strstr(w->path, "timeoutSeconds=");

		assert_non_null(to);
		assert_true(kube_watch_deadline_ms(atoi(to + 15)) <= 300000);
		assert_true(atoi(to + 15) >= 240); /* and not needlessly short */
	}
	assert_false(fx.in_sync);
	settle(0);
	assert_int_equal(count_calls(KUBE_CREATE, 0), 4);
	assert_int_equal(count_writes(0), 4);
	assert_true(fx.in_sync);
	assert_pool(1);
	for (int i = 0; i < MAX_SLICES; i++)
		if (srv.slices[i])
			assert_non_null(strstr(json_object_to_json_string(srv.slices[i]), NODE_UID));
	/* our own writes came back on the watch: the syncs they cause write nothing */
	settle(5000);
	assert_int_equal(count_writes(0), 4);
}

static void test_rt_capacity_change_rewrites_the_slice_at_once(void **st)
{
	struct cpuset rt;
	int from;

	/* 15 CPUs and cpurt015: still 16 devices, 4 slices */
	devices_free(fx.devices);
	fx.devices = NULL;
	assert_int_equal(cpuset_parse("15", &rt, NULL), 0);
	assert_int_equal(devices_build(fx.topo, &rt, DEVICES_INDIVIDUAL, 0, &fx.devices), 0);
	assert_int_equal(devices_add_rt(fx.devices, fx.topo, &rt, 900), 0);
	published();
	assert_non_null(strstr(json_object_to_json_string(slice_at(3)), "\"900m\""));
	from = n_kcalls;
	/* the kernel's servers grew: the slice of cpurt015 alone is rewritten */
	assert_int_equal(devices_set_rt_capacity(fx.devices, 850), 0);
	publisher_devices_changed(fx.pub, "rt_capacity");
	settle(0);
	assert_true(fx.in_sync);
	assert_int_equal(count_calls(KUBE_UPDATE, from), 1);
	assert_int_equal(count_writes(from), 1);
	assert_non_null(strstr(json_object_to_json_string(slice_at(3)), "\"850m\""));
	assert_null(strstr(json_object_to_json_string(slice_at(3)), "\"900m\""));
	/* told again with nothing changed: nothing written */
	from = n_kcalls;
	publisher_devices_changed(fx.pub, "rt_capacity");
	settle(0);
	assert_int_equal(count_writes(from), 0);
}

static void test_identical_restart_writes_nothing(void **st)
{
	int from;

	published();
	fx.pub = publisher_free(fx.pub);
	from = n_kcalls;
	start_publisher();
	settle(10000);
	assert_true(fx.in_sync);
	assert_int_equal(count_writes(from), 0);
	assert_int_equal(count_calls(KUBE_GET, from), 2); /* node, list */
}

static void test_watch_event_deleting_our_slice_is_repaired(void **st)
{
	int from;

	published();
	from = n_kcalls;
	server_delete(meta(slice_at(2), "name"), true); /* the kubelet wipes one */
	/* repaired after the resync delay, not at once */
	faketimer_advance(999);
	assert_null(pending());
	faketimer_advance(1);
	settle(0);
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
	/* a slice created: the pool generation moves on and every slice is rewritten */
	assert_int_equal(count_calls(KUBE_CREATE, from), 1);
	assert_int_equal(count_calls(KUBE_UPDATE, from), 3);
	assert_pool(2);
}

/* Someone else empties the devices of the slice stored as o. */
static void edit_slice(struct json_object *o)
{
	o = copy(o);
	json_object_object_add(json_object_object_get(o, "spec"), "devices",
			       json_object_new_array());
	server_put(o, true);
}

static void test_watch_event_editing_our_slice_is_repaired(void **st)
{
	int from;

	published();
	from = n_kcalls;
	edit_slice(slice_at(1));
	settle(2000);
	/* one slice changed: fixed in place, the generation stays */
	assert_int_equal(count_writes(from), 1);
	assert_int_equal(count_calls(KUBE_UPDATE, from), 1);
	assert_int_equal(json_object_array_length(json_object_object_get(
				 json_object_object_get(slice_at(1), "spec"), "devices")),
			 4);
	assert_pool(1);
}

static void delete_it(const char *name)
{
	server_delete(name, true);
}

static void edit_it(const char *name)
{
	edit_slice(srv.slices[find_slice(name)]);
}

/* Someone deletes, or edits, a slice between the server storing our update
 * of it and our reading the answer: the watch brings that first, and the
 * older answer must not put back what we believe the server holds. Seen in
 * the end-to-end test under load: the deleted slice stayed deleted. */
static void race_after_our_update(void (*race)(const char *name), int want_creates)
{
	int from;

	published();
	from = n_kcalls;
	edit_slice(slice_at(1)); /* an edit: the repair is our update */
	srv.race = race;
	settle(5000);
	assert_null(srv.race); /* it ran */
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
	assert_int_equal(count_calls(KUBE_CREATE, from), want_creates);
	assert_int_equal(json_object_array_length(json_object_object_get(
				 json_object_object_get(slice_at(1), "spec"), "devices")),
			 4);
}

static void test_a_delete_seen_before_our_update_answer_is_repaired(void **st)
{
	race_after_our_update(delete_it, 1);
}

static void test_an_edit_seen_before_our_update_answer_is_repaired(void **st)
{
	race_after_our_update(edit_it, 0);
}

/* Someone stores a slice of the name we just deleted (same driver and node)
 * before our delete's answer arrives: the answer must not erase it from what
 * we believe the server holds, or it would stay. */
static void recreate_it(const char *name)
{
	struct json_object *o = copy(slice_at(0));

	set_meta(o, "name", name);
	set_meta(o, "uid", "00000000-0000-4000-8000-0000000000fe");
	server_put(o, true);
}

static void test_a_slice_recreated_before_our_delete_answer_is_deleted(void **st)
{
	struct json_object *extra;
	int from;

	published();
	extra = copy(slice_at(3));
	set_meta(extra, "name", "0000b-dra.cpu-node-1-stale");
	set_meta(extra, "uid", "00000000-0000-4000-8000-0000000000fd");
	from = n_kcalls;
	srv.race = recreate_it;
	server_put(extra, true);
	settle(5000);
	assert_null(srv.race); /* it ran */
	assert_int_equal(count_calls(KUBE_DELETE, from), 2);
	assert_int_equal(find_slice("0000b-dra.cpu-node-1-stale"), -1);
	assert_int_equal(n_slices(), 4);
	assert_true(fx.in_sync);
}

static void test_obsolete_slices_are_deleted_with_preconditions(void **st)
{
	struct json_object *extra;
	int from;

	published();
	extra = copy(slice_at(3));
	set_meta(extra, "name", "00009-dra.cpu-node-1-stale");
	set_meta(extra, "uid", "00000000-0000-4000-8000-0000000000ff");
	server_put(extra, true);
	from = n_kcalls;
	settle(2000);
	assert_int_equal(count_calls(KUBE_DELETE, from), 1);
	for (int i = from; i < n_kcalls; i++)
		if (kcalls[i].verb == KUBE_DELETE) {
			assert_non_null(strstr(kcalls[i].path, "00009-dra.cpu-node-1-stale"));
			assert_string_equal(kcalls[i].pre_uid, "00000000-0000-4000-8000-0000000000ff");
			assert_true(kcalls[i].pre_rv[0]);
		}
	assert_int_equal(n_slices(), 4);
	assert_true(fx.in_sync);
}

static void test_delete_of_a_slice_already_gone_is_success(void **st)
{
	struct json_object *extra;
	struct kube_call *c;

	published();
	extra = copy(slice_at(0));
	set_meta(extra, "name", "0000a-dra.cpu-node-1-gone");
	server_put(extra, true);
	faketimer_advance(1000);
	c = pending();
	assert_int_equal(c->verb, KUBE_DELETE);
	server_delete("0000a-dra.cpu-node-1-gone", false); /* someone was faster */
	serve_one(c);					 /* 404 */
	settle(0);
	assert_true(fx.in_sync);
	assert_null(pending());
	assert_int_equal(count_calls(KUBE_GET, 0), 2); /* no relist */
}

/* ---- conflicts and failures ------------------------------------------------------------------ */

static void test_conflict_on_update_relists_and_recovers(void **st)
{
	struct json_object *o;
	struct kube_call *c;
	int from, lists;

	published();
	o = copy(slice_at(1));
	json_object_object_add(json_object_object_get(o, "spec"), "devices",
			       json_object_new_array());
	server_put(o, true);
	faketimer_advance(1000);
	c = pending();
	assert_int_equal(c->verb, KUBE_UPDATE);
	/* someone else writes again before our update lands, and we do not hear of it */
	server_put(copy(slice_at(1)), false);
	from = n_kcalls;
	lists = count_calls(KUBE_GET, 0);
	serve_one(c); /* 409 */
	assert_true(in_sync_gauge() == 0);
	assert_true(fx.in_sync); /* still ready: the repair has 30 s */
	assert_null(watching()); /* dropped: the state is relisted */
	assert_null(pending());	 /* after a backoff */
	settle(1000);
	assert_int_equal(count_calls(KUBE_GET, 0), lists + 1);
	assert_non_null(watching());
	assert_true(fx.in_sync);
	assert_int_equal(count_calls(KUBE_UPDATE, from), 1);
	assert_int_equal(json_object_array_length(json_object_object_get(
				 json_object_object_get(slice_at(1), "spec"), "devices")),
			 4);
}

static void test_create_refused_retries_after_backoff(void **st)
{
	start_publisher();
	serve_one(pending()); /* node */
	serve_one(pending()); /* list */
	faketimer_advance(0);
	assert_int_equal(pending()->verb, KUBE_CREATE);
	fail_call(pending(), 422, -1);
	assert_false(fx.in_sync);
	assert_null(pending());
	settle(1000);
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
}

/* Fails every request for `minutes` of virtual time; returns the delays
 * between consecutive attempts (ms) in *gaps. */
static int fail_for(int64_t minutes, long http, int64_t *gaps, int max)
{
	int64_t end = faketimer_now() + minutes * 60000, last = -1, at = 0;
	int n = 0;

	while (faketimer_now() < end) {
		struct kube_call *c = pending();

		if (c) {
			if (last >= 0 && n < max)
				gaps[n++] = c->at - last;
			last = c->at;
			fail_call(c, http, -1);
			continue;
		}
		assert_non_null(faketimer_next(&at));
		faketimer_advance(at - faketimer_now());
	}
	return n;
}

static void test_api_failing_for_minutes_backs_off_and_recovers(void **st)
{
	int64_t gaps[200];
	int n, from, changes;

	published();
	changes = fx.state_changes;
	/* the watch breaks and the server answers 503 for ten minutes */
	watch_end(watching(), 503, -EAGAIN);
	n = fail_for(10, 503, gaps, (int)ARRAY_SIZE(gaps));
	/* exponential, jittered, capped at 30 s: tens of attempts, not thousands */
	assert_true(n >= 19 && n <= 40);
	for (int i = 0; i < n; i++) {
		assert_true(gaps[i] >= 100);
		assert_true(gaps[i] <= 30000);
	}
	assert_true(gaps[n - 1] >= 15000); /* at the cap by now */
	assert_true(gaps[0] < gaps[6]);
	/* an outage alone says nothing about the slices: still in sync */
	assert_true(fx.in_sync);
	assert_int_equal(fx.state_changes, changes);
	/* the server is back: the next attempt lists, watches and finds all in place */
	from = n_kcalls;
	settle(30000);
	assert_true(fx.in_sync);
	assert_non_null(watching());
	assert_int_equal(count_writes(from), 0);
	/* and once the watch has held for 10 s the backoff starts small again */
	settle(10000);
	watch_end(watching(), 503, -EAGAIN);
	assert_true(faketimer_next(NULL) != NULL);
	{
		int64_t at = 0;

		(void)faketimer_next(&at);
		assert_true(at - faketimer_now() <= 200);
	}
}

static void test_node_get_failures_retry_until_the_node_exists(void **st)
{
	int64_t gaps[50];
	int n;

	start_publisher();
	n = fail_for(2, 404, gaps, (int)ARRAY_SIZE(gaps));
	assert_true(n > 5);
	for (int i = 0; i < n; i++)
		assert_true(gaps[i] <= 30000);
	settle(30000);
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
}

static void test_retry_after_is_honoured(void **st)
{
	int64_t at = 0;

	start_publisher();
	serve_one(pending()); /* node */
	fail_call(pending(), 429, 7);
	assert_non_null(faketimer_next(&at));
	assert_true(at - faketimer_now() >= 7000);
	faketimer_advance(6999);
	assert_null(pending());
	settle(30000);
	assert_true(fx.in_sync);
}

/* ---- the watch ------------------------------------------------------------------------------- */

static void test_watch_end_resumes_from_the_last_resource_version(void **st)
{
	struct kube_watch *w;
	int lists;

	published();
	lists = count_calls(KUBE_GET, 0);
	w = watching();
	watch_event(w, KUBE_EVENT_BOOKMARK, NULL, "5000");
	watch_end(w, 200, 0);
	w = watching();
	assert_non_null(w);
	assert_non_null(strstr(w->path, "resourceVersion=5000"));
	assert_int_equal(count_calls(KUBE_GET, 0), lists);
}

static void test_expired_watch_relists(void **st)
{
	int lists;

	published();
	lists = count_calls(KUBE_GET, 0);
	watch_end(watching(), 200, -ESTALE);
	assert_null(watching());
	settle(1000);
	assert_int_equal(count_calls(KUBE_GET, 0), lists + 1);
	assert_non_null(watching());
	assert_true(fx.in_sync);
}

static void test_watch_ending_at_once_is_not_a_hot_loop(void **st)
{
	int64_t t0;
	int watches;

	/* A proxy that closes every watch stream at once with 200 and no event
	 * must not make us re-watch as fast as the loop turns. */
	published();
	t0 = faketimer_now();
	watches = n_kwatches;
	for (int i = 0; i < 50; i++) {
		struct kube_watch *w = watching();
		int64_t at = 0;

		if (w) {
			watch_end(w, 200, 0);
			continue;
		}
		if (pending()) {
			serve_one(pending());
			continue;
		}
		assert_non_null(faketimer_next(&at));
		faketimer_advance(at - faketimer_now());
	}
	/* at most a handful of watches per virtual second on average */
	assert_true(n_kwatches - watches <= 5 * (faketimer_now() - t0) / 1000 + 5);
	assert_true(faketimer_now() - t0 >= 10000);
}

/* Every watch fails (410) right after its LIST, whose sync writes nothing:
 * the relists back off to the cap instead of one every 200 ms. */
static void test_watch_failing_after_every_list_backs_off(void **st)
{
	int64_t t0;
	int lists;

	published();
	t0 = faketimer_now();
	lists = count_calls(KUBE_GET, 0);
	for (int i = 0; i < 60; i++) {
		struct kube_watch *w = watching();
		int64_t at = 0;

		if (w) {
			settle(0); /* the sync after the LIST runs first, writing nothing */
			watch_end(watching(), 200, -ESTALE);
			continue;
		}
		if (pending()) {
			serve_one(pending());
			continue;
		}
		assert_non_null(faketimer_next(&at));
		faketimer_advance(at - faketimer_now());
	}
	lists = count_calls(KUBE_GET, 0) - lists;
	/* 20 relists: at least 100+200+...+15000 ms of half-jittered delays */
	assert_true(lists >= 15);
	assert_true(faketimer_now() - t0 >= 100000);
}

static void test_watch_failing_during_a_sync_never_runs_two_requests(void **st)
{
	struct kube_call *c;

	start_publisher();
	serve_one(pending()); /* node */
	serve_one(pending()); /* list */
	faketimer_advance(0);
	c = pending();
	assert_int_equal(c->verb, KUBE_CREATE);
	/* the watch dies while the first create is in flight */
	watch_end(watching(), 0, -ECONNRESET);
	faketimer_advance(30000); /* the retry falls due while the create still waits */
	/* the relist replaced the write: never two requests at once (teardown checks) */
	assert_true(c->cancelled || !pending() || pending() == c);
	settle(60000);
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
}

/* ---- readiness ------------------------------------------------------------------------------ */

/* Fails every write (create, update, delete) with http until ms of virtual
 * time have passed; lists, the node and the watch are served. */
static void fail_writes_for(int64_t ms, long http)
{
	int64_t end = faketimer_now() + ms, at = 0;

	while (faketimer_now() < end) {
		struct kube_call *c = pending();

		if (c) {
			if (c->verb == KUBE_GET)
				serve_one(c);
			else
				fail_call(c, http, -1);
			continue;
		}
		if (!faketimer_next(&at) || at > end)
			break;
		faketimer_advance(at - faketimer_now());
	}
	if (end > faketimer_now())
		faketimer_advance(end - faketimer_now());
}

/* The kubelet wipes the slices at its start and they come back at once:
 * known out of sync for a moment (the gauge says so), ready throughout. */
static void test_a_repair_within_the_bound_is_no_readiness_event(void **st)
{
	struct kube_call *c;
	int changes;

	published();
	changes = fx.state_changes;
	server_delete(meta(slice_at(0), "name"), true);
	server_delete(meta(slice_at(3), "name"), true);
	faketimer_advance(1000);
	c = pending();
	assert_non_null(c);
	assert_true(in_sync_gauge() == 0);
	/* the server takes its time over the repair: 29 s */
	faketimer_advance(29000);
	assert_true(fx.in_sync);
	settle(0);
	assert_true(in_sync_gauge() == 1);
	assert_true(fx.in_sync);
	assert_int_equal(fx.state_changes, changes);
	assert_int_equal(n_slices(), 4);
}

/* Slices deleted on the server, and every repair refused (RBAC lost: 403)
 * for longer than the bound: not ready from the bound on, ready again at
 * the first sync that leaves them right. */
static void test_repairs_failing_past_the_bound_turn_unready_until_right(void **st)
{
	int changes;

	published();
	changes = fx.state_changes;
	server_delete(meta(slice_at(1), "name"), true);
	faketimer_advance(1000); /* the resync delay: the sync plans its writes now */
	fail_writes_for(29900, 403);
	assert_true(fx.in_sync);
	assert_int_equal(fx.state_changes, changes);
	fail_writes_for(200, 403);
	assert_false(fx.in_sync);
	assert_int_equal(fx.state_changes, changes + 1);
	fail_writes_for(5 * 60000, 403); /* and stays so */
	assert_false(fx.in_sync);
	assert_int_equal(fx.state_changes, changes + 1);
	settle(60000); /* the server takes writes again */
	assert_true(fx.in_sync);
	assert_true(in_sync_gauge() == 1);
	assert_int_equal(fx.state_changes, changes + 2);
	assert_int_equal(n_slices(), 4);
	assert_pool(2);
}

/* Every slice gone, creates refused as invalid (422): the same, and the
 * bound counts from the latest break, not from an earlier repaired one. */
static void test_all_slices_gone_and_creates_refused_turn_unready(void **st)
{
	int changes;

	published();
	changes = fx.state_changes;
	server_delete(meta(slice_at(2), "name"), true);
	/* 5 s of refusals: the backoff (jittered, 0.2 s doubling) brings the
	 * next attempt within 14 s of the break, well inside the bound */
	fail_writes_for(5000, 422);
	settle(30000);
	assert_true(fx.in_sync);
	assert_int_equal(fx.state_changes, changes);
	for (int i = 0; i < 4; i++)
		server_delete(meta(slice_at(i), "name"), true);
	fail_writes_for(20000, 422);
	assert_true(fx.in_sync); /* 20 s into this break, not 40 s into both */
	fail_writes_for(11000, 422);
	assert_false(fx.in_sync);
	settle(60000);
	assert_true(fx.in_sync);
	assert_int_equal(n_slices(), 4);
}

/* Before the first complete publication the node is not ready, however
 * long that takes; the repair bound starts only after it. */
static void test_not_ready_until_first_published(void **st)
{
	start_publisher();
	fail_writes_for(10 * 60000, 403);
	assert_false(fx.in_sync);
	assert_int_equal(fx.state_changes, 0);
	settle(60000);
	assert_true(fx.in_sync);
	assert_int_equal(fx.state_changes, 1);
}

/* ---- fields the server drops, and the end ----------------------------------------------- */

static void test_fields_the_server_drops_are_adopted_not_fought(void **st)
{
	int from;

	srv.drop_attr = "dra.cpu/numCPUs";
	start_publisher();
	settle(0);
	assert_true(fx.in_sync);
	from = n_kcalls;
	settle(60000); /* echoes, resyncs: nothing to fight over */
	assert_int_equal(count_writes(from), 0);
}

static void test_free_cancels_the_request_and_the_watch(void **st)
{
	struct kube_call *c;
	struct kube_watch *w;

	start_publisher();
	serve_one(pending());
	serve_one(pending());
	faketimer_advance(0);
	c = pending();
	w = watching();
	assert_non_null(c);
	assert_non_null(w);
	fx.pub = publisher_free(fx.pub);
	assert_true(c->cancelled);
	assert_true(w->stopped);
	assert_int_equal(faketimer_count(), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_first_start_gets_node_lists_watches_then_creates),
		T(test_identical_restart_writes_nothing),
		T(test_rt_capacity_change_rewrites_the_slice_at_once),
		T(test_watch_event_deleting_our_slice_is_repaired),
		T(test_watch_event_editing_our_slice_is_repaired),
		T(test_a_delete_seen_before_our_update_answer_is_repaired),
		T(test_an_edit_seen_before_our_update_answer_is_repaired),
		T(test_a_slice_recreated_before_our_delete_answer_is_deleted),
		T(test_obsolete_slices_are_deleted_with_preconditions),
		T(test_delete_of_a_slice_already_gone_is_success),
		T(test_conflict_on_update_relists_and_recovers),
		T(test_create_refused_retries_after_backoff),
		T(test_api_failing_for_minutes_backs_off_and_recovers),
		T(test_node_get_failures_retry_until_the_node_exists),
		T(test_retry_after_is_honoured),
		T(test_watch_end_resumes_from_the_last_resource_version),
		T(test_expired_watch_relists),
		T(test_watch_ending_at_once_is_not_a_hot_loop),
		T(test_watch_failing_after_every_list_backs_off),
		T(test_watch_failing_during_a_sync_never_runs_two_requests),
		T(test_a_repair_within_the_bound_is_no_readiness_event),
		T(test_repairs_failing_past_the_bound_turn_unready_until_right),
		T(test_all_slices_gone_and_creates_refused_turn_unready),
		T(test_not_ready_until_first_published),
		T(test_fields_the_server_drops_are_adopted_not_fought),
		T(test_free_cancels_the_request_and_the_watch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
