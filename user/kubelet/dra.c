/* Kubelet plugin services. See dra.h.
 *
 * A NodePrepareResources call becomes a `struct prep` with one `struct
 * prep_claim` per claim. Each claim goes
 *
 *   NEW ──bad name/uid──────────────────────────────────────────────> DONE (error)
 *    └──> QUEUED ──slot free (next loop turn)──> FETCHING ──reply──> DONE (committed or error)
 *           │                                      │
 *           └──── call cancelled: abandoned ───────┤  (fetch cancelled, never commits)
 *           └──── deadline / Unprepare: error ─────┘
 *
 * A fetch that completes is decided and committed at once (the loop
 * serializes every decision: no two claims can pick the same CPUs). When the
 * last claim of the call is done the reply goes out. A cancelled call is
 * freed without a reply; what it already committed stays (Prepare is
 * idempotent: the kubelet's retry finds it).
 */
#include "kubelet/dra.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>
#include <json-c/json.h>

#define LOG_MOD "dra"
#include "core/cdi.h"
#include "core/claim.h"
#include "core/claimsource.h"
#include "core/devices.h"
#include "core/metadata.h"
#include "core/prepare.h"
#include "lib/clock.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "kubelet/grpc.h"
#include "kubelet_dra_v1.pb-c.h"
#include "kubelet_pluginregistration.pb-c.h"
#include "lib/log.h"
#include "lib/ratelimit.h"
#include "obs/metrics.h"
#include "kubelet/dra_priv.h"
#include "core/state.h"
#include "host/topo.h"

#define REG_SOCKET "plugins_registry/dra.cpu-reg.sock"
#define DRA_DIR "plugins/dra.cpu"
#define DRA_SOCKET DRA_DIR "/dra.sock"
#define HEALTH_RESEND_S 10
/* The reply must reach the kubelet before its own deadline: keep a tenth of
 * the time (at most this much) for it. */
#define REPLY_MARGIN_MS 1000

#define PATH_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define PATH_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareClaimResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;

enum pc_state { PC_NEW, PC_QUEUED, PC_FETCHING, PC_DONE };

struct prep_claim {
	struct prep *prep;
	struct prep_claim *qnext, *qprev; /* PC_QUEUED: the fetch queue */
	enum pc_state st;
	bool named; /* ns and name are Kubernetes names */
	void *fetch; /* PC_FETCHING: the fetch handle */
	char *ns, *name, *uid;
	/* reply */
	struct errbuf err;	  /* empty, or why the claim is refused */
	struct claim_alloc alloc; /* what the claim asked of us */
	struct state_consumer *consumers; /* the pods it is reserved for */
	struct claim_consumer *consumer_names; /* what their names point into */
	int n_consumers;
	struct json_object *claim; /* the claim as read, while it is decided */
};

struct prep {
	struct prep *next;
	struct dra *dra;
	struct grpc_call *call; /* NULL once cancelled */
	bool v1;
	int n, pending;
	struct prep_claim *claims;
	struct event *deadline;
	int64_t deadline_ms; /* clock_now_ms() by which every claim is done */
	uint64_t start_ns; /* clock_now_ns() when the call came */
};

/* A claim refused: the kubelet shows the text (errbuf keeps it valid UTF-8,
 * which the proto3 string it travels in requires). */
#define perr(eb, ...) errbuf_fail((eb), -EINVAL, __VA_ARGS__)

/* ---- NodePrepareResources ------------------------------------------------------------ */

static void prep_free(struct prep *p)
{
	if (!p)
		return;
	if (p->deadline)
		event_free(p->deadline);
	for (int i = 0; i < p->n; i++) {
		free(p->claims[i].ns);
		free(p->claims[i].name);
		free(p->claims[i].uid);
		free(p->claims[i].consumers);
		free(p->claims[i].consumer_names);
	}
	free(p->claims);
	free(p);
}

