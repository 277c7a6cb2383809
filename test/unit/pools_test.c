/* pools: the NRI policy behind a real session, driven by a runtime made of a
 * second ttrpc mux (as in nri_test.c), with state in a temporary directory,
 * no BPF and no pushes. Hundreds of containers, so that the container table
 * grows, and removals that move entries around in it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <json-c/json.h>

#include "lib/log.h"
#include "obs/metrics.h"
#include "nri/nri.h"
#include "nri_api.pb-c.h"
#include "nri_pipe.h"
#include "nri/pools.h"
#include "core/claimsource.h"
#include "core/state.h"
#include "nri/ttrpc.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "testutil.h"

#define SVC_PLUGIN "nri.pkg.api.v1alpha1.Plugin"
#define UID1 "11111111-2222-3333-4444-555555555555"
#define UID2 "66666666-7777-8888-9999-000000000000"
#define N_SHARED 300 /* every third is removed again */

/* ---- the API server: claim reads the test answers by hand ------------------------------- */

static struct read {
	char ns[64], name[254];
	int64_t timeout_ms;
	claimsource_cb cb;
	void *cb_ud;
	bool live, cancelled;
} reads[64];
static int n_reads, read_start_error;

static int read_start(void *ud, const char *ns, const char *name, int64_t timeout_ms,
		      claimsource_cb cb, void *cb_ud, void **ret)
{
	struct read *f;

	if (read_start_error)
		return read_start_error;
	assert_true(n_reads < (int)(sizeof(reads) / sizeof(reads[0])));
	f = &reads[n_reads++];
	snprintf(f->ns, sizeof(f->ns), "%s", ns);
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->timeout_ms = timeout_ms;
	f->cb = cb;
	f->cb_ud = cb_ud;
	f->live = true;
	*ret = f;
	return 0;
}

static void read_cancel(void *ud, void *handle)
{
	struct read *f = handle;

	assert_true(f->live);
	f->live = false;
	f->cancelled = true;
}

static const struct claimsource read_ops = { .start = read_start, .cancel = read_cancel };

struct env {
	char root[64], cdi_dir[96], state_dir[96];
	struct state *state;
	struct metrics *m;
	struct pools *pools;
	struct nri_session *s;
	struct ttrpc_mux *rt;
	struct nri_pipe pipe;
	int replies, code;
	struct buf reply; /* the last reply's payload */
	char msg[ERRBUF_MAX]; /* the last reply's error */
};

static int rt_write(void *ud, const void *buf, size_t len)
{
	pipe_buf_add(&((struct env *)ud)->pipe.to_pl, buf, len);
	return 0;
}

static int pl_write(void *ud, const void *buf, size_t len)
{
	pipe_buf_add(&((struct env *)ud)->pipe.to_rt, buf, len);
	return 0;
}

static void pump(struct env *e)
{
	assert_int_equal(nri_pipe_pump(&e->pipe, e->rt, e->s), 0);
}

static const char *allocatable = "0-15";
/* setup_owners(): pools write owners.json to the state dir and resolve
 * cgroups under <root>/cg (plain directories: a cgroup id is an inode). */
static bool with_owners;
/* setup_quota*(): pod cgroups are found under <root>/cpufs (a fake cgroupfs);
 * keep_quota: --cpu-quota=keep. */
static bool with_cpufs, keep_quota;
/* add_claim()'s claims carry these state flags. */
static unsigned claim_flags;

static int setup(void **state)
{
	static const struct ttrpc_mux_ops ops = { .write = rt_write };
	struct env *e = calloc(1, sizeof(*e));
	struct state_opts so = { 0 };
	struct pools_opts po = { .cgroup_root = "/nonexistent", .claims = &read_ops };
	char cg[128];

	assert_non_null(e);
	memset(reads, 0, sizeof(reads));
	n_reads = read_start_error = 0;
	log_set_level(LOG_ERROR);
	snprintf(e->root, sizeof(e->root), "/dev/shm/pools-test.XXXXXX");
	assert_non_null(mkdtemp(e->root));
	snprintf(e->cdi_dir, sizeof(e->cdi_dir), "%s/cdi", e->root);
	snprintf(e->state_dir, sizeof(e->state_dir), "%s/state", e->root);
	so.cdi_dir = e->cdi_dir;
	so.state_dir = e->state_dir;
	assert_int_equal(cpuset_parse(allocatable, &so.allocatable, NULL), 0);
	assert_int_equal(state_new(&so, &e->state), 0);
	assert_int_equal(state_load(e->state), 0);
	assert_int_equal(metrics_new(&e->m), 0);
	if (with_cpufs) {
		snprintf(cg, sizeof(cg), "%s/cpufs", e->root);
		po.cpu_cgroup_root = cg;
		po.keep_cpu_quota = keep_quota;
	}
	if (with_owners) {
		snprintf(cg, sizeof(cg), "%s/cg", e->root);
		po.cgroup_root = cg;
		po.state_dir = e->state_dir;
	}
	assert_int_equal(pools_new(e->state, NULL, &po, e->m, &e->pools), 0);
	assert_int_equal(nri_session_new(NULL, pools_nri_handlers(), e->pools, pl_write, e, &e->s),
			 0);
	assert_int_equal(ttrpc_mux_new(2, 1, &ops, e, &e->rt), 0);
	/* A write that blocks on a planted FIFO would stop the suite. */
	alarm(20 * (unsigned)testutil_time_scale()); /* emulators: DRA_CPU_TEST_TIME_SCALE */
	*state = e;
	return 0;
}

static int setup_owners(void **state)
{
	int r;

	with_owners = true;
	r = setup(state);
	with_owners = false;
	return r;
}

static int teardown(void **state)
{
	struct env *e = *state;
	char cmd[96];

	alarm(0);
	nri_session_free(e->s);
	ttrpc_mux_free(e->rt);
	pools_free(e->pools);
	state_free(e->state);
	metrics_free(e->m);
	nri_pipe_done(&e->pipe);
	buf_done(&e->reply);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->root);
	assert_int_equal(system(cmd), 0);
	free(e);
	return 0;
}

static void on_reply(void *ud, int r, int code, const char *msg, const uint8_t *p, size_t len)
{
	struct env *e = ud;

	e->replies++;
	e->code = r < 0 ? r : code;
	snprintf(e->msg, sizeof(e->msg), "%s", msg ? msg : "");
	buf_reset(&e->reply);
	if (len)
		pipe_buf_add(&e->reply, p, len);
}

/* The runtime calls method; its reply, if it comes now, lands in e->reply.
 * Returns how many replies came. */
static int call_nowait(struct env *e, const char *method, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(n ? n : 1);
	int replies = e->replies;

	assert_non_null(buf);
	assert_int_equal(protobuf_c_message_pack(msg, buf), n);
	assert_int_equal(ttrpc_mux_call(e->rt, SVC_PLUGIN, method, buf, n, 2000, on_reply, e, NULL),
			 0);
	free(buf);
	pump(e);
	return e->replies - replies;
}

