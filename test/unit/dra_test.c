/* wrap: grpc_server_add_method grpc_server_add_watch_method grpc_server_listen_unix grpc_call_reply grpc_call_fail grpc_call_on_cancel grpc_call_deadline_left_ms grpc_call_send_latest fileio_write_atomic cdi_spec_remove event_add event_del event_pending event_free */
/* dra: the Prepare/Unprepare state machine, driven without sockets.
 *
 * The kubelet is played by hand: the method handlers the plugin registers are
 * captured and called with encoded requests on fake call handles (their
 * replies, failures, cancel callbacks and deadlines are the test's). The API
 * server is the claim source the plugin is given: each fetch waits until
 * the test completes it with a claim, an error, or never. Time is virtual
 * (faketimer.h); the next loop turn is event_base_loop(NONBLOCK). State, CDI
 * specs and the checkpoint are real files in a temporary directory; their
 * writes can be made to fail.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "core/cdi.h"
#include "core/claimsource.h"
#include "core/devices.h"
#include "core/rt.h"
#include "core/state.h"
#include "faketimer.h"
#include "kubelet/dra.h"
#include "kubelet/grpc.h"
#include "kubelet_dra_health_v1.pb-c.h"
#include "kubelet_dra_health_v1alpha1.pb-c.h"
#include "kubelet_dra_v1.pb-c.h"
#include "lib/clock.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "testutil.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareClaimResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;

#define PATH_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define PATH_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
#define UID_A "6f0c1c4e-0000-4000-8000-00000000000a"
#define UID_B "6f0c1c4e-0000-4000-8000-00000000000b"

/* ---- the kubelet side: captured handlers, fake calls ------------------------------------ */

struct grpc_call {
	int64_t deadline_left; /* what the plugin reads as the client's deadline */
	grpc_cancel_fn on_cancel;
	void *cancel_ud;
	bool done, cancelled;
	enum grpc_status status;
	char message[512];
	uint8_t *reply;
	size_t reply_len;
	PrepareResponse *prep;	   /* decoded reply, Prepare */
	UnprepareResponse *unprep; /* decoded reply, Unprepare */
};

static struct {
	char path[128];
	grpc_handler_fn fn;
	void *ud;
} methods[16];
static int n_methods;
static struct grpc_call calls[600];
static int n_calls;

int __real_grpc_server_add_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
				  void *userdata);

int __wrap_grpc_server_add_method(struct grpc_server *srv, const char *path, grpc_handler_fn fn,
				  void *userdata)
{
	assert_true(n_methods < (int)ARRAY_SIZE(methods));
	snprintf(methods[n_methods].path, sizeof(methods[0].path), "%s", path);
	methods[n_methods].fn = fn;
	methods[n_methods].ud = userdata;
	n_methods++;
	return __real_grpc_server_add_method(srv, path, fn, userdata);
}

int __real_grpc_server_add_watch_method(struct grpc_server *srv, const char *path,
					grpc_handler_fn fn, void *userdata);
int __wrap_grpc_server_add_watch_method(struct grpc_server *srv, const char *path,
					grpc_handler_fn fn, void *userdata)
{
	assert_true(n_methods < (int)ARRAY_SIZE(methods));
	snprintf(methods[n_methods].path, sizeof(methods[0].path), "%s", path);
	methods[n_methods].fn = fn;
	methods[n_methods].ud = userdata;
	n_methods++;
	return __real_grpc_server_add_watch_method(srv, path, fn, userdata);
}

int __wrap_grpc_server_listen_unix(struct grpc_server *srv, const char *path, mode_t mode)
{
	return 0; /* no sockets: the tests call the handlers */
}

int __wrap_grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	assert_false(call->done); /* completed exactly once */
	call->done = true;
	call->status = GRPC_STATUS_OK;
	call->reply = malloc(len ? len : 1);
	assert_non_null(call->reply);
	memcpy(call->reply, msg, len);
	call->reply_len = len;
	return 0;
}

int __wrap_grpc_call_fail(struct grpc_call *call, enum grpc_status code, const char *msg)
{
	assert_false(call->done);
	call->done = true;
	call->status = code;
	snprintf(call->message, sizeof(call->message), "%s", msg ? msg : "");
	return 0;
}

void __wrap_grpc_call_on_cancel(struct grpc_call *call, grpc_cancel_fn fn, void *userdata)
{
	call->on_cancel = fn;
	call->cancel_ud = userdata;
}

int64_t __wrap_grpc_call_deadline_left_ms(const struct grpc_call *call)
{
	return call->deadline_left;
}

/* The last health snapshot a stream got, packed. */
static uint8_t sent_pb[1 << 16];
static size_t sent_len;
static int n_sent;

int __wrap_grpc_call_send_latest(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	assert_true(len <= sizeof(sent_pb));
	memcpy(sent_pb, msg, len);
	sent_len = len;
	n_sent++;
	return 0;
}

static grpc_handler_fn method(const char *path, void **ud)
{
	for (int i = 0; i < n_methods; i++)
		if (!strcmp(methods[i].path, path)) {
			*ud = methods[i].ud;
			return methods[i].fn;
		}
	fail_msg("no handler for %s", path);
	return NULL;
}

static struct grpc_call *new_call(int64_t deadline_left)
{
	struct grpc_call *c;

	assert_true(n_calls < (int)ARRAY_SIZE(calls));
	c = &calls[n_calls++];
	memset(c, 0, sizeof(*c));
	c->deadline_left = deadline_left;
	return c;
}

/* The kubelet resets the stream: the plugin's cancel callback, if any. */
static void kubelet_cancel(struct grpc_call *c)
{
	assert_false(c->done);
	c->done = c->cancelled = true;
	if (c->on_cancel)
		c->on_cancel(c, c->cancel_ud);
}

/* One claim reference as the kubelet sends it. */
struct ref {
	const char *ns, *name, *uid;
};

static struct grpc_call *prepare_call(const char *path, int64_t deadline_left, int n,
				      const struct ref *refs)
{
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest rq =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cl = calloc((size_t)n + 1, sizeof(*cl));
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim **clp = calloc((size_t)n + 1, sizeof(*clp));
	struct grpc_call *c = new_call(deadline_left);
	grpc_handler_fn fn;
	uint8_t *buf;
	size_t len;
	void *ud;

	assert_true(cl && clp);
	for (int i = 0; i < n; i++) {
		k8s__io__kubelet__pkg__apis__dra__v1__claim__init(&cl[i]);
		cl[i].namespace_ = (char *)refs[i].ns;
		cl[i].name = (char *)refs[i].name;
		cl[i].uid = (char *)refs[i].uid;
		clp[i] = &cl[i];
	}
	rq.n_claims = (size_t)n;
	rq.claims = clp;
	len = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__get_packed_size(&rq);
	buf = malloc(len + 1);
	assert_non_null(buf);
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__pack(&rq, buf);
	fn = method(path, &ud);
	fn(c, buf, len, ud);
	free(buf);
	free(cl);
	free(clp);
	return c;
}

static struct grpc_call *prepare(const char *name, const char *uid)
{
	struct ref r = { "default", name, uid };

	return prepare_call(PATH_V1 "NodePrepareResources", -1, 1, &r);
}

static struct grpc_call *unprepare(const char *uid)
{
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest rq =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_REQUEST__INIT;
	K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim cl =
		K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT, *clp = &cl;
	struct grpc_call *c = new_call(-1);
	grpc_handler_fn fn;
	uint8_t buf[512];
	size_t len;
	void *ud;

	cl.namespace_ = "default";
	cl.name = "x";
	cl.uid = (char *)uid;
	rq.n_claims = 1;
	rq.claims = &clp;
	len = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__pack(&rq, buf);
	fn = method(PATH_V1 "NodeUnprepareResources", &ud);
	fn(c, buf, len, ud);
	assert_true(c->done);
	assert_int_equal(c->status, GRPC_STATUS_OK);
	c->unprep = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__unpack(
		NULL, c->reply_len, c->reply);
	assert_non_null(c->unprep);
	return c;
}

static const char *unprepare_error(struct grpc_call *c, const char *uid)
{
	for (size_t i = 0; i < c->unprep->n_claims; i++)
		if (!strcmp(c->unprep->claims[i]->key, uid))
			return c->unprep->claims[i]->value->error;
	fail_msg("no unprepare result for %s", uid);
	return NULL;
}

/* The claim's result in a completed Prepare reply. */
static PrepareClaimResponse *result(struct grpc_call *c, const char *uid)
{
	assert_true(c->done);
	assert_false(c->cancelled);
	assert_int_equal(c->status, GRPC_STATUS_OK);
	if (!c->prep) {
		c->prep = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(
			NULL, c->reply_len, c->reply);
		assert_non_null(c->prep);
	}
	for (size_t i = 0; i < c->prep->n_claims; i++)
		if (!strcmp(c->prep->claims[i]->key, uid))
			return c->prep->claims[i]->value;
	fail_msg("no result for %s", uid);
	return NULL;
}

static const char *error_of(struct grpc_call *c, const char *uid)
{
	return result(c, uid)->error;
}

static void assert_error_has(struct grpc_call *c, const char *uid, const char *want)
{
	const char *e = error_of(c, uid);

	if (!strstr(e, want))
		fail_msg("error \"%s\" lacks \"%s\"", e, want);
}

/* ---- the API server side: fetches the test completes ------------------------------------ */

struct fetch {
	bool live, cancelled;
	char ns[64], name[256];
	int64_t timeout_ms;
	claimsource_cb cb;
	void *cb_ud;
};

static struct fetch fetches[600];
static int n_fetches;
static int fetch_start_error; /* next start fails with this */

/* A fetch's timeout is what is left of the call's budget when it starts, on
 * the real clock: the budget less the time between the call and the fetch,
 * which the caller measured from since_ms (clock_now_ms() before the call).
 * Under 1 ms natively, tens of ms under qemu-user: never more than measured. */
static void assert_fetch_timeout(const struct fetch *f, int64_t budget, int64_t since_ms)
{
	int64_t elapsed = clock_now_ms() - since_ms;

	if (f->timeout_ms > budget || f->timeout_ms < budget - elapsed)
		fail_msg("fetch timeout %" PRId64 " ms: not within %" PRId64 " ms of %" PRId64,
			 f->timeout_ms, elapsed, budget);
}

