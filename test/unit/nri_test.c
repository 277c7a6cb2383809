/* nri: the plugin session against a runtime made of a second ttrpc mux (roles
 * swapped), back to back in memory; and the loop side against a listening
 * socket that appears after start. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "lib/errbuf.h"
#include "nri/nri.h"
#include "nri_api.pb-c.h"
#include "nri_ttrpc.pb-c.h"
#include "nri_pipe.h"
#include "nri/ttrpc.h"

#define SVC_PLUGIN "nri.pkg.api.v1alpha1.Plugin"

/* ---- the policy under test: records what it saw, does what it is told ---------------------- */

struct pol {
	int connected, disconnected, disconnect_r;
	int syncs, creates, updates, stops, starts, post_creates, removes, shutdowns;
	size_t sync_pods, sync_ctrs;
	char sync_first_env[64], sync_pod_of_c1[64], sync_cgroups[128], sync_cpus[32];
	char create_id[64], create_pod_uid[64], create_pin[32];
	char update_cpus[32];
	const char *adjust_cpus;	/* what create sets */
	const struct nri_scheduler *adjust_sched; /* ... and this scheduler */
	int configured;
	char runtime[64];		/* "name version nri_version" from Configure */
	const char *update_id;		/* an update to return from every event */
	const struct nri_update *out;	/* or these (Synchronize too) */
	size_t n_out;
	int fail;			/* handlers return this with "policy says no" */
	int pushes, push_r;
	size_t push_failed;
	char push_failed_id[64];
	/* waiting creates: the first wait_runs runs of each wait */
	int wait_runs, defer_r, final_r;
	struct nri_resume resumes[NRI_WAITING_MAX + 8];
	int n_resumes, last_attempt, finals;
	int64_t wait_left;
};

static void p_connected(void *ud)
{
	((struct pol *)ud)->connected++;
}

static void p_disconnected(void *ud, int r)
{
	struct pol *p = ud;

	p->disconnected++;
	p->disconnect_r = r;
}

static int add_update(struct pol *p, struct nri_updates *upd)
{
	for (size_t i = 0; i < p->n_out; i++) {
		int r = nri_updates_add(upd, p->out[i].container_id, p->out[i].cpus);

		if (r < 0)
			return r;
	}
	return p->update_id ? nri_updates_add(upd, p->update_id, "0-1") : 0;
}

static int p_sync(void *ud, const struct nri_pod *pods, size_t n_pods,
		  const struct nri_container *ctrs, size_t n_ctrs, struct nri_updates *upd,
		  struct errbuf *err)
{
	struct pol *p = ud;

	p->syncs++;
	p->sync_pods = n_pods;
	p->sync_ctrs = n_ctrs;
	if (n_ctrs > 0 && ctrs[0].n_env > 0)
		snprintf(p->sync_first_env, sizeof(p->sync_first_env), "%s", ctrs[0].env[0]);
	if (n_ctrs > 1)
		snprintf(p->sync_pod_of_c1, sizeof(p->sync_pod_of_c1), "%s",
			 ctrs[1].pod ? ctrs[1].pod->uid : "(none)");
	if (n_ctrs > 0) {
		snprintf(p->sync_cgroups, sizeof(p->sync_cgroups), "%s", ctrs[0].cgroups_path);
		snprintf(p->sync_cpus, sizeof(p->sync_cpus), "%s", ctrs[0].cpus);
	}
	if (p->fail)
		return errbuf_fail(err, p->fail, "policy says no");
	if (p->out)
		return add_update(p, upd);
	for (size_t i = 0; i < n_ctrs; i++)
		assert_int_equal(nri_updates_add(upd, ctrs[i].id, "1"), 0);
	return 0;
}

static int p_create(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		    struct nri_adjust *adj, struct nri_updates *upd, struct errbuf *err)
{
	struct pol *p = ud;
	const char *pin = nri_container_getenv(c, "PIN");

	p->creates++;
	snprintf(p->create_id, sizeof(p->create_id), "%s", c->id);
	snprintf(p->create_pod_uid, sizeof(p->create_pod_uid), "%s", pod->uid);
	snprintf(p->create_pin, sizeof(p->create_pin), "%s", pin ? pin : "");
	assert_ptr_equal(c->pod, pod);
	p->last_attempt = nri_adjust_attempt(adj);
	p->wait_left = nri_adjust_wait_left_ms(adj);
	if (nri_adjust_is_final(adj)) {
		struct nri_resume r;

		p->finals++;
		assert_int_equal(nri_adjust_defer(adj, &r), -ETIMEDOUT);
		assert_int_equal(p->wait_left, 0);
		if (p->final_r && p->final_r != -EINPROGRESS)
			errbuf_set(err, "claim not read in time");
		return p->final_r;
	}
	if (nri_adjust_attempt(adj) < p->wait_runs) {
		assert_true(p->n_resumes < (int)ARRAY_SIZE(p->resumes));
		p->defer_r = nri_adjust_defer(adj, &p->resumes[p->n_resumes]);
		if (p->defer_r < 0)
			return errbuf_fail(err, p->defer_r, "too many waiting");
		p->n_resumes++;
		return -EINPROGRESS;
	}
	if (p->fail)
		return errbuf_fail(err, p->fail, "policy says no");
	if (p->adjust_cpus)
		assert_int_equal(nri_adjust_set_cpus(adj, p->adjust_cpus), 0);
	if (p->adjust_sched)
		assert_int_equal(nri_adjust_set_scheduler(adj, p->adjust_sched), 0);
	return add_update(p, upd);
}

static int p_update(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		    const char *cpus, struct nri_updates *upd, struct errbuf *err)
{
	struct pol *p = ud;

	p->updates++;
	snprintf(p->update_cpus, sizeof(p->update_cpus), "%s", cpus);
	return add_update(p, upd);
}

static int p_stop(void *ud, const struct nri_pod *pod, const struct nri_container *c,
		  struct nri_updates *upd, struct errbuf *err)
{
	struct pol *p = ud;

	p->stops++;
	return add_update(p, upd);
}

static int p_start(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	((struct pol *)ud)->starts++;
	return ((struct pol *)ud)->fail;
}

static int p_remove(void *ud, const struct nri_pod *pod, const struct nri_container *c)
{
	((struct pol *)ud)->removes++;
	return 0;
}

static void p_shutdown(void *ud)
{
	((struct pol *)ud)->shutdowns++;
}

static void p_push_done(void *ud, int r, const char *const *ids, size_t n)
{
	struct pol *p = ud;

	p->pushes++;
	p->push_r = r;
	p->push_failed = n;
	if (n)
		snprintf(p->push_failed_id, sizeof(p->push_failed_id), "%s", ids[0]);
}

static void p_configured(void *ud, const char *name, const char *version, const char *nri_version)
{
	struct pol *p = ud;

	p->configured++;
	snprintf(p->runtime, sizeof(p->runtime), "%s %s %s", name, version, nri_version);
}

/* create + stop + remove: what the reference driver subscribes (0x608). */
static const struct nri_handlers handlers = {
	.connected = p_connected,
	.configured = p_configured,
	.disconnected = p_disconnected,
	.synchronize = p_sync,
	.create_container = p_create,
	.stop_container = p_stop,
	.remove_container = p_remove,
	.shutdown = p_shutdown,
	.push_done = p_push_done,
};

/* ---- the runtime: a ttrpc mux serving conn 2 and calling on conn 1 ------------------------- */

struct rt {
	struct ttrpc_mux *m;
	struct nri_session *s;
	struct pol pol;
	struct nri_pipe pipe;
	int pl_err;		/* first error the session returned */
	int reg_code;		/* reply to RegisterPlugin; -1: hold it */
	uint32_t reg_stream;
	int reg_seen;
	char reg_name[64], reg_idx[8];
	int n_update_calls;
	size_t last_update_n;
	char last_update_id[64], last_update_cpus[32];
	size_t last_evict_n;
	char last_evict_id[64], last_evict_reason[128];
	/* The bytes of every UpdateContainers request, concatenated: being repeated
	 * fields, their updates pack as one request with all of them. */
	struct buf pushed;
	const char *fail_id;	/* UpdateContainers reports this one failed */
};

static int rt_write(void *ud, const void *buf, size_t len)
{
	pipe_buf_add(&((struct rt *)ud)->pipe.to_pl, buf, len);
	return 0;
}

static int pl_write(void *ud, const void *buf, size_t len)
{
	pipe_buf_add(&((struct rt *)ud)->pipe.to_rt, buf, len);
	return 0;
}