/* ... and it must come at once, ok. */
static void call(struct env *e, const char *method, const ProtobufCMessage *msg)
{
	assert_int_equal(call_nowait(e, method, msg), 1);
	assert_int_equal(e->code, TTRPC_OK);
}

/* A container of its own pod; claim: the env line naming its claim, or NULL. */
struct ctr_msg {
	Nri__PodSandbox pod;
	Nri__Container c;
	char pod_id[32], pod_uid[32], env_buf[128];
	char *env[1];
};

static void ctr_msg(struct ctr_msg *m, const char *id, const char *claim)
{
	nri__pod_sandbox__init(&m->pod);
	nri__container__init(&m->c);
	snprintf(m->pod_id, sizeof(m->pod_id), "sb-%s", id);
	snprintf(m->pod_uid, sizeof(m->pod_uid), "pod-%s", id);
	m->pod.id = m->pod_id;
	m->pod.uid = m->pod_uid;
	m->pod.name = m->pod_id;
	m->pod.namespace_ = "default";
	m->c.id = (char *)id;
	m->c.pod_sandbox_id = m->pod_id;
	m->c.name = "app";
	m->c.state = NRI__CONTAINER_STATE__CONTAINER_RUNNING;
	if (claim) {
		snprintf(m->env_buf, sizeof(m->env_buf), "%s", claim);
		m->env[0] = m->env_buf;
		m->c.env = m->env;
		m->c.n_env = 1;
	}
}

static void ctr_event(struct env *e, const char *method, const char *id, const char *claim)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct ctr_msg m;

	ctr_msg(&m, id, claim);
	req.pod = &m.pod;
	req.container = &m.c;
	call(e, method, &req.base);
}

/* How many updates UpdateContainer answers when the runtime sets the container to
 * cpus; the first one's cpus in ret_cpus (64 bytes). */
static size_t update_ctr(struct env *e, const char *id, const char *cpus, char *ret_cpus)
{
	Nri__UpdateContainerRequest req = NRI__UPDATE_CONTAINER_REQUEST__INIT;
	Nri__LinuxResources res = NRI__LINUX_RESOURCES__INIT;
	Nri__LinuxCPU cpu = NRI__LINUX_CPU__INIT;
	Nri__UpdateContainerResponse *resp;
	struct ctr_msg m;
	size_t n;

	ctr_msg(&m, id, NULL);
	cpu.cpus = (char *)cpus;
	res.cpu = &cpu;
	req.pod = &m.pod;
	req.container = &m.c;
	req.linux_resources = &res;
	call(e, "UpdateContainer", &req.base);
	resp = nri__update_container_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
	assert_non_null(resp);
	n = resp->n_update;
	if (n) {
		assert_string_equal(resp->update[0]->container_id, id);
		snprintf(ret_cpus, 64, "%s", resp->update[0]->linux_->resources->cpu->cpus);
	}
	nri__update_container_response__free_unpacked(resp, NULL);
	return n;
}

/* The consumer a container of ctr_msg(id) is: its pod. */
static struct state_consumer pod_of(const char *id)
{
	static char names[64][32]; /* a ring: consumers are copied when added */
	static int next;
	struct state_consumer c;
	char *name = names[next++ % 64];

	memset(&c, 0, sizeof(c));
	snprintf(c.uid, sizeof(c.uid), "pod-%s", id);
	snprintf(name, sizeof(names[0]), "sb-%s", id);
	c.name = name;
	return c;
}

/* Prepares claim uid ("default/claim") on cpus, reserved for the pods of the
 * containers named (NULL-terminated); no names: consumers unknown, as a claim
 * from an older checkpoint. */
static int add_claim(struct env *e, const char *uid, const char *cpus, ...)
	__attribute__((sentinel));

static int add_claim(struct env *e, const char *uid, const char *cpus, ...)
{
	struct state_result res = { .request = "r", .device = "cpudevnuma000" };
	struct state_claim c = { .ns = "default", .name = "claim", .results = &res,
				 .n_results = 1 };
	struct state_consumer v[8];
	struct cpuset set;
	struct errbuf why = { "" };
	const char *id;
	va_list ap;

	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	c.flags = claim_flags;
	assert_int_equal(cpuset_parse(cpus, &set, NULL), 0);
	res.cpus = cpuset_view(&set);
	va_start(ap, cpus);
	while ((id = va_arg(ap, const char *))) {
		assert_true(c.n_consumers < 8);
		v[c.n_consumers++] = pod_of(id);
	}
	va_end(ap);
	c.consumers_known = c.n_consumers > 0;
	c.consumers = v;
	return state_claim_add(e->state, &c, &why);
}

static double gauge(struct env *e, const char *name)
{
	struct evbuffer *out = evbuffer_new();
	size_t k = strlen(name);
	const char *text, *line;
	double v = -1;

	assert_non_null(out);
	assert_int_equal(metrics_render(e->m, out), 0);
	assert_int_equal(evbuffer_add(out, "", 1), 0);
	text = (const char *)evbuffer_pullup(out, -1);
	for (line = text; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, name, k) == 0 && line[k] == ' ')
			v = strtod(line + k + 1, NULL);
	evbuffer_free(out);
	return v;
}

static void create_shared(struct env *e, char ids[][16])
{
	for (int i = 0; i < N_SHARED; i++) {
		snprintf(ids[i], 16, "s%03d", i);
		ctr_event(e, "CreateContainer", ids[i], NULL);
	}
	for (int i = 0; i < N_SHARED; i += 3)
		ctr_event(e, "RemoveContainer", ids[i], NULL);
}

static void test_pools_claim_holder_updates_exactly_the_live_shared_containers(void **state)
{
	struct env *e = *state;
	static char ids[N_SHARED][16];
	bool seen[N_SHARED] = { false };
	Nri__CreateContainerResponse *resp;

	create_shared(e, ids);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == N_SHARED - N_SHARED / 3);
	assert_int_equal(add_claim(e, UID1, "4-5", "holder", NULL), 0);
	ctr_event(e, "CreateContainer", "holder", "DRA_CPUSET_" UID1 "=4-5");
	resp = nri__create_container_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
	assert_non_null(resp);
	assert_string_equal(resp->adjust->linux_->resources->cpu->cpus, "4-5");
	assert_int_equal(resp->n_update, N_SHARED - N_SHARED / 3);
	for (size_t i = 0; i < resp->n_update; i++) {
		long k = strtol(resp->update[i]->container_id + 1, NULL, 10);

		assert_true(k > 0 && k < N_SHARED && k % 3 != 0);
		assert_false(seen[k]);
		seen[k] = true;
		assert_string_equal(resp->update[i]->linux_->resources->cpu->cpus, "0-3,6-15");
	}
	nri__create_container_response__free_unpacked(resp, NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == N_SHARED - N_SHARED / 3);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
}