static int ff_start(void *ud, const char *ns, const char *name, int64_t timeout_ms,
		    claimsource_cb cb, void *cb_ud, void **ret)
{
	struct fetch *f;

	if (fetch_start_error) {
		int r = fetch_start_error;

		fetch_start_error = 0;
		return r;
	}
	assert_true(n_fetches < (int)ARRAY_SIZE(fetches));
	f = &fetches[n_fetches++];
	memset(f, 0, sizeof(*f));
	f->live = true;
	snprintf(f->ns, sizeof(f->ns), "%s", ns);
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->timeout_ms = timeout_ms;
	f->cb = cb;
	f->cb_ud = cb_ud;
	*ret = f;
	return 0;
}

static void ff_cancel(void *ud, void *handle)
{
	struct fetch *f = handle;

	assert_true(f->live); /* never cancelled twice, never after its callback */
	f->live = false;
	f->cancelled = true;
}

static const struct claimsource fetch_ops = { .start = ff_start, .cancel = ff_cancel };

static int live_fetches(void)
{
	int n = 0;

	for (int i = 0; i < n_fetches; i++)
		n += fetches[i].live;
	return n;
}

static int cancelled_fetches(void)
{
	int n = 0;

	for (int i = 0; i < n_fetches; i++)
		n += fetches[i].cancelled;
	return n;
}

/* A ResourceClaim as GET returns it: NULL-terminated (request, device,
 * consumed) triples; consumed "" for none. */
static char *claim_json(const char *name, const char *uid, ...)
{
	char *s = NULL, *res = strdup("");
	const char *req;
	va_list ap;
	int n = 0;

	va_start(ap, uid);
	while ((req = va_arg(ap, const char *))) {
		const char *dev = va_arg(ap, const char *), *consumed = va_arg(ap, const char *);
		char *cap = NULL, *next = NULL;

		if (*consumed)
			assert_true(asprintf(&cap, ",\"consumedCapacity\":{\"dra.cpu/cpu\":\"%s\"},"
						   "\"shareID\":\"share-%d\"",
					     consumed, n) > 0);
		assert_true(asprintf(&next,
				     "%s%s{\"request\":\"%s\",\"driver\":\"dra.cpu\",\"pool\":"
				     "\"node-1\",\"device\":\"%s\"%s}",
				     res, n ? "," : "", req, dev, cap ? cap : "") > 0);
		free(cap);
		free(res);
		res = next;
		n++;
	}
	va_end(ap);
	assert_true(asprintf(&s,
			     "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
			     "\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"%s\"},"
			     "\"status\":{\"allocation\":{\"devices\":{\"results\":[%s]}}}}",
			     name, uid, res) > 0);
	free(res);
	return s;
}

/* The API server answers fetch f: a claim (JSON, freed here) or an error. */
static void complete(struct fetch *f, char *json, const char *err)
{
	struct json_object *o = json ? json_tokener_parse(json) : NULL;

	assert_true(f->live);
	assert_true(!json || o);
	f->live = false;
	f->cb(f->cb_ud, o, err);
	json_object_put(o);
	free(json);
}

/* ---- fixture ------------------------------------------------------------------------------ */

static struct {
	struct event_base *base;
	struct topo *topo;
	struct devices *devices;
	struct state *state;
	struct metrics *metrics;
	struct dra *dra;
	char root[64], cdi[96], st[96];
	/* write faults */
	char fail_name[64]; /* fileio_write_atomic of a name with this prefix fails */
	int fail_errno;
	int remove_errno; /* cdi_spec_remove fails with this */
} fx;

int __real_fileio_write_atomic(const char *dir, const char *name, const char *data, size_t len,
			       mode_t mode);

int __wrap_fileio_write_atomic(const char *dir, const char *name, const char *data, size_t len,
			       mode_t mode)
{
	if (fx.fail_name[0] && !strncmp(name, fx.fail_name, strlen(fx.fail_name)))
		return -fx.fail_errno;
	return __real_fileio_write_atomic(dir, name, data, len, mode);
}

int __real_cdi_spec_remove(const char *dir, const char *uid);

int __wrap_cdi_spec_remove(const char *dir, const char *uid)
{
	if (fx.remove_errno)
		return -fx.remove_errno;
	return __real_cdi_spec_remove(dir, uid);
}

/* A 16-CPU node (2 NUMA nodes of 4 cores x 2 threads): cpudevnuma000 holds
 * CPUs 0-3,8-11, cpudevnuma001 4-7,12-15; individual mode: cpudev000.. */
static void start_with(int mode, int max_fetches, const struct isol *iso)
{
	struct state_opts so = { 0 };
	struct dra_opts o = { .node = "node-1", .device_mode = mode, .claims = &fetch_ops,
			      .max_fetches = max_fetches };

	assert_int_equal(devices_build_isol(fx.topo, NULL, iso, mode, DEVICES_BY_NUMANODE,
					    &fx.devices),
			 0);
	so.cdi_dir = fx.cdi;
	so.state_dir = fx.st;
	so.allocatable = fx.topo->online;
	so.isolated = fx.devices->isolated;
	assert_int_equal(state_new(&so, &fx.state), 0);
	assert_int_equal(state_load(fx.state), 0);
	o.kubelet_root = fx.root;
	assert_int_equal(dra_new(fx.base, &o, fx.state, fx.topo, fx.devices, fx.metrics, &fx.dra),
			 0);
}

static void start(int mode, int max_fetches)
{
	start_with(mode, max_fetches, NULL);
}

static int setup(void **st)
{
	memset(&fx, 0, sizeof(fx));
	n_methods = n_calls = n_fetches = 0;
	fetch_start_error = 0;
	faketimer_reset();
	log_set_level(LOG_ERROR);
	snprintf(fx.root, sizeof(fx.root), "/dev/shm/dra-test.XXXXXX");
	if (!mkdtemp(fx.root))
		return -1;
	snprintf(fx.cdi, sizeof(fx.cdi), "%s/cdi", fx.root);
	snprintf(fx.st, sizeof(fx.st), "%s/state", fx.root);
	fx.base = event_base_new();
	fx.topo = testutil_topo(1, 2, 4, 2);
	if (!fx.base || metrics_new(&fx.metrics) < 0)
		return -1;
	return 0;
}

static int teardown(void **st)
{
	char cmd[128];

	dra_free(fx.dra);
	state_free(fx.state);
	devices_free(fx.devices);
	metrics_free(fx.metrics);
	topo_free(fx.topo);
	event_base_free(fx.base);
	for (int i = 0; i < n_calls; i++) {
		free(calls[i].reply);
		if (calls[i].prep)
			k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(
				calls[i].prep, NULL);
		if (calls[i].unprep)
			k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
				calls[i].unprep, NULL);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx.root);
	return system(cmd) == 0 ? 0 : -1;
}

/* The next loop turn: queued fetches start. */
static void turn(void)
{
	assert_true(event_base_loop(fx.base, EVLOOP_NONBLOCK) >= 0); /* 1: nothing to run */
}

static bool has_spec(const char *uid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/dra.k8s.io-cpu_claim-%s.json", fx.cdi, uid);
	return access(path, F_OK) == 0;
}

static struct cpuset claim_cpus(const char *uid)
{
	const struct state_claim *c = state_claim(fx.state, uid);
	struct cpuset cpus;

	assert_non_null(c);
	return *cpuset_from_view(&c->cpus, &cpus);
}

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

static void assert_nothing_reserved(void)
{
	struct cpuset pool;

	assert_int_equal(state_claim_count(fx.state), 0);
	state_shared_pool(fx.state, &pool);
	assert_true(cpuset_equal(&pool, &fx.topo->online));
}

/* Prepares claim name/uid to one grouped result and completes it. */
static struct grpc_call *prepare_ok(const char *name, const char *uid, const char *dev,
				    const char *count)
{
	struct grpc_call *c = prepare(name, uid);

	turn();
	complete(&fetches[n_fetches - 1], claim_json(name, uid, "cpu", dev, count, NULL), NULL);
	assert_string_equal(error_of(c, uid), "");
	return c;
}

/* ---- the happy path ------------------------------------------------------------------------ */

static void test_prepare_fetches_decides_commits_and_replies(void **st)
{
	struct cpuset cpus, numa1 = cs("4-7,12-15");
	struct grpc_call *c;
	PrepareClaimResponse *r;
	int64_t t0;

	start(DEVICES_GROUPED, 0);
	t0 = clock_now_ms();
	c = prepare("db", UID_A);
	assert_false(c->done);
	assert_int_equal(n_fetches, 0); /* queued: fetches start on the next loop turn */
	turn();
	assert_int_equal(n_fetches, 1);
	assert_string_equal(fetches[0].ns, "default");
	assert_string_equal(fetches[0].name, "db");
	/* no kubelet deadline: ours, less the reply margin */
	assert_fetch_timeout(&fetches[0], DRA_PREPARE_TIMEOUT_MS - 1000, t0);
	assert_false(c->done);
	complete(&fetches[0], claim_json("db", UID_A, "cpu", "cpudevnuma001", "4", NULL), NULL);
	r = result(c, UID_A);
	assert_string_equal(r->error, "");
	assert_int_equal(r->n_devices, 1);
	assert_string_equal(r->devices[0]->pool_name, "node-1");
	assert_string_equal(r->devices[0]->device_name, "cpudevnuma001");
	assert_int_equal(r->devices[0]->n_request_names, 1);
	assert_string_equal(r->devices[0]->request_names[0], "cpu");
	assert_int_equal(r->devices[0]->n_cdi_device_ids, 1);
	assert_string_equal(r->devices[0]->cdi_device_ids[0], "dra.k8s.io/cpu=claim-" UID_A);
	assert_string_equal(r->devices[0]->share_id, "share-0");
	cpus = claim_cpus(UID_A);
	assert_int_equal(cpuset_count(&cpus), 4);
	assert_true(cpuset_is_subset(&cpus, &numa1));
	assert_true(has_spec(UID_A));
}