static void prep_unlink(struct prep *p)
{
	for (struct prep **pp = &p->dra->preps; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

/* Packs msg and sends it as the call's reply; out of memory fails the call. */
void dra_reply_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(len ? len : 1);

	if (!buf) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	(void)protobuf_c_message_pack(msg, buf);
	(void)grpc_call_reply(call, buf, len);
	free(buf);
}

/* The storage of a NodePrepareResources reply: the protobuf-c structs point
 * into it and into the claims, nothing is copied. */
struct prep_msg {
	PrepareEntry *entries, **eptrs;
	PrepareClaimResponse *crs;
	Device *devs, **dptrs;
	char (*cdi_ids)[160];
	char **cdi_ptrs;
	char **req_ptrs;
	/* per device: the claim's CDI id, then its request's metadata id */
	char (*meta_ids)[256];
	char **id_ptrs;
};

static int prep_msg_alloc(struct prep_msg *m, const struct prep *p)
{
	int total = 0;

	m->entries = calloc((size_t)p->n, sizeof(*m->entries));
	m->eptrs = calloc((size_t)p->n, sizeof(*m->eptrs));
	m->crs = calloc((size_t)p->n, sizeof(*m->crs));
	m->cdi_ids = calloc((size_t)p->n, sizeof(*m->cdi_ids));
	m->cdi_ptrs = calloc((size_t)p->n, sizeof(*m->cdi_ptrs));
	for (int i = 0; i < p->n; i++)
		total += p->claims[i].err.s[0] ? 0 : p->claims[i].alloc.n;
	m->devs = calloc((size_t)total + 1, sizeof(*m->devs));
	m->dptrs = calloc((size_t)total + 1, sizeof(*m->dptrs));
	m->req_ptrs = calloc((size_t)total + 1, sizeof(*m->req_ptrs));
	m->meta_ids = calloc((size_t)total + 1, sizeof(*m->meta_ids));
	m->id_ptrs = calloc(2 * (size_t)total + 2, sizeof(*m->id_ptrs));
	if (!m->entries || !m->eptrs || !m->crs || !m->devs || !m->dptrs || !m->cdi_ids ||
	    !m->cdi_ptrs || !m->req_ptrs || !m->meta_ids || !m->id_ptrs)
		return -ENOMEM;
	return 0;
}

static void prep_msg_done(struct prep_msg *m)
{
	free(m->entries);
	free(m->eptrs);
	free(m->crs);
	free(m->devs);
	free(m->dptrs);
	free(m->cdi_ids);
	free(m->cdi_ptrs);
	free(m->req_ptrs);
	free(m->meta_ids);
	free(m->id_ptrs);
}

/* The devices of prepared claim i, from m->devs[*k] on; *k moves past them. */
static void prep_msg_devices(const struct prep *p, int i, struct prep_msg *m, int *k)
{
	const struct dra *d = p->dra;
	const struct prep_claim *pc = &p->claims[i];
	PrepareClaimResponse *cr = &m->crs[i];

	cdi_device_id(pc->uid, m->cdi_ids[i], sizeof(m->cdi_ids[i]));
	m->cdi_ptrs[i] = m->cdi_ids[i];
	cr->devices = &m->dptrs[*k];
	for (int j = 0; j < pc->alloc.n; j++, (*k)++) {
		const struct claim_result *res = &pc->alloc.results[j];
		Device *dev = &m->devs[*k];

		k8s__io__kubelet__pkg__apis__dra__v1__device__init(dev);
		m->req_ptrs[*k] = (char *)res->request;
		dev->n_request_names = 1;
		dev->request_names = &m->req_ptrs[*k];
		dev->pool_name = d->node;
		dev->device_name = (char *)res->device;
		m->id_ptrs[2 * *k] = m->cdi_ptrs[i];
		dev->n_cdi_device_ids = 1;
		if (d->o.device_metadata) {
			metadata_cdi_id(pc->uid, res->request, m->meta_ids[*k],
					sizeof(m->meta_ids[*k]));
			m->id_ptrs[2 * *k + 1] = m->meta_ids[*k];
			dev->n_cdi_device_ids = 2;
		}
		dev->cdi_device_ids = &m->id_ptrs[2 * *k];
		if (p->v1 && res->share_id[0])
			dev->share_id = (char *)res->share_id;
		m->dptrs[*k] = dev;
	}
	cr->n_devices = (size_t)pc->alloc.n;
}

static void prep_reply(struct prep *p)
{
	struct dra *d = p->dra;
	PrepareResponse resp = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
	struct prep_msg m = { 0 };
	int k = 0;

	/* Completing the call below must not come back here as a cancel. */
	if (p->call)
		grpc_call_on_cancel(p->call, NULL, NULL);
	if (prep_msg_alloc(&m, p) < 0) {
		if (p->call)
			(void)grpc_call_fail(p->call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		goto out;
	}
	for (int i = 0; i < p->n; i++) {
		struct prep_claim *pc = &p->claims[i];
		PrepareClaimResponse *cr = &m.crs[i];

		k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(cr);
		k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
			&m.entries[i]);
		m.entries[i].key = pc->uid;
		m.entries[i].value = cr;
		m.eptrs[i] = &m.entries[i];
		if (pc->err.s[0]) {
			cr->error = pc->err.s;
			metric_series_add(d->prep_err, 1);
			continue;
		}
		metric_series_add(d->prep_ok, 1);
		prep_msg_devices(p, i, &m, &k);
	}
	resp.n_claims = (size_t)p->n;
	resp.claims = m.eptrs;
	metric_observe(d->prep_seconds, (double)(clock_now_ns() - p->start_ns) / 1e9);
	if (p->call)
		dra_reply_message(p->call, &resp.base);
out:
	prep_msg_done(&m);
}

/* Drops one reference; the last one replies and frees. */
static void prep_put(struct prep *p)
{
	if (--p->pending > 0)
		return;
	prep_reply(p);
	prep_unlink(p);
	prep_free(p);
}

static void schedule_pump(struct dra *d)
{
	if (d->queue && d->fetching < d->o.max_fetches && !d->closing)
		event_active(d->pump, EV_TIMEOUT, 0);
}

static void queue_push(struct dra *d, struct prep_claim *pc)
{
	pc->qnext = NULL;
	pc->qprev = d->queue_tail;
	if (d->queue_tail)
		d->queue_tail->qnext = pc;
	else
		d->queue = pc;
	d->queue_tail = pc;
	pc->st = PC_QUEUED;
}

static void queue_remove(struct dra *d, struct prep_claim *pc)
{
	if (pc->qprev)
		pc->qprev->qnext = pc->qnext;
	else
		d->queue = pc->qnext;
	if (pc->qnext)
		pc->qnext->qprev = pc->qprev;
	else
		d->queue_tail = pc->qprev;
	pc->qnext = pc->qprev = NULL;
}

static bool pc_waiting(const struct prep_claim *pc)
{
	return pc->st == PC_QUEUED || pc->st == PC_FETCHING;
}

/* Takes a waiting claim out of the queue or cancels its fetch: whatever the
 * API server answers later never reaches it. */
static void pc_stop(struct prep_claim *pc)
{
	struct dra *d = pc->prep->dra;

	if (pc->st == PC_QUEUED) {
		queue_remove(d, pc);
	} else if (pc->st == PC_FETCHING) {
		claimsource_cancel(d->o.claims, pc->fetch);
		pc->fetch = NULL;
		d->fetching--;
		metric_series_add(d->fetch_cancelled, 1);
		schedule_pump(d);
	}
	pc->st = PC_DONE;
}

/* Tells the daemon what became of the claim (Events, claim status). */
static void report_outcome(struct dra *d, struct prep_claim *pc)
{
	const struct dra_report_ops *ops = d->o.report;

	if (!ops || !ops->prepared)
		return;
	ops->prepared(d->o.report_ud, pc->named ? pc->ns : NULL, pc->named ? pc->name : NULL,
		      pc->uid, pc->err.s[0] ? pc->err.s : NULL, pc->claim,
		      pc->err.s[0] ? NULL : &pc->alloc,
		      pc->err.s[0] ? NULL : state_claim(d->state, pc->uid));
}

static void prep_claim_done(struct prep_claim *pc)
{
	pc->st = PC_DONE;
	report_outcome(pc->prep->dra, pc);
	pc->claim = NULL;
	/* ns and name are logged only once they are known to be Kubernetes
	 * names; everything else a peer sent is quoted. */
	if (pc->err.s[0])
		log_warn("claim_prepare_failed", "claim=%s/%s uid=%s error=%s",
			 pc->named ? pc->ns : "?", pc->named ? pc->name : "?", log_quote(pc->uid),
			 log_quote(pc->err.s));
	prep_put(pc->prep);
}

/* The pods the claim is reserved for, kept with the claim for NRI to check. */
static int read_consumers(struct json_object *claim, struct prep_claim *pc, struct errbuf *eb)
{
	_cleanup_free_ struct claim_consumer *v = NULL;
	int n = claim_consumers_parse(claim, pc->uid, &v, eb);

	if (n == -ENOMEM)
		errbuf_set(eb, "out of memory");
	if (n <= 0)
		return n;
	pc->consumers = calloc((size_t)n, sizeof(*pc->consumers));
	if (!pc->consumers)
		return errbuf_fail(eb, -ENOMEM, "out of memory");
	for (int i = 0; i < n; i++) {
		(void)snprintf(pc->consumers[i].uid, sizeof(pc->consumers[i].uid), "%s", v[i].uid);
		pc->consumers[i].name = v[i].name;
	}
	pc->consumer_names = TAKE_PTR(v);
	pc->n_consumers = n;
	return 0;
}

/* Hands a claim whose allocation is read to the policy (core/prepare.h);
 * a refusal stays in pc->err for the reply. */
static void decide(struct dra *d, struct prep_claim *pc)
{
	struct prepare_request rq = { .ns = pc->ns, .name = pc->name, .uid = pc->uid,
				      .alloc = &pc->alloc, .consumers = pc->consumers,
				      .n_consumers = pc->n_consumers };
	struct prepare_result res;

	if (prepare_claim(d->prepare, &rq, &res, &pc->err) == 0 && !res.again && !res.rt)
		metric_observe(d->claim_cpus, res.n_cpus);
}

static void on_claim_fetched(void *ud, struct json_object *claim, const char *err)
{
	struct prep_claim *pc = ud;
	struct dra *d = pc->prep->dra;
	struct errbuf cerr = { "" };

	pc->fetch = NULL;
	d->fetching--;
	schedule_pump(d);
	if (!claim) {
		metric_series_add(d->fetch_err, 1);
		(void)perr(&pc->err, "getting ResourceClaim %s/%s: %s", pc->ns, pc->name,
			   err && *err ? err : "unknown error");
	} else {
		metric_series_add(d->fetch_ok, 1);
		if (claim_parse(claim, pc->uid, DRA_DRIVER, d->node, &pc->alloc, &cerr) < 0 ||
		    read_consumers(claim, pc, &cerr) < 0)
			(void)perr(&pc->err, "%s", cerr.s);
		else
			decide(d, pc);
	}
	pc->claim = claim;
	prep_claim_done(pc);
}

/* Starts queued fetches while slots are free. Runs on its own loop turn, so
 * the resets a peer sent along with its requests are read first. */
static void on_pump(evutil_socket_t fd, short what, void *ud)
{
	struct dra *d = ud;

	while (d->queue && d->fetching < d->o.max_fetches) {
		struct prep_claim *pc = d->queue;
		int64_t left = pc->prep->deadline_ms - clock_now_ms();
		int r;

		queue_remove(d, pc);
		r = claimsource_start(d->o.claims, pc->ns, pc->name, left > 1 ? left : 1,
				       on_claim_fetched, pc, &pc->fetch);
		if (r >= 0) {
			pc->st = PC_FETCHING;
			d->fetching++;
			continue;
		}
		(void)perr(&pc->err, "getting ResourceClaim %s/%s: %s", pc->ns, pc->name,
			   strerror(-r));
		prep_claim_done(pc);
	}
}

/* The kubelet is about to give up: claims still waiting fail now, with a
 * reason it can log, and nothing of this call happens later. */
static void on_prep_deadline(evutil_socket_t fd, short what, void *ud)
{
	struct prep *p = ud;
	int late = 0;

	p->pending++; /* the last claim must not free p under the loop */
	for (int i = 0; i < p->n; i++) {
		struct prep_claim *pc = &p->claims[i];

		if (!pc_waiting(pc))
			continue;
		pc_stop(pc);
		(void)perr(&pc->err,
			   "ResourceClaim %s/%s was not read from the API server before the "
			   "kubelet's deadline: not prepared, the kubelet will retry",
			   pc->ns, pc->name);
		late++;
		prep_claim_done(pc);
	}
	log_warn("prepare_deadline", "claims=%d late=%d", p->n, late);
	prep_put(p);
}

/* The kubelet went away (reset, deadline, closed connection): claims still
 * waiting are dropped with their fetches. The kubelet's retry starts over;
 * whatever this call already committed is found again then. */
static void on_prep_cancel(struct grpc_call *call, void *ud)
{
	struct prep *p = ud;
	struct dra *d = p->dra;
	int abandoned = 0;
	uint64_t held;

	p->call = NULL; /* the handle ends when this returns */
	for (int i = 0; i < p->n; i++)
		if (pc_waiting(&p->claims[i])) {
			pc_stop(&p->claims[i]);
			abandoned++;
		}
	metric_series_add(d->prep_cancelled, abandoned);
	/* A peer can reset streams as fast as it opens them: one line per
	 * period says how many. */
	if (ratelimit_pass(&d->cancel_rl, &held))
		log_warn("prepare_cancelled", "calls=%llu claims=%d abandoned=%d action=dropped",
			 (unsigned long long)held + 1, p->n, abandoned);
	prep_unlink(p);
	prep_free(p);
}

/* A new call of rq's claims (copied: rq may go), its deadline not armed yet;
 * NULL when out of memory. */
static struct prep *prep_new(struct dra *d, struct grpc_call *call, const PrepareRequest *rq,
			     bool v1)
{
	struct prep *p = calloc(1, sizeof(*p));

	if (p) {
		p->claims = calloc(rq->n_claims + 1, sizeof(*p->claims));
		p->deadline = evtimer_new(d->base, on_prep_deadline, p);
	}
	if (!p || !p->claims || !p->deadline) {
		prep_free(p);
		return NULL;
	}
	p->dra = d;
	p->call = call;
	p->v1 = v1;
	p->start_ns = clock_now_ns();
	p->n = (int)rq->n_claims;
	p->pending = p->n + 1; /* +1: held until every claim is under way */
	for (int i = 0; i < p->n; i++) {
		struct prep_claim *pc = &p->claims[i];

		pc->prep = p;
		pc->ns = strdup(rq->claims[i]->namespace_ ? rq->claims[i]->namespace_ : "");
		pc->name = strdup(rq->claims[i]->name ? rq->claims[i]->name : "");
		pc->uid = strdup(rq->claims[i]->uid ? rq->claims[i]->uid : "");
	}
	return p;
}

/* Arms p's deadline: the kubelet's (or ours when it sets none, or a longer
 * one), less the time the reply needs to reach it. Returns the budget, ms. */
static int64_t prep_arm_deadline(struct dra *d, struct prep *p, struct grpc_call *call)
{
	int64_t left = grpc_call_deadline_left_ms(call), budget;
	struct timeval tv;

	if (left < 0 || left > d->o.prepare_timeout_ms)
		left = d->o.prepare_timeout_ms;
	budget = left - (left / 10 < REPLY_MARGIN_MS ? left / 10 : REPLY_MARGIN_MS);
	p->deadline_ms = clock_now_ms() + budget;
	tv = clock_tv_ms(budget);
	(void)event_add(p->deadline, &tv);
	return budget;
}

/* The kubelet's strings reach a log line, the reply and a URL only once they
 * are what Kubernetes allows; they are not echoed before. True when the claim
 * may be fetched; else pc->err says why. */
static bool pc_admit(struct prep_claim *pc, int64_t budget)
{
	if (!pc->ns || !pc->name || !pc->uid) {
		(void)perr(&pc->err, "out of memory");
	} else if (cdi_uid_valid(pc->uid) < 0) {
		(void)perr(&pc->err, "the claim uid is not a valid Kubernetes uid");
	} else if (claim_namespace_check(pc->ns) < 0) {
		(void)perr(&pc->err,
			   "claim %s: the namespace is not a Kubernetes namespace name (at "
			   "most 63 of a-z, 0-9 and '-', alphanumeric at both ends)",
			   pc->uid);
	} else if (claim_name_check(pc->name) < 0) {
		(void)perr(&pc->err,
			   "claim %s: the name is not a Kubernetes object name (DNS-1123 "
			   "subdomain: at most 253 of a-z, 0-9, '-' and '.')",
			   pc->uid);
	} else if (budget <= 0) {
		pc->named = true;
		(void)perr(&pc->err, "the call's deadline has passed");
	} else {
		pc->named = true;
		return true;
	}
	return false;
}

static void handle_prepare(struct grpc_call *call, const uint8_t *req, size_t len, void *ud,
			   bool v1)
{
	struct dra *d = ud;
	PrepareRequest *rq;
	struct prep *p;
	int64_t budget;

	rq = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
											     req);
	if (!rq) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
				     "NodePrepareResourcesRequest does not decode");
		return;
	}
	if (rq->n_claims > DRA_MAX_CLAIMS_PER_CALL) {
		struct errbuf why;

		errbuf_set(&why, "more than %d claims in one call", DRA_MAX_CLAIMS_PER_CALL);
		k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(rq,
												   NULL);
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, why.s);
		return;
	}
	p = prep_new(d, call, rq, v1);
	k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(rq, NULL);
	if (!p) {
		(void)grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	p->next = d->preps;
	d->preps = p;
	grpc_call_on_cancel(call, on_prep_cancel, p);
	budget = prep_arm_deadline(d, p, call);
	for (int i = 0; i < p->n; i++) {
		struct prep_claim *pc = &p->claims[i];

		if (pc_admit(pc, budget))
			queue_push(d, pc);
		else
			prep_claim_done(pc);
	}
	schedule_pump(d);
	/* Drop the hold; replies now if nothing is waiting. */
	prep_put(p);
}