static void test_pools_update_container_finds_it_among_many(void **state)
{
	struct env *e = *state;
	static char ids[N_SHARED][16];
	char cpus[64] = "";

	create_shared(e, ids);
	/* moved off the pool: moved back; removed: not ours any more */
	for (int i = 0; i < N_SHARED; i++) {
		cpus[0] = 0;
		assert_int_equal(update_ctr(e, ids[i], "0", cpus), i % 3 != 0);
		assert_string_equal(cpus, i % 3 ? "0-15" : "");
	}
	assert_int_equal(update_ctr(e, "s001", "0-15", cpus), 0);
	/* every one is found to go, too */
	for (int i = 1; i < N_SHARED; i++)
		if (i % 3)
			ctr_event(e, "RemoveContainer", ids[i], NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 0);
}

static void test_pools_synchronize_rebuilds_the_table(void **state)
{
	struct env *e = *state;
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	Nri__SynchronizeResponse *resp;
	static char ids[N_SHARED][16];
	static struct ctr_msg m[1000];
	static char names[1000][16];
	Nri__Container *ctrs[1000];
	Nri__PodSandbox *pods[1];
	size_t exclusive = 0;
	char cpus[64] = "";

	create_shared(e, ids);
	assert_int_equal(add_claim(e, UID1, "4-5", "n0500", NULL), 0);
	for (int i = 0; i < 1000; i++) {
		snprintf(names[i], sizeof(names[i]), "n%04d", i);
		ctr_msg(&m[i], names[i], i == 500 ? "DRA_CPUSET_" UID1 "=4-5" : NULL);
		ctrs[i] = &m[i].c;
	}
	m[7].c.state = NRI__CONTAINER_STATE__CONTAINER_STOPPED;
	pods[0] = &m[500].pod;
	req.pods = pods;
	req.n_pods = 1;
	req.containers = ctrs;
	req.n_containers = 1000;
	call(e, "Synchronize", &req.base);
	resp = nri__synchronize_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
	assert_non_null(resp);
	assert_int_equal(resp->n_update, 999); /* the stopped one is not pinned */
	for (size_t i = 0; i < resp->n_update; i++)
		if (strcmp(resp->update[i]->container_id, "n0500") == 0) {
			assert_string_equal(resp->update[i]->linux_->resources->cpu->cpus, "4-5");
			exclusive++;
		} else {
			assert_string_equal(resp->update[i]->linux_->resources->cpu->cpus,
					    "0-3,6-15");
		}
	assert_int_equal(exclusive, 1);
	nri__synchronize_response__free_unpacked(resp, NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 998);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	/* the containers before it are gone, the runtime's are found */
	assert_int_equal(update_ctr(e, "s001", "0", cpus), 0);
	assert_int_equal(update_ctr(e, "n0999", "0", cpus), 1);
	assert_string_equal(cpus, "0-3,6-15");
	assert_int_equal(update_ctr(e, "n0007", "0", cpus), 0);
}

static void test_pools_guard_counts_shared_containers(void **state)
{
	struct env *e = *state;

	ctr_event(e, "CreateContainer", "a", NULL);
	ctr_event(e, "CreateContainer", "b", NULL);
	ctr_event(e, "CreateContainer", "a", NULL); /* the same container again */
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 2);
	/* a claim that would empty the pool under them is refused */
	assert_int_equal(add_claim(e, UID1, "0-15", NULL), -ENOSPC);
	ctr_event(e, "RemoveContainer", "a", NULL);
	ctr_event(e, "StopContainer", "b", NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 0);
	assert_int_equal(add_claim(e, UID1, "0-15", NULL), 0);
	assert_int_equal(state_claim_remove(e->state, UID1), 0);

	/* a claim holder whose claim is unprepared runs in the pool from then on */
	assert_int_equal(add_claim(e, UID2, "4-5", "holder", NULL), 0);
	ctr_event(e, "CreateContainer", "holder", "DRA_CPUSET_" UID2 "=4-5");
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	assert_int_equal(state_claim_remove(e->state, UID2), 0);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 1);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 0);
	assert_int_equal(add_claim(e, UID1, "0-15", NULL), -ENOSPC);
}

/* ---- consumers -------------------------------------------------------------------------- */

#define RF(id) "{\"resource\":\"pods\",\"name\":\"sb-" id "\",\"uid\":\"pod-" id "\"}"

/* The API server answers read i with claim uid ("default/claim") reserved
 * for the pods in list (JSON), or with an error when list is NULL. */
static void answer(struct env *e, int i, const char *uid, const char *list, const char *err)
{
	struct read *f = &reads[i];
	struct json_object *o = NULL;
	char json[4096];

	assert_true(i < n_reads && f->live);
	f->live = false;
	if (list) {
		snprintf(json, sizeof(json),
			 "{\"metadata\":{\"name\":\"claim\",\"namespace\":\"default\","
			 "\"uid\":\"%s\"},\"status\":{\"allocation\":{},\"reservedFor\":%s}}",
			 uid, list);
		o = json_tokener_parse(json);
		assert_non_null(o);
	}
	f->cb(f->cb_ud, o, err);
	json_object_put(o);
	pump(e);
}

static int create_nowait(struct env *e, const char *id, const char *claim)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	struct ctr_msg m;

	ctr_msg(&m, id, claim);
	req.pod = &m.pod;
	req.container = &m.c;
	return call_nowait(e, "CreateContainer", &req.base);
}

/* The cpuset the last reply (a CreateContainerResponse) gave. */
static void assert_created_on(struct env *e, const char *cpus)
{
	Nri__CreateContainerResponse *resp;

	assert_int_equal(e->code, TTRPC_OK);
	resp = nri__create_container_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
	assert_non_null(resp);
	assert_non_null(resp->adjust);
	assert_string_equal(resp->adjust->linux_->resources->cpu->cpus, cpus);
	nri__create_container_response__free_unpacked(resp, NULL);
}

static void assert_refused(struct env *e, const char *why)
{
	assert_int_equal(e->code, TTRPC_UNKNOWN);
	if (!strstr(e->msg, why))
		fail_msg("\"%s\" does not say \"%s\"", e->msg, why);
}

#define ENV1 "DRA_CPUSET_" UID1 "=4-5"