static void test_v1beta1_reply_carries_no_share_id(void **st)
{
	struct ref ref = { "default", "db", UID_A };
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare_call(PATH_V1BETA1 "NodePrepareResources", -1, 1, &ref);
	turn();
	complete(&fetches[0], claim_json("db", UID_A, "cpu", "cpudevnuma000", "2", NULL), NULL);
	assert_string_equal(error_of(c, UID_A), "");
	assert_string_equal(result(c, UID_A)->devices[0]->share_id, "");
}

static void test_claims_of_one_call_are_answered_together(void **st)
{
	struct ref refs[] = { { "default", "a", UID_A }, { "default", "b", UID_B } };
	struct grpc_call *c;
	struct cpuset a, b;

	start(DEVICES_GROUPED, 0);
	c = prepare_call(PATH_V1 "NodePrepareResources", -1, 2, refs);
	turn();
	assert_int_equal(n_fetches, 2);
	complete(&fetches[1], claim_json("b", UID_B, "cpu", "cpudevnuma000", "3", NULL), NULL);
	assert_false(c->done); /* one claim still fetching */
	complete(&fetches[0], claim_json("a", UID_A, "cpu", "cpudevnuma000", "3", NULL), NULL);
	assert_string_equal(error_of(c, UID_A), "");
	assert_string_equal(error_of(c, UID_B), "");
	a = claim_cpus(UID_A);
	b = claim_cpus(UID_B);
	assert_false(cpuset_intersects(&a, &b));
}

/* ---- fetch outcomes ------------------------------------------------------------------------ */

static void test_fetch_outcomes_are_claim_errors(void **st)
{
	static const struct {
		int start_error;   /* the fetch does not even start */
		const char *err;   /* the API server's error */
		const char *claim; /* or the claim it returns */
		const char *want;
	} cases[] = {
		{ -ECONNREFUSED, NULL, NULL, "getting ResourceClaim default/db: Connection refused" },
		{ 0, "GET resourceclaims/db: 404 NotFound: resourceclaims \"db\" not found", NULL,
		  "getting ResourceClaim default/db: GET resourceclaims/db: 404 NotFound" },
		{ 0, "connection reset by peer", NULL, "connection reset by peer" },
		{ 0, "", NULL, "unknown error" },
		{ 0, NULL, "{\"kind\":\"ResourceClaim\",\"metadata\":{\"uid\":\"" UID_B "\"}}",
		  "deleted and recreated" },
		{ 0, NULL,
		  "{\"metadata\":{\"uid\":\"" UID_A "\"},\"status\":{\"allocation\":{\"devices\":{"
		  "\"results\":[{\"request\":\"g\",\"driver\":\"gpu.example.com\",\"pool\":"
		  "\"node-1\",\"device\":\"gpu0\"}]}}}}",
		  "no results for driver dra.cpu" },
		{ 0, NULL, "{\"metadata\":{\"uid\":\"" UID_A "\"},\"status\":{}}", "not allocated" },
	};

	start(DEVICES_GROUPED, 0);
	assert_true(ARRAY_SIZE(cases) > 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct grpc_call *c;

		fetch_start_error = cases[i].start_error;
		c = prepare("db", UID_A);
		turn();
		if (!cases[i].start_error)
			complete(&fetches[n_fetches - 1],
				 cases[i].claim ? strdup(cases[i].claim) : NULL, cases[i].err);
		assert_true(c->done);
		if (!strstr(error_of(c, UID_A), cases[i].want))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, error_of(c, UID_A),
				 cases[i].want);
		assert_int_equal(result(c, UID_A)->n_devices, 0);
		assert_false(has_spec(UID_A));
		assert_nothing_reserved();
	}
}

static void test_decision_errors_commit_nothing(void **st)
{
	static const struct {
		const char *dev, *count, *want;
	} cases[] = {
		{ "cpudevnuma000", "9", "\"9\" exceeds 8 (device cpudevnuma000 has 8 CPUs)" },
		{ "cpudevnuma000", "0", "must be at least 1" },
		{ "cpudevnuma000", "1.5", "not a whole number" },
		{ "cpudevnuma000", "", "needs the DRAConsumableCapacity feature" },
		{ "cpudevnuma007", "1", "is not a device of this node" },
	};

	start(DEVICES_GROUPED, 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct grpc_call *c = prepare("db", UID_A);

		turn();
		complete(&fetches[n_fetches - 1],
			 claim_json("db", UID_A, "cpu", cases[i].dev, cases[i].count, NULL), NULL);
		if (!strstr(error_of(c, UID_A), cases[i].want))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, error_of(c, UID_A),
				 cases[i].want);
		assert_nothing_reserved();
		assert_false(has_spec(UID_A));
	}
}

static void test_reservation_conflicts_between_claims(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	(void)prepare_ok("a", UID_A, "cpudevnuma000", "6");
	c = prepare("b", UID_B);
	turn();
	complete(&fetches[1], claim_json("b", UID_B, "cpu", "cpudevnuma000", "3", NULL), NULL);
	assert_error_has(c, UID_B, "\"3\" is more than the 2 CPUs cpudevnuma000 has free");
	assert_int_equal(state_claim_count(fx.state), 1);
}

/* ---- commit failures ----------------------------------------------------------------------- */

static void test_cdi_write_failure_keeps_nothing(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	snprintf(fx.fail_name, sizeof(fx.fail_name), "dra.k8s.io-cpu_claim-");
	fx.fail_errno = ENOSPC;
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[0], claim_json("db", UID_A, "cpu", "cpudevnuma000", "4", NULL), NULL);
	assert_error_has(c, UID_A, "writing the CDI spec");
	assert_error_has(c, UID_A, "No space left on device");
	assert_nothing_reserved();
	assert_false(has_spec(UID_A));
	/* the kubelet's retry succeeds once the disk has room */
	fx.fail_name[0] = 0;
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	assert_true(has_spec(UID_A));
}

static void test_checkpoint_write_failure_rolls_back_the_cdi_spec(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	snprintf(fx.fail_name, sizeof(fx.fail_name), "checkpoint.json");
	fx.fail_errno = EIO;
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[0], claim_json("db", UID_A, "cpu", "cpudevnuma000", "4", NULL), NULL);
	assert_error_has(c, UID_A, "writing the checkpoint");
	assert_nothing_reserved();
	assert_false(has_spec(UID_A));
}

/* ---- idempotence and re-prepare ------------------------------------------------------------ */

static void test_repeated_prepare_is_idempotent(void **st)
{
	struct cpuset first, again;
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	first = claim_cpus(UID_A);
	for (int i = 0; i < 3; i++) {
		c = prepare_ok("db", UID_A, "cpudevnuma000", "4");
		assert_int_equal(result(c, UID_A)->n_devices, 1);
		again = claim_cpus(UID_A);
		assert_true(cpuset_equal(&first, &again));
	}
	assert_int_equal(state_claim_count(fx.state), 1);
}

static void test_grouped_reprepare_with_another_allocation_is_refused(void **st)
{
	static const struct {
		const char *req, *dev, *count, *req2, *dev2, *count2, *want;
	} cases[] = {
		{ "cpu", "cpudevnuma001", "4", NULL, NULL, NULL, "now request cpu: 4 of cpudevnuma001" },
		{ "cpu", "cpudevnuma000", "6", NULL, NULL, NULL, "now request cpu: 6 of cpudevnuma000" },
		{ "cpu", "cpudevnuma000", "2", NULL, NULL, NULL, "now request cpu: 2 of cpudevnuma000" },
		{ "other", "cpudevnuma000", "4", NULL, NULL, NULL, "now request other" },
		{ "cpu", "cpudevnuma000", "4", "more", "cpudevnuma001", "1", "with 1 results, its "
									    "allocation now has 2" },
	};
	struct cpuset held;

	start(DEVICES_GROUPED, 0);
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	held = claim_cpus(UID_A);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct grpc_call *c = prepare("db", UID_A);
		struct cpuset now;

		turn();
		complete(&fetches[n_fetches - 1],
			 cases[i].req2 ? claim_json("db", UID_A, cases[i].req, cases[i].dev,
						    cases[i].count, cases[i].req2, cases[i].dev2,
						    cases[i].count2, NULL)
				       : claim_json("db", UID_A, cases[i].req, cases[i].dev,
						    cases[i].count, NULL),
			 NULL);
		if (!strstr(error_of(c, UID_A), cases[i].want))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, error_of(c, UID_A),
				 cases[i].want);
		assert_error_has(c, UID_A, "unprepare it before preparing it again");
		assert_int_equal(result(c, UID_A)->n_devices, 0); /* never the old CPUs */
		now = claim_cpus(UID_A);
		assert_true(cpuset_equal(&now, &held)); /* the running pod keeps them */
	}
}

static void test_reprepare_of_a_claim_restored_from_its_cdi_spec(void **st)
{
	struct cpuset cpus = cs("0-1,8-9");
	struct grpc_call *c;

	/* A crash before the checkpoint: only the CDI spec tells what is held. */
	assert_int_equal(cdi_spec_write(fx.cdi, UID_A, &cpus), 0);
	start(DEVICES_GROUPED, 0);
	assert_int_equal(state_claim(fx.state, UID_A)->n_results, 0);
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[1], claim_json("db", UID_A, "cpu", "cpudevnuma001", "4", NULL), NULL);
	assert_error_has(c, UID_A, "already prepared with CPUs 0-1,8-9");
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[2], claim_json("db", UID_A, "cpu", "cpudevnuma000", "3", NULL), NULL);
	assert_error_has(c, UID_A, "already prepared with CPUs 0-1,8-9");
}

/* claim_json() with status.reservedFor set to the JSON list given. */
static char *reserved(char *json, const char *list)
{
	char *at = strstr(json, "\"status\":{"), *s = NULL;

	assert_non_null(at);
	at += strlen("\"status\":{");
	assert_true(asprintf(&s, "%.*s\"reservedFor\":%s,%s", (int)(at - json), json, list, at) > 0);
	free(json);
	return s;
}

#define POD_A "{\"resource\":\"pods\",\"name\":\"web-0\",\"uid\":\"pod-a\"}"
#define POD_B "{\"resource\":\"pods\",\"name\":\"web-1\",\"uid\":\"pod-b\"}"