static void on_prepare_v1(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	handle_prepare(call, req, len, ud, true);
}

static void on_prepare_v1beta1(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	handle_prepare(call, req, len, ud, false);
}

/* ---- NodeUnprepareResources ---------------------------------------------------------- */

/* Unprepare wins over any Prepare of the same claim still waiting for its
 * fetch: that Prepare answers with an error and never commits afterwards
 * (otherwise its CDI spec and CPUs would appear after Unprepare returned and
 * stay reserved for good). Returns how many were superseded. */
int dra_supersede_prepares(struct dra *d, const char *uid)
{
	struct prep *p, *next;
	int n = 0;

	for (p = d->preps; p; p = next) {
		p->pending++;
		for (int i = 0; i < p->n; i++) {
			struct prep_claim *pc = &p->claims[i];

			if (!pc_waiting(pc) || strcmp(pc->uid, uid) != 0)
				continue;
			pc_stop(pc);
			(void)perr(&pc->err, "NodeUnprepareResources for this claim arrived "
				   "while it was being prepared: not prepared");
			n++;
			prep_claim_done(pc);
		}
		next = p->next;
		prep_put(p); /* may reply and free p, never another call */
	}
	return n;
}

/* ---- registration ---------------------------------------------------------------------- */

static void handle_get_info(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	struct dra *d = ud;
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
	/* The health services too: the kubelet picks v1 when both are listed,
	 * v1alpha1 when only it is (1.34-1.36). */
	static char *versions[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
				    "v1alpha1.DRAResourceHealth" };
	uint8_t buf[1024];
	size_t n;

	info.type = "DRAPlugin";
	info.name = DRA_DRIVER;
	info.endpoint = d->endpoint;
	info.n_supported_versions = ARRAY_SIZE(versions);
	info.supported_versions = versions;
	n = pluginregistration__plugin_info__get_packed_size(&info);
	if (n > sizeof(buf)) {
		(void)grpc_call_fail(call, GRPC_STATUS_INTERNAL, "plugin info too large");
		return;
	}
	pluginregistration__plugin_info__pack(&info, buf);
	(void)grpc_call_reply(call, buf, n);
}