static void test_pools_a_pod_not_among_the_consumers_is_refused_the_owner_is_not(void **state)
{
	struct env *e = *state;

	assert_int_equal(add_claim(e, UID1, "4-5", "owner", NULL), 0);
	/* the impostor comes first: one read of the claim, then refused */
	assert_int_equal(create_nowait(e, "thief", ENV1), 0);
	assert_int_equal(n_reads, 1);
	assert_string_equal(reads[0].ns, "default");
	assert_string_equal(reads[0].name, "claim");
	assert_true(reads[0].timeout_ms > 1000 && reads[0].timeout_ms <= NRI_CREATE_WAIT_MS);
	answer(e, 0, UID1, "[" RF("owner") "]", NULL);
	assert_int_equal(e->replies, 1);
	assert_refused(e, "pod default/sb-thief (uid pod-thief) is not a consumer of claim "
			  "default/claim (status.reservedFor)");
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"not_consumer\"}") == 1);
	assert_true(gauge(e, "dra_cpu_nri_rejected_containers_total{reason=\"binding\"}") == 1);
	assert_true(gauge(e, "dra_cpu_nri_claim_reads_total{result=\"ok\"}") == 1);
	assert_string_equal(state_claim(e->state, UID1)->owner_pod, "");
	/* the owner gets its CPUs, without a read */
	ctr_event(e, "CreateContainer", "owner", ENV1);
	assert_created_on(e, "4-5");
	assert_int_equal(n_reads, 1);
	assert_string_equal(state_claim(e->state, UID1)->owner_pod, "pod-owner");
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	/* an impostor now learns nothing of who holds it */
	assert_int_equal(create_nowait(e, "thief2", ENV1), 0);
	answer(e, 1, UID1, "[" RF("owner") "]", NULL);
	assert_refused(e, "pod default/sb-thief2 (uid pod-thief2) is not a consumer");
	assert_null(strstr(e->msg, "pod-owner"));
	/* the same pod in another namespace, or under another name, is not it */
	assert_int_equal(state_claim_unbind(e->state, UID1), 0);
	{
		Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
		struct ctr_msg m;

		ctr_msg(&m, "owner", ENV1);
		m.pod.namespace_ = "other";
		m.c.id = "owner-2";
		req.pod = &m.pod;
		req.container = &m.c;
		assert_int_equal(call_nowait(e, "CreateContainer", &req.base), 0);
		answer(e, 2, UID1, "[" RF("owner") "]", NULL);
		assert_refused(e, "pod other/sb-owner");
	}
}

static void test_pools_a_late_consumer_binds_after_one_read(void **state)
{
	struct env *e = *state;
	char path[160], text[8192] = "";
	FILE *f;

	/* shared claim: reserved for one pod at Prepare, another one since */
	assert_int_equal(add_claim(e, UID1, "4-5", "first", NULL), 0);
	assert_int_equal(create_nowait(e, "late", ENV1), 0);
	assert_int_equal(n_reads, 1);
	/* a second container waiting on the same claim shares the read */
	assert_int_equal(create_nowait(e, "later", ENV1), 0);
	assert_int_equal(n_reads, 1);
	answer(e, 0, UID1, "[" RF("first") "," RF("late") "]", NULL);
	assert_int_equal(e->replies, 2);
	/* "late" got the claim; "later" is not a consumer even after the read */
	assert_refused(e, "pod default/sb-later (uid pod-later) is not a consumer");
	assert_string_equal(state_claim(e->state, UID1)->owner_pod, "pod-late");
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	/* the newer consumers are on disk already */
	assert_true(state_claim_has_consumer(state_claim(e->state, UID1), "pod-late", "default",
					     "sb-late"));
	snprintf(path, sizeof(path), "%s/checkpoint.json", e->state_dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_true(fread(text, 1, sizeof(text) - 1, f) > 0);
	fclose(f);
	assert_non_null(strstr(text, "{\"uid\":\"pod-late\",\"name\":\"sb-late\"}"));
}

static void test_pools_a_failed_or_slow_read_refuses(void **state)
{
	struct env *e = *state;
	int64_t d;

	assert_int_equal(add_claim(e, UID1, "4-5", "owner", NULL), 0);
	assert_int_equal(create_nowait(e, "a", ENV1), 0);
	answer(e, 0, UID1, NULL, "GET default/claim: HTTP 403 Forbidden");
	assert_refused(e, "reading the claim again failed: GET default/claim: HTTP 403");
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"read_failed\"}") == 1);
	assert_true(gauge(e, "dra_cpu_nri_claim_reads_total{result=\"error\"}") == 1);
	/* a claim deleted and created again under the name is another claim */
	assert_int_equal(create_nowait(e, "b", ENV1), 0);
	answer(e, 1, UID2, "[" RF("b") "]", NULL);
	assert_refused(e, "deleted and recreated");
	/* no answer within the wait: refused on the final run */
	assert_int_equal(create_nowait(e, "c", ENV1), 0);
	assert_int_equal(n_reads, 3);
	d = nri_session_next_deadline(e->s);
	assert_true(d > 0);
	assert_int_equal(nri_session_expire(e->s, d), 0);
	pump(e);
	assert_refused(e, "could not be read again in time");
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"read_timeout\"}") == 1);
	/* its answer still counts: the pod is a consumer from now on */
	answer(e, 2, UID1, "[" RF("owner") "," RF("c") "]", NULL);
	assert_int_equal(e->replies, 3);
	ctr_event(e, "CreateContainer", "c", ENV1);
	assert_created_on(e, "4-5");
	assert_int_equal(n_reads, 3);
	/* no read possible: refused at once */
	assert_int_equal(state_claim_unbind(e->state, UID1), 0);
	read_start_error = -ENOTCONN;
	assert_int_equal(create_nowait(e, "d", ENV1), 1);
	assert_refused(e, "which cannot be read again");
}

static void test_pools_unprepare_answers_creates_waiting_on_a_read(void **state)
{
	struct env *e = *state;

	assert_int_equal(add_claim(e, UID1, "4-5", "owner", NULL), 0);
	assert_int_equal(create_nowait(e, "x", ENV1), 0);
	assert_int_equal(state_claim_remove(e->state, UID1), 0);
	assert_true(reads[0].cancelled);
	pump(e);
	assert_int_equal(e->replies, 1);
	assert_refused(e, "is not prepared on this node");
}

static void test_pools_claims_restored_without_a_name_bind_nobody(void **state)
{
	struct env *e = *state;
	struct state_result res = { .request = "r", .device = "cpudevnuma000" };
	struct state_claim c = { .uid = UID1, .results = &res, .n_results = 1 };
	struct cpuset set;
	struct errbuf why = { "" };

	assert_int_equal(cpuset_parse("4-5", &set, NULL), 0);
	res.cpus = cpuset_view(&set);
	assert_int_equal(state_claim_add(e->state, &c, &why), 0);
	assert_int_equal(create_nowait(e, "x", ENV1), 1);
	assert_refused(e, "restored from its CDI spec alone");
	assert_int_equal(n_reads, 0);
}

static void test_pools_a_binding_of_a_pod_not_among_the_consumers_is_dropped(void **state)
{
	struct env *e = *state;

	/* bound by an older driver to a pod the claim was never reserved for */
	assert_int_equal(add_claim(e, UID1, "4-5", "owner", NULL), 0);
	assert_int_equal(state_claim_bind(e->state, UID1, "pod-thief", "app"), 0);
	ctr_event(e, "CreateContainer", "owner", ENV1);
	assert_created_on(e, "4-5");
	assert_string_equal(state_claim(e->state, UID1)->owner_pod, "pod-owner");
}