static void test_prepare_records_the_pods_the_claim_is_reserved_for(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[0],
		 reserved(claim_json("db", UID_A, "cpu", "cpudevnuma000", "2", NULL), "[" POD_A "]"),
		 NULL);
	assert_string_equal(error_of(c, UID_A), "");
	assert_true(state_claim_has_consumer(state_claim(fx.state, UID_A), "pod-a", "default",
					     "web-0"));
	assert_false(state_claim_has_consumer(state_claim(fx.state, UID_A), "pod-b", "default",
					      "web-1"));
	/* a second pod of a shared claim: its Prepare records it too */
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[1],
		 reserved(claim_json("db", UID_A, "cpu", "cpudevnuma000", "2", NULL),
			  "[" POD_A "," POD_B "]"),
		 NULL);
	assert_string_equal(error_of(c, UID_A), "");
	assert_true(state_claim_has_consumer(state_claim(fx.state, UID_A), "pod-b", "default",
					     "web-1"));
	/* a claim reserved for nobody yet is prepared, for nobody */
	c = prepare("other", UID_B);
	turn();
	complete(&fetches[2], claim_json("other", UID_B, "cpu", "cpudevnuma001", "2", NULL), NULL);
	assert_string_equal(error_of(c, UID_B), "");
	assert_true(state_claim(fx.state, UID_B)->consumers_known);
	assert_int_equal(state_claim(fx.state, UID_B)->n_consumers, 0);
}

static void test_prepare_refuses_a_malformed_reserved_for(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[0],
		 reserved(claim_json("db", UID_A, "cpu", "cpudevnuma000", "2", NULL),
			  "[{\"resource\":\"pods\",\"name\":\"x\\nlevel=error\",\"uid\":\"p\"}]"),
		 NULL);
	assert_error_has(c, UID_A, "status.reservedFor[0] is not a pod's uid and name");
	assert_nothing_reserved();
	/* an already prepared claim keeps what it recorded */
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "2");
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[2],
		 reserved(claim_json("db", UID_A, "cpu", "cpudevnuma000", "2", NULL), "{}"), NULL);
	assert_error_has(c, UID_A, "status.reservedFor is not a list");
	assert_true(state_claim(fx.state, UID_A)->consumers_known);
}

static void test_individual_reprepare_must_name_the_same_cpus(void **st)
{
	struct grpc_call *c;

	start(DEVICES_INDIVIDUAL, 0);
	c = prepare("w", UID_A);
	turn();
	complete(&fetches[0], claim_json("w", UID_A, "cpus", "cpudev000", "", "cpus", "cpudev001",
					 "", NULL),
		 NULL);
	assert_string_equal(error_of(c, UID_A), "");
	c = prepare("w", UID_A);
	turn();
	complete(&fetches[1], claim_json("w", UID_A, "cpus", "cpudev000", "", "cpus", "cpudev001",
					 "", NULL),
		 NULL);
	assert_string_equal(error_of(c, UID_A), "");
	c = prepare("w", UID_A);
	turn();
	complete(&fetches[2], claim_json("w", UID_A, "cpus", "cpudev000", "", "cpus", "cpudev002",
					 "", NULL),
		 NULL);
	assert_error_has(c, UID_A, "another allocation");
	c = prepare("w", UID_A);
	turn();
	complete(&fetches[3], claim_json("w", UID_A, "cpus", "cpudev000", "", "cpus", "cpudev000",
					 "", NULL),
		 NULL);
	assert_error_has(c, UID_A, "another allocation");
	assert_int_equal(state_claim_count(fx.state), 1);
}

/* ---- cancellation, deadlines, Unprepare ---------------------------------------------------- */

static void test_kubelet_cancel_stops_the_fetch_and_commits_nothing(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare("db", UID_A);
	turn();
	assert_true(fetches[0].live);
	kubelet_cancel(c);
	assert_true(fetches[0].cancelled); /* its answer can never arrive */
	assert_null(c->reply);
	assert_nothing_reserved();
	assert_false(has_spec(UID_A));
	/* the kubelet's retry starts over */
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	assert_true(has_spec(UID_A));
}

static void test_cancel_of_a_queued_claim_never_fetches(void **st)
{
	struct grpc_call *a, *b;

	start(DEVICES_GROUPED, 1);
	a = prepare("a", UID_A);
	b = prepare("b", UID_B);
	turn();
	assert_int_equal(n_fetches, 1); /* one slot */
	kubelet_cancel(b);
	complete(&fetches[0], claim_json("a", UID_A, "cpu", "cpudevnuma000", "1", NULL), NULL);
	turn();
	assert_int_equal(n_fetches, 1);
	assert_string_equal(error_of(a, UID_A), "");
}

static void test_reset_flood_costs_no_fetch(void **st)
{
	struct grpc_call *c[500];
	char uids[500][40];

	start(DEVICES_GROUPED, 0);
	for (int i = 0; i < 500; i++) {
		snprintf(uids[i], sizeof(uids[i]), "6f0c1c4e-0000-4000-8000-%012d", i);
		c[i] = prepare("db", uids[i]);
	}
	/* the resets arrive with the requests, before the next loop turn */
	for (int i = 0; i < 500; i++)
		kubelet_cancel(c[i]);
	turn();
	assert_int_equal(n_fetches, 0);
}

static void test_fetches_in_flight_are_capped(void **st)
{
	struct ref refs[5] = { { "default", "c0", "u0" }, { "default", "c1", "u1" },
			       { "default", "c2", "u2" }, { "default", "c3", "u3" },
			       { "default", "c4", "u4" } };
	struct grpc_call *c;

	start(DEVICES_GROUPED, 2);
	c = prepare_call(PATH_V1 "NodePrepareResources", -1, 5, refs);
	turn();
	assert_int_equal(live_fetches(), 2);
	for (int done = 0; done < 5; done++) {
		struct fetch *f = NULL;

		for (int i = 0; i < n_fetches && !f; i++)
			if (fetches[i].live)
				f = &fetches[i];
		assert_non_null(f);
		complete(f, claim_json(f->name, refs[f->name[1] - '0'].uid, "cpu", "cpudevnuma000",
				       "1", NULL),
			 NULL);
		turn();
		assert_true(live_fetches() <= 2);
	}
	assert_int_equal(n_fetches, 5);
	for (int i = 0; i < 5; i++)
		assert_string_equal(error_of(c, refs[i].uid), "");
}

static void test_unprepare_supersedes_a_prepare_in_flight(void **st)
{
	struct grpc_call *p, *u;

	start(DEVICES_GROUPED, 0);
	p = prepare("db", UID_A);
	turn();
	assert_true(fetches[0].live);
	u = unprepare(UID_A);
	assert_string_equal(unprepare_error(u, UID_A), "");
	/* the Prepare answers now, with an error, and its fetch is gone */
	assert_true(fetches[0].cancelled);
	assert_error_has(p, UID_A, "NodeUnprepareResources for this claim arrived while it was "
				   "being prepared");
	assert_nothing_reserved();
	assert_false(has_spec(UID_A));
}

static void test_unprepare_supersedes_a_queued_prepare(void **st)
{
	struct grpc_call *p;

	start(DEVICES_GROUPED, 0);
	p = prepare("db", UID_A);
	(void)unprepare(UID_A); /* before the fetch even started */
	assert_error_has(p, UID_A, "arrived while it was being prepared");
	turn();
	assert_int_equal(n_fetches, 0);
	assert_nothing_reserved();
}

static void test_unprepare_after_kubelet_gave_up_leaves_nothing(void **st)
{
	struct grpc_call *p;

	start(DEVICES_GROUPED, 0);
	p = prepare("db", UID_A);
	turn();
	kubelet_cancel(p); /* the kubelet gives up ... */
	(void)unprepare(UID_A); /* ... and unprepares */
	assert_true(fetches[0].cancelled);
	faketimer_advance(DRA_PREPARE_TIMEOUT_MS * 2);
	turn();
	assert_nothing_reserved();
	assert_false(has_spec(UID_A));
}

static void test_unprepare_of_one_claim_leaves_others_fetching(void **st)
{
	struct ref refs[] = { { "default", "a", UID_A }, { "default", "b", UID_B } };
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare_call(PATH_V1 "NodePrepareResources", -1, 2, refs);
	turn();
	(void)unprepare(UID_B);
	assert_false(c->done);
	assert_true(fetches[0].live);
	complete(&fetches[0], claim_json("a", UID_A, "cpu", "cpudevnuma000", "1", NULL), NULL);
	assert_string_equal(error_of(c, UID_A), "");
	assert_error_has(c, UID_B, "arrived while it was being prepared");
}

static void test_unprepare_removes_and_is_idempotent(void **st)
{
	struct grpc_call *u;

	start(DEVICES_GROUPED, 0);
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	u = unprepare(UID_A);
	assert_string_equal(unprepare_error(u, UID_A), "");
	assert_nothing_reserved();
	assert_false(has_spec(UID_A));
	u = unprepare(UID_A);
	assert_string_equal(unprepare_error(u, UID_A), "");
	u = unprepare("not a uid\n");
	assert_string_equal(unprepare_error(u, "not a uid\n"), "");
}

static void test_unprepare_failure_keeps_the_cpus(void **st)
{
	struct grpc_call *u;

	start(DEVICES_GROUPED, 0);
	(void)prepare_ok("db", UID_A, "cpudevnuma000", "4");
	fx.remove_errno = EROFS;
	u = unprepare(UID_A);
	assert_non_null(strstr(unprepare_error(u, UID_A), "CPUs stay reserved"));
	assert_int_equal(state_claim_count(fx.state), 1);
	fx.remove_errno = 0;
	u = unprepare(UID_A);
	assert_string_equal(unprepare_error(u, UID_A), "");
	assert_nothing_reserved();
}

static void test_deadline_ends_the_call_before_the_kubelets(void **st)
{
	struct ref ref = { "default", "db", UID_A };
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare_call(PATH_V1 "NodePrepareResources", 3000, 1, &ref);
	turn();
	/* the fetch may not wait (Retry-After included) past the call */
	assert_true(fetches[0].timeout_ms > 0 && fetches[0].timeout_ms <= 2700);
	faketimer_advance(2699);
	assert_false(c->done);
	assert_true(fetches[0].live);
	faketimer_advance(1);
	assert_true(fetches[0].cancelled);
	assert_error_has(c, UID_A, "before the kubelet's deadline");
	assert_nothing_reserved();
}