static void handle_registration_status(struct grpc_call *call, const uint8_t *req, size_t len,
				       void *ud)
{
	struct dra *d = ud;
	Pluginregistration__RegistrationStatus *st;
	Pluginregistration__RegistrationStatusResponse resp =
		PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
	uint8_t buf[16];
	size_t n;

	st = pluginregistration__registration_status__unpack(NULL, len, req);
	if (!st) {
		(void)grpc_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
				     "RegistrationStatus does not decode");
		return;
	}
	if (st->plugin_registered)
		log_info("kubelet_registered", "endpoint=%s", d->endpoint);
	else
		log_error("kubelet_registration_rejected", "error=%s",
			  log_quote(st->error ? st->error : ""));
	d->registered = st->plugin_registered;
	if (d->o.on_registered)
		d->o.on_registered(d->o.registered_ud, d->registered);
	pluginregistration__registration_status__free_unpacked(st, NULL);
	n = pluginregistration__registration_status_response__pack(&resp, buf);
	(void)grpc_call_reply(call, buf, n);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static void on_grpc_observe(const char *path, enum grpc_status code, uint64_t ns, void *ud)
{
	struct dra *d = ud;
	char c[8];

	(void)snprintf(c, sizeof(c), "%d", (int)code);
	metric_series_add(metric_with(d->grpc_calls, path, c), 1);
	metric_series_observe(metric_with(d->grpc_seconds, path), (double)ns / 1e9);
}