/* Synchronize with the given containers (NULL-terminated id, env pairs). */
static Nri__SynchronizeResponse *synchronize(struct env *e, ...)
{
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	static struct ctr_msg m[8];
	Nri__Container *ctrs[8];
	Nri__PodSandbox *pods[8];
	const char *id;
	va_list ap;
	size_t n = 0;

	va_start(ap, e);
	while ((id = va_arg(ap, const char *))) {
		assert_true(n < 8);
		ctr_msg(&m[n], id, va_arg(ap, const char *));
		ctrs[n] = &m[n].c;
		pods[n] = &m[n].pod;
		n++;
	}
	va_end(ap);
	req.pods = pods;
	req.n_pods = n;
	req.containers = ctrs;
	req.n_containers = n;
	call(e, "Synchronize", &req.base);
	return nri__synchronize_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
}

static const char *cpus_of(const Nri__SynchronizeResponse *r, const char *id)
{
	for (size_t i = 0; i < r->n_update; i++)
		if (strcmp(r->update[i]->container_id, id) == 0)
			return r->update[i]->linux_->resources->cpu->cpus;
	return "";
}

static void test_pools_synchronize_confines_an_impostor(void **state)
{
	struct env *e = *state;
	Nri__SynchronizeResponse *r;

	assert_int_equal(add_claim(e, UID1, "4-5", "owner", NULL), 0);
	/* started while the plugin was away, with the owner's variable */
	r = synchronize(e, "thief", ENV1, "web", NULL, NULL);
	assert_non_null(r);
	assert_string_equal(cpus_of(r, "thief"), "0-3,6-15");
	assert_string_equal(cpus_of(r, "web"), "0-3,6-15");
	nri__synchronize_response__free_unpacked(r, NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 0);
	assert_int_equal(n_reads, 1); /* once more, in case it is a late consumer */
	answer(e, 0, UID1, "[" RF("owner") "]", NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 0);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 2);
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"synchronize\"}") == 1);
	assert_string_equal(state_claim(e->state, UID1)->owner_pod, "");
	/* the owner starts and gets its CPUs */
	ctr_event(e, "CreateContainer", "owner", ENV1);
	assert_created_on(e, "4-5");
	/* the impostor stays in the pool when the runtime asks otherwise */
	{
		char cpus[64] = "";

		assert_int_equal(update_ctr(e, "thief", "4-5", cpus), 1);
		assert_string_equal(cpus, "0-3,6-15");
	}
}

static void test_pools_synchronize_trusts_a_consumer_after_a_read(void **state)
{
	struct env *e = *state;
	Nri__SynchronizeResponse *r;

	/* a claim from a checkpoint without consumers: no pod is vouched for */
	assert_int_equal(add_claim(e, UID1, "4-5", NULL), 0);
	r = synchronize(e, "owner", ENV1, "web", NULL, NULL);
	assert_non_null(r);
	assert_string_equal(cpus_of(r, "owner"), "0-3,6-15"); /* not trusted yet */
	nri__synchronize_response__free_unpacked(r, NULL);
	assert_int_equal(n_reads, 1);
	answer(e, 0, UID1, "[" RF("owner") "]", NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 1);
	assert_string_equal(state_claim(e->state, UID1)->owner_pod, "pod-owner");
	assert_true(state_claim(e->state, UID1)->consumers_known);
	/* a consumer on record is trusted at once by the next Synchronize */
	r = synchronize(e, "owner", ENV1, NULL, NULL);
	assert_string_equal(cpus_of(r, "owner"), "4-5");
	nri__synchronize_response__free_unpacked(r, NULL);
	assert_int_equal(n_reads, 1);
}

/* Lines of stderr with the given event while fn runs. */
static int log_lines(struct env *e, const char *event, void (*fn)(struct env *e))
{
	char path[160], line[2048], want[96];
	int saved = dup(2), fd, n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stderr", e->root);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	close(fd);
	log_set_level(LOG_WARN);
	fn(e);
	log_set_level(LOG_ERROR);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	snprintf(want, sizeof(want), "event=%s ", event);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, want) != NULL;
	fclose(f);
	return n;
}

static void refuse_50(struct env *e)
{
	for (int i = 0; i < 50; i++) {
		char id[16];

		snprintf(id, sizeof(id), "t%d", i);
		assert_int_equal(create_nowait(e, id, ENV1), 1);
	}
}

static void test_pools_refusal_lines_are_rate_limited(void **state)
{
	struct env *e = *state;

	assert_int_equal(add_claim(e, UID1, "4-5", "owner", NULL), 0);
	read_start_error = -ENOTCONN;
	/* a pod created in a loop: every refusal counted, ten lines logged, by
	 * the policy and by nri */
	assert_int_equal(log_lines(e, "container_binding_refused", refuse_50), 10);
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"read_failed\"}") == 50);
	assert_int_equal(log_lines(e, "nri_handler_failed", refuse_50), 0); /* same window */
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"read_failed\"}") == 100);
}

static int setup_wide(void **state)
{
	allocatable = "0-63";
	return setup(state);
}

static int teardown_wide(void **state)
{
	allocatable = "0-15";
	return teardown(state);
}

static void test_pools_claim_reads_in_flight_are_capped(void **state)
{
	struct env *e = *state;
	char uid[64], env[128], id[16], cpu[8];

	for (int i = 0; i <= POOLS_MAX_READS; i++) {
		snprintf(uid, sizeof(uid), "6f0c1c4e-0000-4000-8000-0000000000%02d", i);
		snprintf(cpu, sizeof(cpu), "%d", i);
		snprintf(env, sizeof(env), "DRA_CPUSET_%s=%d", uid, i);
		snprintf(id, sizeof(id), "t%d", i);
		assert_int_equal(add_claim(e, uid, cpu, "owner", NULL), 0);
		assert_int_equal(create_nowait(e, id, env), i == POOLS_MAX_READS);
	}
	assert_int_equal(n_reads, POOLS_MAX_READS);
	assert_refused(e, "16 claim reads are already under way");
	assert_true(gauge(e, "dra_cpu_nri_binding_refused_total{reason=\"busy\"}") == 1);
}

/* A claim holder in cgroup <root>/cg/<name>: created, then started (which
 * resolves its cgroup and rewrites owners.json). */
static void start_holder(struct env *e, const char *id, const char *claim, const char *name)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	Nri__LinuxContainer lc = NRI__LINUX_CONTAINER__INIT;
	char path[160], cgpath[64];
	struct ctr_msg m;

	snprintf(path, sizeof(path), "%s/cg", e->root);
	(void)mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/cg/%s", e->root, name);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(cgpath, sizeof(cgpath), "/%s", name);
	ctr_msg(&m, id, claim);
	lc.cgroups_path = cgpath;
	m.c.linux_ = &lc;
	req.pod = &m.pod;
	req.container = &m.c;
	call(e, "CreateContainer", &req.base);
	call(e, "StartContainer", &req.base);
}