static void test_deadline_reaches_queued_claims_too(void **st)
{
	struct ref refs[] = { { "default", "a", UID_A }, { "default", "b", UID_B } };
	struct grpc_call *c;

	start(DEVICES_GROUPED, 1);
	c = prepare_call(PATH_V1 "NodePrepareResources", 10000, 2, refs);
	turn();
	assert_int_equal(n_fetches, 1);
	faketimer_advance(9000);
	assert_error_has(c, UID_A, "deadline");
	assert_error_has(c, UID_B, "deadline");
	turn();
	assert_int_equal(n_fetches, 1); /* the queued one never started */
	assert_int_equal(cancelled_fetches(), 1);
}

static void test_no_deadline_means_ours_and_a_longer_one_is_capped(void **st)
{
	struct ref ref = { "default", "db", UID_A };
	struct grpc_call *c;
	int64_t t0;

	start(DEVICES_GROUPED, 0);
	t0 = clock_now_ms();
	c = prepare_call(PATH_V1 "NodePrepareResources", 3600 * 1000, 1, &ref);
	turn();
	assert_fetch_timeout(&fetches[0], DRA_PREPARE_TIMEOUT_MS - 1000, t0);
	faketimer_advance(DRA_PREPARE_TIMEOUT_MS - 1000);
	assert_error_has(c, UID_A, "deadline");
}

static void test_expired_deadline_fails_at_once(void **st)
{
	struct ref ref = { "default", "db", UID_A };
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare_call(PATH_V1 "NodePrepareResources", 0, 1, &ref);
	assert_error_has(c, UID_A, "deadline has passed");
	turn();
	assert_int_equal(n_fetches, 0);
}

static void test_answer_after_the_call_ended_is_impossible(void **st)
{
	struct grpc_call *c;
	int timers;

	/* Once the reply is out, nothing of the call waits: no timer of it is
	 * left to fire and no fetch is left to complete. */
	start(DEVICES_GROUPED, 0);
	timers = faketimer_count(); /* the plugin's own (health) */
	c = prepare_ok("db", UID_A, "cpudevnuma000", "1");
	assert_true(c->done);
	assert_int_equal(live_fetches(), 0);
	assert_int_equal(faketimer_count(), timers);
}

static void test_free_cancels_fetches_in_flight(void **st)
{
	start(DEVICES_GROUPED, 0);
	(void)prepare("db", UID_A);
	turn();
	fx.dra = dra_free(fx.dra);
	assert_true(fetches[0].cancelled);
}

/* ---- what the kubelet sends ---------------------------------------------------------------- */

static void test_bad_names_and_uids_never_reach_a_fetch(void **st)
{
	static const struct ref bad[] = {
		{ "default", "db", "" },
		{ "default", "db", "uid with spaces" },
		{ "", "db", UID_A },
		{ "Default", "db", UID_A },
		{ "kube_system", "db", UID_A },
		{ "default\nts=forged", "db", UID_A },
		{ "default", "", UID_A },
		{ "default", "db/../../nodes/x", UID_A },
		{ "default", "db?watch=1", UID_A },
		{ "default", "db\r\nlevel=error", UID_A },
		{ "default", "DB", UID_A },
	};
	static const char *const want[] = {
		"not a valid Kubernetes uid",	    "not a valid Kubernetes uid",
		"namespace is not a Kubernetes",    "namespace is not a Kubernetes",
		"namespace is not a Kubernetes",    "namespace is not a Kubernetes",
		"name is not a Kubernetes object", "name is not a Kubernetes object",
		"name is not a Kubernetes object", "name is not a Kubernetes object",
		"name is not a Kubernetes object",
	};

	start(DEVICES_GROUPED, 0);
	assert_int_equal(ARRAY_SIZE(bad), ARRAY_SIZE(want));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct grpc_call *c = prepare_call(PATH_V1 "NodePrepareResources", -1, 1, &bad[i]);
		const char *e = error_of(c, bad[i].uid);

		if (!strstr(e, want[i]))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, e, want[i]);
		/* not echoed: the reply is a proto3 string and may end up in logs */
		assert_null(strchr(e, '\n'));
		assert_null(strstr(e, "forged"));
		assert_null(strstr(e, ".."));
	}
	turn();
	assert_int_equal(n_fetches, 0);
}

static void test_undecodable_and_oversized_requests_fail_the_call(void **st)
{
	struct ref *refs = calloc(DRA_MAX_CLAIMS_PER_CALL + 1, sizeof(*refs));
	struct grpc_call *c = new_call(-1);
	grpc_handler_fn fn;
	void *ud;

	start(DEVICES_GROUPED, 0);
	fn = method(PATH_V1 "NodePrepareResources", &ud);
	fn(c, (const uint8_t *)"\x0a\xff", 2, ud);
	assert_int_equal(c->status, GRPC_STATUS_INVALID_ARGUMENT);
	assert_non_null(refs);
	for (int i = 0; i <= DRA_MAX_CLAIMS_PER_CALL; i++)
		refs[i] = (struct ref){ "default", "db", UID_A };
	c = prepare_call(PATH_V1 "NodePrepareResources", -1, DRA_MAX_CLAIMS_PER_CALL + 1, refs);
	assert_int_equal(c->status, GRPC_STATUS_RESOURCE_EXHAUSTED);
	turn();
	assert_int_equal(n_fetches, 0);
	free(refs);
}

static void test_empty_prepare_replies_at_once(void **st)
{
	struct grpc_call *c;

	start(DEVICES_GROUPED, 0);
	c = prepare_call(PATH_V1 "NodePrepareResources", -1, 0, NULL);
	assert_true(c->done);
	assert_int_equal(c->status, GRPC_STATUS_OK);
}

/* ---- isolated CPUs ------------------------------------------------------------------------ */

/* The 16-CPU node with CPUs 2-3,10-11 isolated: cpudevnuma000 holds
 * 0-1,8-9, cpuisonuma000 2-3,10-11, and the shared pool leaves them out. */
static void start_isolated(void)
{
	struct isol iso = { .domain_source = "sysfs" };

	iso.domain = cs("2-3,10-11");
	iso.isolated = iso.domain;
	start_with(DEVICES_GROUPED, 0, &iso);
}

/* claim_json() with one CPUConfig for every request (isolated: value). */
static char *with_isolated(char *json, const char *value)
{
	char *out = NULL, *end = strstr(json, "]}}}}");

	assert_non_null(end);
	*end = 0;
	assert_true(asprintf(&out,
			     "%s],\"config\":[{\"source\":\"FromClaim\",\"opaque\":{\"driver\":"
			     "\"dra.cpu\",\"parameters\":{\"apiVersion\":\"dra.cpu/v1alpha1\","
			     "\"kind\":\"CPUConfig\",\"isolated\":\"%s\"}}}]}}}}",
			     json, value) > 0);
	free(json);
	return out;
}

/* Prepares claim name/uid to count CPUs of dev, with CPUConfig isolated:
 * isolated (NULL: none), and returns the call, answered. */
static struct grpc_call *prepare_isolated(const char *name, const char *uid, const char *dev,
					  const char *count, const char *isolated)
{
	struct grpc_call *c = prepare(name, uid);
	char *json = claim_json(name, uid, "cpu", dev, count, NULL);

	turn();
	complete(&fetches[n_fetches - 1], isolated ? with_isolated(json, isolated) : json, NULL);
	return c;
}