static void register_metrics(struct dra *d, struct metrics *m)
{
	struct metric *f;

	f = metrics_family(m, MF_PREPARE_CLAIMS_TOTAL);
	d->prep_ok = metric_with(f, "success");
	d->prep_err = metric_with(f, "error");
	d->prep_cancelled = metric_with(f, "cancelled");
	f = metrics_family(m, MF_CLAIM_FETCHES_TOTAL);
	d->fetch_ok = metric_with(f, "ok");
	d->fetch_err = metric_with(f, "error");
	d->fetch_cancelled = metric_with(f, "cancelled");
	f = metrics_family(m, MF_UNPREPARE_CLAIMS_TOTAL);
	d->unprep_ok = metric_with(f, "success");
	d->unprep_err = metric_with(f, "error");
	d->prep_seconds = metrics_family(m, MF_PREPARE_CLAIM_DURATION_SECONDS);
	d->claim_cpus = metrics_family(m, MF_CLAIM_ALLOCATED_CPUS);
	d->grpc_calls = metrics_family(m, MF_GRPC_CALLS_TOTAL);
	d->g_claims_offline = metrics_family(m, MF_CLAIMS_ON_OFFLINE_CPUS);
	d->g_health_streams = metrics_family(m, MF_HEALTH_STREAMS);
	d->health_coalesced = metrics_family(m, MF_HEALTH_UPDATES_COALESCED_TOTAL);
	d->grpc_seconds = metrics_family(m, MF_GRPC_CALL_DURATION_SECONDS);
}