static char *read_text(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static mode_t kind_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

/* owners.json is written for bpf-verify through whatever was planted in the
 * state dir while running: a FIFO at the fixed temp name of earlier versions
 * blocked the write (and so the whole loop) for good; a symlink at
 * owners.json is replaced, its target untouched; a directory there makes
 * the write fail without stopping the pinning. */
static void test_pools_owners_file_never_opens_or_follows_what_was_planted(void **state)
{
	struct env *e = *state;
	char owners[160], temp[160], target[160];
	FILE *f;

	snprintf(owners, sizeof(owners), "%s/owners.json", e->state_dir);
	snprintf(temp, sizeof(temp), "%s/.owners.json.tmp", e->state_dir);
	snprintf(target, sizeof(target), "%s/target", e->root);
	f = fopen(target, "w");
	assert_non_null(f);
	fputs("precious", f);
	fclose(f);
	assert_int_equal(mkfifo(temp, 0600), 0);
	assert_int_equal(symlink(target, owners), 0);

	assert_int_equal(add_claim(e, UID1, "4-5", "holder", NULL), 0);
	start_holder(e, "holder", "DRA_CPUSET_" UID1 "=4-5", "h1");
	assert_int_equal(kind_of(owners), S_IFREG);
	assert_non_null(strstr(read_text(owners), "\"claimUID\":\"" UID1 "\""));
	assert_string_equal(read_text(target), "precious");
	assert_int_equal(kind_of(temp), S_IFIFO); /* never opened */

	/* a directory at owners.json: the write fails, the container events do not */
	assert_int_equal(unlink(owners), 0);
	assert_int_equal(mkdir(owners, 0700), 0);
	assert_int_equal(add_claim(e, UID2, "6-7", "holder2", NULL), 0);
	start_holder(e, "holder2", "DRA_CPUSET_" UID2 "=6-7", "h2");
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 2);
	ctr_event(e, "StopContainer", "holder2", NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	assert_int_equal(kind_of(owners), S_IFDIR);
}

/* ---- the container record ------------------------------------------------------------ */

#define BIG_CLAIMS 32 /* claims a container may name */

/* A container whose strings are as long as their APIs allow: namespace 63
 * (a DNS label), pod name 253, container name 63, pod uid a UUID, a
 * 255-byte container id (NAME_MAX: it is a directory of its cgroups path,
 * between two others), and n claims of uids 36 to 63 bytes long (the
 * longest first: the record sizes every slot for it), claim i on CPU i + 1
 * in namespace ns as "claim-<i>". */
struct big {
	Nri__PodSandbox pod;
	Nri__Container c;
	Nri__LinuxContainer lc;
	char id[256], pod_uid[37], ns[64], pod_name[254], name[64], path[600], cgroup[800];
	char uids[BIG_CLAIMS][64], env_buf[BIG_CLAIMS][160];
	char *env[BIG_CLAIMS];
	int n;
};

static void fill(char *s, size_t len, char c)
{
	memset(s, c, len);
	s[len] = 0;
}

/* The pod of b as a consumer, for its claims. */
static struct state_consumer big_consumer(const struct big *b)
{
	struct state_consumer c;

	memset(&c, 0, sizeof(c));
	snprintf(c.uid, sizeof(c.uid), "%s", b->pod_uid);
	c.name = b->pod_name;
	return c;
}

/* b with n claims, prepared (consumers: its pod, or unknown), and its
 * cgroup made under <root>/cg. id_first: the id's first byte. */
static void big_init(struct env *e, struct big *b, int n, bool consumers_known, char id_first)
{
	struct state_consumer who;
	char cmd[1024];

	memset(b, 0, sizeof(*b));
	nri__pod_sandbox__init(&b->pod);
	nri__container__init(&b->c);
	nri__linux_container__init(&b->lc);
	fill(b->id, 255, 'd');
	b->id[0] = id_first;
	snprintf(b->pod_uid, sizeof(b->pod_uid), "0b1c2d3e-4f50-4a61-8b72-9c8d7e6f5a4b");
	fill(b->ns, 63, 'n');
	fill(b->pod_name, 253, 'p');
	fill(b->name, 63, 'k');
	snprintf(b->path, sizeof(b->path), "/%0200d/%s/init", 0, b->id);
	snprintf(b->cgroup, sizeof(b->cgroup), "%s/cg%s", e->root, b->path);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", b->cgroup);
	assert_int_equal(system(cmd), 0);
	b->pod.id = "sandbox";
	b->pod.uid = b->pod_uid;
	b->pod.name = b->pod_name;
	b->pod.namespace_ = b->ns;
	b->c.id = b->id;
	b->c.pod_sandbox_id = "sandbox";
	b->c.name = b->name;
	b->c.state = NRI__CONTAINER_STATE__CONTAINER_RUNNING;
	b->c.pid = 4242;
	b->lc.cgroups_path = b->path;
	b->c.linux_ = &b->lc;
	b->n = n;
	who = big_consumer(b);
	for (int i = 0; i < n; i++) {
		struct state_result res = { .request = "r", .device = "cpudevnuma000" };
		struct state_claim c = { .ns = b->ns, .results = &res, .n_results = 1 };
		struct errbuf why = { "" };
		char name[16];
		struct cpuset set;
		size_t len = i == 0 ? 63 : 36 + (size_t)i % 27;

		fill(b->uids[i], len, (char)('a' + i % 26));
		snprintf(name, sizeof(name), "u%02d", i); /* distinct however long */
		memcpy(b->uids[i], name, 3);
		snprintf(b->env_buf[i], sizeof(b->env_buf[i]), "DRA_CPUSET_%s=%d", b->uids[i],
			 i + 1);
		b->env[i] = b->env_buf[i];
		snprintf(name, sizeof(name), "claim-%d", i);
		c.name = name;
		snprintf(c.uid, sizeof(c.uid), "%s", b->uids[i]);
		cpuset_zero(&set);
		cpuset_set(&set, i + 1);
		res.cpus = cpuset_view(&set);
		c.consumers_known = consumers_known;
		c.consumers = consumers_known ? &who : NULL;
		c.n_consumers = consumers_known;
		if (state_claim_add(e->state, &c, &why) < 0)
			fail_msg("claim %d: %s", i, why.s);
	}
	b->c.env = b->env;
	b->c.n_env = (size_t)n;
}

static void big_event(struct env *e, const char *method, struct big *b)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;

	req.pod = &b->pod;
	req.container = &b->c;
	call(e, method, &req.base);
}

static Nri__SynchronizeResponse *big_synchronize(struct env *e, struct big *b)
{
	Nri__SynchronizeRequest req = NRI__SYNCHRONIZE_REQUEST__INIT;
	Nri__Container *ctrs[1] = { &b->c };
	Nri__PodSandbox *pods[1] = { &b->pod };

	req.pods = pods;
	req.n_pods = 1;
	req.containers = ctrs;
	req.n_containers = 1;
	call(e, "Synchronize", &req.base);
	return nri__synchronize_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
}