static int rt_request(void *ud, const struct ttrpc_request *rq)
{
	struct rt *rt = ud;

	assert_string_equal(rq->service, "nri.pkg.api.v1alpha1.Runtime");
	if (strcmp(rq->method, "RegisterPlugin") == 0) {
		Nri__RegisterPluginRequest *r =
			nri__register_plugin_request__unpack(NULL, rq->len, rq->payload);

		assert_non_null(r);
		rt->reg_seen++;
		snprintf(rt->reg_name, sizeof(rt->reg_name), "%s", r->plugin_name);
		snprintf(rt->reg_idx, sizeof(rt->reg_idx), "%s", r->plugin_idx);
		nri__register_plugin_request__free_unpacked(r, NULL);
		assert_true(rq->timeout_ns > 0);
		rt->reg_stream = rq->stream_id;
		if (rt->reg_code < 0)
			return 0;
		return ttrpc_mux_reply(rt->m, rq->stream_id, rt->reg_code, "invalid plugin", NULL,
				       0);
	}
	if (strcmp(rq->method, "UpdateContainers") == 0) {
		Nri__UpdateContainersRequest *r =
			nri__update_containers_request__unpack(NULL, rq->len, rq->payload);
		Nri__UpdateContainersResponse resp = NRI__UPDATE_CONTAINERS_RESPONSE__INIT;
		Nri__ContainerUpdate f = NRI__CONTAINER_UPDATE__INIT, *fp = &f;
		uint8_t out[256];
		size_t n;

		assert_non_null(r);
		rt->n_update_calls++;
		rt->last_update_n = r->n_update;
		rt->last_evict_n = r->n_evict;
		if (r->n_evict) {
			snprintf(rt->last_evict_id, sizeof(rt->last_evict_id), "%s",
				 r->evict[0]->container_id);
			snprintf(rt->last_evict_reason, sizeof(rt->last_evict_reason), "%s",
				 r->evict[0]->reason);
		}
		if (rq->len)
			pipe_buf_add(&rt->pushed, rq->payload, rq->len);
		if (r->n_update) {
			snprintf(rt->last_update_id, sizeof(rt->last_update_id), "%s",
				 r->update[0]->container_id);
			snprintf(rt->last_update_cpus, sizeof(rt->last_update_cpus), "%s",
				 r->update[0]->linux_->resources->cpu->cpus);
		}
		nri__update_containers_request__free_unpacked(r, NULL);
		if (rt->fail_id) {
			f.container_id = (char *)rt->fail_id;
			resp.n_failed = 1;
			resp.failed = &fp;
		}
		n = nri__update_containers_response__pack(&resp, out);
		return ttrpc_mux_reply(rt->m, rq->stream_id, TTRPC_OK, NULL, out, n);
	}
	return ttrpc_mux_reply(rt->m, rq->stream_id, TTRPC_UNIMPLEMENTED, "method", NULL, 0);
}

/* Moves bytes both ways until nothing moves or the session failed. */
static void pump(struct rt *rt)
{
	if (!rt->pl_err)
		rt->pl_err = nri_pipe_pump(&rt->pipe, rt->m, rt->s);
}

static int rt_setup_with(void **state, const struct nri_handlers *h, int reg_code)
{
	static const struct ttrpc_mux_ops ops = { .write = rt_write, .request = rt_request };
	struct rt *rt = calloc(1, sizeof(*rt));

	assert_non_null(rt);
	rt->reg_code = reg_code;
	assert_int_equal(ttrpc_mux_new(2, 1, &ops, rt, &rt->m), 0);
	assert_int_equal(nri_session_new(NULL, h, &rt->pol, pl_write, rt, &rt->s), 0);
	*state = rt;
	return 0;
}

static int rt_setup(void **state)
{
	return rt_setup_with(state, &handlers, TTRPC_OK);
}

static int rt_teardown(void **state)
{
	struct rt *rt = *state;

	nri_session_free(rt->s);
	ttrpc_mux_free(rt->m);
	nri_pipe_done(&rt->pipe);
	buf_done(&rt->pushed);
	free(rt);
	return 0;
}

/* A call from the runtime and its outcome. */
struct reply {
	int n, r, code;
	char msg[ERRBUF_MAX];
	uint8_t payload[8192];
	size_t len;
};

static void on_reply(void *ud, int r, int code, const char *msg, const uint8_t *p, size_t len)
{
	struct reply *x = ud;

	x->n++;
	x->r = r;
	x->code = code;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
	assert_true(len <= sizeof(x->payload));
	x->len = len;
	if (len)
		memcpy(x->payload, p, len);
}

static void rt_call_svc(struct rt *rt, const char *svc, const char *method,
			const ProtobufCMessage *msg, struct reply *x)
{
	static uint8_t buf[65536];
	size_t n = msg ? protobuf_c_message_pack(msg, buf) : 0;

	*x = (struct reply){ 0 };
	assert_int_equal(ttrpc_mux_call(rt->m, svc, method, buf, n, 2000, on_reply, x, NULL), 0);
	pump(rt);
}

static void rt_call(struct rt *rt, const char *method, const ProtobufCMessage *msg,
		    struct reply *x)
{
	rt_call_svc(rt, SVC_PLUGIN, method, msg, x);
}

static void start(struct rt *rt)
{
	assert_int_equal(nri_session_start(rt->s), 0);
	pump(rt);
	assert_int_equal(rt->pl_err, 0);
}

/* The reference: the protobuf-c tree of each update, as nri.c built it before it encoded
 * updates itself. */
struct pb_updates {
	Nri__ContainerUpdate **ptrs;
	Nri__ContainerUpdate *u;
	Nri__LinuxContainerUpdate *l;
	Nri__LinuxResources *r;
	Nri__LinuxCPU *c;
	size_t n;
};

static void pb_updates_init(struct pb_updates *p, const struct nri_update *v, size_t n)
{
	size_t k = n ? n : 1;

	p->ptrs = calloc(k, sizeof(*p->ptrs));
	p->u = calloc(k, sizeof(*p->u));
	p->l = calloc(k, sizeof(*p->l));
	p->r = calloc(k, sizeof(*p->r));
	p->c = calloc(k, sizeof(*p->c));
	assert_true(p->ptrs && p->u && p->l && p->r && p->c);
	for (size_t i = 0; i < n; i++) {
		nri__container_update__init(&p->u[i]);
		nri__linux_container_update__init(&p->l[i]);
		nri__linux_resources__init(&p->r[i]);
		nri__linux_cpu__init(&p->c[i]);
		p->c[i].cpus = (char *)v[i].cpus;
		p->r[i].cpu = &p->c[i];
		p->l[i].resources = &p->r[i];
		p->u[i].container_id = (char *)v[i].container_id;
		p->u[i].linux_ = &p->l[i];
		p->ptrs[i] = &p->u[i];
	}
	p->n = n;
}

static void pb_updates_done(struct pb_updates *p)
{
	free(p->ptrs);
	free(p->u);
	free(p->l);
	free(p->r);
	free(p->c);
}

static void assert_packs_as(const struct buf *got, const ProtobufCMessage *want)
{
	size_t len = protobuf_c_message_get_packed_size(want);
	uint8_t *w = malloc(len ? len : 1);

	assert_non_null(w);
	assert_int_equal(protobuf_c_message_pack(want, w), len);
	assert_int_equal(got->len, len);
	if (len)
		assert_memory_equal(pipe_bytes(got), w, len);
	free(w);
}

/* Objects for the requests. */
struct ctr_fixture {
	Nri__PodSandbox pod;
	Nri__LinuxPodSandbox pod_linux;
	Nri__Container c;
	Nri__LinuxContainer linux_;
	Nri__LinuxResources res;
	Nri__LinuxCPU cpu;
	char *env[2];
};

static void ctr_fixture(struct ctr_fixture *f, const char *pod_id, const char *uid,
			const char *cid, const char *pin)
{
	static char envbuf[4][32];
	static int k;
	char *e = envbuf[k++ % 4];

	nri__pod_sandbox__init(&f->pod);
	nri__linux_pod_sandbox__init(&f->pod_linux);
	nri__container__init(&f->c);
	nri__linux_container__init(&f->linux_);
	nri__linux_resources__init(&f->res);
	nri__linux_cpu__init(&f->cpu);
	f->pod.id = (char *)pod_id;
	f->pod.uid = (char *)uid;
	f->pod.name = "pod";
	f->pod.namespace_ = "default";
	f->pod_linux.cgroup_parent = "/kubepods";
	f->pod.linux_ = &f->pod_linux;
	f->c.id = (char *)cid;
	f->c.pod_sandbox_id = (char *)pod_id;
	f->c.name = "app";
	f->c.state = NRI__CONTAINER_STATE__CONTAINER_RUNNING;
	snprintf(e, 32, "PIN=%s", pin);
	f->env[0] = "HOME=/root";
	f->env[1] = e;
	f->c.env = f->env;
	f->c.n_env = 2;
	f->cpu.cpus = "0-3";
	f->res.cpu = &f->cpu;
	f->linux_.resources = &f->res;
	f->linux_.cgroups_path = "/kubepods/pod1/c1";
	f->c.linux_ = &f->linux_;
}

static void create(struct rt *rt, const char *cid, const char *pin, struct reply *x)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct ctr_fixture f;

	ctr_fixture(&f, "sb1", "uid-1", cid, pin);
	req.pod = &f.pod;
	req.container = &f.c;
	rt_call(rt, "CreateContainer", &req.base, x);
}

/* ---- registration and Configure ----------------------------------------------------------- */

static void test_nri_registers_as_dra_cpu_00(void **state)
{
	struct rt *rt = *state;

	assert_false(nri_session_is_registered(rt->s));
	start(rt);
	assert_int_equal(rt->reg_seen, 1);
	assert_int_equal(rt->reg_stream, 1);
	assert_string_equal(rt->reg_name, "dra.cpu");
	assert_string_equal(rt->reg_idx, "00");
	assert_true(nri_session_is_registered(rt->s));
	assert_int_equal(rt->pol.connected, 1);
	assert_int_equal(nri_session_stats(rt->s)->registrations, 1);
}