/* The kubelet plugin's gRPC server and its methods (not listening yet). */
static int dra_grpc_new(struct dra *d, struct event_base *base, const struct dra_opts *o)
{
	static const struct {
		const char *path;
		grpc_handler_fn fn;
		bool dra_socket;
	} methods[] = {
		{ "/pluginregistration.Registration/GetInfo", handle_get_info, false },
		{ "/pluginregistration.Registration/NotifyRegistrationStatus",
		  handle_registration_status, false },
		{ PATH_V1 "NodePrepareResources", on_prepare_v1, true },
		{ PATH_V1 "NodeUnprepareResources", dra_handle_unprepare, true },
		{ PATH_V1BETA1 "NodePrepareResources", on_prepare_v1beta1, true },
		{ PATH_V1BETA1 "NodeUnprepareResources", dra_handle_unprepare, true },
		{ "/v1.DRAResourceHealth/NodeWatchResources", dra_handle_watch_resources, true },
		{ "/v1alpha1.DRAResourceHealth/NodeWatchResources", dra_handle_watch_resources, true },
	};
	struct grpc_limits lim;
	int r;

	grpc_limits_default(&lim);
	if (o->first_request_timeout_ms > 0)
		lim.first_request_timeout_ms = (uint32_t)o->first_request_timeout_ms;
	r = grpc_server_new(base, &lim, &d->grpc);
	if (r < 0)
		return r;
	grpc_server_set_observer(d->grpc, on_grpc_observe, d);
	for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
		r = (methods[i].fn == dra_handle_watch_resources ? grpc_server_add_watch_method
								  : grpc_server_add_method)(
			d->grpc, methods[i].path, methods[i].fn, d);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The plugin's directories under the kubelet root, and both sockets. */
static int dra_listen(struct dra *d, const struct dra_opts *o)
{
	char dir[4096];
	int r;

	(void)snprintf(dir, sizeof(dir), "%s/%s", o->kubelet_root, DRA_DIR);
	r = fileio_mkdir_p(dir, 0750);
	if (r < 0)
		return log_error_errno(r, "plugin_dir_failed", "path=%s", dir);
	(void)snprintf(dir, sizeof(dir), "%s/plugins_registry", o->kubelet_root);
	r = fileio_mkdir_p(dir, 0755);
	if (r < 0)
		return log_error_errno(r, "registry_dir_failed", "path=%s", dir);
	r = grpc_server_listen_unix(d->grpc, d->endpoint, 0600);
	if (r < 0)
		return log_error_errno(r, "dra_socket_failed", "path=%s", d->endpoint);
	r = grpc_server_listen_unix(d->grpc, d->reg_path, 0600);
	if (r < 0)
		return log_error_errno(r, "registration_socket_failed", "path=%s", d->reg_path);
	return 0;
}

/* The policy Prepare hands claims to (core/prepare.h). */
static int dra_prepare_new(struct dra *d, const struct dra_opts *o)
{
	struct prepare_opts po = { .state = d->state, .topo = d->topo, .devices = d->devices,
				   .rt = o->rt, .memory_local = o->memory_local,
				   .external_allocator = o->external_allocator,
				   .device_metadata = o->device_metadata,
				   .data_dir = d->data_dir, .cdi_dir = o->cdi_dir,
				   .driver = DRA_DRIVER, .pool = d->node,
				   .device_attributes = o->device_attributes,
				   .attributes_ud = o->attributes_ud };
	int r;

	r = prepare_new(&po, &d->prepare);
	if (r < 0)
		return log_error_errno(r, "allocator_init_failed", "");
	return 0;
}

int dra_new(struct event_base *base, const struct dra_opts *o, struct state *state,
	    const struct topo *topo, const struct devices *devices, struct metrics *metrics,
	    struct dra **ret)
{
	_cleanup_(dra_freep) struct dra *d = calloc(1, sizeof(*d));
	struct timeval tv = { .tv_sec = HEALTH_RESEND_S };
	int r;

	if (!d)
		return -ENOMEM;
	if (!claimsource_is_valid(o->claims))
		return -EINVAL;
	d->base = base;
	d->o = *o;
	ratelimit_init(&d->cancel_rl, 10000, 1);
	if (d->o.prepare_timeout_ms <= 0)
		d->o.prepare_timeout_ms = DRA_PREPARE_TIMEOUT_MS;
	if (d->o.max_fetches <= 0)
		d->o.max_fetches = DRA_MAX_FETCHES;
	d->state = state;
	d->topo = topo;
	d->devices = devices;
	d->node = strdup(o->node);
	d->kubelet_root = strdup(o->kubelet_root);
	if (!d->node || !d->kubelet_root ||
	    asprintf(&d->endpoint, "%s/%s", o->kubelet_root, DRA_SOCKET) < 0 ||
	    asprintf(&d->data_dir, "%s/%s", o->kubelet_root, DRA_DIR) < 0 ||
	    asprintf(&d->reg_path, "%s/%s", o->kubelet_root, REG_SOCKET) < 0)
		return -ENOMEM;
	d->pump = event_new(base, -1, 0, on_pump, d);
	if (!d->pump)
		return -ENOMEM;
	register_metrics(d, metrics);
	r = dra_prepare_new(d, o);
	if (r < 0)
		return r;
	r = dra_grpc_new(d, base, o);
	if (r < 0)
		return r;
	r = dra_listen(d, o);
	if (r < 0)
		return r;
	d->health_timer = event_new(base, -1, EV_PERSIST, dra_on_health_timer, d);
	if (!d->health_timer || event_add(d->health_timer, &tv) < 0)
		return -ENOMEM;
	log_info("kubelet_plugin_listening", "dra=%s registration=%s", d->endpoint, d->reg_path);
	*ret = TAKE_PTR(d);
	return 0;
}

struct dra *dra_free(struct dra *d)
{
	if (!d)
		return NULL;
	d->closing = true;
	if (d->health_timer)
		event_free(d->health_timer);
	/* Cancels every open call: health streams unlink and free themselves,
	 * pending prepares drop their fetches and free themselves. */
	grpc_server_free(d->grpc);
	while (d->streams) {
		struct health_stream *hs = d->streams;

		d->streams = hs->next;
		free(hs);
	}
	while (d->preps) {
		struct prep *p = d->preps;

		for (int i = 0; i < p->n; i++)
			if (pc_waiting(&p->claims[i]))
				pc_stop(&p->claims[i]);
		d->preps = p->next;
		prep_free(p);
	}
	if (d->pump)
		event_free(d->pump);
	prepare_free(d->prepare);
	free(d->node);
	free(d->kubelet_root);
	free(d->endpoint);
	free(d->data_dir);
	free(d->reg_path);
	free(d);
	return NULL;
}