/* owners.json lists b's claims but the one at gone (-1: none), each with
 * every string of b as it came. */
static void assert_owners_of(struct env *e, const struct big *b, int gone)
{
	char path[160], pod[320], claim[96], cpus[16];
	struct json_object *root, *arr;
	int seen = 0;

	snprintf(path, sizeof(path), "%s/owners.json", e->state_dir);
	root = json_object_from_file(path);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "owners", &arr));
	assert_int_equal(json_object_array_length(arr), b->n - (gone >= 0));
	snprintf(pod, sizeof(pod), "%s/%s", b->ns, b->pod_name);
	for (size_t k = 0; k < json_object_array_length(arr); k++) {
		struct json_object *o = json_object_array_get_idx(arr, k), *v;
		int i;

		assert_true(json_object_object_get_ex(o, "claimUID", &v));
		for (i = 0; i < b->n; i++)
			if (strcmp(json_object_get_string(v), b->uids[i]) == 0)
				break;
		assert_true(i < b->n && i != gone);
		seen++;
		snprintf(claim, sizeof(claim), "%s/claim-%d", b->ns, i);
		snprintf(cpus, sizeof(cpus), "%d", i + 1);
		assert_true(json_object_object_get_ex(o, "claim", &v));
		assert_string_equal(json_object_get_string(v), claim);
		assert_true(json_object_object_get_ex(o, "cpus", &v));
		assert_string_equal(json_object_get_string(v), cpus);
		assert_true(json_object_object_get_ex(o, "cgroup", &v));
		assert_string_equal(json_object_get_string(v), b->cgroup);
		assert_true(json_object_object_get_ex(o, "pod", &v));
		assert_string_equal(json_object_get_string(v), pod);
		assert_true(json_object_object_get_ex(o, "container", &v));
		assert_string_equal(json_object_get_string(v), b->name);
	}
	assert_int_equal(seen, b->n - (gone >= 0));
	json_object_put(root);
}

/* The exclusive-CPU series of cpu for b's claim i. */
static double owner_info(struct env *e, const struct big *b, int cpu, int i)
{
	char series[1024];

	snprintf(series, sizeof(series),
		 "dra_cpu_cpu_owner_info{cpu=\"%d\",namespace=\"%s\",pod=\"%s\","
		 "container=\"%s\",claim=\"%s/claim-%d\"}",
		 cpu, b->ns, b->pod_name, b->name, b->ns, i);
	return gauge(e, series);
}

/* Every string of a container at its maximum comes back as it was given,
 * through each path that replaces its record: CreateContainer again,
 * Synchronize, a claim unprepared from the middle of its list. */
static void test_pools_record_keeps_strings_at_their_maxima_across_replacements(void **state)
{
	struct env *e = *state;
	static struct big b, shared;
	Nri__SynchronizeResponse *r;
	char cpus[64] = "";

	big_init(e, &b, BIG_CLAIMS, true, 'a');
	big_event(e, "CreateContainer", &b);
	assert_created_on(e, "1-32");
	big_event(e, "StartContainer", &b); /* resolves its cgroup: owners.json */
	assert_owners_of(e, &b, -1);
	assert_true(owner_info(e, &b, 1, 0) == 1);
	assert_true(owner_info(e, &b, 32, 31) == 1);
	/* a shared container with as long an id is found by it */
	big_init(e, &shared, 0, true, 'z');
	big_event(e, "CreateContainer", &shared);
	assert_created_on(e, "0,33-63");
	assert_int_equal(update_ctr(e, shared.id, "1", cpus), 1);
	assert_string_equal(cpus, "0,33-63");

	/* created again: the new record replaces the old, counted once */
	big_event(e, "CreateContainer", &b);
	assert_created_on(e, "1-32");
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 1);
	assert_int_equal(update_ctr(e, b.id, "0", cpus), 1);
	assert_string_equal(cpus, "1-32");

	/* Synchronize rebuilds it from the runtime's view: same claims, same strings */
	r = big_synchronize(e, &b);
	assert_non_null(r);
	assert_string_equal(cpus_of(r, b.id), "1-32");
	nri__synchronize_response__free_unpacked(r, NULL);
	assert_owners_of(e, &b, -1);
	assert_true(owner_info(e, &b, 17, 16) == 1);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 0); /* not listed: gone */

	/* a claim from the middle unprepared: the others stay, in their slots */
	assert_int_equal(state_claim_remove(e->state, b.uids[5]), 0);
	assert_int_equal(update_ctr(e, b.id, "0", cpus), 1);
	assert_string_equal(cpus, "1-5,7-32");
	assert_owners_of(e, &b, 5);
	assert_true(owner_info(e, &b, 6, 5) == -1);
	assert_true(owner_info(e, &b, 32, 31) == 1);
	big_event(e, "StopContainer", &b);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 0);
}

/* A container Synchronize left in the shared pool for want of consumers
 * holds the claims it wanted once they vouch for it, and its strings. */
static void test_pools_record_vouched_for_after_synchronize_keeps_its_claims(void **state)
{
	struct env *e = *state;
	static struct big b;
	Nri__SynchronizeResponse *r;
	char list[512], cpus[64] = "";

	big_init(e, &b, 2, false, 'a');
	r = big_synchronize(e, &b);
	assert_non_null(r);
	assert_string_equal(cpus_of(r, b.id), "0,3-63");
	nri__synchronize_response__free_unpacked(r, NULL);
	assert_int_equal(n_reads, 2);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 1);
	snprintf(list, sizeof(list),
		 "[{\"resource\":\"pods\",\"name\":\"%s\",\"uid\":\"%s\"}]", b.pod_name,
		 b.pod_uid);
	answer(e, 0, b.uids[0], list, NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 0); /* one still read */
	answer(e, 1, b.uids[1], list, NULL);
	assert_true(gauge(e, "dra_cpu_nri_containers_exclusive") == 1);
	assert_true(gauge(e, "dra_cpu_nri_containers_shared") == 0);
	assert_string_equal(state_claim(e->state, b.uids[0])->owner_pod, b.pod_uid);
	assert_string_equal(state_claim(e->state, b.uids[1])->owner_container, b.name);
	assert_int_equal(update_ctr(e, b.id, "0", cpus), 1);
	assert_string_equal(cpus, "1-2");
	assert_owners_of(e, &b, -1);
}

static int setup_owners_wide(void **state)
{
	allocatable = "0-63";
	return setup_owners(state);
}

/* ---- CFS quota on exclusive CPUs (nri/quota.h) ---------------------------------------- */

static int setup_quota(void **state)
{
	int r;

	with_cpufs = true;
	r = setup(state);
	with_cpufs = false;
	return r;
}

static int setup_quota_keep(void **state)
{
	int r;

	keep_quota = true;
	r = setup_quota(state);
	keep_quota = false;
	return r;
}