static void test_nri_answers_configure_before_the_register_reply(void **state)
{
	struct rt *rt = *state;
	Nri__ConfigureRequest req = NRI__CONFIGURE_REQUEST__INIT;
	Nri__ConfigureResponse *resp;
	struct reply x;

	rt->reg_code = -1; /* hold the RegisterPlugin reply */
	start(rt);
	assert_int_equal(rt->reg_seen, 1);
	assert_false(nri_session_is_registered(rt->s));
	req.runtime_name = "sim";
	req.runtime_version = "v0";
	req.registration_timeout = 5000;
	req.request_timeout = 2000;
	rt_call(rt, "Configure", &req.base, &x);
	assert_int_equal(x.n, 1);
	assert_int_equal(x.code, TTRPC_OK);
	/* create + stop + remove = 0x608, on the wire "10 88 0c" (wire-protocols 4.5) */
	assert_int_equal(x.len, 3);
	assert_memory_equal(x.payload, "\x10\x88\x0c", 3);
	resp = nri__configure_response__unpack(NULL, x.len, x.payload);
	assert_int_equal(resp->events, 0x608);
	nri__configure_response__free_unpacked(resp, NULL);
	/* now the reply */
	assert_int_equal(ttrpc_mux_reply(rt->m, rt->reg_stream, TTRPC_OK, NULL, NULL, 0), 0);
	pump(rt);
	assert_true(nri_session_is_registered(rt->s));
	assert_int_equal(rt->pol.connected, 1);
}

static void test_nri_refused_registration_ends_the_session(void **state)
{
	struct rt *rt = *state;

	rt->reg_code = TTRPC_UNKNOWN;
	assert_int_equal(nri_session_start(rt->s), 0);
	pump(rt);
	assert_int_equal(rt->pl_err, -ECONNREFUSED);
	assert_non_null(strstr(nri_session_why(rt->s), "registration refused"));
	assert_int_equal(rt->pol.connected, 0);
}

static void test_nri_unanswered_registration_times_out(void **state)
{
	struct rt *rt = *state;
	int64_t d;

	rt->reg_code = -1;
	start(rt);
	d = nri_session_next_deadline(rt->s);
	assert_true(d > ttrpc_now_ms() + 4000); /* 5 s default */
	assert_int_equal(nri_session_expire(rt->s, d - 1), 0);
	assert_int_equal(nri_session_expire(rt->s, d), -ETIMEDOUT);
	assert_non_null(strstr(nri_session_why(rt->s), "RegisterPlugin"));
	assert_int_equal(nri_session_stats(rt->s)->timeouts, 1);
}

static void test_nri_session_new_checks_name_and_index(void **state)
{
	struct nri_session *s = NULL;
	struct nri_config bad_idx = { .plugin_idx = "1" }, bad_idx2 = { .plugin_idx = "a0" },
			  bad_name = { .plugin_name = "dra cpu" }, empty = { .plugin_name = "" },
			  ok = { .plugin_name = "x_y.z+1-2", .plugin_idx = "99" };

	assert_int_equal(nri_session_new(&bad_idx, &handlers, NULL, pl_write, NULL, &s), -EINVAL);
	assert_int_equal(nri_session_new(&bad_idx2, &handlers, NULL, pl_write, NULL, &s), -EINVAL);
	assert_int_equal(nri_session_new(&bad_name, &handlers, NULL, pl_write, NULL, &s), -EINVAL);
	assert_int_equal(nri_session_new(&empty, &handlers, NULL, pl_write, NULL, &s), -EINVAL);
	assert_null(s);
	assert_int_equal(nri_session_new(&ok, &handlers, NULL, pl_write, NULL, &s), 0);
	nri_session_free(s);
	assert_null(nri_session_free(NULL));
}

static void test_nri_events_follow_handlers_and_never_zero(void **state)
{
	struct nri_session *s = NULL;
	struct nri_handlers h = { 0 };

	assert_int_equal(nri_session_new(NULL, &h, NULL, pl_write, NULL, &s), 0);
	assert_int_equal(nri_session_events(s), NRI_EVENT_BIT(NRI_EVENT_REMOVE_CONTAINER));
	nri_session_free(s);
	h.create_container = p_create;
	h.update_container = p_update;
	h.start_container = p_start;
	assert_int_equal(nri_session_new(NULL, &h, NULL, pl_write, NULL, &s), 0);
	assert_int_equal(nri_session_events(s), 0x8 | 0x80 | 0x20);
	nri_session_free(s);
}

/* ---- Synchronize ---------------------------------------------------------------------------- */

static void test_nri_synchronize_gives_views_and_returns_updates(void **state)
{
	struct rt *rt = *state;
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	Nri__SynchronizeResponse *resp;
	struct ctr_fixture f1, f2;
	Nri__PodSandbox *pods[2];
	Nri__Container *ctrs[2];
	struct reply x;

	start(rt);
	ctr_fixture(&f1, "sb1", "uid-1", "c1", "1");
	ctr_fixture(&f2, "sb2", "uid-2", "c2", "0");
	pods[0] = &f1.pod;
	pods[1] = &f2.pod;
	ctrs[0] = &f1.c;
	ctrs[1] = &f2.c;
	req.n_pods = 2;
	req.pods = pods;
	req.n_containers = 2;
	req.containers = ctrs;
	rt_call(rt, "Synchronize", &req.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.syncs, 1);
	assert_int_equal(rt->pol.sync_pods, 2);
	assert_int_equal(rt->pol.sync_ctrs, 2);
	assert_string_equal(rt->pol.sync_first_env, "HOME=/root");
	assert_string_equal(rt->pol.sync_pod_of_c1, "uid-2");
	assert_string_equal(rt->pol.sync_cgroups, "/kubepods/pod1/c1");
	assert_string_equal(rt->pol.sync_cpus, "0-3");
	resp = nri__synchronize_response__unpack(NULL, x.len, x.payload);
	assert_non_null(resp);
	assert_false(resp->more);
	assert_int_equal(resp->n_update, 2);
	assert_string_equal(resp->update[1]->container_id, "c2");
	assert_string_equal(resp->update[1]->linux_->resources->cpu->cpus, "1");
	nri__synchronize_response__free_unpacked(resp, NULL);
	assert_true(nri_session_is_synchronized(rt->s));
}

static void test_nri_synchronize_multi_part_answers_more_then_all(void **state)
{
	struct rt *rt = *state;
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	Nri__SynchronizeResponse *resp;
	struct ctr_fixture f[3];
	Nri__PodSandbox *pods[1];
	Nri__Container *ctrs[1];
	struct reply x;

	start(rt);
	for (int i = 0; i < 3; i++) {
		char id[8];

		snprintf(id, sizeof(id), "c%d", i);
		ctr_fixture(&f[i], i == 0 ? "sb1" : "sb9", "uid", strdup(id), "1");
		req.n_pods = i == 0;
		pods[0] = &f[i].pod;
		req.pods = pods;
		ctrs[0] = &f[i].c;
		req.n_containers = 1;
		req.containers = ctrs;
		req.more = i < 2;
		rt_call(rt, "Synchronize", &req.base, &x);
		free(f[i].c.id);
		assert_int_equal(x.code, TTRPC_OK);
		resp = nri__synchronize_response__unpack(NULL, x.len, x.payload);
		assert_non_null(resp);
		if (i < 2) {
			/* intermediate part: "more" and no updates, no handler yet */
			assert_true(resp->more);
			assert_int_equal(resp->n_update, 0);
			assert_int_equal(rt->pol.syncs, 0);
			assert_false(nri_session_is_synchronized(rt->s));
		} else {
			assert_false(resp->more);
			assert_int_equal(resp->n_update, 3);
		}
		nri__synchronize_response__free_unpacked(resp, NULL);
	}
	assert_int_equal(rt->pol.syncs, 1);
	assert_int_equal(rt->pol.sync_ctrs, 3);
	assert_int_equal(rt->pol.sync_pods, 1);
	assert_string_equal(rt->pol.sync_pod_of_c1, "(none)"); /* sb9 not listed */
	assert_int_equal(nri_session_stats(rt->s)->sync_parts, 3);
	assert_true(nri_session_is_synchronized(rt->s));
}

static void test_nri_synchronize_error_is_reported(void **state)
{
	struct rt *rt = *state;
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	struct reply x;

	start(rt);
	rt->pol.fail = -EINVAL;
	rt_call(rt, "Synchronize", &req.base, &x);
	assert_int_equal(x.code, TTRPC_UNKNOWN);
	assert_string_equal(x.msg, "policy says no");
	assert_false(nri_session_is_synchronized(rt->s));
	assert_int_equal(nri_session_stats(rt->s)->handler_errors, 1);
}

/* ---- container events ---------------------------------------------------------------------- */