static void test_isolated_cpus_go_only_to_claims_that_ask(void **st)
{
	struct cpuset cpus, pool, iso = cs("2-3,10-11");
	struct grpc_call *c;

	start_isolated();
	/* the default (avoid) refuses an isolated device */
	c = prepare_isolated("quiet", UID_A, "cpuisonuma000", "2", NULL);
	assert_error_has(c, UID_A, "did not ask for them");
	assert_int_equal(state_claim_count(fx.state), 0);
	/* require: the claim gets isolated CPUs, nobody else ever had them */
	c = prepare_isolated("quiet", UID_A, "cpuisonuma000", "2", "require");
	assert_string_equal(error_of(c, UID_A), "");
	cpus = claim_cpus(UID_A);
	assert_int_equal(cpuset_count(&cpus), 2);
	assert_true(cpuset_is_subset(&cpus, &iso));
	state_shared_pool(fx.state, &pool);
	assert_false(cpuset_intersects(&pool, &iso));
	/* require on an ordinary device is refused; prefer takes it */
	c = prepare_isolated("busy", UID_B, "cpudevnuma000", "2", "require");
	assert_error_has(c, UID_B, "is not isolated CPUs");
	c = prepare_isolated("busy", UID_B, "cpudevnuma000", "4", "prefer");
	assert_string_equal(error_of(c, UID_B), "");
	cpus = claim_cpus(UID_B);
	assert_int_equal(cpuset_count(&cpus), 4);
	assert_false(cpuset_intersects(&cpus, &iso));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- real-time claims --------------------------------------------------------------------- */

#define UID_C "6f0c1c4e-0000-4000-8000-00000000000c"
#define UID_D "6f0c1c4e-0000-4000-8000-00000000000d"
#define DL_3MS "{\"policy\":\"deadline\",\"runtimeNs\":3000000,\"periodNs\":10000000}"

static const struct rt_limits rt_limits = { .capacity_milli = 900,
					    .period_min_ns = 100000,
					    .period_max_ns = 4194304000ull };

/* The 16-CPU node with CPUs 14-15 real-time (cpurt014, cpurt015, 900m each). */
static void start_rt(int mode)
{
	struct cpuset rt = cs("14-15");
	struct state_opts so = { 0 };
	struct dra_opts o = { .node = "node-1", .device_mode = mode, .claims = &fetch_ops,
			      .rt = &rt_limits };

	assert_int_equal(devices_build(fx.topo, &rt, mode, DEVICES_BY_NUMANODE, &fx.devices), 0);
	assert_int_equal(devices_add_rt(fx.devices, fx.topo, &rt, 900), 0);
	so.cdi_dir = fx.cdi;
	so.state_dir = fx.st;
	so.allocatable = fx.devices->allocatable;
	so.rt_cpus = rt;
	assert_int_equal(state_new(&so, &fx.state), 0);
	assert_int_equal(state_load(fx.state), 0);
	o.kubelet_root = fx.root;
	assert_int_equal(dra_new(fx.base, &o, fx.state, fx.topo, fx.devices, fx.metrics, &fx.dra),
			 0);
}

/* A claim with results (JSON objects without braces' driver and pool) and
 * one CPUConfig carrying realtime (NULL: none). */
static char *rt_claim(const char *name, const char *uid, const char *results,
		      const char *realtime)
{
	char *s = NULL, *config = NULL;

	if (realtime)
		assert_true(asprintf(&config,
				     ",\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":"
				     "{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\","
				     "\"realtime\":%s}}}]",
				     realtime) > 0);
	assert_true(asprintf(&s,
			     "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
			     "\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"%s\"},"
			     "\"status\":{\"allocation\":{\"devices\":{\"results\":[%s]%s}}}}",
			     name, uid, results, config ? config : "") > 0);
	free(config);
	return s;
}

#define RT_RES(req, dev, q)                                                                    \
	"{\"request\":\"" req "\",\"driver\":\"dra.cpu\",\"pool\":\"node-1\",\"device\":\"" dev \
	"\",\"shareID\":\"s-" dev "\",\"consumedCapacity\":{\"dra.cpu/rtBandwidth\":\"" q "\"}}"

/* Prepares a claim and returns its error ("" when prepared). */
static const char *prepare_rt(const char *name, const char *uid, const char *results,
			      const char *realtime)
{
	struct grpc_call *c = prepare(name, uid);

	turn();
	complete(&fetches[n_fetches - 1], rt_claim(name, uid, results, realtime), NULL);
	return error_of(c, uid);
}

static void test_rt_three_300m_claims_fit_a_900m_cpu_and_a_fourth_is_refused(void **st)
{
	const char *e;
	struct cpuset pool, cpus;

	start_rt(DEVICES_INDIVIDUAL);
	assert_string_equal(prepare_rt("a", UID_A, RT_RES("rt", "cpurt014", "300m"), DL_3MS), "");
	assert_string_equal(prepare_rt("b", UID_B, RT_RES("rt", "cpurt014", "300m"), DL_3MS), "");
	assert_string_equal(prepare_rt("c", UID_C, RT_RES("rt", "cpurt014", "0.3"), DL_3MS), "");
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 900);
	e = prepare_rt("d", UID_D, RT_RES("rt", "cpurt014", "300m"), DL_3MS);
	if (!strstr(e, "dra.cpu/rtBandwidth 300m does not fit on cpurt014: the real-time claims "
		       "prepared on it hold 900m of 900m"))
		fail_msg("%s", e);
	assert_false(has_spec(UID_D));
	assert_null(state_claim(fx.state, UID_D));
	/* each claim's CDI spec names its CPU; the shared pool never had it */
	cpus = claim_cpus(UID_B);
	assert_true(cpuset_equal(&cpus, &(struct cpuset){ 0 }) == false);
	assert_true(cpuset_has(&cpus, 14) && cpuset_count(&cpus) == 1);
	state_shared_pool(fx.state, &pool);
	assert_int_equal(cpuset_count(&pool), 14);
	/* the other CPU is free; and a claim going away makes room */
	assert_string_equal(prepare_rt("d", UID_D, RT_RES("rt", "cpurt015", "300m"), DL_3MS), "");
	assert_string_equal(unprepare_error(unprepare(UID_B), UID_B), "");
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 600);
	assert_int_equal(rt_cpu_used_milli(fx.state, 15, &rt_limits), 300);
}

static void test_rt_bad_claims_are_refused_with_the_reason(void **st)
{
	static const struct {
		const char *results, *realtime, *want;
	} cases[] = {
		{ RT_RES("rt", "cpurt014", "300m"), NULL, "the claim needs a CPUConfig with \"realtime\"" },
		{ RT_RES("rt", "cpurt014", "300m"),
		  "{\"policy\":\"deadline\",\"runtimeNs\":4000000,\"periodNs\":10000000}",
		  "needs 400m of dra.cpu/rtBandwidth, the claim consumes only 300m" },
		{ RT_RES("rt", "cpurt014", "300m"), "{\"policy\":\"fifo\",\"priority\":10}",
		  "a fifo claim must consume the CPU's whole dra.cpu/rtBandwidth (900m), not 300m" },
		{ RT_RES("rt", "cpurt014", "300m"),
		  "{\"policy\":\"deadline\",\"runtimeNs\":3000,\"periodNs\":10000}",
		  "outside this node's sched_deadline_period range" },
		{ RT_RES("rt", "cpurt014", "950m"), DL_3MS, "\"950m\" is more than device cpurt014 has" },
		{ RT_RES("rt", "cpurt014", "300500u"), DL_3MS, "finer than 1m" },
		{ "{\"request\":\"rt\",\"driver\":\"dra.cpu\",\"pool\":\"node-1\",\"device\":"
		  "\"cpurt014\"}",
		  DL_3MS, "has no consumedCapacity[\"dra.cpu/rtBandwidth\"]" },
		{ RT_RES("rt", "cpurt014", "300m") ",{\"request\":\"x\",\"driver\":\"dra.cpu\","
		  "\"pool\":\"node-1\",\"device\":\"cpudev000\"}",
		  DL_3MS, "device cpudev000 is not a real-time CPU: a claim's devices must all be" },
		{ RT_RES("rt", "cpurt014", "300m") "," RT_RES("rt2", "cpurt014", "300m"), DL_3MS,
		  "device cpurt014 is allocated twice in the claim" },
		{ RT_RES("rt", "cpurt016", "300m"), DL_3MS, "device cpurt016 (request rt) is not a device" },
	};

	start_rt(DEVICES_INDIVIDUAL);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *e = prepare_rt("bad", UID_A, cases[i].results, cases[i].realtime);

		if (!strstr(e, cases[i].want))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, e, cases[i].want);
		assert_int_equal(state_claim_count(fx.state), 0);
		assert_false(has_spec(UID_A));
	}
}

static void test_rt_reprepare_and_restart_charge_once(void **st)
{
	start_rt(DEVICES_GROUPED);
	assert_string_equal(prepare_rt("a", UID_A, RT_RES("rt", "cpurt014", "300m"), DL_3MS), "");
	assert_string_equal(prepare_rt("a", UID_A, RT_RES("rt", "cpurt014", "300m"), DL_3MS), "");
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 300);
	/* the driver restarts: state comes back from the CDI spec and checkpoint */
	dra_free(fx.dra);
	state_free(fx.state);
	devices_free(fx.devices);
	fx.dra = NULL;
	n_methods = 0; /* the new plugin's handlers */
	start_rt(DEVICES_GROUPED);
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 300);
	assert_string_equal(prepare_rt("a", UID_A, RT_RES("rt", "cpurt014", "300m"), DL_3MS), "");
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 300);
	assert_int_equal(state_claim_count(fx.state), 1);
	/* another budget or device for the same claim is another allocation */
	assert_non_null(strstr(prepare_rt("a", UID_A, RT_RES("rt", "cpurt014", "450m"), DL_3MS),
			       "already prepared with"));
	assert_non_null(strstr(prepare_rt("a", UID_A, RT_RES("rt", "cpurt015", "300m"), DL_3MS),
			       "already prepared with"));
	assert_non_null(strstr(prepare_rt("a", UID_A, "{\"request\":\"c\",\"driver\":\"dra.cpu\","
						      "\"pool\":\"node-1\",\"device\":"
						      "\"cpudevnuma000\",\"consumedCapacity\":"
						      "{\"dra.cpu/cpu\":\"1\"}}",
					  NULL),
			       "already prepared as a real-time claim"));
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 300);
}

static int test_attributes(void *ud, const char *device, struct json_object **ret)
{
	*ret = json_tokener_parse("{\"dra.cpu/numCPUs\":{\"int\":8}}");
	return *ret ? 0 : -ENOMEM;
}

/* Grouped by NUMA node, device metadata on. */
static void start_metadata(void)
{
	struct state_opts so = { 0 };
	struct dra_opts o = { .node = "node-1", .device_mode = DEVICES_GROUPED,
			      .claims = &fetch_ops, .device_metadata = true, .cdi_dir = fx.cdi,
			      .device_attributes = test_attributes };

	assert_int_equal(devices_build(fx.topo, NULL, DEVICES_GROUPED, DEVICES_BY_NUMANODE,
				       &fx.devices),
			 0);
	so.cdi_dir = fx.cdi;
	so.state_dir = fx.st;
	so.allocatable = fx.topo->online;
	assert_int_equal(state_new(&so, &fx.state), 0);
	assert_int_equal(state_load(fx.state), 0);
	o.kubelet_root = fx.root;
	assert_int_equal(dra_new(fx.base, &o, fx.state, fx.topo, fx.devices, fx.metrics, &fx.dra),
			 0);
}

/* start() with a grouping and reserved CPUs (NULL: none). */
static void start_grouped(int mode, int group_by, const char *reserved, int max_fetches)
{
	struct state_opts so = { 0 };
	struct dra_opts o = { .node = "node-1", .device_mode = mode, .claims = &fetch_ops,
			      .max_fetches = max_fetches };
	struct cpuset res;

	cpuset_zero(&res);
	if (reserved)
		assert_int_equal(cpuset_parse(reserved, &res, NULL), 0);
	assert_int_equal(devices_build(fx.topo, &res, mode, group_by, &fx.devices), 0);
	so.cdi_dir = fx.cdi;
	so.state_dir = fx.st;
	so.allocatable = fx.devices->allocatable;
	assert_int_equal(state_new(&so, &fx.state), 0);
	assert_int_equal(state_load(fx.state), 0);
	o.kubelet_root = fx.root;
	assert_int_equal(dra_new(fx.base, &o, fx.state, fx.topo, fx.devices, fx.metrics, &fx.dra),
			 0);
}

/* ---- exact cpuset (the reference driver's override) ------------------------------------- */

/* A claim whose results may each come with a cpuset override: NULL-terminated
 * (request, device, consumed, cpuset) quadruples, cpuset NULL for none. The
 * overrides are configs from source naming their request. */