/* A pod cgroup in the fake cgroupfs, its cpu file holding text. */
static void pod_cgroup(struct env *e, const char *pod, const char *file, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cpufs/kubepods/%s", e->root, pod);
	assert_int_equal(fileio_mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/cpufs/kubepods/%s/%s", e->root, pod, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void assert_pod_cgroup(struct env *e, const char *pod, const char *file, const char *text)
{
	char path[256], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/cpufs/kubepods/%s/%s", e->root, pod, file);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, text);
}

/* CreateContainer of id in a pod whose cgroup parent is /kubepods/pod-<id>;
 * returns 1 with the quota the reply set in *ret, or 0 when it set none. */
static int create_quota(struct env *e, const char *id, const char *claim, int64_t *ret)
{
	Nri__ContainerRequest req = NRI__CONTAINER_REQUEST__INIT;
	Nri__LinuxPodSandbox lpod = NRI__LINUX_POD_SANDBOX__INIT;
	Nri__CreateContainerResponse *resp;
	struct ctr_msg m;
	char parent[64];
	int set;

	ctr_msg(&m, id, claim);
	snprintf(parent, sizeof(parent), "/kubepods/pod-%s", id);
	lpod.cgroup_parent = parent;
	m.pod.linux_ = &lpod;
	req.pod = &m.pod;
	req.container = &m.c;
	call(e, "CreateContainer", &req.base);
	resp = nri__create_container_response__unpack(NULL, e->reply.len, pipe_bytes(&e->reply));
	assert_non_null(resp);
	assert_non_null(resp->adjust);
	set = resp->adjust->linux_->resources->cpu->quota != NULL;
	if (set)
		*ret = resp->adjust->linux_->resources->cpu->quota->value;
	nri__create_container_response__free_unpacked(resp, NULL);
	return set;
}

static void test_pools_exclusive_container_and_its_pod_lose_their_quota(void **state)
{
	struct env *e = *state;
	int64_t q = 0;

	assert_int_equal(add_claim(e, UID1, "4-5", "x1", NULL), 0);
	pod_cgroup(e, "pod-x1", "cpu.max", "50000 100000\n");
	assert_int_equal(create_quota(e, "x1", ENV1, &q), 1);
	assert_int_equal(q, -1);
	assert_pod_cgroup(e, "pod-x1", "cpu.max", "max");
	assert_true(gauge(e, "dra_cpu_cpu_quota_dropped_total{level=\"container\"}") == 1);
	assert_true(gauge(e, "dra_cpu_cpu_quota_dropped_total{level=\"pod\"}") == 1);
}

static void test_pools_v1_pod_quota_becomes_minus_one(void **state)
{
	struct env *e = *state;
	int64_t q = 0;

	assert_int_equal(add_claim(e, UID1, "4-5", "x1", NULL), 0);
	pod_cgroup(e, "pod-x1", "cpu.cfs_quota_us", "50000\n");
	assert_int_equal(create_quota(e, "x1", ENV1, &q), 1);
	assert_pod_cgroup(e, "pod-x1", "cpu.cfs_quota_us", "-1");
}

static void test_pools_shared_and_shared_pool_containers_keep_their_quota(void **state)
{
	struct env *e = *state;
	int64_t q = 0;

	pod_cgroup(e, "pod-s1", "cpu.max", "50000 100000\n");
	assert_int_equal(create_quota(e, "s1", NULL, &q), 0);
	assert_pod_cgroup(e, "pod-s1", "cpu.max", "50000 100000\n");

	claim_flags = STATE_CLAIM_SHARED_POOL;
	assert_int_equal(add_claim(e, UID1, "4-5", "x1", NULL), 0);
	claim_flags = 0;
	pod_cgroup(e, "pod-x1", "cpu.max", "50000 100000\n");
	assert_int_equal(create_quota(e, "x1", ENV1, &q), 0);
	assert_pod_cgroup(e, "pod-x1", "cpu.max", "50000 100000\n");
	assert_true(gauge(e, "dra_cpu_cpu_quota_dropped_total{level=\"container\"}") <= 0);
}

static void test_pools_keep_option_leaves_every_quota(void **state)
{
	struct env *e = *state;
	int64_t q = 0;

	assert_int_equal(add_claim(e, UID1, "4-5", "x1", NULL), 0);
	pod_cgroup(e, "pod-x1", "cpu.max", "50000 100000\n");
	assert_int_equal(create_quota(e, "x1", ENV1, &q), 0);
	assert_pod_cgroup(e, "pod-x1", "cpu.max", "50000 100000\n");
}

static void test_pools_a_pod_cgroup_not_found_is_counted_the_container_still_loses_its_quota(
	void **state)
{
	struct env *e = *state;
	int64_t q = 0;

	assert_int_equal(add_claim(e, UID1, "4-5", "x1", NULL), 0);
	assert_int_equal(create_quota(e, "x1", ENV1, &q), 1);
	assert_int_equal(q, -1);
	assert_true(gauge(e, "dra_cpu_cpu_quota_errors_total") == 1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define TQ(f) cmocka_unit_test_setup_teardown(f, setup_quota, teardown)
	const struct CMUnitTest tests[] = {
		T(test_pools_claim_holder_updates_exactly_the_live_shared_containers),
		T(test_pools_update_container_finds_it_among_many),
		TQ(test_pools_exclusive_container_and_its_pod_lose_their_quota),
		TQ(test_pools_v1_pod_quota_becomes_minus_one),
		TQ(test_pools_shared_and_shared_pool_containers_keep_their_quota),
		cmocka_unit_test_setup_teardown(test_pools_keep_option_leaves_every_quota,
						setup_quota_keep, teardown),
		TQ(test_pools_a_pod_cgroup_not_found_is_counted_the_container_still_loses_its_quota),
		T(test_pools_synchronize_rebuilds_the_table),
		T(test_pools_guard_counts_shared_containers),
		T(test_pools_a_pod_not_among_the_consumers_is_refused_the_owner_is_not),
		T(test_pools_a_late_consumer_binds_after_one_read),
		T(test_pools_a_failed_or_slow_read_refuses),
		T(test_pools_unprepare_answers_creates_waiting_on_a_read),
		T(test_pools_claims_restored_without_a_name_bind_nobody),
		T(test_pools_a_binding_of_a_pod_not_among_the_consumers_is_dropped),
		T(test_pools_synchronize_confines_an_impostor),
		T(test_pools_synchronize_trusts_a_consumer_after_a_read),
		T(test_pools_refusal_lines_are_rate_limited),
		cmocka_unit_test_setup_teardown(test_pools_claim_reads_in_flight_are_capped,
						setup_wide, teardown_wide),
		cmocka_unit_test_setup_teardown(
			test_pools_owners_file_never_opens_or_follows_what_was_planted, setup_owners,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_pools_record_keeps_strings_at_their_maxima_across_replacements,
			setup_owners_wide, teardown_wide),
		cmocka_unit_test_setup_teardown(
			test_pools_record_vouched_for_after_synchronize_keeps_its_claims,
			setup_owners_wide, teardown_wide),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