static void test_nri_create_container_returns_adjustment_and_updates(void **state)
{
	struct rt *rt = *state;
	Nri__CreateContainerResponse *resp;
	struct reply x;

	start(rt);
	rt->pol.adjust_cpus = "2-3";
	rt->pol.update_id = "other";
	create(rt, "c7", "2-3", &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_string_equal(rt->pol.create_id, "c7");
	assert_string_equal(rt->pol.create_pod_uid, "uid-1");
	assert_string_equal(rt->pol.create_pin, "2-3");
	resp = nri__create_container_response__unpack(NULL, x.len, x.payload);
	assert_non_null(resp);
	assert_non_null(resp->adjust);
	assert_string_equal(resp->adjust->linux_->resources->cpu->cpus, "2-3");
	assert_int_equal(resp->n_update, 1);
	assert_string_equal(resp->update[0]->container_id, "other");
	assert_string_equal(resp->update[0]->linux_->resources->cpu->cpus, "0-1");
	nri__create_container_response__free_unpacked(resp, NULL);
}

static void test_nri_create_container_returns_the_scheduler_adjustment(void **state)
{
	struct rt *rt = *state;
	const struct nri_scheduler dl = { .policy = NRI_SCHED_DEADLINE,
					  .flags = 1u << NRI_SCHED_FLAG_RESET_ON_FORK,
					  .runtime = 2000000,
					  .deadline = 5000000,
					  .period = 10000000 };
	Nri__CreateContainerResponse *resp;
	Nri__LinuxScheduler *s;
	struct reply x;

	start(rt);
	rt->pol.adjust_cpus = "3";
	rt->pol.adjust_sched = &dl;
	create(rt, "c7", "3", &x);
	assert_int_equal(x.code, TTRPC_OK);
	resp = nri__create_container_response__unpack(NULL, x.len, x.payload);
	assert_non_null(resp);
	assert_string_equal(resp->adjust->linux_->resources->cpu->cpus, "3");
	s = resp->adjust->linux_->scheduler;
	assert_non_null(s);
	assert_int_equal(s->policy, NRI__LINUX_SCHEDULER_POLICY__SCHED_DEADLINE);
	assert_int_equal(s->policy, 7); /* upstream's number */
	assert_int_equal(s->n_flags, 1);
	assert_int_equal(s->flags[0], NRI__LINUX_SCHEDULER_FLAG__SCHED_FLAG_RESET_ON_FORK);
	assert_int_equal(s->runtime, 2000000);
	assert_int_equal(s->deadline, 5000000);
	assert_int_equal(s->period, 10000000);
	assert_int_equal(s->priority, 0);
	nri__create_container_response__free_unpacked(resp, NULL);
}

static void test_nri_scheduler_adjustment_rejects_unknown_values(void **state)
{
	struct nri_adjust *adj = NULL;
	struct nri_scheduler bad = { .policy = 5 }, flags = { .policy = NRI_SCHED_FIFO,
							       .flags = 1u << 9 };

	/* the checks come before any use of the adjustment */
	assert_int_equal(nri_adjust_set_scheduler(adj, &bad), -EINVAL);
	assert_int_equal(nri_adjust_set_scheduler(adj, &flags), -EINVAL);
}

static void test_nri_configure_tells_who_the_runtime_is(void **state)
{
	struct rt *rt = *state;
	Nri__ConfigureRequest req = NRI__CONFIGURE_REQUEST__INIT;
	struct reply x;

	start(rt);
	req.runtime_name = "containerd";
	req.runtime_version = "2.2.1";
	req.nri_version = "v0.11.0";
	rt_call(rt, "Configure", &req.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.configured, 1);
	assert_string_equal(rt->pol.runtime, "containerd 2.2.1 v0.11.0");
}

static void test_nri_push_evict_asks_the_runtime(void **state)
{
	struct rt *rt = *state;

	assert_int_equal(nri_session_push_evict(rt->s, "c1", "no bandwidth"), -ENOTCONN);
	start(rt);
	assert_int_equal(nri_session_push_evict(rt->s, "", "x"), -EINVAL);
	assert_int_equal(nri_session_push_evict(rt->s, "c1", "kernel said EBUSY"), 0);
	pump(rt);
	assert_int_equal(rt->n_update_calls, 1);
	assert_int_equal(rt->last_update_n, 0);
	assert_int_equal(rt->last_evict_n, 1);
	assert_string_equal(rt->last_evict_id, "c1");
	assert_string_equal(rt->last_evict_reason, "kernel said EBUSY");
	assert_int_equal(rt->pol.pushes, 1);
	assert_int_equal(rt->pol.push_r, 0);
}

static void test_nri_create_container_without_adjustment_is_empty(void **state)
{
	struct rt *rt = *state;
	struct reply x;

	start(rt);
	create(rt, "c7", "", &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(x.len, 0); /* CreateContainerResponse{} */
}

static void test_nri_create_container_error_fails_creation(void **state)
{
	struct rt *rt = *state;
	struct reply x;

	start(rt);
	rt->pol.fail = -EBUSY;
	create(rt, "c7", "1", &x);
	assert_int_equal(x.r, 0);
	assert_int_equal(x.code, TTRPC_UNKNOWN);
	assert_string_equal(x.msg, "policy says no");
	assert_int_equal(nri_session_stats(rt->s)->handler_errors, 1);
	assert_int_equal(rt->pl_err, 0); /* the connection lives on */
}

/* A CreateContainer as create() sends it, with the runtime's timeout given. */
static void create_timeout(struct rt *rt, const char *cid, unsigned timeout_ms, struct reply *x)
{
	static uint8_t buf[4096];
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct ctr_fixture f;
	size_t n;

	ctr_fixture(&f, "sb1", "uid-1", cid, "1");
	req.pod = &f.pod;
	req.container = &f.c;
	n = nri__container_request__pack(&req, buf);
	*x = (struct reply){ 0 };
	assert_int_equal(ttrpc_mux_call(rt->m, SVC_PLUGIN, "CreateContainer", buf, n, timeout_ms,
					on_reply, x, NULL),
			 0);
	pump(rt);
}

static void test_nri_create_waits_then_answers_from_the_next_run(void **state)
{
	struct rt *rt = *state;
	Nri__CreateContainerResponse *resp;
	struct reply x, y;

	start(rt);
	rt->pol.wait_runs = 2; /* waits twice: a container with two claims to read */
	rt->pol.adjust_cpus = "2-3";
	create(rt, "c7", "2-3", &x);
	assert_int_equal(x.n, 0); /* no answer yet */
	assert_int_equal(rt->pol.creates, 1);
	assert_int_equal(rt->pol.n_resumes, 1);
	assert_true(rt->pol.wait_left > 1000 && rt->pol.wait_left <= NRI_CREATE_WAIT_MS);
	/* the connection is not blocked meanwhile */
	rt->pol.wait_runs = 0;
	create(rt, "c8", "1", &y);
	assert_int_equal(y.n, 1);
	assert_int_equal(y.code, TTRPC_OK);
	rt->pol.wait_runs = 2;
	assert_int_equal(nri_resume_run(&rt->pol.resumes[0]), 0);
	pump(rt);
	assert_int_equal(x.n, 0);
	assert_int_equal(rt->pol.last_attempt, 1);
	assert_int_equal(rt->pol.n_resumes, 2);
	assert_int_equal(rt->pol.resumes[1].token, rt->pol.resumes[0].token);
	assert_int_equal(nri_resume_run(&rt->pol.resumes[1]), 0);
	pump(rt);
	assert_int_equal(x.n, 1);
	assert_int_equal(rt->pol.last_attempt, 2);
	assert_int_equal(x.code, TTRPC_OK);
	resp = nri__create_container_response__unpack(NULL, x.len, x.payload);
	assert_non_null(resp);
	assert_string_equal(resp->adjust->linux_->resources->cpu->cpus, "2-3");
	nri__create_container_response__free_unpacked(resp, NULL);
	assert_string_equal(rt->pol.create_id, "c7"); /* the same request, run again */
	/* answered: a late wake does nothing */
	assert_int_equal(nri_resume_run(&rt->pol.resumes[0]), -ENOENT);
	assert_int_equal(nri_session_next_deadline(rt->s), -1);
	assert_int_equal(nri_session_stats(rt->s)->create_waits, 1);
	assert_int_equal(nri_session_stats(rt->s)->create_wait_timeouts, 0);
	assert_int_equal(rt->pl_err, 0);
}

static void test_nri_create_wait_ends_with_a_final_run(void **state)
{
	struct rt *rt = *state;
	struct reply x, y;
	int64_t d, now = ttrpc_now_ms();

	start(rt);
	rt->pol.wait_runs = 1;
	/* the runtime gives 400 ms: the wait ends at 3/4 of that */
	create_timeout(rt, "c7", 400, &x);
	assert_true(rt->pol.wait_left <= 300 && rt->pol.wait_left > 200);
	d = nri_session_next_deadline(rt->s);
	assert_true(d >= now + 200 && d <= now + 300 + 50);
	assert_int_equal(nri_session_expire(rt->s, d - 1), 0);
	assert_int_equal(rt->pol.finals, 0);
	/* the policy refuses on its final run: that is the answer */
	rt->pol.final_r = -EPERM;
	assert_int_equal(nri_session_expire(rt->s, d), 0);
	pump(rt);
	assert_int_equal(rt->pol.finals, 1);
	assert_int_equal(x.n, 1);
	assert_int_equal(x.code, TTRPC_UNKNOWN);
	assert_string_equal(x.msg, "claim not read in time");
	assert_int_equal(nri_resume_run(&rt->pol.resumes[0]), -ENOENT);
	/* a policy that still cannot decide: answered as a timeout */
	rt->pol.final_r = -EINPROGRESS;
	create(rt, "c8", "1", &y);
	assert_int_equal(y.n, 0);
	assert_int_equal(nri_session_expire(rt->s, nri_session_next_deadline(rt->s)), 0);
	pump(rt);
	assert_int_equal(y.n, 1);
	assert_int_equal(y.code, TTRPC_UNKNOWN);
	assert_non_null(strstr(y.msg, "no decision within the 1500 ms"));
	assert_int_equal(nri_session_stats(rt->s)->create_waits, 2);
	assert_int_equal(nri_session_stats(rt->s)->create_wait_timeouts, 1);
	assert_int_equal(rt->pl_err, 0);
}

static void test_nri_update_and_stop_reach_their_handlers(void **state)
{
	struct rt *rt = *state;
	Nri__UpdateContainerRequest ureq = NRI__UPDATE_CONTAINER_REQUEST__INIT;
	Nri__ContainerRequest sreq = NRI__CONTAINER_REQUEST__INIT;
	Nri__LinuxResources res = NRI__LINUX_RESOURCES__INIT;
	Nri__LinuxCPU cpu = NRI__LINUX_CPU__INIT;
	Nri__StopContainerResponse *sresp;
	struct nri_handlers h = handlers;
	struct ctr_fixture f;
	struct reply x;

	/* a session that also subscribes UpdateContainer */
	nri_session_free(rt->s);
	h.update_container = p_update;
	assert_int_equal(nri_session_new(NULL, &h, &rt->pol, pl_write, rt, &rt->s), 0);
	start(rt);
	ctr_fixture(&f, "sb1", "uid-1", "c1", "1");
	cpu.cpus = "5";
	res.cpu = &cpu;
	ureq.pod = &f.pod;
	ureq.container = &f.c;
	ureq.linux_resources = &res;
	rt_call(rt, "UpdateContainer", &ureq.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.updates, 1);
	assert_string_equal(rt->pol.update_cpus, "5");

	rt->pol.update_id = "c9";
	sreq.pod = &f.pod;
	sreq.container = &f.c;
	rt_call(rt, "StopContainer", &sreq.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.stops, 1);
	sresp = nri__stop_container_response__unpack(NULL, x.len, x.payload);
	assert_int_equal(sresp->n_update, 1);
	assert_string_equal(sresp->update[0]->container_id, "c9");
	nri__stop_container_response__free_unpacked(sresp, NULL);

	rt_call(rt, "RemoveContainer", &sreq.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(x.len, 0);
	assert_int_equal(rt->pol.removes, 1);
}

static void test_nri_unserved_methods_answer_unimplemented(void **state)
{
	struct rt *rt = *state;
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct ctr_fixture f;
	struct reply x;

	start(rt);
	ctr_fixture(&f, "sb1", "uid-1", "c1", "1");
	req.pod = &f.pod;
	req.container = &f.c;
	rt_call(rt, "FrobnicateContainer", NULL, &x);
	assert_int_equal(x.code, TTRPC_UNIMPLEMENTED);
	assert_string_equal(x.msg, "method FrobnicateContainer");
	/* not subscribed: no start handler */
	rt_call(rt, "StartContainer", &req.base, &x);
	assert_int_equal(x.code, TTRPC_UNIMPLEMENTED);
	rt_call(rt, "RunPodSandbox", NULL, &x);
	assert_int_equal(x.code, TTRPC_UNIMPLEMENTED);
	rt_call(rt, "UpdateContainer", &req.base, &x);
	assert_int_equal(x.code, TTRPC_UNIMPLEMENTED);
	rt_call_svc(rt, "some.other.Service", "Configure", NULL, &x);
	assert_int_equal(x.code, TTRPC_UNIMPLEMENTED);
	assert_string_equal(x.msg, "service some.other.Service");
	assert_int_equal(rt->pol.starts, 0);
	assert_int_equal(nri_session_stats(rt->s)->unimplemented, 5);
	assert_int_equal(rt->pl_err, 0);
}

static void test_nri_state_change_reaches_notification_handlers(void **state)
{
	struct rt *rt = *state;
	Nri__StateChangeEvent ev = NRI__STATE_CHANGE_EVENT__INIT;
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct nri_handlers h = handlers;
	struct ctr_fixture f;
	struct reply x;

	nri_session_free(rt->s);
	h.start_container = p_start;
	assert_int_equal(nri_session_new(NULL, &h, &rt->pol, pl_write, rt, &rt->s), 0);
	start(rt);
	ctr_fixture(&f, "sb1", "uid-1", "c1", "1");
	ev.event = NRI__EVENT__START_CONTAINER;
	ev.pod = &f.pod;
	ev.container = &f.c;
	rt_call(rt, "StateChange", &ev.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.starts, 1);
	/* a notification handler's error is logged; the runtime gets ok */
	rt->pol.fail = -EIO;
	req.pod = &f.pod;
	req.container = &f.c;
	rt_call(rt, "StartContainer", &req.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.starts, 2);
	/* events we do not observe are acknowledged */
	ev.event = NRI__EVENT__RUN_POD_SANDBOX;
	rt_call(rt, "StateChange", &ev.base, &x);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(rt->pol.starts, 2);
}

static void test_nri_undecodable_event_drops_the_connection(void **state)
{
	struct rt *rt = *state;
	static const uint8_t junk[] = { 0x12, 0x40, 0x01 }; /* container, length past the end */
	struct reply x = { 0 };

	start(rt);
	assert_int_equal(ttrpc_mux_call(rt->m, SVC_PLUGIN, "CreateContainer", junk, sizeof(junk),
					0, on_reply, &x, NULL),
			 0);
	pump(rt);
	assert_int_equal(rt->pl_err, -EPROTO);
	assert_non_null(strstr(nri_session_why(rt->s), "undecodable CreateContainer"));
	assert_int_equal(nri_session_stats(rt->s)->protocol_errors, 1);
	assert_int_equal(rt->pol.creates, 0);
	ttrpc_mux_free(rt->m); /* x is on this stack */
	rt->m = NULL;
}

/* A StateChange request as the runtime would frame it, on a stream id of our
 * choosing (the runtime's mux would never pick a bad one). */
static size_t raw_state_change(uint8_t *out, size_t cap, uint32_t sid)
{
	Nri__StateChangeEvent ev = NRI__STATE_CHANGE_EVENT__INIT;
	Ttrpc__Request rq = TTRPC__REQUEST__INIT;
	uint8_t payload[64];
	size_t pl, bl;

	ev.event = NRI__EVENT__RUN_POD_SANDBOX;
	pl = nri__state_change_event__pack(&ev, payload);
	rq.service = SVC_PLUGIN;
	rq.method = "StateChange";
	rq.payload.data = payload;
	rq.payload.len = pl;
	bl = ttrpc__request__get_packed_size(&rq);
	assert_true(18 + bl <= cap);
	ttrpc__request__pack(&rq, out + 18);
	for (int i = 0; i < 4; i++) {
		out[i] = (uint8_t)(1u >> (24 - 8 * i)); /* conn 1: the plugin serves */
		out[4 + i] = (uint8_t)((10 + bl) >> (24 - 8 * i));
		out[8 + i] = (uint8_t)(bl >> (24 - 8 * i));
		out[12 + i] = (uint8_t)(sid >> (24 - 8 * i));
	}
	out[16] = 1; /* request */
	out[17] = 0;
	return 18 + bl;
}

/* What the plugin wrote back for one raw request: stream id, status. */
static void take_plugin_reply(struct rt *rt, uint32_t *sid, int *code, char *msg, size_t msz)
{
	struct buf *b = &rt->pipe.to_rt;
	const uint8_t *p = pipe_bytes(b);
	Ttrpc__Response *resp;

	assert_true(b->len >= 18);
	assert_int_equal(p[3], 1);
	assert_int_equal(p[16], 2); /* response */
	*sid = (uint32_t)p[12] << 24 | (uint32_t)p[13] << 16 | (uint32_t)p[14] << 8 | p[15];
	resp = ttrpc__response__unpack(NULL, b->len - 18, p + 18);
	assert_non_null(resp);
	*code = resp->status ? resp->status->code : 0;
	snprintf(msg, msz, "%s", resp->status ? resp->status->message : "");
	ttrpc__response__free_unpacked(resp, NULL);
	buf_reset(b);
}

/* A CreateContainer for container cid as raw bytes on stream sid. */
static size_t raw_create(uint8_t *out, size_t cap, uint32_t sid, const char *cid)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	Ttrpc__Request rq = TTRPC__REQUEST__INIT;
	struct ctr_fixture f;
	uint8_t payload[1024];
	size_t bl;

	ctr_fixture(&f, "sb1", "uid-1", cid, "1");
	req.pod = &f.pod;
	req.container = &f.c;
	assert_true(nri__container_request__get_packed_size(&req) <= sizeof(payload));
	rq.service = SVC_PLUGIN;
	rq.method = "CreateContainer";
	rq.payload.data = payload;
	rq.payload.len = nri__container_request__pack(&req, payload);
	bl = ttrpc__request__get_packed_size(&rq);
	assert_true(18 + bl <= cap);
	ttrpc__request__pack(&rq, out + 18);
	for (int i = 0; i < 4; i++) {
		out[i] = (uint8_t)(1u >> (24 - 8 * i));
		out[4 + i] = (uint8_t)((10 + bl) >> (24 - 8 * i));
		out[8 + i] = (uint8_t)(bl >> (24 - 8 * i));
		out[12 + i] = (uint8_t)(sid >> (24 - 8 * i));
	}
	out[16] = 1;
	out[17] = 0;
	return 18 + bl;
}

/* More waiting creates than a runtime mux of ours may have calls pending: fed
 * as raw requests, as containerd's many workers would send them. */
static void test_nri_waiting_creates_are_capped_and_go_with_the_session(void **state)
{
	struct rt *rt = *state;
	uint8_t frame[2048];
	char id[16], msg[ERRBUF_MAX];
	uint32_t sid;
	int code;

	start(rt);
	rt->pol.wait_runs = 1;
	for (unsigned i = 0; i <= NRI_WAITING_MAX; i++) {
		snprintf(id, sizeof(id), "c%u", i);
		assert_int_equal(nri_session_feed(rt->s, frame,
						  raw_create(frame, sizeof(frame), 101 + 2 * i, id)),
				 0);
		if (i < NRI_WAITING_MAX)
			assert_int_equal(rt->pipe.to_rt.len, 0); /* waiting: no answer */
	}
	/* one over: refused at once, with the policy's reason */
	assert_int_equal(rt->pol.defer_r, -EBUSY);
	take_plugin_reply(rt, &sid, &code, msg, sizeof(msg));
	assert_int_equal(sid, 101 + 2 * NRI_WAITING_MAX);
	assert_int_equal(code, TTRPC_UNKNOWN);
	assert_string_equal(msg, "too many waiting");
	/* the first one decides: room for one more */
	rt->pol.wait_runs = 0;
	assert_int_equal(nri_resume_run(&rt->pol.resumes[0]), 0);
	take_plugin_reply(rt, &sid, &code, msg, sizeof(msg));
	assert_int_equal(sid, 101);
	assert_int_equal(code, TTRPC_OK);
	rt->pol.wait_runs = 1;
	assert_int_equal(nri_session_feed(rt->s, frame,
					  raw_create(frame, sizeof(frame), 1001, "late")),
			 0);
	assert_int_equal(rt->pol.defer_r, 0);
	assert_int_equal(rt->pipe.to_rt.len, 0);
	/* the teardown frees the session with 256 requests waiting (ASan: no leak) */
}

/* A request on an even stream id, or reusing one: INVALID_ARGUMENT on that id
 * (containerd/ttrpc's words), no handler runs, the session goes on. */
static void test_nri_bad_stream_ids_are_answered_and_the_session_lives(void **state)
{
	struct rt *rt = *state;
	Nri__StateChangeEvent ev = NRI__STATE_CHANGE_EVENT__INIT;
	static const uint32_t bad[] = { 2, 1, 0 }; /* even; the one just used; zero */
	uint8_t buf[256];
	struct reply x;
	uint32_t sid;
	int code;
	char msg[128];

	uint64_t served;

	start(rt);
	ev.event = NRI__EVENT__RUN_POD_SANDBOX;
	rt_call(rt, "StateChange", &ev.base, &x); /* stream 1 */
	assert_int_equal(x.code, TTRPC_OK);
	served = nri_session_stats(rt->s)->requests;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = raw_state_change(buf, sizeof(buf), bad[i]);

		assert_int_equal(nri_session_feed(rt->s, buf, n), 0);
		take_plugin_reply(rt, &sid, &code, msg, sizeof(msg));
		assert_int_equal(sid, bad[i]);
		assert_int_equal(code, TTRPC_INVALID_ARGUMENT);
		assert_string_equal(msg, bad[i] & 1 ? "StreamID cannot be re-used and must increment"
						    : "StreamID must be odd for client initiated streams");
	}
	assert_int_equal(nri_session_stats(rt->s)->protocol_errors, 0);
	assert_int_equal(nri_session_stats(rt->s)->requests, served);
	/* the same session still serves the runtime (stream 3) */
	rt_call(rt, "StateChange", &ev.base, &x);
	assert_int_equal(rt->pl_err, 0);
	assert_int_equal(x.n, 1);
	assert_int_equal(x.code, TTRPC_OK);
	assert_int_equal(nri_session_stats(rt->s)->requests, served + 1);
	assert_int_equal(rt->pol.disconnected, 0);
}

static void test_nri_create_without_container_is_an_error_reply(void **state)
{
	struct rt *rt = *state;
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct reply x;

	start(rt);
	rt_call(rt, "CreateContainer", &req.base, &x);
	assert_int_equal(x.code, TTRPC_INVALID_ARGUMENT);
	assert_int_equal(rt->pol.creates, 0);
}

static void test_nri_shutdown_is_answered_then_ends_the_session(void **state)
{
	struct rt *rt = *state;
	struct reply x = { 0 };

	start(rt);
	assert_int_equal(ttrpc_mux_call(rt->m, SVC_PLUGIN, "Shutdown", NULL, 0, 0, on_reply, &x,
					NULL),
			 0);
	pump(rt);
	assert_int_equal(rt->pl_err, -ESHUTDOWN);
	assert_int_equal(rt->pol.shutdowns, 1);
	/* the reply was queued before the session ended */
	assert_true(rt->pipe.to_rt.len > 0);
	assert_int_equal(ttrpc_mux_feed(rt->m, pipe_bytes(&rt->pipe.to_rt), rt->pipe.to_rt.len),
			 0);
	assert_int_equal(x.n, 1);
	assert_int_equal(x.code, TTRPC_OK);
	buf_reset(&rt->pipe.to_rt);
}

static void test_nri_disconnected_follows_connected(void **state)
{
	struct rt *rt = *state;

	start(rt);
	rt->s = nri_session_free(rt->s);
	assert_int_equal(rt->pol.disconnected, 1);
	assert_int_equal(rt->pol.disconnect_r, -ECONNRESET);
}

/* ---- UpdateContainers --------------------------------------------------------------------- */

static void test_nri_push_updates_calls_update_containers(void **state)
{
	struct rt *rt = *state;
	const struct nri_update u[] = { { "c1", "0-1" }, { "c2", "3" } };

	assert_int_equal(nri_session_push_updates(rt->s, u, 2), -ENOTCONN);
	start(rt);
	rt->fail_id = "c2";
	assert_int_equal(nri_session_push_updates(rt->s, u, 2), 0);
	pump(rt);
	assert_int_equal(rt->n_update_calls, 1);
	assert_int_equal(rt->last_update_n, 2);
	assert_string_equal(rt->last_update_id, "c1");
	assert_string_equal(rt->last_update_cpus, "0-1");
	assert_int_equal(rt->pol.pushes, 1);
	assert_int_equal(rt->pol.push_r, 0);
	assert_int_equal(rt->pol.push_failed, 1);
	assert_string_equal(rt->pol.push_failed_id, "c2");
	assert_int_equal(nri_session_stats(rt->s)->updates_pushed, 2);
	assert_int_equal(nri_session_stats(rt->s)->updates_failed, 1);
}

static void test_nri_push_updates_splits_large_batches(void **state)
{
	struct rt *rt = *state;
	Nri__UpdateContainersRequest want = NRI__UPDATE_CONTAINERS_REQUEST__INIT;
	size_t n = 20000;
	struct nri_update *u = calloc(n, sizeof(*u));
	static char ids[20000][80];
	struct pb_updates pu;

	start(rt);
	for (size_t i = 0; i < n; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%064zu", i);
		u[i] = (struct nri_update){ ids[i], "0-1" };
	}
	assert_int_equal(nri_session_push_updates(rt->s, u, n), 0);
	pump(rt);
	assert_int_equal(rt->n_update_calls, 2); /* ~1.7 MB in 1 MiB chunks */
	assert_int_equal(rt->pol.pushes, 2);
	assert_int_equal(nri_session_stats(rt->s)->updates_pushed, n);
	/* cut between updates: the two requests hold every update once, in order */
	pb_updates_init(&pu, u, n);
	want.n_update = pu.n;
	want.update = pu.ptrs;
	assert_packs_as(&rt->pushed, &want.base);
	pb_updates_done(&pu);
	free(u);
}

static void test_nri_push_updates_validates_input(void **state)
{
	struct rt *rt = *state;

	start(rt);
	assert_int_equal(nri_session_push_updates(rt->s, &(struct nri_update){ "c1", "" }, 1),
			 -EINVAL);
	assert_int_equal(nri_session_push_updates(rt->s, &(struct nri_update){ "c1", "x" }, 1),
			 -EINVAL);
	assert_int_equal(nri_session_push_updates(rt->s, &(struct nri_update){ "", "1" }, 1),
			 -EINVAL);
	assert_int_equal(rt->n_update_calls, 0);
}

static void test_nri_push_unanswered_reports_timeout_and_lives_on(void **state)
{
	struct rt *rt = *state;
	int64_t d;

	start(rt);
	assert_int_equal(nri_session_push_updates(rt->s, &(struct nri_update){ "c1", "1" }, 1), 0);
	/* do not let the runtime see it */
	buf_reset(&rt->pipe.to_rt);
	d = nri_session_next_deadline(rt->s);
	assert_true(d > 0);
	assert_int_equal(nri_session_expire(rt->s, d), 0);
	assert_int_equal(rt->pol.pushes, 1);
	assert_int_equal(rt->pol.push_r, -ETIMEDOUT);
}

/* ---- updates on the wire: byte for byte what protobuf-c packs ------------------------------ */

/* Update lists for the encoder: none; one; a pool change reaching 500 containers; ids and a
 * cpu list whose lengths take 1-, 2- and 3-byte varints; lists changing from one update to
 * the next and back. */
#define N_UPDATE_SETS 6

/* "0,2,4,...,8190": its length takes a 3-byte varint. */
static const char *long_cpu_list(void)
{
	static char s[20480];
	size_t o = 0;

	if (!*s)
		for (int c = 0; c < 8192; c += 2)
			o += (size_t)snprintf(s + o, sizeof(s) - o, "%s%d", c ? "," : "", c);
	assert_true(strlen(s) > 16383);
	return s;
}

static size_t update_set(int which, const struct nri_update **ret)
{
	static const size_t id_lens[] = { 1, 127, 128, 1023, 1024 };
	static const char *const mixed[] = { "0-1", "2-3", "0-1", "0-1", "4", "2-3" };
	static struct nri_update v[500];
	static char ids[500][1025];
	size_t n = 0;

	switch (which) {
	case 1:
		v[n++] = (struct nri_update){ "c1", "0-1" };
		break;
	case 2:
		for (; n < 500; n++) {
			snprintf(ids[n], sizeof(ids[n]), "%064zx", n * 2654435761u);
			v[n] = (struct nri_update){ ids[n], "1-127,129-1023" };
		}
		break;
	case 3:
		for (; n < ARRAY_SIZE(id_lens); n++) {
			memset(ids[n], 'a' + (int)n, id_lens[n]);
			ids[n][id_lens[n]] = 0;
			v[n] = (struct nri_update){ ids[n], "3" };
		}
		break;
	case 4:
		v[n++] = (struct nri_update){ "c1", long_cpu_list() };
		v[n++] = (struct nri_update){ "c2", "7" };
		v[n++] = (struct nri_update){ "c3", long_cpu_list() };
		break;
	case 5:
		for (; n < ARRAY_SIZE(mixed); n++) {
			snprintf(ids[n], sizeof(ids[n]), "m%zu", n);
			v[n] = (struct nri_update){ ids[n], mixed[n] };
		}
		break;
	}
	*ret = v;
	return n;
}

struct raw_reply {
	int n, code;
	struct buf b;
};

static void on_raw_reply(void *ud, int r, int code, const char *msg, const uint8_t *p,
			 size_t len)
{
	struct raw_reply *x = ud;

	x->n++;
	x->code = r < 0 ? r : code;
	buf_reset(&x->b);
	if (len)
		pipe_buf_add(&x->b, p, len);
}

/* A call whose reply may be larger than struct reply holds: its payload in x->b. */
static void rt_call_raw(struct rt *rt, const char *method, const ProtobufCMessage *msg,
			struct raw_reply *x)
{
	static uint8_t buf[4096];
	size_t n = protobuf_c_message_pack(msg, buf);

	x->n = 0;
	assert_int_equal(ttrpc_mux_call(rt->m, SVC_PLUGIN, method, buf, n, 2000, on_raw_reply, x,
					NULL),
			 0);
	pump(rt);
	assert_int_equal(x->n, 1);
	assert_int_equal(x->code, TTRPC_OK);
}

static void test_nri_create_reply_is_what_protobuf_c_packs(void **state)
{
	struct rt *rt = *state;
	/* no adjustment, one that fits before the updates, one that does not */
	const char *const adjusts[] = { NULL, "2-3", long_cpu_list() };
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct raw_reply x = { 0 };
	struct ctr_fixture f;

	start(rt);
	ctr_fixture(&f, "sb1", "uid-1", "c7", "");
	req.pod = &f.pod;
	req.container = &f.c;
	for (size_t a = 0; a < ARRAY_SIZE(adjusts); a++)
		for (int k = 0; k < N_UPDATE_SETS; k++) {
			Nri__CreateContainerResponse want = NRI__CREATE_CONTAINER_RESPONSE__INIT;
			Nri__ContainerAdjustment adj = NRI__CONTAINER_ADJUSTMENT__INIT;
			Nri__LinuxContainerAdjustment ladj = NRI__LINUX_CONTAINER_ADJUSTMENT__INIT;
			Nri__LinuxResources res = NRI__LINUX_RESOURCES__INIT;
			Nri__LinuxCPU cpu = NRI__LINUX_CPU__INIT;
			struct pb_updates pu;

			rt->pol.n_out = update_set(k, &rt->pol.out);
			rt->pol.adjust_cpus = adjusts[a];
			rt_call_raw(rt, "CreateContainer", &req.base, &x);
			if (adjusts[a]) {
				cpu.cpus = (char *)adjusts[a];
				res.cpu = &cpu;
				ladj.resources = &res;
				adj.linux_ = &ladj;
				want.adjust = &adj;
			}
			pb_updates_init(&pu, rt->pol.out, rt->pol.n_out);
			want.n_update = pu.n;
			want.update = pu.ptrs;
			assert_packs_as(&x.b, &want.base);
			pb_updates_done(&pu);
		}
	buf_done(&x.b);
}

static void test_nri_update_and_stop_replies_are_what_protobuf_c_packs(void **state)
{
	struct rt *rt = *state;
	Nri__UpdateContainerRequest ureq = NRI__UPDATE_CONTAINER_REQUEST__INIT;
	Nri__ContainerRequest sreq = NRI__CONTAINER_REQUEST__INIT;
	struct nri_handlers h = handlers;
	struct raw_reply x = { 0 };
	struct ctr_fixture f;

	nri_session_free(rt->s);
	h.update_container = p_update;
	assert_int_equal(nri_session_new(NULL, &h, &rt->pol, pl_write, rt, &rt->s), 0);
	start(rt);
	ctr_fixture(&f, "sb1", "uid-1", "c1", "1");
	ureq.pod = sreq.pod = &f.pod;
	ureq.container = sreq.container = &f.c;
	for (int k = 0; k < N_UPDATE_SETS; k++) {
		Nri__UpdateContainerResponse uwant = NRI__UPDATE_CONTAINER_RESPONSE__INIT;
		Nri__StopContainerResponse swant = NRI__STOP_CONTAINER_RESPONSE__INIT;
		struct pb_updates pu;

		rt->pol.n_out = update_set(k, &rt->pol.out);
		pb_updates_init(&pu, rt->pol.out, rt->pol.n_out);
		rt_call_raw(rt, "UpdateContainer", &ureq.base, &x);
		uwant.n_update = pu.n;
		uwant.update = pu.ptrs;
		assert_packs_as(&x.b, &uwant.base);
		rt_call_raw(rt, "StopContainer", &sreq.base, &x);
		swant.n_update = pu.n;
		swant.update = pu.ptrs;
		assert_packs_as(&x.b, &swant.base);
		pb_updates_done(&pu);
	}
	buf_done(&x.b);
}

static void test_nri_synchronize_reply_is_what_protobuf_c_packs(void **state)
{
	struct rt *rt = *state;
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	struct raw_reply x = { 0 };

	start(rt);
	for (int k = 0; k < N_UPDATE_SETS; k++) {
		Nri__SynchronizeResponse want = NRI__SYNCHRONIZE_RESPONSE__INIT;
		struct pb_updates pu;

		rt->pol.n_out = update_set(k, &rt->pol.out);
		rt_call_raw(rt, "Synchronize", &req.base, &x);
		pb_updates_init(&pu, rt->pol.out, rt->pol.n_out);
		want.n_update = pu.n;
		want.update = pu.ptrs;
		assert_packs_as(&x.b, &want.base);
		pb_updates_done(&pu);
	}
	assert_int_equal(rt->pol.syncs, N_UPDATE_SETS);
	buf_done(&x.b);
}

static void test_nri_push_request_is_what_protobuf_c_packs(void **state)
{
	struct rt *rt = *state;

	start(rt);
	for (int k = 0; k < N_UPDATE_SETS; k++) {
		Nri__UpdateContainersRequest want = NRI__UPDATE_CONTAINERS_REQUEST__INIT;
		const struct nri_update *u;
		size_t n = update_set(k, &u);
		int calls = rt->n_update_calls;
		struct pb_updates pu;

		buf_reset(&rt->pushed);
		assert_int_equal(nri_session_push_updates(rt->s, u, n), 0);
		pump(rt);
		/* nothing to push: no call */
		assert_int_equal(rt->n_update_calls, calls + (n > 0));
		pb_updates_init(&pu, u, n);
		want.n_update = pu.n;
		want.update = pu.ptrs;
		assert_packs_as(&rt->pushed, &want.base);
		pb_updates_done(&pu);
	}
}

/* ---- outputs and helpers ------------------------------------------------------------------ */

static void test_nri_adjust_and_updates_reject_bad_cpusets(void **state)
{
	/* Opaque outputs nri makes for a handler; every call here fails before
	 * touching them, so zeroed memory of ample size stands in. */
	struct nri_adjust *adj = calloc(1, 64);
	struct nri_updates *upd = calloc(1, 256);
	static char huge[NRI_CPUS_MAX + 2];

	memset(huge, '1', sizeof(huge) - 1);
	assert_int_equal(nri_adjust_set_cpus(adj, ""), -EINVAL);
	assert_int_equal(nri_adjust_set_cpus(adj, "1-"), -EINVAL);
	assert_int_equal(nri_adjust_set_cpus(adj, "1\n"), -EINVAL);
	assert_int_equal(nri_adjust_set_cpus(adj, " 1"), -EINVAL);
	assert_int_equal(nri_adjust_set_cpus(adj, NULL), -EINVAL);
	assert_int_equal(nri_adjust_set_cpus(adj, huge), -E2BIG);
	assert_int_equal(nri_updates_add(upd, "c1", ""), -EINVAL);
	assert_int_equal(nri_updates_add(upd, "", "1"), -EINVAL);
	assert_int_equal(nri_updates_add(upd, NULL, "1"), -EINVAL);
	free(adj);
	free(upd);
}

static void test_nri_container_getenv_matches_whole_keys(void **state)
{
	const char *env[] = { "PINNED=9", "PIN=1-2", "PIN=3", "EMPTY=" };
	struct nri_container c = { .env = env, .n_env = 4 };

	assert_string_equal(nri_container_getenv(&c, "PIN"), "1-2");
	assert_string_equal(nri_container_getenv(&c, "EMPTY"), "");
	assert_null(nri_container_getenv(&c, "PI"));
	assert_null(nri_container_getenv(&c, "NOPE"));
}

/* ---- on the loop: the socket appears after start ------------------------------------------- */

struct loop_rt {
	struct event_base *base;
	char path[108];
	int lfd;
	struct event *accept_ev, *listen_later, *give_up;
	struct bufferevent *bev;
	struct ttrpc_mux *m;
	struct reply cfg, sync;
	int registered;
	struct pol pol;
};

static int lrt_write(void *ud, const void *buf, size_t len)
{
	return bufferevent_write(((struct loop_rt *)ud)->bev, buf, len) < 0 ? -EIO : 0;
}

static void lrt_sync_done(void *ud, int r, int code, const char *msg, const uint8_t *p,
			  size_t len)
{
	struct loop_rt *x = ud;

	on_reply(&x->sync, r, code, msg, p, len);
	event_base_loopbreak(x->base);
}

static int lrt_request(void *ud, const struct ttrpc_request *rq)
{
	struct loop_rt *x = ud;
	Nri__ConfigureRequest cfg = NRI__CONFIGURE_REQUEST__INIT;
	Nri__SynchronizeRequest sync = NRI__SYNCHRONIZE_REQUEST__INIT;
	uint8_t buf[64];
	int r;

	assert_string_equal(rq->method, "RegisterPlugin");
	x->registered++;
	r = ttrpc_mux_reply(x->m, rq->stream_id, TTRPC_OK, NULL, NULL, 0);
	assert_int_equal(r, 0);
	cfg.runtime_name = "loop-rt";
	assert_int_equal(ttrpc_mux_call(x->m, SVC_PLUGIN, "Configure", buf,
					nri__configure_request__pack(&cfg, buf), 2000, on_reply,
					&x->cfg, NULL),
			 0);
	return ttrpc_mux_call(x->m, SVC_PLUGIN, "Synchronize", buf,
			      nri__synchronize_request__pack(&sync, buf), 2000, lrt_sync_done, x,
			      NULL);
}

static void lrt_read(struct bufferevent *bev, void *arg)
{
	struct loop_rt *x = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);
	uint8_t *p = evbuffer_pullup(in, (ssize_t)n);

	assert_int_equal(ttrpc_mux_feed(x->m, p, n), 0);
	evbuffer_drain(in, n);
}