static char *claim_cpusets(const char *uid, const char *source, ...)
{
	char *res = strdup(""), *cfg = strdup(""), *s = NULL;
	const char *req;
	va_list ap;
	int n = 0, k = 0;

	va_start(ap, source);
	while ((req = va_arg(ap, const char *))) {
		const char *dev = va_arg(ap, const char *), *consumed = va_arg(ap, const char *);
		const char *set = va_arg(ap, const char *);
		char *next = NULL;

		assert_true(asprintf(&next,
				     "%s%s{\"request\":\"%s\",\"driver\":\"dra.cpu\",\"pool\":"
				     "\"node-1\",\"device\":\"%s\",\"consumedCapacity\":"
				     "{\"dra.cpu/cpu\":\"%s\"}}",
				     res, n++ ? "," : "", req, dev, consumed) > 0);
		free(res);
		res = next;
		if (!set)
			continue;
		assert_true(asprintf(&next,
				     "%s%s{\"source\":\"%s\",\"requests\":[\"%s\"],\"opaque\":"
				     "{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
				     "\"v1alpha1\",\"cpuConfig\":{\"cpuset\":\"%s\"}}}}",
				     cfg, k++ ? "," : "", source, req, set) > 0);
		free(cfg);
		cfg = next;
	}
	va_end(ap);
	assert_true(asprintf(&s,
			     "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
			     "\"metadata\":{\"name\":\"exact\",\"namespace\":\"default\","
			     "\"uid\":\"%s\"},\"status\":{\"allocation\":{\"devices\":{"
			     "\"results\":[%s],\"config\":[%s]}}}}",
			     uid, res, cfg) > 0);
	free(res);
	free(cfg);
	return s;
}

static struct grpc_call *prepare_json(const char *uid, char *json)
{
	struct grpc_call *c = prepare("exact", uid);

	turn();
	complete(&fetches[n_fetches - 1], json, NULL);
	return c;
}

static void test_cpuset_override_prepares_exactly_those_cpus(void **st)
{
	const struct state_claim *sc;
	struct cpuset want, got;

	/* machine device: CPUs 1-15 (0 reserved) */
	start_grouped(DEVICES_GROUPED, DEVICES_BY_MACHINE, "0", 0);
	assert_string_equal(error_of(prepare_json(UID_A,
						  claim_cpusets(UID_A, "FromClaim", "a",
								"cpudevmachine", "4", "4-7", "b",
								"cpudevmachine", "2", "12,14", "c",
								"cpudevmachine", "1", NULL, NULL)),
				     UID_A),
			    "");
	sc = state_claim(fx.state, UID_A);
	assert_non_null(sc);
	assert_int_equal(sc->n_results, 3);
	want = cs("4-7");
	assert_true(cpuset_equal(cpuset_from_view(&sc->results[0].cpus, &got), &want));
	want = cs("12,14");
	assert_true(cpuset_equal(cpuset_from_view(&sc->results[1].cpus, &got), &want));
	/* c has no override: the driver picks one CPU, none of the others */
	assert_int_equal(cpuset_count(cpuset_from_view(&sc->results[2].cpus, &got)), 1);
	assert_false(cpuset_has(&got, 0));
	want = cs("4-7,12,14");
	cpuset_andnot(&want, cpuset_from_view(&sc->cpus, &got), &want);
	assert_int_equal(cpuset_count(&want), 1);
	assert_true(has_spec(UID_A));
	/* the kubelet's retry gets the same answer; another cpuset is refused */
	assert_string_equal(error_of(prepare_json(UID_A,
						  claim_cpusets(UID_A, "FromClaim", "a",
								"cpudevmachine", "4", "4-7", "b",
								"cpudevmachine", "2", "12,14", "c",
								"cpudevmachine", "1", NULL, NULL)),
				     UID_A),
			    "");
	assert_error_has(prepare_json(UID_A, claim_cpusets(UID_A, "FromClaim", "a",
							   "cpudevmachine", "4", "8-11", "b",
							   "cpudevmachine", "2", "12,14", "c",
							   "cpudevmachine", "1", NULL, NULL)),
			 UID_A, "already prepared with other CPUs for request a than its cpuset 8-11");
}

static void test_cpuset_override_is_checked_like_the_reference(void **st)
{
	static const struct {
		const char *src, *set_a, *set_b, *want;
	} cases[] = {
		{ "FromClaim", "16-19", NULL, "cpuset 16-19: CPUs 16-19 are not online" },
		{ "FromClaim", "0-3", NULL, "cpuset 0-3: CPUs 0 are reserved (--reserved-cpus)" },
		{ "FromClaim", "4-6", NULL, "cpuset 4-6 has 3 CPUs, the allocation consumed 4" },
		{ "FromClaim", "4-8", NULL, "cpuset 4-8 has 5 CPUs" },
		{ "FromClaim", "4-7", "6-7", "request b: cpuset 6-7: CPUs 6-7 are used by another "
					     "device of the claim" },
		{ "FromClaim", "8-11", NULL, "cpuset 8-11: CPUs 8-9 are held by another claim" },
		{ "FromClass", "4-7", NULL, "configuration from DeviceClass is not supported" },
	};

	start_grouped(DEVICES_GROUPED, DEVICES_BY_MACHINE, "0", 0);
	/* another claim holds 8-9 */
	assert_string_equal(error_of(prepare_json(UID_B, claim_cpusets(UID_B, "FromClaim", "x",
								       "cpudevmachine", "2", "8-9",
								       NULL)),
				     UID_B),
			    "");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct grpc_call *c = prepare_json(
			UID_A, claim_cpusets(UID_A, cases[i].src, "a", "cpudevmachine", "4",
					     cases[i].set_a, "b", "cpudevmachine", "2",
					     cases[i].set_b, NULL));

		if (!strstr(error_of(c, UID_A), cases[i].want))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, error_of(c, UID_A),
				 cases[i].want);
		assert_null(state_claim(fx.state, UID_A));
		assert_false(has_spec(UID_A));
	}
	assert_int_equal(state_claim_count(fx.state), 1);
}

static void test_cpuset_override_stays_inside_its_device(void **st)
{
	start_grouped(DEVICES_GROUPED, DEVICES_BY_NUMANODE, NULL, 0);
	/* cpudevnuma000 is 0-3,8-11 */
	assert_error_has(prepare_json(UID_A, claim_cpusets(UID_A, "FromClaim", "a",
							   "cpudevnuma000", "2", "3-4", NULL)),
			 UID_A, "cpuset 3-4: CPUs 4 are not in device cpudevnuma000");
	assert_string_equal(error_of(prepare_json(UID_A, claim_cpusets(UID_A, "FromClaim", "a",
								       "cpudevnuma000", "2",
								       "3,8", NULL)),
				     UID_A),
			    "");
}

static void test_cpuset_override_needs_grouped_devices(void **st)
{
	start(DEVICES_INDIVIDUAL, 0);
	assert_error_has(prepare_json(UID_A, claim_cpusets(UID_A, "FromClaim", "a", "cpudev000",
							   "1", "0", NULL)),
			 UID_A, "a cpuset override (cpuConfig.cpuset) needs grouped devices");
	assert_nothing_reserved();
}

/* ---- health ------------------------------------------------------------------------------- */

/* The reference's wire example: one device (pool n1, device d0, HEALTHY,
 * t=1700000000, timeout 20) is these 22 bytes in v1; the v1alpha1 encoding
 * the plugin sends for both services is byte for byte the same. */
static void test_health_v1_and_v1alpha1_share_the_wire(void **st)
{
	static const uint8_t want[] = { 0x0a, 0x14, 0x0a, 0x08, 0x0a, 0x02, 0x6e, 0x31,
					0x12, 0x02, 0x64, 0x30, 0x10, 0x01, 0x18, 0x80,
					0xe2, 0xcf, 0xaa, 0x06, 0x20, 0x14 };
	V1alpha1__DeviceIdentifier id = V1ALPHA1__DEVICE_IDENTIFIER__INIT;
	V1alpha1__DeviceHealth h = V1ALPHA1__DEVICE_HEALTH__INIT, *hp = &h;
	V1alpha1__NodeWatchResourcesResponse r = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	V1__NodeWatchResourcesResponse *v1;
	uint8_t buf[64];
	size_t n;

	id.pool_name = "n1";
	id.device_name = "d0";
	h.device = &id;
	h.health = V1ALPHA1__HEALTH_STATUS__HEALTHY;
	h.last_updated_time = 1700000000;
	h.health_check_timeout_seconds = 20;
	r.n_devices = 1;
	r.devices = &hp;
	n = v1alpha1__node_watch_resources_response__pack(&r, buf);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(buf, want, n);
	v1 = v1__node_watch_resources_response__unpack(NULL, n, buf);
	assert_non_null(v1);
	assert_int_equal(v1->n_devices, 1);
	assert_string_equal(v1->devices[0]->device->device_name, "d0");
	assert_int_equal(v1->devices[0]->health, V1__HEALTH_STATUS__HEALTHY);
	assert_int_equal(v1->devices[0]->health_check_timeout_seconds, 20);
	v1__node_watch_resources_response__free_unpacked(v1, NULL);
}

/* Opens a health stream on path; the snapshot it got, decoded as v1. */
static V1__NodeWatchResourcesResponse *watch(const char *path)
{
	void *ud;
	grpc_handler_fn fn = method(path, &ud);
	struct grpc_call *c = new_call(-1);

	assert_non_null(fn);
	n_sent = 0;
	fn(c, NULL, 0, ud);
	assert_int_equal(n_sent, 1);
	return v1__node_watch_resources_response__unpack(NULL, sent_len, sent_pb);
}

static V1__DeviceHealth *health_of(V1__NodeWatchResourcesResponse *r, const char *dev)
{
	for (size_t i = 0; i < r->n_devices; i++)
		if (!strcmp(r->devices[i]->device->device_name, dev))
			return r->devices[i];
	fail_msg("no health for %s", dev);
	return NULL;
}

static V1__NodeWatchResourcesResponse *last_sent(void)
{
	return v1__node_watch_resources_response__unpack(NULL, sent_len, sent_pb);
}

static void test_health_individual_offline_cpu_is_unhealthy_and_its_claim_named(void **st)
{
	V1__NodeWatchResourcesResponse *r;
	struct cpuset online = cs("0-4,6-15"), held;
	V1__DeviceHealth *h;
	struct grpc_call *c;

	start(DEVICES_INDIVIDUAL, 0);
	/* 16 CPUs, siblings N and N+8: cpudev000 = 0, cpudev001 = 8, ..., cpudev010 = 5 */
	c = prepare("web", UID_A);
	turn();
	complete(&fetches[0], claim_json("web", UID_A, "cpu", "cpudev010", "", NULL), NULL);
	assert_string_equal(error_of(c, UID_A), "");
	r = watch("/v1.DRAResourceHealth/NodeWatchResources");
	assert_int_equal(r->n_devices, 16);
	for (size_t i = 0; i < r->n_devices; i++) {
		assert_int_equal(r->devices[i]->health, V1__HEALTH_STATUS__HEALTHY);
		assert_string_equal(r->devices[i]->device->pool_name, "node-1");
		assert_int_equal(r->devices[i]->health_check_timeout_seconds, 20);
		assert_true(r->devices[i]->last_updated_time > 1700000000);
	}
	v1__node_watch_resources_response__free_unpacked(r, NULL);

	/* CPU 5 goes offline: every open stream hears at once */
	n_sent = 0;
	dra_set_online(fx.dra, &online);
	assert_int_equal(n_sent, 1);
	r = last_sent();
	h = health_of(r, "cpudev010");
	assert_int_equal(h->health, V1__HEALTH_STATUS__UNHEALTHY);
	assert_string_equal(h->message, "CPU 5 is offline (prepared for claim default/web; kept "
					"there, not moved)");
	assert_int_equal(health_of(r, "cpudev011")->health, V1__HEALTH_STATUS__HEALTHY);
	v1__node_watch_resources_response__free_unpacked(r, NULL);
	/* the claim keeps CPU 5 */
	held = claim_cpus(UID_A);
	assert_true(cpuset_has(&held, 5));
	/* the same set again: nothing to say */
	n_sent = 0;
	dra_set_online(fx.dra, &online);
	assert_int_equal(n_sent, 0);
	/* back */
	online = cs("0-15");
	dra_set_online(fx.dra, &online);
	r = last_sent();
	assert_int_equal(health_of(r, "cpudev010")->health, V1__HEALTH_STATUS__HEALTHY);
	v1__node_watch_resources_response__free_unpacked(r, NULL);
}

static void test_health_group_with_free_offline_cpus_stays_healthy(void **st)
{
	V1__NodeWatchResourcesResponse *r;
	struct cpuset online = cs("0-2,4-15"), got;
	V1__DeviceHealth *h;

	start(DEVICES_GROUPED, 0);
	r = watch("/v1alpha1.DRAResourceHealth/NodeWatchResources");
	v1__node_watch_resources_response__free_unpacked(r, NULL);
	dra_set_online(fx.dra, &online);
	r = last_sent();
	h = health_of(r, "cpudevnuma000");
	assert_int_equal(h->health, V1__HEALTH_STATUS__HEALTHY);
	assert_string_equal(h->message, "CPUs 3 are offline; 7 of its 8 CPUs remain");
	v1__node_watch_resources_response__free_unpacked(r, NULL);
	/* new claims never get the offline CPU: all 7 left of node 0 */
	(void)prepare_ok("all", UID_A, "cpudevnuma000", "7");
	got = claim_cpus(UID_A);
	assert_false(cpuset_has(&got, 3));
	assert_int_equal(cpuset_count(&got), 7);
	/* a held CPU goes: unhealthy, the claim named */
	online = cs("0-1,4-15");
	dra_set_online(fx.dra, &online);
	r = last_sent();
	h = health_of(r, "cpudevnuma000");
	assert_int_equal(h->health, V1__HEALTH_STATUS__UNHEALTHY);
	assert_non_null(strstr(h->message, "CPUs 2 are prepared for claim default/all"));
	v1__node_watch_resources_response__free_unpacked(r, NULL);
}

/* ---- device metadata ---------------------------------------------------------------------- */

static bool meta_file(const char *uid, const char *req)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/plugins/dra.cpu/dra-device-metadata/%s/%s/metadata.json",
		 fx.root, uid, req);
	return access(path, F_OK) == 0;
}

static bool meta_spec(const char *uid, const char *req)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/dra.cpu_metadata_%s_%s.json", fx.cdi, uid, req);
	return access(path, F_OK) == 0;
}

static void test_metadata_written_at_prepare_with_its_cdi_id_removed_at_unprepare(void **st)
{
	PrepareClaimResponse *r;
	struct grpc_call *c;

	start_metadata();
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[0],
		 claim_json("db", UID_A, "a", "cpudevnuma000", "2", "b/sub", "cpudevnuma001", "3",
			    "a", "cpudevnuma001", "1", NULL),
		 NULL);
	r = result(c, UID_A);
	assert_string_equal(r->error, "");
	assert_int_equal(r->n_devices, 3);
	for (size_t i = 0; i < r->n_devices; i++) {
		const char *base = !strcmp(r->devices[i]->request_names[0], "b/sub") ? "b" : "a";
		char want[160];

		assert_int_equal(r->devices[i]->n_cdi_device_ids, 2);
		assert_string_equal(r->devices[i]->cdi_device_ids[0],
				    "dra.k8s.io/cpu=claim-" UID_A);
		snprintf(want, sizeof(want), "dra.cpu/metadata=%s_%s", UID_A, base);
		assert_string_equal(r->devices[i]->cdi_device_ids[1], want);
	}
	assert_true(meta_file(UID_A, "a") && meta_spec(UID_A, "a"));
	assert_true(meta_file(UID_A, "b") && meta_spec(UID_A, "b"));
	/* the kubelet's retry rewrites what went missing */
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/dra.cpu_metadata_%s_b.json", fx.cdi, UID_A);
		assert_int_equal(unlink(path), 0);
	}
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[1],
		 claim_json("db", UID_A, "a", "cpudevnuma000", "2", "b/sub", "cpudevnuma001", "3",
			    "a", "cpudevnuma001", "1", NULL),
		 NULL);
	assert_string_equal(error_of(c, UID_A), "");
	assert_true(meta_spec(UID_A, "b"));
	assert_string_equal(unprepare_error(unprepare(UID_A), UID_A), "");
	assert_false(meta_file(UID_A, "a") || meta_spec(UID_A, "a"));
	assert_false(meta_file(UID_A, "b") || meta_spec(UID_A, "b"));
	assert_nothing_reserved();
}

static void test_metadata_failures_commit_nothing(void **st)
{
	struct grpc_call *c;

	start_metadata();
	/* the metadata cannot be written: no claim */
	snprintf(fx.fail_name, sizeof(fx.fail_name), "dra.cpu_metadata_");
	fx.fail_errno = ENOSPC;
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[0], claim_json("db", UID_A, "a", "cpudevnuma000", "2", NULL), NULL);
	assert_error_has(c, UID_A, "writing the device metadata");
	assert_nothing_reserved();
	assert_false(meta_file(UID_A, "a"));
	/* the claim cannot be committed: its metadata goes again */
	snprintf(fx.fail_name, sizeof(fx.fail_name), "dra.k8s.io-cpu_claim-");
	c = prepare("db", UID_A);
	turn();
	complete(&fetches[1], claim_json("db", UID_A, "a", "cpudevnuma000", "2", NULL), NULL);
	assert_true(error_of(c, UID_A)[0]);
	assert_nothing_reserved();
	assert_false(meta_file(UID_A, "a") || meta_spec(UID_A, "a"));
	fx.fail_name[0] = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_prepare_fetches_decides_commits_and_replies),
		T(test_isolated_cpus_go_only_to_claims_that_ask),
		T(test_v1beta1_reply_carries_no_share_id),
		T(test_claims_of_one_call_are_answered_together),
		T(test_fetch_outcomes_are_claim_errors),
		T(test_decision_errors_commit_nothing),
		T(test_reservation_conflicts_between_claims),
		T(test_cdi_write_failure_keeps_nothing),
		T(test_checkpoint_write_failure_rolls_back_the_cdi_spec),
		T(test_repeated_prepare_is_idempotent),
		T(test_grouped_reprepare_with_another_allocation_is_refused),
		T(test_reprepare_of_a_claim_restored_from_its_cdi_spec),
		T(test_individual_reprepare_must_name_the_same_cpus),
		T(test_prepare_records_the_pods_the_claim_is_reserved_for),
		T(test_prepare_refuses_a_malformed_reserved_for),
		T(test_kubelet_cancel_stops_the_fetch_and_commits_nothing),
		T(test_cancel_of_a_queued_claim_never_fetches),
		T(test_reset_flood_costs_no_fetch),
		T(test_fetches_in_flight_are_capped),
		T(test_unprepare_supersedes_a_prepare_in_flight),
		T(test_unprepare_supersedes_a_queued_prepare),
		T(test_unprepare_after_kubelet_gave_up_leaves_nothing),
		T(test_unprepare_of_one_claim_leaves_others_fetching),
		T(test_unprepare_removes_and_is_idempotent),
		T(test_unprepare_failure_keeps_the_cpus),
		T(test_deadline_ends_the_call_before_the_kubelets),
		T(test_deadline_reaches_queued_claims_too),
		T(test_no_deadline_means_ours_and_a_longer_one_is_capped),
		T(test_expired_deadline_fails_at_once),
		T(test_answer_after_the_call_ended_is_impossible),
		T(test_free_cancels_fetches_in_flight),
		T(test_bad_names_and_uids_never_reach_a_fetch),
		T(test_undecodable_and_oversized_requests_fail_the_call),
		T(test_empty_prepare_replies_at_once),
		T(test_rt_three_300m_claims_fit_a_900m_cpu_and_a_fourth_is_refused),
		T(test_rt_bad_claims_are_refused_with_the_reason),
		T(test_rt_reprepare_and_restart_charge_once),
		T(test_cpuset_override_prepares_exactly_those_cpus),
		T(test_cpuset_override_is_checked_like_the_reference),
		T(test_cpuset_override_stays_inside_its_device),
		T(test_cpuset_override_needs_grouped_devices),
		T(test_health_v1_and_v1alpha1_share_the_wire),
		T(test_health_individual_offline_cpu_is_unhealthy_and_its_claim_named),
		T(test_health_group_with_free_offline_cpus_stays_healthy),
		T(test_metadata_written_at_prepare_with_its_cdi_id_removed_at_unprepare),
		T(test_metadata_failures_commit_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