static void lrt_accept(evutil_socket_t fd, short what, void *arg)
{
	static const struct ttrpc_mux_ops ops = { .write = lrt_write, .request = lrt_request };
	struct loop_rt *x = arg;
	int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	assert_true(c >= 0);
	assert_null(x->bev); /* exactly one connection */
	x->bev = bufferevent_socket_new(x->base, c, BEV_OPT_CLOSE_ON_FREE);
	assert_int_equal(ttrpc_mux_new(2, 1, &ops, x, &x->m), 0);
	bufferevent_setcb(x->bev, lrt_read, NULL, NULL, x);
	bufferevent_enable(x->bev, EV_READ | EV_WRITE);
}

static void lrt_listen(evutil_socket_t fd, short what, void *arg)
{
	struct loop_rt *x = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", x->path);
	x->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(x->lfd >= 0);
	assert_int_equal(bind(x->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(x->lfd, 4), 0);
	x->accept_ev = event_new(x->base, x->lfd, EV_READ | EV_PERSIST, lrt_accept, x);
	event_add(x->accept_ev, NULL);
}

static void lrt_give_up(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(((struct loop_rt *)arg)->base);
}

static void test_nri_connects_when_the_socket_appears_later(void **state)
{
	struct loop_rt x = { .lfd = -1 };
	struct nri_config cfg = { .backoff_min_ms = 20, .backoff_max_ms = 50 };
	struct nri *n = NULL;
	struct nri_stats st;
	struct timeval later = { 0, 200000 }, limit = { 5, 0 };

	x.base = event_base_new();
	assert_non_null(x.base);
	snprintf(x.path, sizeof(x.path), "/tmp/nri-test-%d.sock", (int)getpid());
	unlink(x.path);
	cfg.socket_path = x.path;
	assert_int_equal(nri_new(x.base, &cfg, &handlers, &x.pol, &n), 0);
	assert_int_equal(nri_start(n), 0);
	assert_int_equal(nri_start(n), -EALREADY);
	assert_int_equal(nri_push_updates(n, &(struct nri_update){ "c", "1" }, 1), -ENOTCONN);
	x.listen_later = evtimer_new(x.base, lrt_listen, &x);
	x.give_up = evtimer_new(x.base, lrt_give_up, &x);
	evtimer_add(x.listen_later, &later);
	evtimer_add(x.give_up, &limit);
	event_base_dispatch(x.base);

	assert_int_equal(x.registered, 1);
	assert_int_equal(x.cfg.code, TTRPC_OK);
	assert_int_equal(x.sync.n, 1);
	assert_int_equal(x.sync.code, TTRPC_OK);
	assert_true(nri_is_synchronized(n));
	assert_int_equal(x.pol.connected, 1);
	st = nri_get_stats(n);
	assert_int_equal(st.connects, 1);
	assert_true(st.connect_failures >= 2); /* tried while the socket was absent */
	assert_int_equal(st.registrations, 1);

	n = nri_free(n);
	assert_int_equal(x.pol.disconnected, 1);
	ttrpc_mux_free(x.m);
	bufferevent_free(x.bev);
	event_free(x.accept_ev);
	event_free(x.listen_later);
	event_free(x.give_up);
	close(x.lfd);
	unlink(x.path);
	event_base_free(x.base);
}

static void test_nri_new_rejects_bad_config(void **state)
{
	struct event_base *base = event_base_new();
	struct nri *n = NULL;
	char longpath[200];

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = 0;
	assert_int_equal(nri_new(base, &(struct nri_config){ .socket_path = longpath }, &handlers,
				 NULL, &n),
			 -ENAMETOOLONG);
	assert_int_equal(nri_new(base, &(struct nri_config){ .plugin_idx = "000" }, &handlers, NULL,
				 &n),
			 -EINVAL);
	assert_int_equal(nri_new(NULL, NULL, &handlers, NULL, &n), -EINVAL);
	assert_null(n);
	assert_int_equal(nri_new(base, NULL, &handlers, NULL, &n), 0);
	n = nri_free(n);
	event_base_free(base);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, rt_setup, rt_teardown)
	const struct CMUnitTest tests[] = {
		T(test_nri_registers_as_dra_cpu_00),
		T(test_nri_answers_configure_before_the_register_reply),
		T(test_nri_refused_registration_ends_the_session),
		T(test_nri_unanswered_registration_times_out),
		cmocka_unit_test(test_nri_session_new_checks_name_and_index),
		cmocka_unit_test(test_nri_events_follow_handlers_and_never_zero),
		T(test_nri_synchronize_gives_views_and_returns_updates),
		T(test_nri_synchronize_multi_part_answers_more_then_all),
		T(test_nri_synchronize_error_is_reported),
		T(test_nri_create_container_returns_adjustment_and_updates),
		T(test_nri_create_container_without_adjustment_is_empty),
		T(test_nri_create_container_returns_the_scheduler_adjustment),
		cmocka_unit_test(test_nri_scheduler_adjustment_rejects_unknown_values),
		T(test_nri_configure_tells_who_the_runtime_is),
		T(test_nri_push_evict_asks_the_runtime),
		T(test_nri_create_container_error_fails_creation),
		T(test_nri_create_waits_then_answers_from_the_next_run),
		T(test_nri_create_wait_ends_with_a_final_run),
		T(test_nri_waiting_creates_are_capped_and_go_with_the_session),
		T(test_nri_update_and_stop_reach_their_handlers),
		T(test_nri_unserved_methods_answer_unimplemented),
		T(test_nri_state_change_reaches_notification_handlers),
		T(test_nri_undecodable_event_drops_the_connection),
		T(test_nri_bad_stream_ids_are_answered_and_the_session_lives),
		T(test_nri_create_without_container_is_an_error_reply),
		T(test_nri_shutdown_is_answered_then_ends_the_session),
		T(test_nri_disconnected_follows_connected),
		T(test_nri_push_updates_calls_update_containers),
		T(test_nri_push_updates_splits_large_batches),
		T(test_nri_push_updates_validates_input),
		T(test_nri_push_unanswered_reports_timeout_and_lives_on),
		T(test_nri_create_reply_is_what_protobuf_c_packs),
		T(test_nri_update_and_stop_replies_are_what_protobuf_c_packs),
		T(test_nri_synchronize_reply_is_what_protobuf_c_packs),
		T(test_nri_push_request_is_what_protobuf_c_packs),
		cmocka_unit_test(test_nri_adjust_and_updates_reject_bad_cpusets),
		cmocka_unit_test(test_nri_container_getenv_matches_whole_keys),
		cmocka_unit_test(test_nri_connects_when_the_socket_appears_later),
		cmocka_unit_test(test_nri_new_rejects_bad_config),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
